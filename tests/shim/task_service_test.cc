// The Task service and the task layer below it (TaskManager, Container,
// Process, Sandbox) against fakes of the VM, the agent, the host mounts and
// the event publisher: the containerd contract of each call (SHIM-PROTOCOL),
// event order, pod grouping, VM sizing and stop, and that no failure leaves
// a VM or a mount behind. The real VM, agent and containerd are covered by
// tests/integration/shim.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <thread>

#include "runtime/common/reasons.h"
#include "shim/pod/host_namespaces.h"
#include "shim/pod/pod_network.h"
#include "shim/pod/sandbox.h"
#include "shim/launcher/bundle_record.h"
#include "tests/shim/task_service_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

// A guest answering a read with more bytes than were asked for is refused
// (the stream ends there): the shim never takes in what it did not ask for.
TEST_F(TaskServiceTest, AnAgentReadLongerThanAskedForEndsTheStream) {
  FifoReader out(Fifo("out"));
  vms_->next_agent()->SetScript("c1", "", {std::string(256 * 1024, 'x'), "", 0});
  vms_->next_agent()->set_oversized_reads(true);
  auto created = service_->Create(CreateReq("c1", BaseSpec(), out.path()));
  ASSERT_OK(created);
  out.Start();
  MustStart("c1");
  auto w = Wait("c1");
  ASSERT_OK(w);
  EXPECT_EQ(out.Get(), "") << "an oversized chunk reached containerd's FIFO";
  ASSERT_OK(Delete("c1"));
}

TEST_F(TaskServiceTest, CtrRunLifecycleWithOutputExitAndOrderedEvents) {
  FifoReader out(Fifo("out"));
  vms_->next_agent()->SetScript("c1", "", {"hello\n", "", 0});
  auto created = service_->Create(CreateReq("c1", BaseSpec(), out.path()));
  ASSERT_OK(created);
  out.Start();
  EXPECT_EQ(created->pid(), static_cast<uint32_t>(::getpid())) << "the task pid is the VMM's";
  ASSERT_EQ(vms_->boots().size(), 1u);
  EXPECT_EQ(vms_->boots()[0].vcpus, 1u);
  EXPECT_EQ(vms_->boots()[0].memory_mib, 256u);
  EXPECT_EQ(State("c1")->status(), containerd::v1::types::CREATED);

  auto waited = std::async(std::launch::async, [&] { return Wait("c1"); });  // Wait before Start
  EXPECT_EQ(waited.wait_for(milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(MustStart("c1").pid(), created->pid());
  auto w = waited.get();
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 0u);
  EXPECT_EQ(w->exited_at().seconds(), 1700000000);
  EXPECT_EQ(out.Get(), "hello\n");
  auto st = State("c1");
  EXPECT_EQ(st->status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(st->stdout(), out.path());

  auto del = Delete("c1");
  ASSERT_OK(del);
  EXPECT_EQ(del->pid(), created->pid());
  EXPECT_EQ(del->exit_status(), 0u);
  EXPECT_EQ(del->exited_at().seconds(), 1700000000);
  EXPECT_EQ(vms_->live_vms(), 0) << "a pod of one: its VM stops with it";
  EXPECT_TRUE(mounter_.live().empty());
  EXPECT_EQ(events_.topics(), (std::vector<std::string>{"/tasks/create", "/tasks/start", "/tasks/exit",
                                                        "/tasks/delete"}));
  for (const auto& e : events_.events()) EXPECT_EQ(e.any.type_url().find('/'), std::string::npos) << e.any.type_url();
  auto exit = events_.Last<cev::TaskExit>("/tasks/exit");
  EXPECT_EQ(exit.container_id(), "c1");
  EXPECT_EQ(exit.id(), "c1");
  EXPECT_EQ(exit.pid(), created->pid());

  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  EXPECT_NE(ShutdownReason(), "") << "no task left: the shim exits";
}

// c1 has exited after writing `output`, and the shim's first read of it is
// held in the agent (Release("ReadStdout") lets it go).
class HeldOutputTest : public TaskServiceTest {
 protected:
  void StartWithHeldOutput(const std::shared_ptr<FakeAgentClient>& agent, FifoReader& out, const std::string& output) {
    agent->SetScript("c1", "", {output, "", 0});
    std::promise<void> reading;
    agent->HoldNext("ReadStdout", [&] { reading.set_value(); });
    ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec(), out.path())));
    out.Start();
    MustStart("c1");
    ASSERT_EQ(reading.get_future().wait_for(milliseconds(10000)), std::future_status::ready);
  }
};

// The exit is reported once the output in flight is out (ctr closes its
// end of the output when it hears of the exit), as long as that takes
// less than the grace.
TEST_F(HeldOutputTest, TheExitIsReportedAfterTheOutputInFlight) {
  FifoReader out(Fifo("out"));
  const std::string output(200 * 1024, 'o');
  auto agent = vms_->next_agent();
  ASSERT_NO_FATAL_FAILURE(StartWithHeldOutput(agent, out, output));
  auto waited = std::async(std::launch::async, [&] { return Wait("c1"); });
  EXPECT_EQ(waited.wait_for(milliseconds(200)), std::future_status::timeout)
      << "the exit was reported with its output still in the guest";
  agent->Release("ReadStdout");
  auto w = waited.get();
  ASSERT_OK(w);
  EXPECT_EQ(out.Get().size(), output.size());
  EXPECT_OK(Delete("c1"));
}

// Output that stays in flight past the grace does not hold the exit back;
// a Delete right after it (ctr run does one) waits for that output, since
// deleting removes the container in the guest, and its unread output.
TEST_F(HeldOutputTest, OutputPastTheGraceIsWaitedForByDeleteNotByTheExit) {
  FifoReader out(Fifo("out"));
  const std::string output(200 * 1024, 'o');
  auto agent = vms_->next_agent();
  ASSERT_NO_FATAL_FAILURE(StartWithHeldOutput(agent, out, output));
  auto w = Wait("c1");
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 0u) << "the exit is reported while output is still held";

  auto deleted = std::async(std::launch::async, [&] { return Delete("c1"); });
  EXPECT_EQ(deleted.wait_for(milliseconds(200)), std::future_status::timeout) << "Delete did not wait for the output";
  agent->Release("ReadStdout");
  auto del = deleted.get();
  ASSERT_OK(del);
  EXPECT_EQ(out.Get().size(), output.size()) << "output was lost to the delete";
}

TEST_F(TaskServiceTest, ExitCodeSignalAndKillAfterExit) {
  vms_->next_agent()->SetScript("c1", "", {"", "", 3});
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  MustStart("c1");
  EXPECT_EQ(Wait("c1")->exit_status(), 3u);
  EXPECT_EQ(State("c1")->exit_status(), 3u);
  Status k = Kill("c1", SIGTERM);
  EXPECT_EQ(k.code(), Code::kNotFound) << "CRI's stop relies on NotFound for an exited task: " << k.ToString();
  ASSERT_OK(Delete("c1"));

  RunSleeper("c2");
  ASSERT_OK(Kill("c2", SIGKILL));
  EXPECT_EQ(Wait("c2")->exit_status(), 137u) << "128 + SIGKILL";
  ASSERT_OK(Delete("c2"));
}

TEST_F(TaskServiceTest, DeleteOfARunningTaskNamesBothStates) {
  RunSleeper("c1");
  auto del = Delete("c1");
  ASSERT_FALSE(del.ok());
  EXPECT_EQ(del.status().code(), Code::kFailedPrecondition);
  EXPECT_REASON(del, reason::kWrongState);
  EXPECT_NE(del.status().message().find("cannot go from running to deleted"), std::string::npos)
      << del.status().message();
  EXPECT_EQ(vms_->live_vms(), 1);
  StopAndDelete("c1");
  EXPECT_EQ(Delete("c1").status().code(), Code::kNotFound);
}

TEST_F(TaskServiceTest, ExecLifecycleClosesItsOutputAndRejectsDuplicates) {
  RunSleeper("c1");
  FifoReader out(Fifo("exec-out"));
  Agent("c1")->SetScript("c1", "e1", {"hi\n", "", 7});
  ASSERT_OK(Exec("c1", "e1", out.path()));
  out.Start();
  EXPECT_EQ(Exec("c1", "e1").code(), Code::kAlreadyExists);
  EXPECT_EQ(State("c1", "e1")->status(), containerd::v1::types::CREATED);
  auto waited = std::async(std::launch::async, [&] { return Wait("c1", "e1"); });
  MustStart("c1", "e1");
  EXPECT_EQ(waited.get()->exit_status(), 7u);
  EXPECT_EQ(out.Get(), "hi\n") << "the exec's output FIFO must close after it exits (CRI ExecSync)";
  EXPECT_EQ(Kill("c1", SIGKILL, "e1").code(), Code::kNotFound);
  ASSERT_OK(Delete("c1", "e1"));
  EXPECT_TRUE(Agent("c1")->called("RemoveProcess"));
  EXPECT_EQ(State("c1", "e1").status().code(), Code::kNotFound);
  EXPECT_EQ(State("c1")->status(), containerd::v1::types::RUNNING) << "the init keeps running";

  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  std::vector<std::string> exec_topics;
  for (const auto& t : events_.topics())
    if (t != "/tasks/create" && t != "/tasks/start") exec_topics.push_back(t);
  EXPECT_EQ(exec_topics, (std::vector<std::string>{"/tasks/exec-added", "/tasks/exec-started", "/tasks/exit"}));
  auto exit = events_.Last<cev::TaskExit>("/tasks/exit");
  EXPECT_EQ(exit.container_id(), "c1");
  EXPECT_EQ(exit.id(), "e1") << "an exec's exit names the exec";
  EXPECT_EQ(exit.exit_status(), 7u);
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, ExecNeedsARunningContainerAndAValidSpec) {
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  Status st = Exec("c1", "e1");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_REASON(st, reason::kWrongState);
  MustStart("c1");
  st = Exec("c1", "e2", "", R"({"args": "not-a-list"})");
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("args"), std::string::npos) << st.message();
  EXPECT_EQ(Exec("nope", "e1").code(), Code::kNotFound);
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, StdinIsForwardedAndCloseIOClosesIt) {
  const std::string in_path = Fifo("in");
  ASSERT_EQ(::mkfifo(in_path.c_str(), 0600), 0);
  auto req = CreateReq("c1", BaseSpec());
  req.set_stdin(in_path);
  ASSERT_OK(service_->Create(req));
  MustStart("c1");
  EXPECT_FALSE(Agent("c1")->stdin_closed("c1", "")) << "a process with a stdin FIFO keeps its stdin open";
  UniqueFd w(::open(in_path.c_str(), O_WRONLY | O_CLOEXEC));
  ASSERT_TRUE(w.valid());
  ASSERT_EQ(::write(w.get(), "ping\n", 5), 5);
  v2::CloseIORequest close;
  close.set_id("c1");
  close.set_stdin(true);
  ASSERT_OK(service_->CloseIO(close));
  auto agent = Agent("c1");
  for (int i = 0; i < 500 && !agent->stdin_closed("c1", ""); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(agent->stdin_closed("c1", ""));
  EXPECT_EQ(agent->stdin_of("c1", ""), "ping\n") << "what the FIFO held is forwarded before the close";
  StopAndDelete("c1");
}

// No stdin FIFO: the create (or the exec) itself asks the agent to close
// the process's stdin, so it reads end of file without a CloseStdin round
// trip after it.
TEST_F(TaskServiceTest, AProcessWithoutStdinHasItClosedByItsCreateWithoutAnotherCall) {
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  auto agent = Agent("c1");
  EXPECT_TRUE(agent->stdin_closed("c1", ""));
  MustStart("c1");
  ASSERT_OK(Exec("c1", "e1"));
  MustStart("c1", "e1");
  EXPECT_TRUE(agent->stdin_closed("c1", "e1"));
  const auto calls = agent->calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "CloseStdin"), 0);
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, CriPodSharesOneVmSizedFromItsAnnotations) {
  auto sandbox_spec = BaseSpec({{kTypeKey, "sandbox"},
                                {"io.kubernetes.cri.sandbox-memory", std::to_string(128 << 20)},
                                {"io.kubernetes.cri.sandbox-cpu-quota", "150000"},
                                {"io.kubernetes.cri.sandbox-cpu-period", "100000"}});
  sandbox_spec["mounts"].push_back({{"destination", "/dev/shm"}, {"type", "bind"}, {"source", "/dev/shm"},
                                    {"options", {"rbind", "ro"}}});
  ASSERT_OK(service_->Create(CreateReq("pod1", sandbox_spec)));
  MustStart("pod1");
  ASSERT_EQ(vms_->boots().size(), 1u);
  EXPECT_EQ(vms_->boots()[0].memory_mib, 256u + 128u);
  EXPECT_EQ(vms_->boots()[0].vcpus, 1u + 2u);
  auto agent = Agent("pod1");
  const auto sb = agent->sandbox();
  EXPECT_EQ(sb.sandbox_id(), "pod1");
  EXPECT_EQ(sb.hostname(), "box");
  ASSERT_EQ(sb.storages_size(), 2);
  EXPECT_EQ(sb.storages(0).driver(), "virtiofs");
  EXPECT_EQ(sb.storages(1).mount_point(), "/run/capsule/pod-shm");

  const std::string hosts = tmp_->Join("hosts");
  ASSERT_OK(WriteFile(hosts, "127.0.0.1 localhost\n"));
  auto spec = BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}});
  spec["linux"]["namespaces"] = {{{"type", "pid"}, {"path", "/proc/1/ns/pid"}}, {{"type", "mount"}},
                                 {{"type", "network"}, {"path", "/var/run/netns/cni-1"}}};
  spec["mounts"].push_back({{"destination", "/etc/hosts"}, {"type", "bind"}, {"source", hosts},
                            {"options", {"rbind", "rprivate", "ro"}}});
  ASSERT_OK(service_->Create(CreateReq("app", spec)));
  EXPECT_EQ(vms_->boots().size(), 1u) << "a CRI container joins its pod's VM";
  auto created = agent->created("app");
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(created->sandbox_pidns()) << "POD pid mode";
  auto guest = nlohmann::json::parse(created->oci_spec_json());
  EXPECT_EQ(guest["root"]["path"], "/run/capsule/shared/app/rootfs");
  EXPECT_EQ(guest["linux"]["namespaces"].size(), 2u) << guest["linux"].dump();
  EXPECT_FALSE(guest["linux"]["namespaces"][0].contains("path"));
  EXPECT_EQ(guest["mounts"].back()["source"], "/run/capsule/shared/app/mounts/2-hosts");
  const auto live = mounter_.live();
  EXPECT_EQ(live.count(tmp_->Join("state/vm/" + VmId("pod1") + "/mounts/app/rootfs")), 1u);
  EXPECT_EQ(live.count(tmp_->Join("state/vm/" + VmId("pod1") + "/mounts/app/mounts/2-hosts")), 1u);
  MustStart("app");

  StopAndDelete("app");
  EXPECT_EQ(vms_->live_vms(), 1) << "the pod's VM stays while its sandbox exists";
  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  EXPECT_EQ(ShutdownReason(), "") << "a shim with a task left must not exit";
  StopAndDelete("pod1");
  EXPECT_EQ(vms_->live_vms(), 0);
  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  EXPECT_NE(ShutdownReason(), "");
}

// Delete racing a Create that joins the pod: the pod's own container is
// deleted (its VM stops) while the guest has not yet answered a
// newcomer's CreateContainer. The stop cuts that call; the newcomer fails
// naming itself and leaves nothing; the VM is gone and the shim may exit.
TEST_F(TaskServiceTest, ACreateJoiningAPodWhoseSandboxIsDeletedMeanwhileFailsAndLeavesNothing) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  MustStart("pod1");
  auto agent = Agent("pod1");
  std::promise<void> entered;
  agent->HangNextCreateContainer([&entered] { entered.set_value(); });
  auto joining = std::async(std::launch::async, [&] {
    return service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}})));
  });
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  StopAndDelete("pod1");
  ASSERT_EQ(joining.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "the newcomer's Create hangs";
  auto r = joining.get();
  // Counted once the VM object is gone, which the newcomer's hold on the
  // pod's Sandbox delays until its Create returned.
  EXPECT_EQ(vms_->live_vms(), 0) << "the pod's VM stops with its sandbox container";
  ASSERT_FALSE(r.ok()) << "the newcomer became a task of a pod that is gone";
  EXPECT_NE(r.status().message().find("app"), std::string::npos) << r.status().ToString();
  EXPECT_TRUE(mounter_.live().empty()) << "the newcomer's rootfs stayed mounted";
  v2::StateRequest state;
  state.set_id("app");
  EXPECT_FALSE(service_->State(state).ok());
  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  EXPECT_NE(ShutdownReason(), "") << "a shim with no task left exits";
}

TEST_F(TaskServiceTest, PodWhoseNetnsCannotBeReadFailsNamingItAndLeavesNoVm) {
  auto spec = BaseSpec({{kTypeKey, "sandbox"}});
  spec["linux"]["namespaces"] = {{{"type", "pid"}}, {{"type", "ipc"}},
                                 {{"type", "network"}, {"path", tmp_->Join("no-such-netns")}}};
  auto r = service_->Create(CreateReq("pod1", spec));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(tmp_->Join("no-such-netns")), std::string::npos) << r.status().message();
  EXPECT_EQ(vms_->boots().size(), 1u);
  EXPECT_EQ(vms_->live_vms(), 0) << "the VM booted for the pod is stopped again";
  EXPECT_TRUE(mounter_.live().empty());
}

TEST(PodNetnsPathTest, TakesTheNetworkNamespacePathOnly) {
  using shim::pod::PodNetnsPath;
  EXPECT_EQ(PodNetnsPath(nlohmann::json::object()), "");
  EXPECT_EQ(PodNetnsPath({{"linux", {{"namespaces", {{{"type", "network"}}}}}}}), "") << "a fresh netns: no CNI";
  EXPECT_EQ(PodNetnsPath({{"linux", {{"namespaces", {{{"type", "pid"}, {"path", "/proc/1/ns/pid"}}}}}}}), "");
  EXPECT_EQ(PodNetnsPath({{"linux",
                           {{"namespaces",
                             {{{"type", "pid"}}, {{"type", "network"}, {"path", "/var/run/netns/cni-1"}}}}}}}),
            "/var/run/netns/cni-1");
}

TEST_F(TaskServiceTest, ContainerOfAnUnknownPodFails) {
  auto r = service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "nopod"}})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("nopod"), std::string::npos) << r.status().message();
  EXPECT_TRUE(vms_->boots().empty());
}

TEST_F(TaskServiceTest, FailedCreatesLeaveNoVmNoMountAndFreeTheId) {
  mounter_.FailTargetsContaining("rootfs");
  auto r = service_->Create(CreateReq("c1", BaseSpec()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rootfs of c1"), std::string::npos) << r.status().message();
  EXPECT_EQ(vms_->live_vms(), 0);
  EXPECT_TRUE(mounter_.live().empty());
  mounter_.FailTargetsContaining("");

  vms_->next_agent()->FailNext("CreateContainer", InvalidArgument("bad spec"));
  r = service_->Create(CreateReq("c1", BaseSpec()));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("create container c1: agent: bad spec"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(vms_->live_vms(), 0);
  EXPECT_TRUE(mounter_.live().empty()) << "the rootfs mount is undone";
  EXPECT_EQ(Delete("c1").status().code(), Code::kNotFound) << "containerd deletes after a failed create";

  vms_->FailNextBoot(Unavailable("qemu: no"));
  r = service_->Create(CreateReq("c1", BaseSpec()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("qemu: no"), std::string::npos);

  auto bad = CreateReq("c1", BaseSpec());
  bad.set_stdout(tmp_->Join("no-such-fifo"));
  r = service_->Create(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-fifo"), std::string::npos) << r.status().message();
  EXPECT_EQ(vms_->live_vms(), 0);

  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec()))) << "the id is free again";
  EXPECT_EQ(service_->Create(CreateReq("c1", BaseSpec())).status().code(), Code::kAlreadyExists);
  ASSERT_OK(Delete("c1")) << "a never-started task can be deleted";
}

TEST_F(TaskServiceTest, AVmThatDiesKillsItsProcesses) {
  RunSleeper("c1");
  auto waited = std::async(std::launch::async, [&] { return Wait("c1"); });
  vms_->vm(VmId("c1"))->Crash();
  auto w = waited.get();
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 137u);
  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  EXPECT_EQ(Kill("c1", SIGKILL).code(), Code::kNotFound);
  ASSERT_OK(Delete("c1"));
}

TEST_F(TaskServiceTest, OomKillsArePublished) {
  RunSleeper("c1");
  Agent("c1")->InjectOom("c1");
  ASSERT_TRUE(events_.WaitFor("/tasks/oom"));
  EXPECT_EQ(events_.Last<cev::TaskOOM>("/tasks/oom").container_id(), "c1");
  StopAndDelete("c1");
}

// The guest decides what GetOOMEvent says: a report naming a container
// this pod does not have (another pod's) is not believed, and a flood of
// reports publishes a bounded number of events.
TEST_F(TaskServiceTest, OomReportsOfTheGuestCountOnlyForItsOwnContainersAndAreBounded) {
  RunSleeper("c1");
  Agent("c1")->InjectOom("another-pods-container");
  for (int i = 0; i < 200; ++i) Agent("c1")->InjectOom("c1");
  for (int i = 0; i < 200 && Agent("c1")->pending_ooms() > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(Agent("c1")->pending_ooms(), 0u);
  std::this_thread::sleep_for(milliseconds(100));  // the last one fetched is published or dropped
  const std::vector<std::string> topics = events_.topics();
  const auto published = std::count(topics.begin(), topics.end(), "/tasks/oom");
  EXPECT_GE(published, 1);
  EXPECT_LE(published, 20) << "a guest flooding OOM reports floods containerd";
  for (const auto& e : events_.events()) {
    if (e.topic != "/tasks/oom") continue;
    cev::TaskOOM oom;
    ASSERT_TRUE(oom.ParseFromString(e.any.value()));
    EXPECT_EQ(oom.container_id(), "c1");
  }
  StopAndDelete("c1");
}

// The watcher's long poll may not have fetched the kill when the exit comes
// (and `ctr run --rm` then stops the VM): the exit itself says OOM-killed.
TEST_F(TaskServiceTest, AnOomKilledExitPublishesOomBeforeTheExit) {
  RunSleeper("c1");
  Agent("c1")->ExitOomKilled("c1", "");
  auto w = Wait("c1");
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 137u);
  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  std::vector<std::string> topics = events_.topics();
  auto oom = std::find(topics.begin(), topics.end(), "/tasks/oom");
  auto exit = std::find(topics.begin(), topics.end(), "/tasks/exit");
  ASSERT_NE(oom, topics.end()) << "no /tasks/oom for an OOM-killed exit";
  EXPECT_LT(oom, exit) << "/tasks/oom comes before /tasks/exit";
  EXPECT_EQ(events_.Last<cev::TaskOOM>("/tasks/oom").container_id(), "c1");
  EXPECT_EQ(std::count(topics.begin(), topics.end(), "/tasks/oom"), 1);
  ASSERT_OK(Delete("c1"));
}

TEST_F(TaskServiceTest, AnOomTheWatcherReportedIsNotRepeatedAtExit) {
  RunSleeper("c1");
  Agent("c1")->InjectOom("c1");
  ASSERT_TRUE(events_.WaitFor("/tasks/oom"));
  Agent("c1")->ExitOomKilled("c1", "");
  ASSERT_OK(Wait("c1"));
  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  ASSERT_OK(Delete("c1"));
  const std::vector<std::string> topics = events_.topics();
  EXPECT_EQ(std::count(topics.begin(), topics.end(), "/tasks/oom"), 1);
}

TEST_F(TaskServiceTest, StatsPidsAndUpdateGoToTheAgent) {
  RunSleeper("c1");
  v2::StatsRequest sreq;
  sreq.set_id("c1");
  auto stats = service_->Stats(sreq);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->stats().type_url(), "io.containerd.cgroups.v2.Metrics") << "bare, as CRI's typeurl wants it";
  io::containerd::cgroups::v2::Metrics m;
  ASSERT_TRUE(m.ParseFromString(stats->stats().value()));
  EXPECT_EQ(m.cpu().usage_usec(), 4242u);

  v2::PidsRequest preq;
  preq.set_id("c1");
  auto pids = service_->Pids(preq);
  ASSERT_OK(pids);
  ASSERT_EQ(pids->processes_size(), 1);
  EXPECT_EQ(pids->processes(0).pid(), 100u) << "guest pids";

  v2::UpdateTaskRequest ureq;
  ureq.set_id("c1");
  ureq.mutable_resources()->set_value(R"({"memory":{"limit":1048576}})");
  ASSERT_OK(service_->Update(ureq));
  EXPECT_EQ(Agent("c1")->last_update(), R"({"memory":{"limit":1048576}})");
  ureq.mutable_resources()->set_value(R"({"memory":{"limit":"lots"}})");
  EXPECT_EQ(service_->Update(ureq).status().code(), Code::kInvalidArgument);
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, PauseResumeStopsTheVmOfASandboxButNotOfAPodMember) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  v2::PauseRequest pause;
  pause.set_id("pod1");
  EXPECT_EQ(service_->Pause(pause).status().code(), Code::kFailedPrecondition) << "created, not running";
  MustStart("pod1");
  ASSERT_OK(service_->Pause(pause));
  EXPECT_EQ(State("pod1")->status(), containerd::v1::types::PAUSED);
  EXPECT_EQ(vms_->vm(VmId("pod1"))->fake_vmm().pauses, 1);
  v2::ResumeRequest resume;
  resume.set_id("pod1");
  ASSERT_OK(service_->Resume(resume));
  EXPECT_EQ(vms_->vm(VmId("pod1"))->fake_vmm().resumes, 1);
  EXPECT_EQ(State("pod1")->status(), containerd::v1::types::RUNNING);
  EXPECT_EQ(service_->Resume(resume).status().code(), Code::kFailedPrecondition);

  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  MustStart("app");
  pause.set_id("app");
  ASSERT_OK(service_->Pause(pause));
  EXPECT_TRUE(Agent("pod1")->called("PauseContainer"));
  EXPECT_EQ(vms_->vm(VmId("pod1"))->fake_vmm().pauses, 1) << "the VM keeps running";
  resume.set_id("app");
  ASSERT_OK(service_->Resume(resume));
  EXPECT_EQ(events_.topics().size(), 8u);
  StopAndDelete("app");
  StopAndDelete("pod1");
}

TEST_F(TaskServiceTest, ConnectCheckpointAndUnknownIds) {
  RunSleeper("c1");
  v2::ConnectRequest creq;
  creq.set_id("c1");
  auto c = service_->Connect(creq);
  ASSERT_OK(c);
  EXPECT_EQ(c->shim_pid(), static_cast<uint32_t>(::getpid()));
  EXPECT_EQ(c->task_pid(), static_cast<uint32_t>(::getpid())) << "the VMM's pid (CRI reads its netns)";
  creq.set_id("other");
  EXPECT_EQ(service_->Connect(creq)->task_pid(), 0u);
  v2::CheckpointTaskRequest cp;
  cp.set_id("c1");
  EXPECT_EQ(service_->Checkpoint(cp).status().code(), Code::kUnimplemented);
  EXPECT_EQ(State("nope").status().code(), Code::kNotFound);
  EXPECT_EQ(Kill("nope", 9).code(), Code::kNotFound);
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, StopAllEndsBlockedWaitsAndStopsEveryVm) {
  RunSleeper("c1");
  RunSleeper("c2");
  // The process itself, not the service's id lookup: StopAll forgets the
  // ids, and a Wait that has not looked its task up yet would race it.
  shim::task::ProcessPtr init;
  {
    auto c1 = tasks_->Get("c1");
    ASSERT_OK(c1);
    init = (*c1)->init();
  }
  auto waited = std::async(std::launch::async, [init] { return init->Wait(); });
  tasks_->StopAll();
  EXPECT_EQ(waited.get().status, 137u);
  EXPECT_EQ(vms_->live_vms(), 0);
  EXPECT_TRUE(mounter_.live().empty());
}

// CRI's ExecSync of a missing binary: Wait (before Start), Start fails, then
// containerd's WithProcessKill waits for the exit after a Kill. runc's shim
// answers all of it at once; a Wait that never returned held containerd for
// its 60 s deadline and kept the shim alive after the pod was gone.
TEST_F(TaskServiceTest, AnExecThatCannotStartIsStoppedAtOnce) {
  RunSleeper("c1");
  Agent("c1")->FailNext("ExecProcess", NotFound("exec \"/no/such/binary\": executable file not found in $PATH")
                                           .WithReason(reason::kExecutableNotFound));
  ASSERT_OK(Exec("c1", "e1"));
  auto waited = std::async(std::launch::async, [&] { return Wait("c1", "e1"); });
  v2::StartRequest start;
  start.set_id("c1");
  start.set_exec_id("e1");
  auto started = service_->Start(start);
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), Code::kNotFound);
  EXPECT_REASON(started, reason::kExecutableNotFound) << "the agent's reason reaches the Task service's answer";
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(5)), std::future_status::ready) << "Wait must return";
  EXPECT_EQ(waited.get()->exit_status(), 127u);
  EXPECT_EQ(State("c1", "e1")->status(), containerd::v1::types::STOPPED);
  EXPECT_EQ(Kill("c1", SIGKILL, "e1", true).code(), Code::kNotFound);
  ASSERT_OK(Delete("c1", "e1"));
  EXPECT_FALSE(Agent("c1")->called("RemoveProcess")) << "the agent never had it";
  const std::vector<std::string> topics = events_.topics();
  EXPECT_EQ(std::count(topics.begin(), topics.end(), "/tasks/exec-started"), 0);
  EXPECT_EQ(std::count(topics.begin(), topics.end(), "/tasks/exit"), 0) << "an exec that never started has no exit";

  Agent("c1")->FailNext("ExecProcess", Internal("fork: out of memory"));
  ASSERT_OK(Exec("c1", "e2"));
  start.set_exec_id("e2");
  EXPECT_FALSE(service_->Start(start).ok());
  EXPECT_EQ(Wait("c1", "e2")->exit_status(), 126u);
  EXPECT_EQ(State("c1")->status(), containerd::v1::types::RUNNING) << "the container is untouched";
  StopAndDelete("c1");
}

TEST_F(TaskServiceTest, AnInitThatCannotStartIsStoppedAndReportsItsExit) {
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  auto waited = std::async(std::launch::async, [&] { return Wait("c1"); });
  Agent("c1")->FailNext("StartContainer", NotFound("exec \"nope\": executable file not found in $PATH"));
  v2::StartRequest start;
  start.set_id("c1");
  ASSERT_FALSE(service_->Start(start).ok());
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(waited.get()->exit_status(), 127u);
  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  EXPECT_EQ(Kill("c1", SIGKILL, "", true).code(), Code::kNotFound);
  auto del = Delete("c1");
  ASSERT_OK(del);
  EXPECT_EQ(del->exit_status(), 127u);
  EXPECT_EQ(vms_->live_vms(), 0);
}

TEST_F(TaskServiceTest, DeletingAContainerEndsTheWaitOfAnExecNeverStarted) {
  RunSleeper("c1");
  ASSERT_OK(Exec("c1", "e1"));
  auto waited = std::async(std::launch::async, [&] { return Wait("c1", "e1"); });
  EXPECT_EQ(waited.wait_for(milliseconds(50)), std::future_status::timeout);
  StopAndDelete("c1");
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(waited.get()->exit_status(), 137u);
}

TEST_F(TaskServiceTest, StopAllEndsTheWaitsOfProcessesNeverStarted) {
  RunSleeper("c1");
  ASSERT_OK(Exec("c1", "e1"));
  ASSERT_OK(service_->Create(CreateReq("c2", BaseSpec())));
  shim::task::ProcessPtr exec, init;
  {
    auto c1 = tasks_->Get("c1");
    auto c2 = tasks_->Get("c2");
    ASSERT_TRUE(c1.ok() && c2.ok());
    auto e = (*c1)->Find("e1");
    ASSERT_OK(e);
    exec = *e;
    init = (*c2)->init();
  }
  auto exec_waited = std::async(std::launch::async, [exec] { return exec->Wait(); });
  auto init_waited = std::async(std::launch::async, [init] { return init->Wait(); });
  tasks_->StopAll();
  ASSERT_EQ(exec_waited.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  ASSERT_EQ(init_waited.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_EQ(exec_waited.get().status, 137u);
  EXPECT_EQ(init_waited.get().status, 137u);
}

TEST_F(TaskServiceTest, APodAskingForAHostNamespaceIsRefusedBeforeAnyBoot) {
  struct Case {
    const char* dropped;
    const char* field;
  };
  for (const Case& c : {Case{"network", "hostNetwork: true"}, Case{"pid", "hostPID: true"},
                        Case{"ipc", "hostIPC: true"}}) {
    auto spec = BaseSpec({{kTypeKey, "sandbox"}});
    auto& ns = spec["linux"]["namespaces"];
    ns.erase(std::remove_if(ns.begin(), ns.end(), [&](const auto& n) { return n["type"] == c.dropped; }), ns.end());
    auto r = service_->Create(CreateReq("pod1", spec));
    ASSERT_FALSE(r.ok()) << c.dropped;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("pod1"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("runc RuntimeClass"), std::string::npos) << r.status().message();
    EXPECT_REASON(r, reason::kHostNamespaceRefused);
  }
  // A network namespace path that is the host's own is hostNetwork too,
  // whatever the spec's list says: no tap or redirect goes into it.
  for (const char* host_netns : {"/proc/1/ns/net", "/proc/self/ns/net"}) {
    struct stat st{};
    // PID 1's is unreadable where the tests run in a container of their own.
    if (::stat(host_netns, &st) != 0) continue;
    auto spec = BaseSpec({{kTypeKey, "sandbox"}});
    for (auto& n : spec["linux"]["namespaces"])
      if (n["type"] == "network") n["path"] = host_netns;
    auto r = service_->Create(CreateReq("pod1", spec));
    ASSERT_FALSE(r.ok()) << host_netns;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_REASON(r, reason::kHostNamespaceRefused);
    EXPECT_NE(r.status().message().find("is the host's own"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("pod1"), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(vms_->boots().empty()) << "nothing is booted for a refused pod";
  EXPECT_FALSE(PathExists(tmp_->Join("pod1/capsule.json"))) << "and no bundle record is left for `delete`";
  // ctr run (no CRI annotations) without a network namespace still runs, with no NIC.
  auto spec = BaseSpec();
  spec["linux"]["namespaces"] = {{{"type", "pid"}}, {{"type", "mount"}}};
  ASSERT_OK(service_->Create(CreateReq("c1", spec)));
  ASSERT_OK(Delete("c1"));
}

TEST(HostNamespacesTest, NamesEachFieldWhoseNamespaceIsLeftOut) {
  using shim::pod::HostNamespacesAskedFor;
  EXPECT_EQ(HostNamespacesAskedFor(nlohmann::json::object()),
            (std::vector<std::string>{"hostNetwork", "hostPID", "hostIPC"}));
  EXPECT_TRUE(HostNamespacesAskedFor(BaseSpec()).empty());
  nlohmann::json spec = {{"linux", {{"namespaces", {{{"type", "ipc"}}, {{"type", "network"}, {"path", "/n"}}}}}}};
  EXPECT_EQ(HostNamespacesAskedFor(spec), (std::vector<std::string>{"hostPID"}));
}

TEST_F(TaskServiceTest, IdleTimeIsCountedFromTheLastTask) {
  auto idle = tasks_->IdleFor();
  ASSERT_TRUE(idle.has_value());
  EXPECT_FALSE(idle->had_task);
  RunSleeper("c1");
  EXPECT_FALSE(tasks_->IdleFor().has_value());
  StopAndDelete("c1");
  idle = tasks_->IdleFor();
  ASSERT_TRUE(idle.has_value());
  EXPECT_TRUE(idle->had_task);
  EXPECT_LT(idle->duration, std::chrono::seconds(5));
}

// CRI's sandbox (pause) container is the pod holder the agent adopted in
// SetupSandbox: its image is not mounted, nothing is created or started in
// the guest for it, yet it is a task like any other: a pid at start,
// running, killed and reaped. StopPodSandbox's SIGKILL, once the pod's
// containers are deleted, ends the VM instead of a guest call.
TEST_F(TaskServiceTest, ACriSandboxContainerIsTheGuestsPodHolder) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  auto agent = Agent("pod1");
  ASSERT_NE(agent, nullptr);
  EXPECT_TRUE(mounter_.live().empty()) << "the pause image is not mounted";
  const auto started = MustStart("pod1");
  EXPECT_GT(started.pid(), 0u);
  EXPECT_EQ(State("pod1")->status(), containerd::v1::types::RUNNING);
  auto calls = agent->calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "SetupSandbox"), 1);
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "CreateContainer"), 0) << "the holder is not created";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "StartContainer"), 0) << "nor started";

  // Its pod's containers are created as before, and join it in the guest.
  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  MustStart("app");
  StopAndDelete("app");
  calls = agent->calls();
  const auto signals = std::count(calls.begin(), calls.end(), "SignalProcess");
  auto* vm = vms_->vm(VmId("pod1"));
  ASSERT_NE(vm, nullptr);
  ASSERT_OK(Kill("pod1", SIGKILL));
  EXPECT_TRUE(vm->stopped()) << "the holder's kill ended the VM";
  EXPECT_EQ(Wait("pod1")->exit_status(), 137u);
  EXPECT_EQ(State("pod1")->status(), containerd::v1::types::STOPPED);
  ASSERT_OK(Delete("pod1"));
  calls = agent->calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "SignalProcess"), signals) << "no guest call for the holder's kill";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "RemoveContainer"), 1) << "app's; the holder went with its VM";
  EXPECT_EQ(vms_->live_vms(), 0);
}

// A container of a pod that lives on is deleted for containerd at once; its
// removal from the guest and its unmounts follow the answer. The pod's stop
// waits for such a removal in flight, so the share is unmounted last.
TEST_F(TaskServiceTest, AContainersRemovalFromTheGuestFollowsTheDeletesAnswer) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  auto agent = Agent("pod1");
  ASSERT_NE(agent, nullptr);
  MustStart("pod1");
  auto removals = [&] {
    auto calls = agent->calls();
    return std::count(calls.begin(), calls.end(), "RemoveContainer");
  };
  for (const std::string id : {"app", "app2"}) {
    ASSERT_OK(service_->Create(CreateReq(id, BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
    MustStart(id);
    ASSERT_OK(Kill(id, SIGKILL));
    ASSERT_OK(Wait(id));
  }
  const size_t mounted = mounter_.live().size();
  ASSERT_GT(mounted, 0u);

  std::vector<std::function<void()>> after_reply;
  ttrpc::CallContext ctx;
  ctx.after_reply = &after_reply;
  v2::DeleteRequest req;
  req.set_id("app");
  auto deleted = service_->Delete(req, ctx);
  ASSERT_OK(deleted);
  EXPECT_EQ(deleted->exit_status(), 137u);
  EXPECT_EQ(removals(), 0) << "the guest call waits for the answer";
  EXPECT_EQ(mounter_.live().size(), mounted);
  ASSERT_EQ(after_reply.size(), 1u);
  EXPECT_EQ(Delete("app").status().code(), Code::kNotFound) << "deleted for containerd already";
  after_reply[0]();
  EXPECT_EQ(removals(), 1);
  EXPECT_LT(mounter_.live().size(), mounted) << "app's mounts went after its removal";

  // app2's removal is still to run when the holder's kill ends the pod: the
  // VM's stop waits for it.
  after_reply.clear();
  req.set_id("app2");
  ASSERT_OK(service_->Delete(req, ctx));
  ASSERT_EQ(after_reply.size(), 1u);
  auto* vm = vms_->vm(VmId("pod1"));
  ASSERT_NE(vm, nullptr);
  auto kill = std::async(std::launch::async, [&] { return Kill("pod1", SIGKILL); });
  EXPECT_EQ(kill.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "the pod's stop went ahead of app2's removal";
  EXPECT_FALSE(vm->stopped());
  after_reply[0]();
  after_reply.clear();  // as the server does once the work ran
  ASSERT_OK(kill.get());
  EXPECT_TRUE(vm->stopped());
  EXPECT_EQ(removals(), 2) << "app2's removal ran to its end before the VM's stop";
  ASSERT_OK(Delete("pod1"));
  EXPECT_TRUE(mounter_.live().empty());
  EXPECT_EQ(vms_->live_vms(), 0);
}

// The guest may report a killed process's exit before the kill is answered;
// containerd then deletes the task and closes its connection, losing the
// kill's answer. So a delete is answered only after the task's kills.
TEST_F(TaskServiceTest, ADeleteIsAnsweredOnlyAfterTheTasksKills) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  MustStart("pod1");
  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  MustStart("app");
  std::vector<std::function<void()>> after_reply;
  ttrpc::CallContext ctx;
  ctx.after_reply = &after_reply;
  v2::KillRequest kill;
  kill.set_id("app");
  kill.set_signal(SIGKILL);
  ASSERT_OK(service_->Kill(kill, ctx));
  ASSERT_OK(Wait("app")) << "the exit is reported while the kill's answer is still to be written";
  auto deleted = std::async(std::launch::async, [&] { return Delete("app"); });
  EXPECT_EQ(deleted.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "the delete was answered before the kill";
  for (auto& work : after_reply) work();  // the server does this once the kill's answer is out
  auto r = deleted.get();
  ASSERT_OK(r);
  EXPECT_EQ(r->exit_status(), 137u);
}

// The holder's kill ends the VM only when nothing else of the pod is left:
// with a container still there (running, or exited and not yet deleted),
// or for any signal but SIGKILL, it goes to the guest.
TEST_F(TaskServiceTest, AHolderKillGoesToTheGuestWhileThePodHasAnotherTask) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  auto agent = Agent("pod1");
  ASSERT_NE(agent, nullptr);
  MustStart("pod1");
  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  MustStart("app");
  ASSERT_OK(Kill("pod1", SIGKILL));
  EXPECT_FALSE(vms_->vm(VmId("pod1"))->stopped()) << "app still runs in the VM";
  auto calls = agent->calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "SignalProcess"), 1) << "the kill went to the guest";
  EXPECT_EQ(Wait("pod1")->exit_status(), 137u);
  StopAndDelete("app");
  ASSERT_OK(Delete("pod1"));
  EXPECT_EQ(vms_->live_vms(), 0);

  // Alone, but SIGTERM: the holder decides (it exits 0 in a real guest).
  ASSERT_OK(service_->Create(CreateReq("pod2", BaseSpec({{kTypeKey, "sandbox"}}))));
  auto agent2 = Agent("pod2");
  ASSERT_NE(agent2, nullptr);
  MustStart("pod2");
  ASSERT_OK(Kill("pod2", SIGTERM));
  EXPECT_FALSE(vms_->vm(VmId("pod2"))->stopped());
  calls = agent2->calls();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "SignalProcess"), 1) << "SIGTERM went to the guest";
  EXPECT_EQ(Wait("pod2")->exit_status(), 128u + SIGTERM);
  ASSERT_OK(Delete("pod2"));
  EXPECT_EQ(vms_->live_vms(), 0);
}

// A pod takes a pooled VM when one is ready: no boot, the bundle record
// names the pooled VM (so `shim delete` finds it), its containers join it,
// and before anything runs its clock is set and its RNG reseeded.
TEST_F(TaskServiceTest, APodClaimsAPooledVmRecordsItAndRefreshesItsClockAndRng) {
  vms_->AddPoolVms(1);
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  EXPECT_TRUE(vms_->boots().empty()) << "a claimed VM is not booted";
  EXPECT_EQ(vms_->claims(), std::vector<std::string>{"pod1"});
  auto record = shim::launcher::ReadBundleRecord(tmp_->Join("pod1"));
  ASSERT_OK(record);
  EXPECT_EQ(record->vm_id, "pool-fake-1");
  EXPECT_EQ(record->shim_pid, ::getpid()) << "the record names the daemon, for delete to ask";
  EXPECT_GT(record->shim_start_time, 0u);
  EXPECT_EQ(record->vm_state_dir, vms_->StateDirFor("pool-fake-1"));
  auto agent = vms_->agent_of("pool-fake-1");
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->reseeds(), 1u) << "the guest RNG is reseeded at claim";
  EXPECT_NEAR(static_cast<double>(agent->guest_time().seconds()), static_cast<double>(::time(nullptr)), 5.0)
      << "the guest clock is set at claim";
  const auto calls = agent->calls();
  const auto fresh = std::find(calls.begin(), calls.end(), "AddRandomness");
  const auto sandbox = std::find(calls.begin(), calls.end(), "CreateSandbox");
  EXPECT_LT(fresh, sandbox) << "freshness comes before the pod exists in the guest";
  // One guest call at claim: the fake records SetupSandbox, then the steps
  // it applies; a step called on its own would be recorded again.
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "SetupSandbox"), 1);
  EXPECT_LT(std::find(calls.begin(), calls.end(), "SetupSandbox"), std::find(calls.begin(), calls.end(), "SetGuestTime"));
  for (const char* step : {"SetGuestTime", "AddRandomness", "CreateSandbox"})
    EXPECT_EQ(std::count(calls.begin(), calls.end(), step), 1) << step << " outside SetupSandbox";

  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  auto app_record = shim::launcher::ReadBundleRecord(tmp_->Join("app"));
  ASSERT_OK(app_record);
  EXPECT_EQ(app_record->vm_id, "pool-fake-1");
  EXPECT_EQ(app_record->container_share_dir, vms_->StateDirFor("pool-fake-1") + "/mounts/app");
  EXPECT_EQ(mounter_.live().count(vms_->StateDirFor("pool-fake-1") + "/mounts/app/rootfs"), 1u);
  ASSERT_OK(Delete("app"));
  ASSERT_OK(Delete("pod1"));
  EXPECT_EQ(vms_->live_vms(), 0) << "the pod's end is its VM's end";
}

TEST_F(TaskServiceTest, APoolMissColdBootsAndRecordsTheBootedVm) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  ASSERT_EQ(vms_->boots().size(), 1u);
  auto record = shim::launcher::ReadBundleRecord(tmp_->Join("pod1"));
  ASSERT_OK(record);
  EXPECT_EQ(record->vm_id, VmId("pod1"));
  EXPECT_EQ(Agent("pod1")->reseeds(), 1u) << "a cold VM is reseeded too";
  ASSERT_OK(Delete("pod1"));
}

class TaskServiceBadConfigTest : public TaskServiceTest {
 protected:
  void SetUp() override {
    config_error_ = InvalidArgument("/etc/capsule/config.yaml:3:1: unknown key 'guest.kernell'");
    TaskServiceTest::SetUp();
  }
};

TEST_F(TaskServiceBadConfigTest, EveryCreateReportsTheConfigError) {
  auto r = service_->Create(CreateReq("c1", BaseSpec()));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("guest.kernell"), std::string::npos) << r.status().message();
  EXPECT_TRUE(vms_->boots().empty());
}

}  // namespace
}  // namespace capsule::testing

namespace capsule::testing {
namespace {

// A Sandbox's life is one state at a time: ready after Create, paused and
// ready again with the VM's stop and cont (a repeated ask changes nothing),
// stopped for good; no pause once it stops.
TEST_F(TaskServiceTest, ASandboxMovesReadyPausedReadyStoppedAndRefusesAPauseOnceStopped) {
  using shim::pod::SandboxState;
  shim::pod::SandboxParams p;
  p.id = "pod-state";
  p.vm_id = "pod-state-vm";
  p.use_pool = false;
  p.record = [](const std::string&, const std::string&) { return Status::Ok(); };
  auto sandbox = shim::pod::Sandbox::Create(p, *vms_);
  ASSERT_OK(sandbox);
  auto& sb = **sandbox;
  auto& vmm = vms_->vm("pod-state-vm")->fake_vmm();
  EXPECT_EQ(sb.state(), SandboxState::kReady);
  ASSERT_OK(sb.ResumeVm());
  EXPECT_EQ(vmm.resumes, 0) << "a ready VM runs already";
  ASSERT_OK(sb.PauseVm());
  ASSERT_OK(sb.PauseVm());
  EXPECT_EQ(sb.state(), SandboxState::kPaused);
  EXPECT_TRUE(sb.vm_paused());
  EXPECT_EQ(vmm.pauses, 1);
  ASSERT_OK(sb.ResumeVm());
  EXPECT_EQ(sb.state(), SandboxState::kReady);
  EXPECT_EQ(vmm.resumes, 1);
  EXPECT_FALSE(sb.stopping());
  ASSERT_OK(sb.Stop());
  EXPECT_EQ(sb.state(), SandboxState::kStopped);
  EXPECT_TRUE(sb.stopping());
  EXPECT_TRUE(sb.GoneProbe()());
  Status late = sb.PauseVm();
  EXPECT_EQ(late.code(), Code::kFailedPrecondition);
  EXPECT_REASON(late, reason::kWrongState);
  EXPECT_OK(sb.Stop()) << "a second Stop has nothing to do";
}

}  // namespace
}  // namespace capsule::testing
