// The Task service when the guest or containerd misbehaves, against the
// fakes: a slow agent never blocks State, Kill, Wait or Delete behind a
// Start or a Pause; an agent that misses its deadline fails the call naming
// the RPC and the pod and stops the pod's VM (every process reported
// killed); a Create containerd gave up on (its deadline, its Delete, its
// Shutdown) is undone and leaves no VM, also when it had just finished.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <functional>
#include <future>
#include <thread>

#include "runtime/common/reasons.h"
#include "tests/shim/task_service_fixture.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

// A bound for "answers at once" that a loaded CI machine still meets.
constexpr milliseconds kPrompt{2000};

template <typename T>
bool ReadyWithin(std::future<T>& f, milliseconds t) {
  return f.wait_for(t) == std::future_status::ready;
}

class TaskServiceFaultTest : public TaskServiceTest {
 protected:
  void SetUp() override {
    config_.runtime.agent_timeout_ms = 200;
    TaskServiceTest::SetUp();
  }
  // Runs `call` on its own thread and expects it back within kPrompt; if
  // it is late, `unblock_` releases the slow call so the test fails instead
  // of hanging.
  template <typename F>
  auto Promptly(F call) {
    auto f = std::async(std::launch::async, std::move(call));
    if (!ReadyWithin(f, kPrompt)) {
      ADD_FAILURE() << "the call waited behind the slow agent call";
      if (unblock_) unblock_();
    }
    return f.get();
  }
  std::function<void()> unblock_;
};

TEST_F(TaskServiceFaultTest, AStartTheAgentIsSlowToAnswerBlocksNeitherStateNorKillNorWait) {
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  std::promise<void> entered;
  Agent("c1")->HoldNext("StartContainer", [&] { entered.set_value(); });
  unblock_ = [this] { Agent("c1")->Release("StartContainer"); };
  auto start = std::async(std::launch::async, [&] {
    v2::StartRequest req;
    req.set_id("c1");
    return service_->Start(req);
  });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);

  auto state = Promptly([&] { return State("c1"); });
  ASSERT_OK(state);
  EXPECT_EQ(state->status(), containerd::v1::types::CREATED) << "running only once the agent said so";
  auto deleted = Promptly([&] { return Delete("c1"); });
  EXPECT_EQ(deleted.status().code(), Code::kFailedPrecondition) << deleted.status().ToString();
  EXPECT_REASON(deleted, reason::kWrongState);
  auto again = Promptly([&] {
    v2::StartRequest req;
    req.set_id("c1");
    return service_->Start(req);
  });
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition) << again.status().ToString();
  auto waited = std::async(std::launch::async, [&] { return Wait("c1"); });
  Status killed = Promptly([&] { return Kill("c1", SIGKILL); });
  EXPECT_OK(killed);
  EXPECT_FALSE(ReadyWithin(waited, milliseconds(100))) << "the start's outcome decides the exit";

  Agent("c1")->Release("StartContainer");
  ASSERT_TRUE(ReadyWithin(start, seconds(5)));
  auto started = start.get();
  ASSERT_OK(started);
  ASSERT_TRUE(ReadyWithin(waited, seconds(5))) << "the watcher of the started process sees its kill";
  auto w = waited.get();
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 137u);
  ASSERT_OK(Delete("c1"));
}

TEST_F(TaskServiceFaultTest, ADeadVmDuringASlowStartLeavesTheProcessStopped) {
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec())));
  std::promise<void> entered;
  Agent("c1")->HoldNext("StartContainer", [&] { entered.set_value(); });
  auto start = std::async(std::launch::async, [&] {
    v2::StartRequest req;
    req.set_id("c1");
    return service_->Start(req);
  });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  vms_->vm(VmId("c1"))->Crash();  // revokes the agent: the held start is cut
  ASSERT_TRUE(ReadyWithin(start, seconds(5)));
  EXPECT_FALSE(start.get().ok());
  auto w = Wait("c1");
  ASSERT_OK(w);
  EXPECT_NE(w->exit_status(), 0u);
  EXPECT_EQ(State("c1")->status(), containerd::v1::types::STOPPED);
  ASSERT_OK(Delete("c1"));
}

// An exec's stdin is closed in the agent, once its FIFO reaches end of file,
// by the copier's stdin thread: State of the exec answers meanwhile, and
// the exec's Start did not wait for it. (An exec without stdin has it
// closed by ExecProcess itself: no CloseStdin at all.)
TEST_F(TaskServiceFaultTest, AnExecWhoseStdinCloseIsSlowStillAnswersState) {
  RunSleeper("c1");
  const std::string in_path = Fifo("exec-in");
  ASSERT_EQ(::mkfifo(in_path.c_str(), 0600), 0);
  v2::ExecProcessRequest exec;
  exec.set_id("c1");
  exec.set_exec_id("e1");
  exec.set_stdin(in_path);
  exec.mutable_spec()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/Process");
  exec.mutable_spec()->set_value(R"({"args":["cat"],"cwd":"/"})");
  ASSERT_OK(service_->Exec(exec).status());
  std::promise<void> entered;
  Agent("c1")->HoldNext("CloseStdin", [&] { entered.set_value(); });
  unblock_ = [this] { Agent("c1")->Release("CloseStdin"); };
  MustStart("c1", "e1");
  { UniqueFd w(::open(in_path.c_str(), O_WRONLY | O_CLOEXEC)); }  // the last writer goes: EOF
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  auto state = Promptly([&] { return State("c1", "e1"); });
  ASSERT_OK(state);
  EXPECT_EQ(state->status(), containerd::v1::types::RUNNING);
  Agent("c1")->Release("CloseStdin");
  for (int i = 0; i < 500 && !Agent("c1")->stdin_closed("c1", "e1"); ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_TRUE(Agent("c1")->stdin_closed("c1", "e1"));
  Agent("c1")->Exit("c1", "e1", 0);  // cat, at end of file
  ASSERT_OK(Wait("c1", "e1"));
  ASSERT_OK(Delete("c1", "e1"));
  StopAndDelete("c1");
}

TEST_F(TaskServiceFaultTest, ASlowPauseBlocksNeitherStateNorASecondCall) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  MustStart("pod1");
  ASSERT_OK(service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}}))));
  MustStart("app");
  std::promise<void> entered;
  Agent("pod1")->HoldNext("PauseContainer", [&] { entered.set_value(); });
  unblock_ = [this] { Agent("pod1")->Release("PauseContainer"); };
  v2::PauseRequest pause;
  pause.set_id("app");
  auto paused = std::async(std::launch::async, [&] { return service_->Pause(pause); });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  auto state = Promptly([&] { return State("app"); });
  ASSERT_OK(state);
  EXPECT_EQ(state->status(), containerd::v1::types::RUNNING);
  auto second = Promptly([&] { return service_->Pause(pause); });
  EXPECT_EQ(second.status().code(), Code::kFailedPrecondition) << second.status().ToString();
  EXPECT_OK(Promptly([&] { return Exec("app", "e1"); })) << "the container's lock is free";
  Agent("pod1")->Release("PauseContainer");
  ASSERT_TRUE(ReadyWithin(paused, seconds(5)));
  ASSERT_OK(paused.get());
  EXPECT_EQ(State("app")->status(), containerd::v1::types::PAUSED);
  v2::ResumeRequest resume;
  resume.set_id("app");
  ASSERT_OK(service_->Resume(resume));
  StopAndDelete("app");
  StopAndDelete("pod1");
}

// The agent does not answer CreateContainer within runtime.agent_timeout_ms:
// the call fails naming the RPC, the container and the pod, and the pod is
// not left half-alive: its VM is stopped, its sandbox process reported
// killed, and it is deleted cleanly.
TEST_F(TaskServiceFaultTest, AnUnansweredCallFailsNamingItAndStopsThePodsVm) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  MustStart("pod1");
  Agent("pod1")->TimeOutNext("CreateContainer", milliseconds(250));
  auto t0 = Clock::now();
  auto r = service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}})));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded) << r.status().ToString();
  for (const char* part : {"create container app", "agent CreateContainer in pod pod1",
                           "deadline exceeded after 250 ms", "VM is stopped"}) {
    EXPECT_NE(r.status().message().find(part), std::string::npos) << part << " not in: " << r.status().message();
  }
  EXPECT_LT(Clock::now() - t0, seconds(5));
  auto w = Wait("pod1");
  ASSERT_OK(w);
  EXPECT_EQ(w->exit_status(), 137u) << "the pod's processes die with its VM";
  ASSERT_TRUE(events_.WaitFor("/tasks/exit"));
  FakeVmm& vmm = vms_->vm(VmId("pod1"))->fake_vmm();
  for (int i = 0; i < 100 && vmm.state() != hypervisor::VmState::kExited; ++i) ::usleep(20 * 1000);
  EXPECT_EQ(vmm.state(), hypervisor::VmState::kExited) << "the VMM of a pod whose agent hung still runs";
  EXPECT_EQ(Kill("pod1", SIGKILL).code(), Code::kNotFound);
  ASSERT_OK(Delete("pod1"));
  EXPECT_EQ(vms_->live_vms(), 0);
}

// A DEADLINE_EXCEEDED the agent answers itself (a cgroup that did not
// settle) is an answer: the pod stays.
TEST_F(TaskServiceFaultTest, ADeadlineErrorTheAgentAnswersQuicklyLeavesThePodAlone) {
  RunSleeper("c1");
  Agent("c1")->FailNext("StatsContainer", DeadlineExceeded("cgroup /c1: memory.events did not become 0"));
  v2::StatsRequest req;
  req.set_id("c1");
  EXPECT_EQ(service_->Stats(req).status().code(), Code::kDeadlineExceeded);
  EXPECT_OK(service_->Stats(req));
  EXPECT_EQ(State("c1")->status(), containerd::v1::types::RUNNING);
  EXPECT_EQ(vms_->vm(VmId("c1"))->fake_vmm().state(), hypervisor::VmState::kRunning);
  StopAndDelete("c1");
}

// containerd 1.6 answers a Create it gave up on with Delete(id): the
// creation is cancelled, the Delete waits until it is undone and answers
// NOT_FOUND, and Shutdown then lets the shim exit.
TEST_F(TaskServiceFaultTest, ADeleteDuringCreateCancelsItAndLeavesNoVm) {
  std::promise<void> entered;
  vms_->next_agent()->HoldNext("CreateSandbox", [&] { entered.set_value(); });
  auto create = std::async(std::launch::async, [&] { return service_->Create(CreateReq("c1", BaseSpec())); });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  EXPECT_EQ(vms_->live_vms(), 1);
  unblock_ = [this] { Agent("c1")->Release("CreateSandbox"); };
  auto deleted = Promptly([&] { return Delete("c1"); });
  EXPECT_EQ(deleted.status().code(), Code::kNotFound) << deleted.status().ToString();
  EXPECT_EQ(vms_->live_vms(), 0) << "Delete answered before the VM was gone";
  ASSERT_TRUE(ReadyWithin(create, seconds(1)));
  auto r = create.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kCancelled) << r.status().ToString();
  EXPECT_NE(r.status().message().find("deleted the task while it was being created"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(events_.topics().empty()) << "no event for a task containerd never had";
  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  EXPECT_NE(ShutdownReason(), "");
}

TEST_F(TaskServiceFaultTest, ACreatePastContainerdsDeadlineIsUndone) {
  vms_->next_agent()->HoldNext("CreateSandbox");
  auto t0 = Clock::now();
  auto r = service_->Create(CreateReq("c1", BaseSpec()), Clock::now() + milliseconds(300));
  const auto took = Clock::now() - t0;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded) << r.status().ToString();
  EXPECT_NE(r.status().message().find("containerd's deadline for it passed"), std::string::npos)
      << r.status().message();
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, seconds(3));
  EXPECT_EQ(vms_->live_vms(), 0);
  EXPECT_TRUE(mounter_.live().empty());
  auto idle = tasks_->IdleFor();
  ASSERT_TRUE(idle);
  EXPECT_TRUE(idle->had_task) << "a forgotten creation lets the shim exit as after its last task";
  EXPECT_EQ(Delete("c1").status().code(), Code::kNotFound);
  ASSERT_OK(service_->Create(CreateReq("c1", BaseSpec()), Clock::now() + seconds(30))) << "the id is free";
  ASSERT_OK(Delete("c1"));
}

// A container joining a pod: its CreateContainer (the pod's agent is
// shared, so it is not cut) answers after containerd gave up; the container
// it made is removed from the guest and unmounted, the pod goes on.
TEST_F(TaskServiceFaultTest, AJoiningCreateThatFinishesAfterTheDeadlineIsUndone) {
  ASSERT_OK(service_->Create(CreateReq("pod1", BaseSpec({{kTypeKey, "sandbox"}}))));
  MustStart("pod1");
  std::promise<void> entered;
  Agent("pod1")->HoldNext("CreateContainer", [&] { entered.set_value(); });
  auto create = std::async(std::launch::async, [&] {
    return service_->Create(CreateReq("app", BaseSpec({{kTypeKey, "container"}, {kSandboxKey, "pod1"}})),
                            Clock::now() + milliseconds(200));
  });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  ::usleep(400 * 1000);  // past the deadline
  Agent("pod1")->Release("CreateContainer");
  ASSERT_TRUE(ReadyWithin(create, seconds(5)));
  auto r = create.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDeadlineExceeded) << r.status().ToString();
  EXPECT_TRUE(Agent("pod1")->called("RemoveContainer")) << "the container made too late stays in the guest";
  EXPECT_EQ(Agent("pod1")->container_count(), 1u) << "only the pod's own container is left";
  EXPECT_EQ(State("app").status().code(), Code::kNotFound);
  EXPECT_EQ(State("pod1")->status(), containerd::v1::types::RUNNING);
  for (const auto& topic : events_.topics()) {
    EXPECT_NE(topic, "/tasks/exit") << "an exit of the undone container, whose task containerd never had";
  }
  StopAndDelete("pod1");
}

// containerd's Shutdown while the shim's only creation runs: that creation
// is one containerd forgot; it is cancelled, and the shim asks to exit
// once it is undone.
TEST_F(TaskServiceFaultTest, AShutdownDuringTheOnlyCreateCancelsItAndTheShimExits) {
  std::promise<void> entered;
  vms_->next_agent()->HoldNext("CreateSandbox", [&] { entered.set_value(); });
  auto create = std::async(std::launch::async, [&] { return service_->Create(CreateReq("c1", BaseSpec())); });
  ASSERT_EQ(entered.get_future().wait_for(seconds(5)), std::future_status::ready);
  ASSERT_OK(service_->Shutdown(v2::ShutdownRequest()));
  ASSERT_TRUE(ReadyWithin(create, seconds(5)));
  EXPECT_EQ(create.get().status().code(), Code::kCancelled);
  EXPECT_EQ(vms_->live_vms(), 0);
  auto idle = tasks_->IdleFor();
  ASSERT_TRUE(idle);
  EXPECT_TRUE(idle->shutdown_requested);
}

}  // namespace
}  // namespace capsule::testing
