// Boots a QEMU guest (TCG) whose /init is engine_test itself, so the whole
// engine suite runs as PID 1 of a real guest kernel with a pure cgroup2
// hierarchy (cpu, memory, pids controllers: the OOM, pids and cpu.max tests
// that this host's hybrid cgroups must skip) and an initramfs root (the
// pivot_root fallback). One boot for the whole suite.
#include <fcntl.h>
#include <gtest/gtest.h>


#include "runtime/common/file_util.h"
#include "runtime/common/subprocess.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine {
namespace {

using namespace std::chrono_literals;

// Boot (~10 s under TCG) plus the suite (~40 s); generous for loaded hosts.
// A single stuck test ends sooner: the guest's watchdog dumps its tasks and
// powers off after 90 s (engine_test_main.cc).
constexpr auto kGuestTimeout = 300s;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Runs a helper script, returning its stdout's last line.
Result<std::string> RunScript(const std::vector<std::string>& argv, const std::string& out_path) {
  UniqueFd out(::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return ErrnoStatus("open " + out_path);
  SpawnOptions o;
  o.argv = argv;
  o.stdout_fd = out.get();
  o.stderr_fd = 2;
  ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(o));
  ASSIGN_OR_RETURN(int status, child.Wait(300s));
  if (ExitCode(status) != 0) return Internal(argv[0] + " failed with " + std::to_string(ExitCode(status)));
  ASSIGN_OR_RETURN(std::string text, ReadFile(out_path));
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

std::string Tail(const std::string& text, size_t lines) {
  size_t pos = text.size();
  for (size_t i = 0; i < lines && pos != std::string::npos && pos > 0; ++i) pos = text.rfind('\n', pos - 1);
  return pos == std::string::npos ? text : text.substr(pos);
}

TEST(EngineVmTest, WholeSuitePassesAsGuestPid1WithCgroup2Controllers) {
  const std::string src = Env("CAPSULE_SOURCE_DIR"), build = Env("CAPSULE_BUILD_DIR");
  ASSERT_FALSE(src.empty() || build.empty()) << "run through ctest (CAPSULE_SOURCE_DIR/CAPSULE_BUILD_DIR)";
  auto tmp = TempDir::Create("engine-vm");
  ASSERT_OK(tmp);
  const std::string vm = src + "/tests/agent/engine/vm/";
  // The project's one guest kernel: fetched by `make deps`, copied by the
  // image build (this test depends on capsule-initrd).
  const std::string kernel =
      Env("CAPSULE_GUEST_KERNEL").empty() ? build + "/deploy/vmlinuz" : Env("CAPSULE_GUEST_KERNEL");
  ASSERT_TRUE(PathExists(kernel)) << kernel << " missing: run `make deps`, then build capsule-initrd";
  const std::string initrd = tmp->Join("initrd.cpio");
  auto made = RunScript({vm + "make_initrd.sh", build + "/tests/agent/engine/engine_test", initrd,
                         build + "/agent/capsule-agent"},
                        tmp->Join("i.txt"));
  ASSERT_OK(made);

  const std::string log = tmp->Join("serial.log");
  SpawnOptions o;
  o.argv = {"/usr/bin/qemu-system-x86_64", "-M", "q35", "-accel", "tcg", "-cpu", "max", "-m", "512", "-smp", "2",
            "-display", "none", "-nodefaults", "-no-reboot", "-serial", "file:" + log, "-kernel", kernel,
            "-initrd", initrd, "-append", "console=ttyS0 quiet panic=-1 printk.devkmsg=on -- --gtest_color=no"};
  o.die_with_parent = true;
  auto qemu = ChildProcess::Spawn(o);
  ASSERT_OK(qemu);
  auto status = qemu->Wait(kGuestTimeout);
  if (!status.ok()) qemu->Terminate(2s);
  const std::string out = ReadFile(log).value_or("");
  ASSERT_OK(status) << "guest did not power off within the timeout; serial tail:\n" << Tail(out, 80);
  ASSERT_NE(out.find("CAPSULE_VM_RESULT="), std::string::npos) << "guest gave no result; serial tail:\n" << Tail(out, 120);
  EXPECT_NE(out.find("CAPSULE_VM_RESULT=0"), std::string::npos)
      << "serial tail:\n" << Tail(out, out.find("engine_test watchdog:") != std::string::npos ? 400 : 120);
  // The point of the guest: these ran rather than skipped.
  for (const char* name : {"MemoryLimitOomKillsAndRaisesEvent", "PidsLimitMakesForkFail", "CpuLimitAndUpdateWriteCpuMax",
                           "StatsReportCpuUsage", "ExecSharesPidNamespaceAndMounts"}) {
    EXPECT_NE(out.find(std::string("[       OK ] EngineTest.") + name), std::string::npos) << name << " did not pass";
  }
  EXPECT_EQ(out.find("[  SKIPPED ]"), std::string::npos) << "tests skipped in the guest:\n" << Tail(out, 60);
}

}  // namespace
}  // namespace capsule::engine
