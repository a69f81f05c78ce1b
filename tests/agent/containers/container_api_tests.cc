// The container API through gRPC, endpoint-independent: compiled into every
// binary that instantiates ContainerApiTest (host agent, pod VM). Each test
// runs in its own sandbox; the fixture checks for leaked mounts and cgroups.
#include <signal.h>

#include <thread>

#include "runtime/common/reasons.h"
#include "tests/agent/containers/container_api_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::agent::testing {
namespace {

using nlohmann::json;

// Runs `args` as container `id` to completion; returns stdout, stderr, exit.
struct Ran {
  std::string out, err;
  v1::WaitProcessResponse exit;
};

Ran RunToEnd(ApiClient& api, const std::string& id, const json& spec) {
  Ran r;
  EXPECT_OK(api.Create(id, spec));
  EXPECT_OK(api.Start(id));
  std::thread err_reader([&] { r.err = api.ReadAll(id, "", true).value_or("<read failed>"); });
  r.out = api.ReadAll(id).value_or("<read failed>");
  err_reader.join();
  auto exit = api.Wait(id);
  EXPECT_OK(exit);
  if (exit.ok()) r.exit = *exit;
  EXPECT_OK(api.Remove(id));
  return r;
}

TEST_P(ContainerApiTest, CreateStartReadsOutputAndWaitReportsExitZero) {
  Ran r = RunToEnd(api(), "c1", api().Spec({"sh", "-c", "echo hello; echo oops >&2"}));
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(r.exit.status(), 0);
  EXPECT_GT(r.exit.exited_at_unix_nanos(), 0);
  EXPECT_FALSE(r.exit.oom_killed());
}

// The agent answers what a create cost it, part by part, for the shim to
// log (the guest logs no line on this path): each part of a real launch
// takes time, and the parts are disjoint pieces of the whole.
TEST_P(ContainerApiTest, CreateAnswersTheAgentsTimings) {
  auto created = api().CreateAnswered("timed", api().Spec({"true"}));
  ASSERT_OK(created);
  EXPECT_GT(created->plan_us(), 0u);
  EXPECT_GT(created->cgroup_us(), 0u);
  EXPECT_GT(created->fork_us(), 0u);
  EXPECT_GT(created->setup_us(), 0u);
  EXPECT_GE(created->handled_us(), created->storages_us() + created->plan_us() + created->cgroup_us() +
                                       created->fork_us() + created->setup_us());
  EXPECT_OK(api().Remove("timed"));
}

TEST_P(ContainerApiTest, ExitCodeThreeIsReported) {
  EXPECT_EQ(RunToEnd(api(), "c3", api().Spec({"sh", "-c", "exit 3"})).exit.status(), 3);
}

TEST_P(ContainerApiTest, KillBySignalReports128PlusSignalAndLaterSignalsAreNotFound) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Signal("c1", "", SIGKILL));
  auto exit = api().Wait("c1");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status(), 128 + SIGKILL);
  // containerd's CRI stops a container by Kill and needs NOT_FOUND once gone.
  EXPECT_ERROR(api().Signal("c1", "", SIGTERM), Code::kNotFound, "exited");
  EXPECT_ERROR(api().Signal("c1", "", SIGKILL, /*all=*/true), Code::kNotFound, "c1");
}

TEST_P(ContainerApiTest, StdinRoundTripsAndCloseStdinEndsTheProcess) {
  ASSERT_OK(api().Create("cat", api().Spec({"cat"})));
  ASSERT_OK(api().Start("cat"));
  auto n = api().Write("cat", "", "ping\n");
  ASSERT_OK(n);
  EXPECT_EQ(*n, 5u);
  EXPECT_EQ(api().ReadAll("cat", "", false, "ping\n").value_or(""), "ping\n");
  ASSERT_OK(api().CloseStdin("cat"));
  auto eof = api().Read("cat", "", false);
  ASSERT_OK(eof);
  EXPECT_TRUE(eof->eof());
  EXPECT_EQ(api().Wait("cat").value_or(v1::WaitProcessResponse()).status(), 0);
}

// stdin_closed: the process reads end of file from the start, with no
// CloseStdin after the create (or the exec).
TEST_P(ContainerApiTest, StdinClosedAtCreateGivesTheProcessEndOfFile) {
  ASSERT_OK(api().Create("cat", api().Spec({"cat"}), false, {}, /*stdin_closed=*/true));
  auto write = api().Write("cat", "", "late\n");
  EXPECT_EQ(write.status().code(), Code::kFailedPrecondition) << write.status().ToString();
  ASSERT_OK(api().Start("cat"));
  EXPECT_EQ(api().Wait("cat").value_or(v1::WaitProcessResponse()).status(), 0);

  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Exec("c1", "e1", ApiClient::Process({"cat"}), /*stdin_closed=*/true));
  EXPECT_EQ(api().Wait("c1", "e1").value_or(v1::WaitProcessResponse()).status(), 0);
  auto open_stdin = api().Exec("c1", "e2", ApiClient::Process({"cat"}));
  ASSERT_OK(open_stdin);
  EXPECT_EQ(api().Wait("c1", "e2", std::chrono::milliseconds(300)).status().code(), Code::kDeadlineExceeded)
      << "without stdin_closed the exec's stdin stays open until CloseStdin";
  ASSERT_OK(api().CloseStdin("c1", "e2"));
  EXPECT_EQ(api().Wait("c1", "e2").value_or(v1::WaitProcessResponse()).status(), 0);
}

TEST_P(ContainerApiTest, ExecJoinsTheContainersPidNamespace) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Exec("c1", "e1", ApiClient::Process({"cat", "/proc/1/comm"})));
  EXPECT_EQ(api().ReadAll("c1", "e1").value_or(""), "sleep\n");  // pid 1 is the container's init
  auto exit = api().Wait("c1", "e1");
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status(), 0);
  auto list = api().List("c1");
  ASSERT_OK(list);
  ASSERT_GE(list->processes_size(), 1);
  EXPECT_EQ(list->processes(0).command(), "sleep");
  EXPECT_ERROR(api().Exec("c1", "e1", ApiClient::Process({"true"})), Code::kAlreadyExists, "e1");
}

TEST_P(ContainerApiTest, SecondContainerJoinsThePodPidNamespaceWhenAsked) {
  ASSERT_OK(api().Create("anchor", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("anchor"));
  ASSERT_OK(api().Exec("anchor", "ipc", ApiClient::Process({"readlink", "/proc/self/ns/ipc"})));
  const std::string anchor_ipc = api().ReadAll("anchor", "ipc").value_or("?");
  const json probe = api().Spec({"sh", "-c", "cat /proc/1/comm; readlink /proc/self/ns/ipc"});
  // Not asked: its own pid namespace (pid 1 is its own sh), but the pod's ipc.
  EXPECT_EQ(RunToEnd(api(), "plain", probe).out, "sh\n" + anchor_ipc);
  // CreateContainerRequest.sandbox_pidns: pid 1 is the anchor's init.
  ASSERT_OK(api().Create("shared", probe, /*sandbox_pidns=*/true));
  ASSERT_OK(api().Start("shared"));
  EXPECT_EQ(api().ReadAll("shared").value_or(""), "sleep\n" + anchor_ipc);
  EXPECT_OK(api().Wait("shared"));
}

TEST_P(ContainerApiTest, SandboxPidnsFromCreateSandboxAppliesToEveryContainer) {
  RecreateSandbox(/*sandbox_pidns=*/true);
  ASSERT_OK(api().Create("first", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("first"));
  Ran second = RunToEnd(api(), "second", api().Spec({"cat", "/proc/1/comm"}));
  EXPECT_EQ(second.out, "sleep\n");
}

TEST_P(ContainerApiTest, CriAnnotationsChooseTheSandboxContainer) {
  json pause = api().Spec({"sleep", "1000"});
  pause["annotations"] = {{"io.kubernetes.cri.container-type", "sandbox"}, {"io.kubernetes.cri.sandbox-id", "pause"}};
  ASSERT_OK(api().Create("pause", pause));
  ASSERT_OK(api().Start("pause"));
  // CRI's POD pid mode: the pid entry carries the host's path to the sandbox.
  json app = api().Spec({"cat", "/proc/1/comm"});
  app["annotations"] = {{"io.kubernetes.cri.container-type", "container"}, {"io.kubernetes.cri.sandbox-id", "pause"}};
  app["linux"]["namespaces"][0] = {{"type", "pid"}, {"path", "/proc/4242/ns/pid"}};
  EXPECT_EQ(RunToEnd(api(), "app", app).out, "sleep\n");
  json stray = app;
  stray["annotations"]["io.kubernetes.cri.sandbox-id"] = "other-pod";
  EXPECT_ERROR(api().Create("stray", stray), Code::kFailedPrecondition, "other-pod");
  pause["annotations"]["io.kubernetes.cri.sandbox-id"] = "pause2";
  EXPECT_ERROR(api().Create("pause2", pause), Code::kFailedPrecondition, "already is");
}

// The pod holder made before the sandbox becomes the CRI sandbox container
// at SetupSandbox: running at once, PID 1 of the pod's pid namespace, with
// the pod's hostname; nothing is created or started for it.
TEST_P(ContainerApiTest, SetupSandboxAdoptsThePodHolderAsTheSandboxContainer) {
  if (!endpoint().sets_clock())
    GTEST_SKIP() << "SetupSandbox sets the clock, which a --no-init agent refuses (engine_test covers the holder)";
  ASSERT_OK(api().DestroySandbox());
  auto setup = api().SetupSandboxWithHolder("held", "held-host");
  ASSERT_OK(setup);
  EXPECT_GT(setup->holder_pid(), 0u);
  // The agent's account of its parts, which the shim logs: each measured,
  // none longer than the whole (the pod's own and the clock's take time
  // even here; there is no NIC and no route to apply).
  EXPECT_GT(setup->handled_us(), 0u);
  EXPECT_GT(setup->pod_us(), 0u);
  EXPECT_GT(setup->clock_rng_us(), 0u);
  EXPECT_GE(setup->handled_us(), setup->clock_rng_us() + setup->pod_us() + setup->nics_us() + setup->routes_us());
  EXPECT_ERROR(api().Start("held"), Code::kFailedPrecondition, "running");
  json app = api().Spec({"sh", "-c", "cat /proc/1/comm; hostname"});
  app["annotations"] = {{"io.kubernetes.cri.container-type", "container"}, {"io.kubernetes.cri.sandbox-id", "held"}};
  app["linux"]["namespaces"][0] = {{"type", "pid"}, {"path", "/proc/4242/ns/pid"}};
  app["hostname"] = "";  // the pod's, from the holder's uts namespace
  EXPECT_EQ(RunToEnd(api(), "app", app).out, "pause\nheld-host\n");
  json pause = api().Spec({"sleep", "1000"});
  pause["annotations"] = {{"io.kubernetes.cri.container-type", "sandbox"}, {"io.kubernetes.cri.sandbox-id", "pause"}};
  EXPECT_ERROR(api().Create("pause", pause), Code::kFailedPrecondition, "already is");
  auto list = api().List("held");
  ASSERT_OK(list);
  ASSERT_EQ(list->processes_size(), 1);
  EXPECT_EQ(list->processes(0).command(), "pause");
}

TEST_P(ContainerApiTest, SeccompProfileDeniesMkdirWithEperm) {
  json spec = api().Spec({"sh", "-c", "mkdir /tmp/d; echo rc=$?"});
  spec["linux"]["seccomp"] = {
      {"defaultAction", "SCMP_ACT_ALLOW"},
      {"architectures", {"SCMP_ARCH_X86_64"}},
      {"syscalls", {{{"names", {"mkdir", "mkdirat"}}, {"action", "SCMP_ACT_ERRNO"}, {"errnoRet", 1}}}}};
  Ran r = RunToEnd(api(), "seccomp", spec);
  EXPECT_EQ(r.out, "rc=1\n");
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
}

TEST_P(ContainerApiTest, RemoveProcessForgetsOnlyExitedExecs) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Exec("c1", "done", ApiClient::Process({"true"})));
  ASSERT_OK(api().Exec("c1", "running", ApiClient::Process({"sleep", "1000"})));
  ASSERT_OK(api().Wait("c1", "done"));
  EXPECT_ERROR(api().RemoveProcess("c1", "running"), Code::kFailedPrecondition, "running");
  EXPECT_ERROR(api().RemoveProcess("c1", ""), Code::kInvalidArgument, "exec_id");
  EXPECT_ERROR(api().RemoveProcess("c1", "nope"), Code::kNotFound, "nope");
  ASSERT_OK(api().RemoveProcess("c1", "done"));
  EXPECT_ERROR(api().Wait("c1", "done"), Code::kNotFound, "done");
  // The id is free again.
  ASSERT_OK(api().Exec("c1", "done", ApiClient::Process({"sh", "-c", "exit 7"})));
  EXPECT_EQ(api().Wait("c1", "done").value_or(v1::WaitProcessResponse()).status(), 7);
}

TEST_P(ContainerApiTest, TerminalModeAndWindowResize) {
  json spec = api().Spec({"sh", "-c", "stty size; read x; stty size"});
  spec["process"]["terminal"] = true;
  spec["process"]["consoleSize"] = {{"height", 24}, {"width", 80}};
  ASSERT_OK(api().Create("tty", spec));
  ASSERT_OK(api().Start("tty"));
  EXPECT_NE(api().ReadAll("tty", "", false, "24 80").value_or("").find("24 80"), std::string::npos);
  auto err = api().Read("tty", "", true);  // a tty has no separate stderr
  ASSERT_OK(err);
  EXPECT_TRUE(err->eof());
  ASSERT_OK(api().Resize("tty", "", 40, 100));
  ASSERT_OK(api().Write("tty", "", "go\n"));
  EXPECT_NE(api().ReadAll("tty", "", false, "40 100").value_or("").find("40 100"), std::string::npos);
  EXPECT_EQ(api().Wait("tty").value_or(v1::WaitProcessResponse()).status(), 0);
  EXPECT_ERROR(api().Resize("tty", "", 70000, 10), Code::kInvalidArgument, "row");
}

TEST_P(ContainerApiTest, MalformedRequestsNameTheFieldAndLeaveNothingBehind) {
  const auto mounts = AgentMounts();
  json spec = api().Spec({"true"});
  EXPECT_ERROR(api().CreateRaw("bad-json", "{not json"), Code::kInvalidArgument, "oci_spec_json");
  EXPECT_ERROR(api().CreateRaw("empty", ""), Code::kInvalidArgument, "oci_spec_json is required");
  json no_process = spec;
  no_process.erase("process");
  EXPECT_ERROR(api().Create("no-process", no_process), Code::kInvalidArgument, "process");
  json bad_ns = spec;
  bad_ns["linux"]["namespaces"].push_back({{"type", "bogus"}});
  EXPECT_ERROR(api().Create("bad-ns", bad_ns), Code::kInvalidArgument, "linux.namespaces");
  json no_root = spec;
  no_root["root"]["path"] = endpoint().scratch_dir() + "/no/such/rootfs";
  EXPECT_ERROR(api().Create("no-root", no_root), Code::kNotFound, "root.path");
  EXPECT_ERROR(api().Create("../escape", spec), Code::kInvalidArgument, "container_id");
  EXPECT_ERROR(api().Start("never-made"), Code::kNotFound, "never-made");
  EXPECT_REASON(api().Start("never-made"), reason::kContainerNotFound) << "the agent's reason crosses gRPC";
  EXPECT_ERROR(api().Signal("never-made", "", 99), Code::kInvalidArgument, "signal 99");
  EXPECT_ERROR(api().Update("never-made", json::array()), Code::kInvalidArgument, "resources_json");
  v1::ExecProcessRequest bad_exec;
  bad_exec.set_container_id("never-made");
  bad_exec.set_exec_id("e");
  bad_exec.set_process_json("[]");
  v1::ExecProcessResponse exec_resp;
  grpc::ClientContext ctx;
  EXPECT_ERROR(FromGrpc(api().stub().ExecProcess(&ctx, bad_exec, &exec_resp)), Code::kInvalidArgument,
               "process_json");
  EXPECT_EQ(AgentMounts(), mounts);
  EXPECT_EQ(CgroupDescendants(), 0);
  // The agent is still there and serves the next request.
  EXPECT_EQ(RunToEnd(api(), "after", api().Spec({"echo", "still here"})).out, "still here\n");
}

TEST_P(ContainerApiTest, ContainerStoragesAreMountedForItAndGoWithIt) {
  const std::string vol = endpoint().scratch_dir() + "/vol-" + std::to_string(::getpid());
  v1::Storage tmpfs;
  tmpfs.set_driver("tmpfs");
  tmpfs.set_source("data");
  tmpfs.set_mount_point(vol);
  json spec = api().Spec({"sh", "-c", "echo written > /data/file"});
  spec["mounts"].push_back({{"destination", "/data"}, {"type", "bind"}, {"source", vol}, {"options", {"rbind", "rw"}}});
  ASSERT_OK(api().Create("store", spec, false, {tmpfs}));
  const auto mounts = AgentMounts();
  EXPECT_NE(std::find(mounts.begin(), mounts.end(), vol), mounts.end()) << vol << " not mounted";
  ASSERT_OK(api().Start("store"));
  EXPECT_EQ(api().Wait("store").value_or(v1::WaitProcessResponse()).status(), 0);
  EXPECT_EQ(api().ReadFile(vol + "/file").value_or(""), "written\n");
  ASSERT_OK(api().Remove("store"));
  const auto after = AgentMounts();
  EXPECT_EQ(std::find(after.begin(), after.end(), vol), after.end()) << vol << " still mounted";
  v1::Storage bad = tmpfs;
  bad.set_driver("floppy");
  EXPECT_ERROR(api().Create("bad-store", spec, false, {bad}), Code::kInvalidArgument, "storages[0].driver");
}

// One try of the scenario: false when a blocked call reached the agent only
// after DestroySandbox (nothing tells the client its call is in flight).
bool DestroyWhileBlocked(ApiClient& api, int* cgroups_left) {
  EXPECT_OK(api.Create("c1", api.Spec({"sleep", "1000"})));
  EXPECT_OK(api.Start("c1"));
  EXPECT_OK(api.Create("c2", api.Spec({"cat"})));
  EXPECT_OK(api.Start("c2"));
  EXPECT_OK(api.Exec("c1", "e1", ApiClient::Process({"sleep", "1000"})));
  Result<v1::WaitProcessResponse> waited = Internal("not waited");
  Result<std::string> read = Internal("not read");
  std::thread waiter([&] { waited = api.Wait("c1", "e1"); });
  std::thread reader([&] { read = api.ReadAll("c2"); });
  // A head start for the two calls (not an assertion on time: a call that
  // still arrives late makes the caller try again).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_OK(api.DestroySandbox());
  waiter.join();
  reader.join();
  *cgroups_left = -1;
  if (waited.status().code() == Code::kFailedPrecondition || read.status().code() == Code::kFailedPrecondition) {
    return false;
  }
  EXPECT_OK(waited);
  if (waited.ok()) {
    EXPECT_EQ(waited->status(), 128 + SIGKILL);
  }
  EXPECT_OK(read);
  if (read.ok()) {
    EXPECT_EQ(*read, "");
  }
  EXPECT_ERROR(api.List("c1"), Code::kFailedPrecondition, "CreateSandbox");
  return true;
}

TEST_P(ContainerApiTest, DestroySandboxStopsEveryProcessAndWakesBlockedCalls) {
  constexpr int kTries = 5;
  int cgroups = 0;
  bool in_flight = false;
  for (int i = 0; i < kTries && !in_flight; ++i) {
    in_flight = DestroyWhileBlocked(api(), &cgroups);
    EXPECT_EQ(CgroupDescendants(), 0);
    ASSERT_OK(api().CreateSandbox("pod-again"));  // the next try, or TearDown, destroys this one
  }
  EXPECT_TRUE(in_flight) << "the blocked calls never reached the agent before DestroySandbox in " << kTries << " tries";
}

TEST_P(ContainerApiTest, WaitGivesUpWhenTheCallerDoes) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  EXPECT_ERROR(api().Wait("c1", "", std::chrono::milliseconds(300)), Code::kDeadlineExceeded, "");
  // The abandoned wait left nothing behind: a new one gets the exit. (SIGKILL:
  // a pid namespace's init ignores SIGTERM it has no handler for.)
  ASSERT_OK(api().Signal("c1", "", SIGKILL));
  EXPECT_EQ(api().Wait("c1").value_or(v1::WaitProcessResponse()).status(), 128 + SIGKILL);
}

TEST_P(ContainerApiTest, PauseFreezesTheCgroupAndResumeThawsIt) {
  ASSERT_OK(api().Create("c1", api().Spec({"cat"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Pause("c1"));
  EXPECT_NE(api().ReadFile(CgroupDir("c1") + "/cgroup.events").value_or("").find("frozen 1"), std::string::npos);
  EXPECT_ERROR(api().Pause("c1"), Code::kFailedPrecondition, "paused");
  ASSERT_OK(api().Resume("c1"));
  EXPECT_NE(api().ReadFile(CgroupDir("c1") + "/cgroup.events").value_or("").find("frozen 0"), std::string::npos);
  ASSERT_OK(api().Write("c1", "", "thawed\n"));
  EXPECT_EQ(api().ReadAll("c1", "", false, "\n").value_or(""), "thawed\n");
  ASSERT_OK(api().CloseStdin("c1"));
  EXPECT_OK(api().Wait("c1"));
}

TEST_P(ContainerApiTest, StatsCarryCgroupMetricsAndTheGuestsInterfaces) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  auto stats = api().Stats("c1");
  ASSERT_OK(stats);
  EXPECT_TRUE(stats->has_metrics());
  for (const auto& n : stats->network()) EXPECT_NE(n.name(), "lo");
  if (endpoint().has_resource_controllers()) {
    EXPECT_GE(stats->metrics().pids().current(), 1u);
    EXPECT_GT(stats->metrics().memory().usage(), 0u);
  }
  EXPECT_ERROR(api().Stats("nope"), Code::kNotFound, "nope");
}

// Resource limits: the host's cgroup2 hierarchy has no memory/pids/cpu
// controllers (they are on v1 here); the VM suite runs these.
#define REQUIRE_RESOURCE_CONTROLLERS()                                                       \
  if (!endpoint().has_resource_controllers())                                               \
  GTEST_SKIP() << endpoint().name() << ": no memory/pids/cpu controllers on its cgroup2 hierarchy"

TEST_P(ContainerApiTest, OomKillIsReportedByGetOomEventAndWait) {
  REQUIRE_RESOURCE_CONTROLLERS();
  json spec = api().Spec({"sh", "-c", "exec tail /dev/zero"});
  spec["linux"]["resources"] = {{"memory", {{"limit", 16 << 20}, {"swap", 16 << 20}}}};
  Result<v1::OOMEvent> event = Internal("no event");
  std::thread oom([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kBlockingDeadline);
    v1::OOMEvent e;
    grpc::Status st = api().stub().GetOOMEvent(&ctx, v1::GetOOMEventRequest(), &e);
    event = st.ok() ? Result<v1::OOMEvent>(e) : Result<v1::OOMEvent>(FromGrpc(st));
  });
  ASSERT_OK(api().Create("oom", spec));
  ASSERT_OK(api().Start("oom"));
  auto exit = api().Wait("oom");
  oom.join();
  ASSERT_OK(exit);
  EXPECT_EQ(exit->status(), 128 + SIGKILL);
  EXPECT_TRUE(exit->oom_killed());
  ASSERT_OK(event);
  EXPECT_EQ(event->container_id(), "oom");
}

TEST_P(ContainerApiTest, PidsLimitMakesForkFail) {
  REQUIRE_RESOURCE_CONTROLLERS();
  json spec = api().Spec({"sh", "-c", "for i in 1 2 3 4 5; do sleep 100 & done; echo not-reached"});
  spec["linux"]["resources"] = {{"pids", {{"limit", 4}}}};
  Ran r = RunToEnd(api(), "pids", spec);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("Resource temporarily unavailable"), std::string::npos) << r.err;
  EXPECT_NE(r.exit.status(), 0);
}

TEST_P(ContainerApiTest, CpuLimitAndUpdateContainerWriteCpuMax) {
  REQUIRE_RESOURCE_CONTROLLERS();
  json spec = api().Spec({"sleep", "1000"});
  spec["linux"]["resources"] = {{"cpu", {{"quota", 50000}, {"period", 100000}}}};
  ASSERT_OK(api().Create("cpu", spec));
  ASSERT_OK(api().Start("cpu"));
  EXPECT_EQ(api().ReadFile(CgroupDir("cpu") + "/cpu.max").value_or(""), "50000 100000\n");
  ASSERT_OK(api().Update("cpu", {{"cpu", {{"quota", 25000}, {"period", 100000}}}}));
  EXPECT_EQ(api().ReadFile(CgroupDir("cpu") + "/cpu.max").value_or(""), "25000 100000\n");
}

// --- Guest processes (ExecGuestProcess, capsule-runtime exec): outside every
// container, addressed with container id "".

// The cgroup a guest process gets, beside the containers' parent.
std::string GuestCgroupFile(AgentEndpoint& ep, const std::string& exec_id) {
  const std::string parent = ep.cgroup_parent_dir();
  return parent.substr(0, parent.rfind('/')) + "/capsule-debug-" + exec_id + "/cgroup.procs";
}

TEST_P(ContainerApiTest, GuestProcessSeesTheGuestFromOutsideWithAContainersTools) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  auto pid = api().Start("c1");
  ASSERT_OK(pid);
  ASSERT_NE(*pid, 1u);  // as the agent counts; the container itself calls it 1
  // The container's pid 1 is its sleep; the guest process sees it under the
  // guest's pid, so it is in the guest's pid namespace, not the container's.
  const std::string script = "cat /proc/" + std::to_string(*pid) + "/comm; cat /proc/1/comm >&2; " +
                             "touch /written-by-debug 2>/dev/null && echo writable; " +
                             "echo scratch > /tmp/t && cat /tmp/t; pwd";
  ASSERT_OK(api().ExecGuest("dbg", ApiClient::Process({"sh", "-c", script}), "c1"));
  std::string err;
  std::thread err_reader([&] { err = api().ReadAll("", "dbg", true).value_or("<read failed>"); });
  EXPECT_EQ(api().ReadAll("", "dbg").value_or("<read failed>"), "sleep\nscratch\n/\n");
  err_reader.join();
  EXPECT_NE(err, "sleep\n") << "pid 1 of the guest process is the container's init";
  EXPECT_EQ(api().Wait("", "dbg").value_or(v1::WaitProcessResponse()).status(), 0);
  ASSERT_OK(api().RemoveProcess("", "dbg"));
  // The tools root was read-only: the container's files are as they were.
  ASSERT_OK(api().Exec("c1", "look", ApiClient::Process({"sh", "-c", "test -e /written-by-debug; echo $?"})));
  EXPECT_EQ(api().ReadAll("c1", "look").value_or(""), "1\n");
  EXPECT_ERROR(api().ReadFile(GuestCgroupFile(endpoint(), "dbg")), Code::kNotFound, "dbg");
}

// The tenant may have replaced any file of its container: what the operator
// runs from it gets the container init's uid, capabilities and view of /proc,
// /sys and /dev, not the guest's root, unless the operator asks for that.
TEST_P(ContainerApiTest, GuestProcessRunsATenantsToolsAsItsInitRunsUnlessAskedForRoot) {
  json spec = api().Spec({"sleep", "1000"});
  spec["process"]["user"] = {{"uid", 1000}, {"gid", 1000}};
  ASSERT_OK(api().Create("tenant", spec));
  ASSERT_OK(api().Start("tenant"));
  ASSERT_OK(api().Create("rooted", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("rooted"));
  // The tenant's "tool": what it runs as, and what of the guest it can change.
  ASSERT_OK(api().Exec("rooted", "plant", ApiClient::Process({"sh", "-c", R"(cat > /tenant-tool <<'EOS'
#!/bin/sh
id -u
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status
v=$(cat /proc/sys/kernel/modprobe 2>/dev/null) && (echo "$v" > /proc/sys/kernel/modprobe) 2>/dev/null && echo modprobe-writable
awk '$5 ~ /^\/(sys|proc\/sys|proc\/sysrq-trigger)$/ { print $5 " " substr($6, 1, 2) }' /proc/self/mountinfo | sort -u
test -e /dev/kmsg && echo guest-dev
ls /proc/1/root/ >/dev/null 2>&1 && echo guest-root-visible
exit 0
EOS
chmod 755 /tenant-tool; grep CapEff /proc/self/status)"})));
  auto caps = api().ReadAll("rooted", "plant");
  ASSERT_OK(caps);
  ASSERT_EQ(api().Wait("rooted", "plant").value_or(v1::WaitProcessResponse()).status(), 0);
  auto run = [&](const std::string& exec_id, const std::string& tools, bool as_root) -> std::string {
    json process = ApiClient::Process({"/tenant-tool"});
    process.erase("capabilities");  // as capsule-runtime exec asks: the agent's own
    auto started = api().ExecGuest(exec_id, process, tools, as_root);
    if (!started.ok()) return started.status().ToString();
    std::string out = api().ReadAll("", exec_id).value_or("<read failed>");
    EXPECT_EQ(api().Wait("", exec_id).value_or(v1::WaitProcessResponse()).status(), 0) << exec_id;
    EXPECT_OK(api().RemoveProcess("", exec_id));
    return out;
  };
  // As the init of a root container: its capabilities, the guest kernel's
  // knobs read-only, /sys read-only, a /dev of its own, no guest root.
  const std::string init = run("as-init", "rooted", false);
  EXPECT_EQ(init.substr(0, init.find("NoNewPrivs")), "0\n" + *caps) << init;
  EXPECT_NE(init.find("/proc/sys ro\n"), std::string::npos) << init;
  EXPECT_NE(init.find("/sys ro\n"), std::string::npos) << init;
  for (const char* line : {" rw\n", "modprobe-writable", "guest-dev", "guest-root-visible"})
    EXPECT_EQ(init.find(line), std::string::npos) << line << " in\n" << init;
  // As a non-root init: its uid.
  EXPECT_EQ(run("as-user", "tenant", false).substr(0, 5), "1000\n");
  // Asked for: the guest's root, with every capability and the guest's view.
  const std::string root = run("as-root", "rooted", true);
  EXPECT_EQ(root.substr(0, 2), "0\n") << root;
  EXPECT_EQ(root.find(*caps), std::string::npos) << root;
  // (The guest's root through /proc/1/root too: the CRI guest exec e2e
  // checks it, where PID 1 is the agent, not the host test's own PID 1.)
  for (const char* line : {"/sys rw\n", "guest-dev\n"})
    EXPECT_NE(root.find(line), std::string::npos) << line << " not in\n" << root;
  ASSERT_OK(api().Exec("rooted", "unplant", ApiClient::Process({"rm", "/tenant-tool"})));
  EXPECT_EQ(api().Wait("rooted", "unplant").value_or(v1::WaitProcessResponse()).status(), 0);
}

TEST_P(ContainerApiTest, GuestProcessStdinExitStatusAndRemovalEndWhatItLeft) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().ExecGuest(
      "io", ApiClient::Process({"sh", "-c", "sleep 1000 & echo $!; read x; echo \"got $x\"; echo oops >&2; exit 7"}),
      "c1"));
  auto first = api().ReadAll("", "io", false, "\n");
  ASSERT_OK(first);
  const std::string left_pid = first->substr(0, first->find('\n'));
  ASSERT_FALSE(left_pid.empty());
  EXPECT_ERROR(api().RemoveProcess("", "io"), Code::kFailedPrecondition, "still running");
  ASSERT_OK(api().Write("", "io", "hi\n"));
  EXPECT_EQ(api().ReadAll("", "io", false, "got hi\n").value_or(""), "got hi\n");
  EXPECT_EQ(api().ReadAll("", "io", true, "oops\n").value_or(""), "oops\n");
  EXPECT_EQ(api().Wait("", "io").value_or(v1::WaitProcessResponse()).status(), 7);
  // Its background sleep still runs and holds its cgroup; removing the
  // process ends it and removes the cgroup.
  EXPECT_OK(api().ReadFile(GuestCgroupFile(endpoint(), "io")));
  ASSERT_OK(api().RemoveProcess("", "io"));
  EXPECT_ERROR(api().ReadFile(GuestCgroupFile(endpoint(), "io")), Code::kNotFound, "io");
  EXPECT_ERROR(api().Wait("", "io"), Code::kNotFound, "io");
  ASSERT_OK(api().ExecGuest("check", ApiClient::Process({"sh", "-c", "test -d /proc/" + left_pid + "; echo $?"}), "c1"));
  EXPECT_EQ(api().ReadAll("", "check").value_or(""), "1\n") << "the background sleep outlived its guest process";
  EXPECT_EQ(api().Wait("", "check").value_or(v1::WaitProcessResponse()).status(), 0);
}

TEST_P(ContainerApiTest, GuestProcessTerminalAndWindowResize) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  json p = ApiClient::Process({"sh", "-c", "stty size; read x; stty size"}, /*terminal=*/true);
  p["consoleSize"] = {{"height", 24}, {"width", 80}};
  ASSERT_OK(api().ExecGuest("tty", p, "c1"));
  EXPECT_NE(api().ReadAll("", "tty", false, "24 80").value_or("").find("24 80"), std::string::npos);
  ASSERT_OK(api().Resize("", "tty", 40, 100));
  ASSERT_OK(api().Write("", "tty", "go\n"));
  EXPECT_NE(api().ReadAll("", "tty", false, "40 100").value_or("").find("40 100"), std::string::npos);
  EXPECT_EQ(api().Wait("", "tty").value_or(v1::WaitProcessResponse()).status(), 0);
  ASSERT_OK(api().RemoveProcess("", "tty"));
}

TEST_P(ContainerApiTest, GuestProcessToolsContainerByCriNameOrIdPrefix) {
  json spec = api().Spec({"sleep", "1000"});
  spec["annotations"] = {{"io.kubernetes.cri.container-name", "toolbox"}};
  ASSERT_OK(api().Create("3f9a0c11-tools", spec));
  ASSERT_OK(api().Start("3f9a0c11-tools"));
  ASSERT_OK(api().Create("3f9a77-other", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("3f9a77-other"));
  for (const char* query : {"toolbox", "3f9a0c", "3f9a0c11-tools"}) {
    ASSERT_OK(api().ExecGuest(std::string("by-") + query, ApiClient::Process({"true"}), query));
    EXPECT_EQ(api().Wait("", std::string("by-") + query).value_or(v1::WaitProcessResponse()).status(), 0) << query;
    ASSERT_OK(api().RemoveProcess("", std::string("by-") + query));
  }
  // Too short to be a prefix; a prefix of two ids names both.
  EXPECT_ERROR(api().ExecGuest("short", ApiClient::Process({"true"}), "3f9"), Code::kNotFound, "\"3f9\"");
  auto both = api().ExecGuest("both", ApiClient::Process({"true"}), "3f9a");
  EXPECT_ERROR(both, Code::kInvalidArgument, "3f9a0c11-tools");
  EXPECT_ERROR(both, Code::kInvalidArgument, "3f9a77-other");
}

TEST_P(ContainerApiTest, GuestProcessErrorsNameWhatWasWrong) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  EXPECT_ERROR(api().ExecGuest("e1", ApiClient::Process({"true"}), "no-such-container"), Code::kNotFound,
               "tools_container_id");
  EXPECT_ERROR(api().ExecGuest("e1", ApiClient::Process({"true"}), "../c1"), Code::kInvalidArgument,
               "tools_container_id");
  EXPECT_ERROR(api().ExecGuest("", ApiClient::Process({"true"}), "c1"), Code::kInvalidArgument, "exec_id");
  EXPECT_ERROR(api().ExecGuest("e1", ApiClient::Process({"capsule-no-such-tool"}), "c1"), Code::kNotFound,
               "capsule-no-such-tool");
  EXPECT_REASON(api().ExecGuest("e2", ApiClient::Process({"capsule-no-such-tool"}), "c1"), reason::kExecutableNotFound)
      << "the launched child's reason crosses its sync channel, then gRPC";
  EXPECT_ERROR(api().ExecGuest("e1", json::array(), "c1"), Code::kInvalidArgument, "process_json");
  EXPECT_ERROR(api().Signal("", "", SIGTERM), Code::kInvalidArgument, "exec_id is required for a guest process");
  EXPECT_ERROR(api().Wait("", "never-made"), Code::kNotFound, "never-made");
  // A failed start leaves no cgroup, and the id is free again.
  EXPECT_ERROR(api().ReadFile(GuestCgroupFile(endpoint(), "e1")), Code::kNotFound, "e1");
  ASSERT_OK(api().ExecGuest("e1", ApiClient::Process({"sleep", "1000"}), "c1"));
  EXPECT_ERROR(api().ExecGuest("e1", ApiClient::Process({"true"}), "c1"), Code::kAlreadyExists, "e1");
  ASSERT_OK(api().Signal("", "e1", SIGTERM));
  EXPECT_EQ(api().Wait("", "e1").value_or(v1::WaitProcessResponse()).status(), 128 + SIGTERM);
  EXPECT_ERROR(api().Signal("", "e1", SIGTERM), Code::kNotFound, "");
  ASSERT_OK(api().RemoveProcess("", "e1"));
}

TEST_P(ContainerApiTest, RemovingAContainerEndsTheGuestProcessesUsingItsTools) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  ASSERT_OK(api().Create("c2", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c2"));
  ASSERT_OK(api().ExecGuest("uses-c1", ApiClient::Process({"sleep", "1000"}), "c1"));
  ASSERT_OK(api().ExecGuest("uses-c2", ApiClient::Process({"sleep", "1000"}), "c2"));
  ASSERT_OK(api().Remove("c1"));
  // Killed, not forgotten: its client still reads the exit and removes it.
  EXPECT_EQ(api().Wait("", "uses-c1").value_or(v1::WaitProcessResponse()).status(), 128 + SIGKILL);
  ASSERT_OK(api().RemoveProcess("", "uses-c1"));
  // The other container's user runs on.
  EXPECT_ERROR(api().RemoveProcess("", "uses-c2"), Code::kFailedPrecondition, "still running");
}

TEST_P(ContainerApiTest, GuestProcessesAreBoundedAndOnesNobodyRemovedAreSweptWhenFull) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  // Exited, never waited for or removed: a client that died.
  constexpr int kLimit = 32;  // engine::GuestProcesses::kMaxProcesses
  for (int i = 0; i < kLimit; ++i)
    ASSERT_OK(api().ExecGuest("gone-" + std::to_string(i), ApiClient::Process({"true"}), "c1"));
  ASSERT_OK(api().Wait("", "gone-0"));  // at least that one has exited
  ASSERT_OK(api().ExecGuest("lives", ApiClient::Process({"sleep", "1000"}), "c1"));
  // The table made room by sweeping exited ones, and their cgroups went.
  EXPECT_ERROR(api().ReadFile(GuestCgroupFile(endpoint(), "gone-0")), Code::kNotFound, "gone-0");
  for (int i = 1; i < kLimit; ++i)
    ASSERT_OK(api().ExecGuest("run-" + std::to_string(i), ApiClient::Process({"sleep", "1000"}), "c1"));
  // Full of running ones: the next is refused, naming the bound.
  EXPECT_ERROR(api().ExecGuest("one-more", ApiClient::Process({"true"}), "c1"), Code::kResourceExhausted, "32");
}

TEST_P(ContainerApiTest, DestroySandboxEndsGuestProcesses) {
  ASSERT_OK(api().Create("c1", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c1"));
  auto pid = api().ExecGuest("long", ApiClient::Process({"sleep", "1001"}), "c1");
  ASSERT_OK(pid);
  ASSERT_OK(api().DestroySandbox());
  EXPECT_ERROR(api().ReadFile(GuestCgroupFile(endpoint(), "long")), Code::kNotFound, "long");
  ASSERT_OK(api().CreateSandbox("pod-again"));  // TearDown destroys this one
  ASSERT_OK(api().Create("c2", api().Spec({"sleep", "1000"})));
  ASSERT_OK(api().Start("c2"));
  ASSERT_OK(api().ExecGuest("check", ApiClient::Process({"sh", "-c", "test -d /proc/" + std::to_string(*pid) + "; echo $?"}),
                            "c2"));
  EXPECT_EQ(api().ReadAll("", "check").value_or(""), "1\n") << "the guest process outlived its sandbox";
}

}  // namespace
}  // namespace capsule::agent::testing
