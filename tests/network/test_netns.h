// Network namespaces for the pod network tests, made the way `ip netns add`
// and CNI make them: a thread unshares CLONE_NEWNET and bind-mounts its
// /proc/thread-self/ns/net onto a file, which then keeps the namespace
// alive and names it. Destroying the object unmounts the file, and the
// namespace with every interface in it goes away.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "tests/support/command.h"

namespace capsule::network::testing {

class TestNetns {
 public:
  // A new empty netns (only "lo", down) bound at `path`.
  static Result<TestNetns> Create(const std::string& path);
  TestNetns(TestNetns&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  TestNetns& operator=(TestNetns&&) = delete;
  ~TestNetns() { Destroy(); }

  const std::string& path() const { return path_; }
  // Unmounts and unlinks the file (the netns dies with its last user).
  void Destroy();

 private:
  explicit TestNetns(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Runs `ip args...` inside the netns at `netns_path` (through nsenter, so
// the test's own threads never change namespace). Fails the test with ip's
// stderr if it fails.
void IpIn(const std::string& netns_path, const std::vector<std::string>& args);
// Same for any command; returns its result.
Result<capsule::testing::CommandResult> RunIn(const std::string& netns_path, std::vector<std::string> argv);

// Whether any mount in this process's mount namespace lies under `dir`.
bool HasMountsUnder(const std::string& dir);

}  // namespace capsule::network::testing
