// Boot order: virtiofsd (share + rootfs), capsule-vsockd, QEMU; then the
// agent's ready line on the console, then one vsock connection to port 1024
// that carries the gRPC channel. Teardown goes the other way.
#include "tests/agent/containers/vm_endpoint.h"

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/security/credentials.h>
#include <sys/mount.h>

#include <cstdlib>
#include <iostream>

#include "runtime/wire/agent_auth.h"
#include "runtime/wire/guest_abi.h"
#include "tests/agent/support/busybox_rootfs.h"

namespace capsule::agent::testing {
namespace {

constexpr std::chrono::milliseconds kBootTimeout(240000);  // TCG on a loaded 2-core host
constexpr std::chrono::milliseconds kDialTimeout(5000);
constexpr std::chrono::milliseconds kPowerOffTimeout(60000);
constexpr int kGuestMemoryMib = 512;
constexpr const char* kRootfsRel = "rootfs";

std::string BuildDir() {
  const char* b = std::getenv("CAPSULE_BUILD_DIR");
  return b ? b : "build";
}

std::vector<std::string> VirtiofsQemuArgs(const std::string& socket) {
  return {"-chardev", "socket,id=fs0,path=" + socket, "-device",
          fmt::format("vhost-user-fs-pci,chardev=fs0,tag={},queue-size=1024", guest_abi::kSharedFsTag)};
}

}  // namespace

Result<std::unique_ptr<VmEndpoint>> VmEndpoint::Start() {
  std::unique_ptr<VmEndpoint> ep(new VmEndpoint());
  ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("agent-api-vm"));
  ep->dir_.emplace(std::move(dir));
  virtiofs::VirtiofsOptions fs;
  fs.vm_dir = ep->dir_->path();
  ASSIGN_OR_RETURN(ep->virtiofsd_, virtiofs::VirtiofsDaemon::Start(fs));
  const std::string rootfs = ep->virtiofsd_->host_dir() + "/" + kRootfsRel;
  RETURN_IF_ERROR(MkdirAll(rootfs));
  RETURN_IF_ERROR_CTX(BuildBusyboxRootfs(rootfs), "rootfs on the share");
  // A mount of its own, as a pod's overlay rootfs is: the share's own tree
  // is read-only to the guest, the mounts in it are not. The share's
  // release detaches it.
  if (::mount(rootfs.c_str(), rootfs.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return ErrnoStatus("bind-mount the test rootfs " + rootfs + " onto itself");
  vsock::VsockBackendOptions vo;
  vo.vsockd_path = BuildDir() + "/runtime/vsock/capsule-vsockd";
  ASSIGN_OR_RETURN(ep->backend_, vsock::MakeVsockBackend(config::VsockBackendKind::kVhostUser, vo));
  vsock::VmVsockSpec vs;
  vs.vm_dir = ep->dir_->path();
  ASSIGN_OR_RETURN(ep->vsock_, ep->backend_->Prepare(vs));

  GuestBootOptions boot;
  boot.memory_mib = kGuestMemoryMib;
  ASSIGN_OR_RETURN(boot.agent_token, agent_auth::NewToken());
  boot.extra_qemu_args = ep->vsock_->qemu_device().Args();
  for (auto& a : VirtiofsQemuArgs(ep->virtiofsd_->socket_path())) boot.extra_qemu_args.push_back(a);
  ASSIGN_OR_RETURN(ep->guest_, QemuGuest::Boot(boot));
  ep->vsock_->OnQemuStarted();
  std::cerr << "QEMU: " << ep->guest_->CommandLine() << "\n";
  ASSIGN_OR_RETURN(std::string ready, ep->guest_->WaitForLine(guest_abi::kAgentReadyMarker, kBootTimeout));
  if (auto at = ep->guest_->ArrivalOf(guest_abi::kAgentReadyMarker)) ep->boot_ms_ = static_cast<double>(at->count());
  std::cerr << "guest agent ready after " << ep->boot_ms_ << " ms: " << ready << "\n";
  ep->StartConsoleDrain();

  ASSIGN_OR_RETURN(UniqueFd conn, ep->vsock_->Dial(guest_abi::kAgentVsockPort, kDialTimeout));
  RETURN_IF_ERROR_CTX(agent_auth::Prove(conn.get(), boot.agent_token, kDialTimeout), "prove the agent token");
  ep->channel_ = grpc::CreateInsecureChannelFromFd("capsule-agent-vsock", conn.release());
  ep->stub_ = v1::Agent::NewStub(ep->channel_);
  return ep;
}

std::string VmEndpoint::rootfs() const { return std::string(guest_abi::kSharedFsGuestPath) + "/" + kRootfsRel; }

std::vector<v1::Storage> VmEndpoint::sandbox_storages() const {
  v1::Storage share;
  share.set_driver("virtiofs");
  share.set_source(std::string(guest_abi::kSharedFsTag));
  share.set_fstype("virtiofs");
  share.set_mount_point(std::string(guest_abi::kSharedFsGuestPath));
  return {share};
}

void VmEndpoint::StartConsoleDrain() {
  drain_ = std::thread([this] {
    while (!stop_drain_.load()) {
      // A line that never comes: WaitForLine just reads for 200 ms.
      auto r = guest_->WaitForLine("<capsule: a line that never comes>", std::chrono::milliseconds(200));
      if (r.status().code() == Code::kUnavailable) return;  // QEMU closed the console
    }
  });
}

void VmEndpoint::StopConsoleDrain() {
  stop_drain_ = true;
  if (drain_.joinable()) drain_.join();
}

VmEndpoint::~VmEndpoint() {
  stub_.reset();
  channel_.reset();
  StopConsoleDrain();
  if (guest_) {
    Status off = guest_->SendCtrlAltDel();
    auto code = off.ok() ? guest_->WaitExit(kPowerOffTimeout) : Result<int>(off);
    if (!code.ok()) std::cerr << "VM did not power off: " << code.status().ToString() << "\n";
    guest_.reset();  // kills QEMU if still there
  }
  if (vsock_) (void)vsock_->Shutdown(std::chrono::milliseconds(2000));
  if (virtiofsd_) (void)virtiofsd_->Stop();
}

Result<AgentEndpointPtr> StartVmEndpoint() {
  ASSIGN_OR_RETURN(std::unique_ptr<VmEndpoint> ep, VmEndpoint::Start());
  return AgentEndpointPtr(std::move(ep));
}

}  // namespace capsule::agent::testing
