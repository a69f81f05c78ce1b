// Flag parsing, identifiers, runtime options and socket addresses: the
// launcher's pure parts.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "runtime/common/file_util.h"
#include "shim/launcher/bundle.h"
#include "shim/launcher/flags.h"
#include "shim/launcher/runtime_options.h"
#include "shim/launcher/socket.h"
#include "tests/support/status_matchers.h"

namespace capsule::shim::launcher {
namespace {

ShimFlags MustParse(const std::vector<std::string>& args) {
  auto f = ParseFlags(args);
  EXPECT_OK(f);
  return f.ok() ? *f : ShimFlags{};
}

TEST(FlagsTest, ParsesContainerdStartCommandLine) {
  // As runtime/v2/shim/util.go Command + binary.go Start build it.
  ShimFlags f = MustParse({"-namespace", "k8s.io", "-address", "/run/containerd/containerd.sock",
                           "-publish-binary", "/usr/bin/containerd", "-id", "abc", "-debug", "start"});
  EXPECT_EQ(f.namespace_, "k8s.io");
  EXPECT_EQ(f.address, "/run/containerd/containerd.sock");
  EXPECT_EQ(f.publish_binary, "/usr/bin/containerd");
  EXPECT_EQ(f.id, "abc");
  EXPECT_TRUE(f.debug);
  EXPECT_EQ(f.action, Action::kStart);
  EXPECT_OK(ValidateFlags(f));
}

TEST(FlagsTest, ParsesDeleteWithBundle) {
  ShimFlags f = MustParse({"-namespace", "default", "-address", "/a", "-publish-binary", "/b",
                           "-id", "c1", "-bundle", "/run/b/c1", "delete"});
  EXPECT_EQ(f.action, Action::kDelete);
  EXPECT_EQ(f.bundle, "/run/b/c1");
  EXPECT_FALSE(f.debug);
}

TEST(FlagsTest, AcceptsGoSyntaxVariants) {
  ShimFlags f = MustParse({"--namespace=ns1", "-id=x", "--address", "/s", "-debug=false", "--", "start"});
  EXPECT_EQ(f.namespace_, "ns1");
  EXPECT_EQ(f.id, "x");
  EXPECT_EQ(f.address, "/s");
  EXPECT_FALSE(f.debug);
  EXPECT_EQ(f.action, Action::kStart);
  // A value may itself start with a dash; a later flag overrides an earlier one.
  f = MustParse({"-id", "-weird", "-id", "final", "-debug=1"});
  EXPECT_EQ(f.id, "final");
  EXPECT_TRUE(f.debug);
  EXPECT_EQ(f.action, Action::kDaemon);
}

TEST(FlagsTest, VersionAndHelpSpellings) {
  EXPECT_TRUE(MustParse({"-v"}).version);
  EXPECT_TRUE(MustParse({"--version"}).version);
  EXPECT_TRUE(MustParse({"-version"}).version);
  EXPECT_TRUE(MustParse({"--help"}).help);
  EXPECT_TRUE(MustParse({"-h"}).help);
}

TEST(FlagsTest, RejectsBadInputNamingIt) {
  struct Case {
    std::vector<std::string> args;
    std::string want;
  } cases[] = {
      {{"-nope", "x"}, "flag provided but not defined: -nope"},
      {{"-id"}, "flag needs an argument: -id"},
      {{"-debug=maybe"}, "invalid boolean value \"maybe\" for -debug"},
      {{"---id", "x"}, "bad flag syntax: ---id"},
      {{"-=x"}, "bad flag syntax: -=x"},
      {{"-id", "x", "frobnicate"}, "unknown action \"frobnicate\""},
      {{"-id", "x", "start", "extra"}, "unexpected argument \"extra\""},
      {{"-socket-fd", "3x"}, "invalid value \"3x\" for -socket-fd"},
  };
  for (const auto& c : cases) {
    auto f = ParseFlags(c.args);
    ASSERT_FALSE(f.ok()) << c.want;
    EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.want), std::string::npos) << f.status().message();
  }
}

TEST(FlagsTest, ValidationNamesTheMissingOrBadFlag) {
  ShimFlags f = MustParse({"-id", "c1", "-address", "/a", "start"});
  EXPECT_NE(ValidateFlags(f).message().find("-namespace"), std::string::npos);
  f = MustParse({"-namespace", "ns", "-id", "c1", "start"});
  EXPECT_NE(ValidateFlags(f).message().find("-address"), std::string::npos);
  f = MustParse({"-namespace", "ns", "-id", "../etc", "-address", "/a", "start"});
  EXPECT_NE(ValidateFlags(f).message().find("-id \"../etc\""), std::string::npos);
  // No action and no socket: a person forgot `start`.
  f = MustParse({"-namespace", "ns", "-id", "c1"});
  EXPECT_NE(ValidateFlags(f).message().find("no action"), std::string::npos);
  f = MustParse({"-namespace", "ns", "-id", "c1", "-socket-fd", "1"});
  EXPECT_FALSE(ValidateFlags(f).ok());
}

TEST(FlagsTest, IdentifierRuleMatchesContainerd) {
  const std::vector<std::string> good = {"a", "k8s.io", "moby", "abc_def-1.2", std::string(76, 'a')};
  for (const auto& ok : good) EXPECT_OK(ValidateIdentifier("x", ok)) << ok;
  const std::vector<std::string> bad = {"", "-a", "a-", "a..b", "a/b", "a b", ".", std::string(77, 'a')};
  for (const auto& b : bad) EXPECT_FALSE(ValidateIdentifier("x", b).ok()) << b;
}

TEST(FlagsTest, DaemonArgsRoundTrip) {
  ShimFlags f = MustParse({"-namespace", "ns", "-id", "c1", "-address", "/a", "-publish-binary",
                           "/b", "-debug", "start"});
  ShimFlags d = MustParse(DaemonArgs(f, "/bundle", 7, "/etc/capsule/x.yaml"));
  EXPECT_EQ(d.action, Action::kDaemon);
  EXPECT_EQ(d.socket_fd, 7);
  EXPECT_EQ(d.bundle, "/bundle");
  EXPECT_EQ(d.config_path, "/etc/capsule/x.yaml");
  EXPECT_EQ(d.publish_binary, "/b");
  EXPECT_TRUE(d.debug);
  EXPECT_OK(ValidateFlags(d));
}

TEST(SocketTest, CleanPathFollowsGo) {
  EXPECT_EQ(CleanPath(""), ".");
  EXPECT_EQ(CleanPath("/"), "/");
  EXPECT_EQ(CleanPath("//a//b/"), "/a/b");
  EXPECT_EQ(CleanPath("/a/./b/../c"), "/a/c");
  EXPECT_EQ(CleanPath("/../x"), "/x");
  EXPECT_EQ(CleanPath("a/../../b"), "../b");
  EXPECT_EQ(CleanPath("./"), ".");
}

TEST(SocketTest, AddressIsContainerdsSha256Scheme) {
  // Hex digests of the joined strings, computed independently (sha256sum).
  EXPECT_EQ(SocketAddress("/run/containerd/containerd.sock", "k8s.io", "pod1", "/run/containerd/s"),
            "unix:///run/containerd/s/8e264b1ad347c80aee5f3dea6e4bb53d72026989222058782273d5db043c7723");
  // Join cleans: a trailing slash or doubled separators change nothing.
  EXPECT_EQ(SocketAddress("/run/containerd//containerd.sock/", "default", "abc", "/run/containerd/s/"),
            "unix:///run/containerd/s/8cb244a719603fe00870d5ce1d8e1f1db43a654cb993d107df1f1ae23ddffa59");
  EXPECT_NE(SocketAddress("/a", "ns", "g1", "/s"), SocketAddress("/a", "ns", "g2", "/s"));
  EXPECT_NE(SocketAddress("/a", "ns1", "g", "/s"), SocketAddress("/a", "ns2", "g", "/s"));
}

TEST(SocketTest, PathFromAddress) {
  EXPECT_EQ(*SocketPathFromAddress("unix:///run/x"), "/run/x");
  EXPECT_FALSE(SocketPathFromAddress("/run/x").ok());
  EXPECT_FALSE(SocketPathFromAddress("unix://relative").ok());
  EXPECT_FALSE(SocketPathFromAddress("tcp://1.2.3.4:5").ok());
}

TEST(SocketTest, ListenProbeAndBoundPath) {
  auto dir = TempDir::Create("shimsock");
  ASSERT_OK(dir);
  const std::string path = dir->Join("sub/dir/sock");  // parents are created
  EXPECT_FALSE(CanConnect(path));
  auto fd = ListenUnix(path);
  ASSERT_OK(fd);
  struct stat st{};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(CanConnect(path));
  EXPECT_EQ(*BoundPath(fd->get()), path);
  auto again = ListenUnix(path);
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  fd->reset();
  EXPECT_FALSE(CanConnect(path));  // the file stays, nobody listens: stale
  auto too_long = ListenUnix("/" + std::string(kSocketPathLimit + 1, 'x'));
  EXPECT_EQ(too_long.status().code(), Code::kInvalidArgument);
}

TEST(RuntimeOptionsTest, ParsesBareAndPrefixedTypeUrls) {
  for (const char* url : {"runtimeoptions.v1.Options", "type.googleapis.com/runtimeoptions.v1.Options"}) {
    auto o = ParseRuntimeOptions(SerializeRuntimeOptions({"/etc/capsule/c.yaml"}, url));
    ASSERT_OK(o) << url << ": " << o.status().ToString();
    EXPECT_EQ(o->config_path, "/etc/capsule/c.yaml");
  }
  EXPECT_EQ(ParseRuntimeOptions("")->config_path, "");
}

TEST(RuntimeOptionsTest, RejectsOtherTypesAndGarbage) {
  auto o = ParseRuntimeOptions(SerializeRuntimeOptions({"/x"}, "containerd.runc.v1.Options"));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("containerd.runc.v1.Options"), std::string::npos);
  o = ParseRuntimeOptions(std::string("\xff\xff\xff", 3));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("google.protobuf.Any"), std::string::npos);
}

TEST(BundleTest, GroupFromSandboxAnnotationElseId) {
  auto dir = TempDir::Create("bundle");
  ASSERT_OK(dir);
  ASSERT_TRUE(WriteFile(dir->Join("config.json"),
                        R"({"ociVersion":"1.0.2","annotations":{"io.kubernetes.cri.sandbox-id":"pod7"}})").ok());
  EXPECT_EQ(*ShimGroup(dir->path(), "c1"), "pod7");
  ASSERT_OK(WriteFile(dir->Join("config.json"), R"({"ociVersion":"1.0.2"})"));
  EXPECT_EQ(*ShimGroup(dir->path(), "c1"), "c1");
  ASSERT_OK(WriteFile(dir->Join("config.json"), R"({"annotations":{"io.kubernetes.cri.sandbox-id":3}})"));
  EXPECT_NE(ShimGroup(dir->path(), "c1").status().message().find("io.kubernetes.cri.sandbox-id"),
            std::string::npos);
  ASSERT_OK(WriteFile(dir->Join("config.json"), "{not json"));
  EXPECT_NE(ShimGroup(dir->path(), "c1").status().message().find("config.json"), std::string::npos);
  ASSERT_EQ(::unlink(dir->Join("config.json").c_str()), 0);
  EXPECT_EQ(ShimGroup(dir->path(), "c1").status().code(), Code::kNotFound);
}

TEST(BundleTest, AddressFileRoundTrip) {
  auto dir = TempDir::Create("bundle");
  ASSERT_OK(dir);
  EXPECT_EQ(ReadAddressFile(dir->path()).status().code(), Code::kNotFound);
  ASSERT_OK(WriteAddressFile(dir->path(), "unix:///run/containerd/s/abc"));
  EXPECT_EQ(*ReadAddressFile(dir->path()), "unix:///run/containerd/s/abc");
}

}  // namespace
}  // namespace capsule::shim::launcher
