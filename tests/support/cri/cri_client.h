// CriClient: a small synchronous client for containerd's CRI (runtime.v1)
// for tests: RunPodSandbox with a runtime handler, containers, ExecSync,
// the streaming URLs of Exec, Attach and PortForward (driven with
// tests/support/streaming), status, stats and images. Every call has a
// deadline; errors keep the gRPC code and say which call and which object
// failed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cri/runtime/v1/api.pb.h"
#include "runtime/common/status.h"

namespace capsule::testing::cri {

namespace v1 = ::runtime::v1;

struct PodOptions {
  std::string name = "pod";
  std::string k8s_namespace = "default";
  std::string uid;                   // default: derived from name
  uint32_t attempt = 0;
  std::string runtime_handler;       // "" = containerd's default runtime
  std::string hostname;
  std::string log_directory;         // where CRI writes container logs
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  // NODE: host network, which needs no CNI config. POD: a pod netns via CNI.
  v1::NamespaceMode network = v1::NODE;
  v1::NamespaceMode pid = v1::POD;  // CONTAINER: each container its own
  v1::NamespaceMode ipc = v1::POD;
  std::string cgroup_parent;
  bool privileged = false;  // linux.security_context.privileged: may run privileged containers
};

struct ContainerOptions {
  std::string name = "c";
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string working_dir;
  std::string log_path;  // relative to the pod's log_directory
  bool tty = false;
  bool stdin = false;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::optional<v1::NamespaceMode> pid;  // default: the pod's
  bool privileged = false;  // needs a privileged pod
};

// Which streams an Exec or Attach session carries. With tty, stderr must be
// false (a terminal has one output stream).
struct StreamingOptions {
  bool stdin = false;
  bool stdout = true;
  bool stderr = true;
  bool tty = false;
};

struct ExecResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// The PodSandboxConfig RunPod sends; CreateContainer needs it again.
v1::PodSandboxConfig MakePodConfig(const PodOptions& options);
v1::ContainerConfig MakeContainerConfig(const ContainerOptions& options);

class CriClient {
 public:
  // Connects to containerd's gRPC socket (a path), waiting up to `timeout`.
  static Result<std::unique_ptr<CriClient>> Connect(const std::string& socket_path,
                                                    std::chrono::milliseconds timeout);
  ~CriClient();
  CriClient(const CriClient&) = delete;
  CriClient& operator=(const CriClient&) = delete;

  // Deadline of each call (default 60 s; a cold microVM boot under TCG
  // takes ~10 s).
  void set_call_timeout(std::chrono::milliseconds t) { call_timeout_ = t; }

  Result<v1::VersionResponse> Version();

  // RunPodSandbox; returns the sandbox id.
  Result<std::string> RunPod(const v1::PodSandboxConfig& config, const std::string& runtime_handler);
  Result<std::string> RunPod(const PodOptions& options);
  Status StopPod(const std::string& pod_id);
  Status RemovePod(const std::string& pod_id);
  Result<v1::PodSandboxStatusResponse> PodStatus(const std::string& pod_id, bool verbose = false);
  Result<std::vector<v1::PodSandbox>> ListPods();

  // CreateContainer; returns the container id.
  Result<std::string> CreateContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                      const v1::ContainerConfig& config);
  Result<std::string> CreateContainer(const std::string& pod_id, const v1::PodSandboxConfig& pod,
                                      const ContainerOptions& options);
  Status StartContainer(const std::string& id);
  // The call's deadline is the call timeout plus the grace period, unless
  // `deadline` gives one (a caller that gives up before the grace ends).
  Status StopContainer(const std::string& id, int64_t timeout_seconds,
                       std::optional<std::chrono::milliseconds> deadline = std::nullopt);
  Status RemoveContainer(const std::string& id);
  Result<v1::ContainerStatusResponse> ContainerStatus(const std::string& id, bool verbose = false);
  Result<std::vector<v1::Container>> ListContainers(const std::string& pod_id = "");

  // ExecSync with CRI's own timeout (seconds, 0 = none); the call deadline
  // stretches to cover it.
  Result<ExecResult> ExecSync(const std::string& id, const std::vector<std::string>& cmd,
                              int64_t timeout_seconds = 0);

  // Exec, Attach, PortForward: the URL of containerd's streaming server for
  // one session (single-use, valid about a minute).
  Result<std::string> Exec(const std::string& id, const std::vector<std::string>& cmd,
                           const StreamingOptions& streams);
  Result<std::string> Attach(const std::string& id, const StreamingOptions& streams);
  Result<std::string> PortForward(const std::string& pod_id, const std::vector<int32_t>& ports);

  Status UpdateContainerResources(const std::string& id, const v1::LinuxContainerResources& resources);
  Status ReopenContainerLog(const std::string& id);

  Result<v1::ContainerStats> ContainerStats(const std::string& id);
  Result<std::vector<v1::ContainerStats>> ListContainerStats(const std::string& pod_id = "");

  Result<std::vector<v1::Image>> ListImages();
  // NOT_FOUND when containerd's CRI does not know the image.
  Result<v1::Image> ImageStatus(const std::string& ref);

 private:
  struct Stubs;
  explicit CriClient(std::unique_ptr<Stubs> stubs);
  std::unique_ptr<Stubs> stubs_;
  std::chrono::milliseconds call_timeout_{60000};
};

}  // namespace capsule::testing::cri
