// The fixture of the Task service's unit tests: a TaskService over a real
// TaskManager with fakes of the VM, the agent, the host mounts and the
// event publisher, and helpers for containerd's calls. After each test no
// VM and no mount may be left.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "containerd/events/task.pb.h"
#include "shim/service/task_service.h"
#include "tests/shim/fakes/fake_mounter.h"
#include "tests/shim/fakes/fake_vm.h"
#include "tests/shim/fakes/recording_publisher.h"
#include "tests/shim/fakes/test_bundle.h"
#include "tests/support/status_matchers.h"

namespace capsule::testing {

namespace v2 = ::containerd::task::v2;
namespace cev = ::containerd::events;
using shim::service::TaskService;
using shim::task::TaskManager;
using std::chrono::milliseconds;

inline constexpr const char* kNs = "default";
inline constexpr const char* kTypeKey = "io.kubernetes.cri.container-type";
inline constexpr const char* kSandboxKey = "io.kubernetes.cri.sandbox-id";

class TaskServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = TempDir::Create("shimsvc");
    ASSERT_OK(t);
    tmp_.emplace(std::move(*t));
    vms_ = std::make_unique<FakeVmProvider>(tmp_->Join("state"));
    shim::task::TaskManagerDeps d;
    d.ns = kNs;
    d.vms = vms_.get();
    d.mounter = &mounter_;
    d.events = &events_;
    d.config_error = config_error_;
    d.config = config_;
    tasks_ = std::make_unique<TaskManager>(d);
    service_ = std::make_unique<TaskService>(tasks_.get(), &events_, [this](std::string why) {
      std::lock_guard lock(mu_);
      shutdown_ = why;
    });
  }
  void TearDown() override {
    service_.reset();
    tasks_.reset();
    EXPECT_EQ(vms_->live_vms(), 0) << "a VM was left running";
    EXPECT_TRUE(mounter_.live().empty()) << "a mount was left: " << *mounter_.live().begin();
  }

  v2::CreateTaskRequest CreateReq(const std::string& id, const nlohmann::json& spec, const std::string& out = "",
                                  const std::string& err = "") {
    v2::CreateTaskRequest req;
    req.set_id(id);
    req.set_bundle(MakeBundle(tmp_->path(), id, spec));
    req.set_stdout(out);
    req.set_stderr(err);
    auto* m = req.add_rootfs();
    m->set_type("overlay");
    m->set_source("overlay");
    m->add_options("lowerdir=/l");
    return req;
  }
  std::string Fifo(const std::string& name) { return tmp_->Join(name); }
  std::string VmId(const std::string& sandbox_id) { return shim::pod::VmIdFor(kNs, sandbox_id); }
  std::shared_ptr<FakeAgentClient> Agent(const std::string& sandbox_id) { return vms_->agent_of(VmId(sandbox_id)); }

  v2::StartResponse MustStart(const std::string& id, const std::string& exec_id = "") {
    v2::StartRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    auto r = service_->Start(req);
    EXPECT_OK(r);
    return r.ok() ? *r : v2::StartResponse();
  }
  Result<v2::WaitResponse> Wait(const std::string& id, const std::string& exec_id = "") {
    v2::WaitRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    return service_->Wait(req);
  }
  Result<v2::DeleteResponse> Delete(const std::string& id, const std::string& exec_id = "") {
    v2::DeleteRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    return service_->Delete(req);
  }
  Status Kill(const std::string& id, uint32_t sig, const std::string& exec_id = "", bool all = false) {
    v2::KillRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    req.set_signal(sig);
    req.set_all(all);
    return service_->Kill(req).status();
  }
  Result<v2::StateResponse> State(const std::string& id, const std::string& exec_id = "") {
    v2::StateRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    return service_->State(req);
  }
  Status Exec(const std::string& id, const std::string& exec_id, const std::string& out = "",
              const std::string& json = R"({"args":["echo","hi"],"cwd":"/"})") {
    v2::ExecProcessRequest req;
    req.set_id(id);
    req.set_exec_id(exec_id);
    req.set_stdout(out);
    req.mutable_spec()->set_type_url("types.containerd.io/opencontainers/runtime-spec/1/Process");
    req.mutable_spec()->set_value(json);
    return service_->Exec(req).status();
  }
  std::string ShutdownReason() {
    std::lock_guard lock(mu_);
    return shutdown_;
  }
  // Creates and starts a long-running ctr-style container.
  void RunSleeper(const std::string& id) {
    auto r = service_->Create(CreateReq(id, BaseSpec()));
    ASSERT_OK(r);
    MustStart(id);
  }
  // Kills it (SIGKILL), waits and deletes it.
  void StopAndDelete(const std::string& id) {
    ASSERT_OK(Kill(id, SIGKILL));
    ASSERT_OK(Wait(id));
    ASSERT_OK(Delete(id));
  }

  // Set by a derived fixture before TaskServiceTest::SetUp().
  Status config_error_;
  config::Config config_;
  std::optional<TempDir> tmp_;
  std::unique_ptr<FakeVmProvider> vms_;
  FakeMounter mounter_;
  RecordingPublisher events_;
  std::unique_ptr<TaskManager> tasks_;
  std::unique_ptr<TaskService> service_;
  std::mutex mu_;
  std::string shutdown_;
};

}  // namespace capsule::testing
