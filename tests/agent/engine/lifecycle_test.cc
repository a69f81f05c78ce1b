// Container lifecycle, stdio and processes on a real kernel: run, exit
// codes, signals, stdin, tty, exec, shared pid namespaces, removal.
#include <signal.h>

#include <filesystem>
#include <thread>

#include "runtime/common/file_util.h"
#include "runtime/common/reasons.h"
#include "tests/agent/engine/engine_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::engine::testing {
namespace {

using namespace std::chrono_literals;

TEST_F(EngineTest, EchoReachesStdout) {
  RunResult r = Run("echo", DefaultSpec({"echo", "hello", "world"}));
  EXPECT_EQ(r.out, "hello world\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.exit.status, 0);
  EXPECT_FALSE(r.exit.oom_killed);
}

TEST_F(EngineTest, ExitCodeAndStderr) {
  RunResult r = Run("exit", DefaultSpec({"sh", "-c", "echo oops >&2; exit 42"}));
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(r.exit.status, 42);
}

TEST_F(EngineTest, KilledInitReports128PlusSignal) {
  auto spec = DefaultSpec({"sh", "-c", "echo up; exec sleep 1000"});
  ContainerPtr c = StartContainer("sig", spec);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->state(), ContainerState::kRunning);
  EXPECT_EQ(ReadUntil(*c->Io(""), Stream::kStdout, "up\n"), "up\n");
  ASSERT_OK(c->Signal("", SIGKILL, false));
  auto exit = c->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 128 + SIGKILL);
  EXPECT_EQ(c->state(), ContainerState::kStopped);
  // containerd's rule: signalling an exited process is NOT_FOUND.
  EXPECT_EQ(c->Signal("", SIGKILL, false).code(), Code::kNotFound);
  EXPECT_EQ(c->Signal("", SIGKILL, true).code(), Code::kNotFound);
}

// StartContainer holds the go until its answer has left: until then the
// container is running but its init is still the launch's copy of this
// process, blocked before the exec.
TEST_F(EngineTest, AHeldGoLetsTheInitExecOnlyOnceReleased) {
  auto c = sandbox_->Create("held", Parse(DefaultSpec({"echo", "held"})), {});
  ASSERT_OK(c);
  auto pid = (*c)->Start(/*hold_go=*/true);
  ASSERT_OK(pid);
  EXPECT_EQ((*c)->state(), ContainerState::kRunning);
  std::this_thread::sleep_for(200ms);  // time enough to exec, had it been told to
  EXPECT_EQ(ReadFile("/proc/" + std::to_string(*pid) + "/cmdline").value_or("gone"),
            ReadFile("/proc/self/cmdline").value_or(""));
  (*c)->ReleaseHeldGo();
  (*c)->ReleaseHeldGo();  // once only
  auto io = (*c)->Io("");
  ASSERT_OK(io);
  ASSERT_OK((*io)->CloseStdin());
  EXPECT_EQ(Drain(*io).first, "held\n");
  auto exit = (*c)->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 0);
  ASSERT_OK(sandbox_->Remove("held", 10s));
}

TEST_F(EngineTest, StdinRoundTripThroughCat) {
  ContainerPtr c = StartContainer("cat", DefaultSpec({"cat"}));
  ASSERT_TRUE(c);
  auto io = *c->Io("");
  auto n = io->Write("ping\n");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(ReadUntil(io, Stream::kStdout, "ping\n"), "ping\n");
  ASSERT_OK(io->CloseStdin());
  auto rest = Drain(io);
  EXPECT_EQ(rest.first, "");
  auto exit = c->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 0);
}

TEST_F(EngineTest, CreateThenStartRunsOnlyAtStart) {
  auto c = sandbox_->Create("twostep", Parse(DefaultSpec({"echo", "started"})), {});
  ASSERT_OK(c);
  EXPECT_EQ((*c)->state(), ContainerState::kCreated);
  EXPECT_GT((*c)->init_pid(), 0);
  auto exec = (*c)->Exec("e1", Parse(DefaultSpec({"true"})).process);
  EXPECT_EQ(exec.status().code(), Code::kFailedPrecondition);
  auto pid = (*c)->Start();
  ASSERT_OK(pid);
  EXPECT_EQ(*pid, (*c)->init_pid());
  EXPECT_EQ(Drain(*(*c)->Io("")).first, "started\n");
  ASSERT_TRUE((*c)->Wait("").ok());
  Status again = (*c)->Start().status();
  EXPECT_EQ(again.code(), Code::kFailedPrecondition);
  EXPECT_REASON(again, reason::kWrongState);
}

TEST_F(EngineTest, RemovingACreatedContainerKillsItsWaitingInit) {
  auto c = sandbox_->Create("unstarted", Parse(DefaultSpec({"echo", "never"})), {});
  ASSERT_OK(c);
  auto io = *(*c)->Io("");
  ASSERT_OK(sandbox_->Remove("unstarted", 10s));
  auto r = io->Read(Stream::kStdout, 100);
  ASSERT_OK(r);
  EXPECT_TRUE(r->eof);
  EXPECT_EQ(r->data, "");
  EXPECT_EQ(sandbox_->Get("unstarted").status().code(), Code::kNotFound);
}

TEST_F(EngineTest, IdsAreUniqueAndLookupsNameTheMissingObject) {
  ContainerPtr c = StartContainer("ids", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  auto dup = sandbox_->Create("ids", Parse(DefaultSpec({"true"})), {});
  EXPECT_EQ(dup.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(sandbox_->Get("nope").status().code(), Code::kNotFound);
  EXPECT_EQ(sandbox_->Remove("nope", 1s).code(), Code::kNotFound);
  ASSERT_OK(c->Exec("x", Parse(DefaultSpec({"sleep", "1000"})).process));
  auto again = c->Exec("x", Parse(DefaultSpec({"true"})).process);
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  auto missing = c->Wait("y");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("no process with exec id y"), std::string::npos);
}

TEST_F(EngineTest, ExecSharesPidNamespaceAndMounts) {
  ContainerPtr c = StartContainer("exec", DefaultSpec({"sh", "-c", "echo marker > /tmp/m; echo ready; exec sleep 1000"}));
  ASSERT_TRUE(c);
  EXPECT_EQ(ReadUntil(*c->Io(""), Stream::kStdout, "ready\n"), "ready\n");
  auto proc = Parse(DefaultSpec({"sh", "-c", "cat /tmp/m; cat /proc/1/comm; hostname; echo $$"})).process;
  auto pid = c->Exec("look", proc);
  ASSERT_OK(pid);
  auto out = Drain(*c->Io("look"));
  auto exit = c->Wait("look");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 0);
  // Same /tmp, same pid namespace (init is pid 1, the exec is not), same uts.
  EXPECT_EQ(out.first.substr(0, out.first.rfind('\n', out.first.size() - 2) + 1), "marker\nsleep\ncapsule-test\n");
  EXPECT_NE(out.first, "marker\nsleep\ncapsule-test\n1\n");

  auto procs = c->ListProcesses();
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 1u);  // the exec has exited
  EXPECT_EQ((*procs)[0].pid, c->init_pid());
  EXPECT_EQ((*procs)[0].command, "sleep");
}

// The container process shares its launcher's memory except in a time
// namespace of its own, where the kernel refuses that (process_launch.cc):
// such an init and an exec joining it still start and run in it.
TEST_F(EngineTest, ATimeNamespaceOfItsOwnHoldsTheInitAndItsExecs) {
  auto spec = DefaultSpec({"sh", "-c", "readlink /proc/self/ns/time; echo ready; exec sleep 1000"});
  spec["linux"]["namespaces"].push_back({{"type", "time"}});
  ContainerPtr c = StartContainer("timens", spec);
  ASSERT_TRUE(c);
  std::string seen = ReadUntil(*c->Io(""), Stream::kStdout, "ready\n");
  auto ours = std::filesystem::read_symlink("/proc/self/ns/time").string();
  ASSERT_EQ(seen.substr(0, 5), "time:") << seen;
  const std::string init_ns = seen.substr(0, seen.find('\n'));
  EXPECT_NE(init_ns, ours);
  auto pid = c->Exec("look", Parse(DefaultSpec({"readlink", "/proc/self/ns/time"})).process);
  ASSERT_OK(pid);
  auto out = Drain(*c->Io("look"));
  auto exit = c->Wait("look");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 0);
  EXPECT_EQ(out.first, init_ns + "\n");
}

TEST_F(EngineTest, SignalReachesExecAndListShowsIt) {
  ContainerPtr c = StartContainer("execsig", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  auto pid = c->Exec("s", Parse(DefaultSpec({"sleep", "1000"})).process);
  ASSERT_OK(pid);
  auto procs = c->ListProcesses();
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 2u);
  bool saw_exec = false;
  for (const auto& p : *procs) saw_exec = saw_exec || (p.exec_id == "s" && p.pid == *pid);
  EXPECT_TRUE(saw_exec);
  ASSERT_OK(c->Signal("s", SIGTERM, false));
  auto exit = c->Wait("s");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 128 + SIGTERM);
  EXPECT_EQ(c->Signal("s", SIGTERM, false).code(), Code::kNotFound);
  ASSERT_OK(c->Signal("", SIGKILL, true));  // every process in the cgroup
  EXPECT_EQ(c->Wait("")->status, 128 + SIGKILL);
}

TEST_F(EngineTest, SecondContainerJoinsFirstPidNamespace) {
  ContainerPtr sandbox = StartContainer("pause", DefaultSpec({"sh", "-c", "echo up; exec sleep 1000"}));
  ASSERT_TRUE(sandbox);
  EXPECT_EQ(ReadUntil(*sandbox->Io(""), Stream::kStdout, "up\n"), "up\n");
  auto path = sandbox->NamespacePath(oci::NamespaceType::kPid);
  ASSERT_OK(path);
  EXPECT_EQ(*path, "/proc/" + std::to_string(sandbox->init_pid()) + "/ns/pid");
  ContainerPtr app = StartInPodOf("pause", "app", {"sh", "-c", "cat /proc/1/comm; hostname"});
  ASSERT_TRUE(app);
  auto out = Drain(*app->Io(""));
  EXPECT_EQ(out.first, "sleep\ncapsule-test\n");
  EXPECT_EQ(app->Wait("")->status, 0);
}

// runc's kill --all on exit: a container in the pod's pid namespace ends
// with its init. What the init started would otherwise run on, reparented
// to the pod's PID 1, and hold the container's stdout open; the pod's own
// processes are left alone.
TEST_F(EngineTest, AnInitInThePodsPidNamespaceTakesWhatItStartedWithIt) {
  ContainerPtr sandbox = StartContainer("pod", DefaultSpec({"sh", "-c", "echo up; exec sleep 1000"}));
  ASSERT_TRUE(sandbox);
  EXPECT_EQ(ReadUntil(*sandbox->Io(""), Stream::kStdout, "up\n"), "up\n");
  ContainerPtr app = StartInPodOf("pod", "app", {"sh", "-c", "sleep 7201 & echo started; exec sleep 7202"});
  ASSERT_TRUE(app);
  auto io = *app->Io("");
  EXPECT_EQ(ReadUntil(io, Stream::kStdout, "started\n"), "started\n");
  auto before = app->ListProcesses();
  ASSERT_OK(before);
  ASSERT_EQ(before->size(), 2u) << "the init and the child it left in the background";

  ASSERT_OK(app->Signal("", SIGKILL, /*all=*/false));  // the init alone, as a CRI stop does
  auto exit = app->Wait("");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status, 128 + SIGKILL);
  std::vector<ProcessInfo> left;
  for (int i = 0; i < 100; ++i) {
    auto procs = app->ListProcesses();
    ASSERT_OK(procs);
    left = *procs;
    if (left.empty()) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(left.empty()) << left.size() << " process(es) of the container outlived its init, first pid "
                            << left.front().pid << " (" << left.front().command << ")";
  // The child's end of stdout closed with it: the output reaches its end.
  EXPECT_EQ(Drain(io).first, "");
  EXPECT_EQ(sandbox->state(), ContainerState::kRunning) << "the pod's PID 1 is not the container's";
  auto pod_procs = sandbox->ListProcesses();
  ASSERT_OK(pod_procs);
  EXPECT_EQ(pod_procs->size(), 1u);
}

TEST_F(EngineTest, TtyCarriesOutputAndWindowSize) {
  auto spec = DefaultSpec({"sh", "-c", "stty size; read line; stty size; echo got:$line"});
  spec["process"]["terminal"] = true;
  spec["process"]["consoleSize"] = {{"height", 24}, {"width", 80}};
  ContainerPtr c = StartContainer("tty", spec);
  ASSERT_TRUE(c);
  auto io = *c->Io("");
  EXPECT_TRUE(io->terminal());
  EXPECT_EQ(ReadUntil(io, Stream::kStdout, "24 80\r\n"), "24 80\r\n");
  EXPECT_TRUE(io->Read(Stream::kStderr, 10)->eof);  // a tty has one stream
  ASSERT_OK(io->Resize(30, 100));
  ASSERT_OK(io->Write("hi\n"));
  std::string out = Drain(io).first;
  EXPECT_NE(out.find("30 100\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("got:hi\r\n"), std::string::npos) << out;
  EXPECT_EQ(c->Wait("")->status, 0);
}

TEST_F(EngineTest, OutputOutlivesTheProcess) {
  // More than a pipe buffer: back-pressure holds the writer until we read.
  RunResult big = Run("big", DefaultSpec({"sh", "-c", "yes 0123456789 | head -c 300000"}));
  EXPECT_EQ(big.out.size(), 300000u);
  EXPECT_EQ(big.exit.status, 0);
  // Wait first, read after: nothing written before exit is lost.
  ContainerPtr c = StartContainer("late", DefaultSpec({"sh", "-c", "head -c 40000 /dev/zero; echo -n end"}));
  ASSERT_TRUE(c);
  ASSERT_OK(c->Wait(""));
  auto out = Drain(*c->Io(""));
  EXPECT_EQ(out.first.size(), 40003u);
  EXPECT_EQ(out.first.substr(40000), "end");
}

TEST_F(EngineTest, RemoveWakesBlockedReader) {
  ContainerPtr c = StartContainer("blocked", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  auto io = *c->Io("");
  std::thread reader([io] {
    auto r = io->Read(Stream::kStdout, 10);
    EXPECT_OK(r);
    EXPECT_TRUE(r->eof);
  });
  ASSERT_OK(sandbox_->Remove("blocked", 10s));
  reader.join();
  EXPECT_EQ(c->Wait("")->status, 128 + SIGKILL);
}

}  // namespace
}  // namespace capsule::engine::testing

namespace capsule::engine::testing {
namespace {

size_t OpenFds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) n += e.exists() || true;
  return n;
}

TEST_F(EngineTest, FinishedExecsReleaseTheirFdsButStillAnswerWait) {
  ContainerPtr c = StartContainer("probes", DefaultSpec({"sleep", "1000"}));
  ASSERT_TRUE(c);
  const size_t before = OpenFds();
  for (int i = 0; i < 5; ++i) {  // like a liveness probe
    const std::string id = "probe" + std::to_string(i);
    ASSERT_OK(c->Exec(id, Parse(DefaultSpec({"echo", id})).process));
    EXPECT_EQ(Drain(*c->Io(id)).first, id + "\n");
    EXPECT_EQ(c->Wait(id)->status, 0);
  }
  EXPECT_EQ(OpenFds(), before) << "exited, waited and drained execs must not keep fds";
  auto late = c->Wait("probe0");  // a repeated Wait still answers
  ASSERT_OK(late);
  EXPECT_EQ(late->status, 0);
  auto r = (*c->Io("probe0"))->Read(Stream::kStdout, 10);
  ASSERT_OK(r);
  EXPECT_TRUE(r->eof);
}

TEST_F(EngineTest, HooksAreSkippedNotRun) {
  auto spec = DefaultSpec({"echo", "ran"});
  spec["hooks"] = {{"prestart", {{{"path", "/nonexistent/hook"}}}},
                   {"createContainer", {{{"path", "/nonexistent/hook2"}}}}};
  RunResult r = Run("hooks", spec);
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_EQ(r.exit.status, 0);
}

}  // namespace
}  // namespace capsule::engine::testing
