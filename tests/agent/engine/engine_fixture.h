// Shared by the engine's integration tests and benchmark: a busybox rootfs,
// a containerd-shaped default spec, a LinuxContainerManager on a real cgroup2 hierarchy,
// stdio helpers, and leak checks (mounts, cgroups, fds) after every test.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "agent/engine/linux_container_manager.h"
#include "runtime/oci/spec.h"

namespace capsule::engine::testing {

// Built once per process from /bin/busybox (static) and its applet links.
const std::string& BusyboxRootfs();

// $CAPSULE_TEST_CGROUP_ROOT, else /sys/fs/cgroup when it is cgroup2, else
// /sys/fs/cgroup/unified (hybrid hosts).
std::string FindCgroup2Root();
// True when `controller` can be enabled for a child of `root`.
bool HasController(const std::string& root, const std::string& controller);

// What containerd's CRI plugin would write (trimmed), running `args`.
nlohmann::json DefaultSpec(const std::vector<std::string>& args);
oci::Spec Parse(const nlohmann::json& spec);

// Reads `stream` until it has seen `needle` (or eof); returns all read.
std::string ReadUntil(const ProcessIoPtr& io, Stream stream, const std::string& needle);
// Reads both streams to eof concurrently.
std::pair<std::string, std::string> Drain(const ProcessIoPtr& io);

struct RunResult {
  std::string out;
  std::string err;
  ExitInfo exit;
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Create, start, drain, wait, remove.
  RunResult Run(const std::string& id, const nlohmann::json& spec);
  // Create + start; the container stays.
  ContainerPtr StartContainer(const std::string& id, const nlohmann::json& spec, CreateOptions options = {});
  // Create + start of `args` as a container of `anchor`'s pod: its pid, ipc
  // and uts namespaces, and no hostname of its own.
  ContainerPtr StartInPodOf(const std::string& anchor, const std::string& id, const std::vector<std::string>& args);
  // The cgroup directory the test spec's cgroupsPath resolves to.
  std::string CgroupDir(const std::string& id) const;
  // Spec with cgroupsPath under this test's private cgroup parent.
  nlohmann::json WithCgroup(nlohmann::json spec, const std::string& id) const;
  std::vector<std::string> OurMounts() const;

  std::string cgroup_root_;
  std::string cgroup_parent_;
  std::unique_ptr<LinuxContainerManager> sandbox_;

 private:
  std::vector<std::string> mounts_before_;
  size_t fds_before_ = 0;
};

}  // namespace capsule::engine::testing
