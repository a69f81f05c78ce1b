// Malformed specs and failing setups: clear errors naming the field or the
// failed step, and nothing left behind (the fixture checks mounts, cgroups
// and fds after each test).
#include <sys/stat.h>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "runtime/oci/spec_parser.h"
#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

Status CreateError(LinuxContainerManager& sandbox, const std::string& id, const nlohmann::json& spec) {
  auto parsed = oci::ParseSpec(spec.dump());
  if (!parsed.ok()) return parsed.status();
  auto c = sandbox.Create(id, *parsed, {});
  if (c.ok()) return Status::Ok();
  return c.status();
}

void ExpectError(const Status& st, Code code, const std::string& text) {
  EXPECT_EQ(st.code(), code) << st.ToString();
  EXPECT_NE(st.message().find(text), std::string::npos) << st.ToString();
}

TEST_F(EngineTest, SpecWithoutProcessIsRejected) {
  auto spec = DefaultSpec({"true"});
  spec.erase("process");
  ExpectError(CreateError(*sandbox_, "noproc", spec), Code::kInvalidArgument, "process: required");
}

TEST_F(EngineTest, BadJsonIsRejected) {
  auto parsed = oci::ParseSpec("{\"root\": {\"path\": ");
  ExpectError(parsed.status(), Code::kInvalidArgument, "invalid JSON");
}

TEST_F(EngineTest, UnknownNamespaceTypeIsRejected) {
  auto spec = DefaultSpec({"true"});
  spec["linux"]["namespaces"].push_back({{"type", "wormhole"}});
  ExpectError(CreateError(*sandbox_, "ns", spec), Code::kInvalidArgument,
              "linux.namespaces[6].type: unknown namespace type \"wormhole\"");
}

TEST_F(EngineTest, UserNamespaceIsUnimplemented) {
  auto spec = DefaultSpec({"true"});
  spec["linux"]["namespaces"].push_back({{"type", "user"}});
  ExpectError(CreateError(*sandbox_, "userns", spec), Code::kUnimplemented, "linux.namespaces[6]: user namespaces");
}

TEST_F(EngineTest, NonexistentRootfsIsRejected) {
  auto spec = DefaultSpec({"true"});
  spec["root"]["path"] = "/nonexistent/rootfs";
  ExpectError(CreateError(*sandbox_, "noroot", spec), Code::kNotFound,
              "root.path: stat /nonexistent/rootfs: No such file or directory");
}

TEST_F(EngineTest, UnknownSeccompSyscallIsRejected) {
  auto spec = DefaultSpec({"true"});
  spec["linux"]["seccomp"] = {{"defaultAction", "SCMP_ACT_ALLOW"},
                              {"syscalls", {{{"names", {"mkdir", "teleport"}}, {"action", "SCMP_ACT_ERRNO"}}}}};
  ExpectError(CreateError(*sandbox_, "scmp", spec), Code::kInvalidArgument,
              "create container scmp: linux.seccomp.syscalls[0].names[1]: unknown syscall \"teleport\"");
}

TEST_F(EngineTest, MountFailureInTheChildComesBackWithContext) {
  auto spec = DefaultSpec({"true"});
  spec["mounts"].push_back({{"destination", "/weird"}, {"type", "nosuchfs"}, {"source", "none"}});
  ExpectError(CreateError(*sandbox_, "mnt", spec), Code::kInternal,  // ENODEV
              "create container mnt: mounts[8]: mount nosuchfs on /weird: No such device");
}

TEST_F(EngineTest, BindMountOfMissingSourceNamesTheField) {
  auto spec = DefaultSpec({"true"});
  spec["mounts"].push_back({{"destination", "/data"}, {"type", "bind"}, {"source", "/no/such/dir"}, {"options", {"rbind"}}});
  ExpectError(CreateError(*sandbox_, "bind", spec), Code::kNotFound, "mounts[8].source: stat /no/such/dir");
}

TEST_F(EngineTest, MissingExecutableFailsCreate) {
  const Status st = CreateError(*sandbox_, "noexe", DefaultSpec({"no-such-program"}));
  ExpectError(st, Code::kNotFound, "exec \"no-such-program\": executable file not found in $PATH");
  EXPECT_REASON(st, reason::kExecutableNotFound) << "the container child's reason crosses the sync channel";
}

// What only the exec can tell comes after the start's answer, as with runc:
// the init exits 127 and its stderr (the container's log) says why.
TEST_F(EngineTest, AnExecThatFailsAfterTheStartIsTheInitsExitWithTheErrorOnItsStderr) {
  auto dir = TempDir::Create("notelf");
  ASSERT_OK(dir);
  ASSERT_OK(WriteFile(dir->Join("prog"), "neither ELF nor a script\n"));
  ASSERT_EQ(::chmod(dir->Join("prog").c_str(), 0755), 0);
  auto spec = DefaultSpec({"/prog"});
  spec["mounts"].push_back({{"destination", "/prog"}, {"type", "bind"}, {"source", dir->Join("prog")},
                            {"options", {"rbind", "rprivate", "ro"}}});
  RunResult r = Run("notelf", spec);  // its start succeeded (Run expects that)
  EXPECT_EQ(r.exit.status, 127);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "capsule: exec \"/prog\": Exec format error\n");
}

TEST_F(EngineTest, BadCwdFailsCreateAsNonRoot) {
  auto spec = DefaultSpec({"true"});
  spec["process"]["cwd"] = "/root/private";
  spec["process"]["user"] = {{"uid", 1000}, {"gid", 1000}};
  spec["process"].erase("capabilities");  // CAP_DAC_OVERRIDE would let it in
  spec["mounts"].push_back({{"destination", "/root"}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"mode=700"}}});
  ExpectError(CreateError(*sandbox_, "cwd", spec), Code::kPermissionDenied, "chdir to cwd /root/private");
}

TEST_F(EngineTest, HostnameWithoutUtsNamespaceIsRejected) {
  auto spec = DefaultSpec({"true"});
  auto& ns = spec["linux"]["namespaces"];
  ns.erase(std::remove_if(ns.begin(), ns.end(), [](const auto& n) { return n["type"] == "uts"; }), ns.end());
  ExpectError(CreateError(*sandbox_, "uts", spec), Code::kInvalidArgument, "hostname: setting it needs a UTS namespace");
}

TEST_F(EngineTest, ExecWithBadProcessFailsCleanly) {
  ContainerPtr c = StartContainer("execfail", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  auto bad = c->Exec("e1", Parse(DefaultSpec({"not-there"})).process);
  ExpectError(bad.status(), Code::kNotFound, "exec e1 in container execfail: exec \"not-there\"");
  auto again = c->Exec("e1", Parse(DefaultSpec({"true"})).process);  // the id was released
  ASSERT_OK(again);
  EXPECT_EQ(c->Wait("e1")->status, 0);
}

}  // namespace
}  // namespace capsule::engine::testing
