// Listen addresses: vsock:PORT and unix:/path, anything else named in the error.
#include "agent/server/endpoint.h"

#include <gtest/gtest.h>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::server {
namespace {

TEST(Endpoint, ParsesVsockAndUnix) {
  auto v = ParseEndpoint("vsock:1024");
  ASSERT_OK(v);
  EXPECT_EQ(v->kind, Endpoint::Kind::kVsock);
  EXPECT_EQ(v->port, 1024u);
  EXPECT_EQ(v->ToString(), "vsock:1024");
  auto u = ParseEndpoint("unix:/run/a.sock");
  ASSERT_OK(u);
  EXPECT_EQ(u->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(u->path, "/run/a.sock");
}

TEST(Endpoint, RejectsJunkNamingIt) {
  for (const char* bad : {"vsock:", "vsock:x", "vsock:99999999999", "vsock:4294967295", "unix:", "unix:rel",
                          "tcp:1", ""}) {
    auto e = ParseEndpoint(bad);
    EXPECT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.status().message().find(bad), std::string::npos) << e.status().message();
  }
}

TEST(Endpoint, UnixListenReplacesStaleSocketButNotAFile) {
  auto dir = TempDir::Create("ep");
  ASSERT_OK(dir);
  Endpoint ep{Endpoint::Kind::kUnix, 0, dir->Join("a.sock")};
  {
    auto fd = Listen(ep);
    ASSERT_OK(fd);
  }
  auto again = Listen(ep);  // the first socket file is stale now
  EXPECT_OK(again);
  ASSERT_OK(WriteFile(dir->Join("file"), "x"));
  auto onfile = Listen(Endpoint{Endpoint::Kind::kUnix, 0, dir->Join("file")});
  ASSERT_FALSE(onfile.ok());
  EXPECT_EQ(onfile.status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace capsule::agent::server
