// A container engine without containers, for the unit tests of the layers
// above it (agent/pod, agent/containers, agent/server): it records what it
// was asked and answers from a map. The real engine is covered by
// engine_test and, through gRPC, by container_api_test and its VM twin.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/engine/container_manager.h"
#include "agent/pod/pod_slot.h"

namespace capsule::agent::fakes {

using oci::NamespaceType;

class FakeContainer : public engine::Container {
 public:
  explicit FakeContainer(std::string id) : id_(std::move(id)) {}
  const std::string& id() const override { return id_; }
  engine::ContainerState state() const override { return engine::ContainerState::kCreated; }
  pid_t init_pid() const override { return 42; }
  using engine::Container::Start;
  Result<pid_t> Start(bool) override { return 42; }
  void ReleaseHeldGo() override {}
  Result<pid_t> Exec(const std::string&, const oci::Process&) override { return 43; }
  Status Signal(const std::string& exec_id, int, bool) override {
    return exec_id == "gone" ? NotFound("process gone has exited") : Status::Ok();
  }
  using engine::Container::Wait;
  Result<engine::ExitInfo> Wait(const std::string&, const engine::CancelCheck& cancel) override {
    while (!cancel.cancelled()) std::this_thread::yield();
    return Cancelled("wait: the caller gave up");
  }
  Status RemoveProcess(const std::string&) override { return Status::Ok(); }
  Result<engine::ProcessIoPtr> Io(const std::string&) override { return NotFound("no io"); }
  Result<std::vector<engine::ProcessInfo>> ListProcesses() override {
    return std::vector<engine::ProcessInfo>{{42, "", "sleep"}};
  }
  Status Update(const oci::LinuxResources&) override { return Status::Ok(); }
  Result<engine::CgroupMetrics> Stats() override { return engine::CgroupMetrics{}; }
  Status Pause() override { return Status::Ok(); }
  Status Resume() override { return Status::Ok(); }
  Result<std::string> NamespacePath(NamespaceType) const override { return std::string("/proc/42/ns/x"); }
  Result<engine::NamespaceFds> ShareNamespaces(const std::vector<NamespaceType>&) const override {
    return engine::NamespaceFds{};
  }

 private:
  std::string id_;
};

struct FakeEngineLog {
  int engines = 0;  // made by FakeEngines()
  std::map<std::string, engine::CreateOptions> created;
  std::vector<std::string> adopted;  // AdoptPodHolder's ids
  int holders_prepared = 0;
  int rehearsals = 0;
  int remove_all = 0;
};

class FakeEngine : public engine::ContainerManager {
 public:
  explicit FakeEngine(FakeEngineLog* log) : log_(log) {}
  Result<engine::ContainerPtr> Create(const std::string& id, const oci::Spec&,
                                      const engine::CreateOptions& options) override {
    log_->created[id] = options;
    return containers_[id] = std::make_shared<FakeContainer>(id);
  }
  Result<engine::ContainerPtr> Get(const std::string& id) const override {
    auto it = containers_.find(id);
    if (it == containers_.end()) return NotFound("container " + id + " not found");
    return it->second;
  }
  std::vector<engine::ContainerPtr> List() const override { return {}; }
  Status Remove(const std::string& id, std::chrono::milliseconds) override {
    return containers_.erase(id) ? Status::Ok() : NotFound("container " + id + " not found");
  }
  Status RemoveAll(std::chrono::milliseconds) override {
    ++log_->remove_all;
    containers_.clear();
    return Status::Ok();
  }
  std::optional<std::string> WaitOomEvent(std::chrono::milliseconds) override { return std::nullopt; }
  Status PreparePodHolder() override {
    ++log_->holders_prepared;
    return Status::Ok();
  }
  Result<engine::ContainerPtr> AdoptPodHolder(const std::string& id) override {
    log_->adopted.push_back(id);
    return containers_[id] = std::make_shared<FakeContainer>(id);
  }
  Result<double> Rehearse() override {
    ++log_->rehearsals;
    return 1.5;
  }

 private:
  FakeEngineLog* log_;
  std::map<std::string, engine::ContainerPtr> containers_;
};

// A PodSlot engine factory making FakeEngines that report to `log`.
inline pod::EngineFactory FakeEngines(FakeEngineLog* log) {
  return [log]() -> Result<engine::ContainerManagerPtr> {
    ++log->engines;
    return engine::ContainerManagerPtr(std::make_unique<FakeEngine>(log));
  };
}

}  // namespace capsule::agent::fakes
