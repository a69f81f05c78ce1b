// FakeMounter: records the shim's host mounts instead of making them, so
// unit tests can check what was mounted where and that nothing is left
// after any failure. Can fail a mount whose target contains a given text.
#pragma once

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "shim/mount/mounter.h"

namespace capsule::testing {

class FakeMounter : public shim::mount::Mounter {
 public:
  Status Mount(const shim::mount::MountSpec& spec) override {
    std::lock_guard lock(mu_);
    history_.push_back(spec);
    if (!fail_target_.empty() && spec.target.find(fail_target_) != std::string::npos)
      return Internal("fake mounter: refusing " + spec.target);
    if (!live_.insert(spec.target).second) return AlreadyExists("fake mounter: " + spec.target + " is mounted");
    return Status::Ok();
  }
  Status Unmount(const std::string& target) override {
    std::lock_guard lock(mu_);
    live_.erase(target);
    return Status::Ok();
  }
  void FailTargetsContaining(std::string text) {
    std::lock_guard lock(mu_);
    fail_target_ = std::move(text);
  }
  std::set<std::string> live() const {
    std::lock_guard lock(mu_);
    return live_;
  }
  std::vector<shim::mount::MountSpec> history() const {
    std::lock_guard lock(mu_);
    return history_;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> live_;
  std::vector<shim::mount::MountSpec> history_;
  std::string fail_target_;
};

}  // namespace capsule::testing
