// See sandbox_vm_provider.h. A claim is: ask the pool (bounded by
// pool.claim_timeout_ms), check its answer, record the VM in the bundle,
// take the agent stream the pool kept for us (if it did), adopt the VM
// (taking vm.lock: from here it is ours alone), check its agent on that
// stream or a dialled one, then remove the pool's mark. Any step that
// fails gives the VM back (or stops it once ours) and reports a miss, so
// the pod cold-boots.
#include "shim/pod/sandbox_vm_provider.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "runtime/common/elapsed.h"
#include "runtime/common/logging.h"
#include "runtime/host/daemon.h"
#include "runtime/pool/agent_stream_handover.h"
#include "runtime/pool/pool_client.h"
#include "runtime/pool/pool_record.h"
#include "runtime/pool/shape.h"
#include "runtime/vm/vm_dir.h"

namespace capsule::shim::pod {
namespace {

const log::Logger kSandboxVmProviderLog("shim.pool");
constexpr std::chrono::milliseconds kReleaseTimeout{2000};
// One local exchange with the pool daemon; it answers at once.
constexpr std::chrono::milliseconds kTakeStreamTimeout{1000};

// The pool's answer is checked before anything acts on it: an id we would
// use as ours, and a dir that is that VM's, absolute, a real directory.
Status CheckAnswer(const pool::Claimed& c) {
  RETURN_IF_ERROR(vm::ValidateVmId(c.vm_id));
  if (c.state_dir.empty() || c.state_dir[0] != '/' || c.state_dir.find("/../") != std::string::npos ||
      c.state_dir.size() < c.vm_id.size() + 1 ||
      c.state_dir.compare(c.state_dir.size() - c.vm_id.size() - 1, std::string::npos, "/" + c.vm_id) != 0)
    return InvalidArgument(fmt::format("state dir '{}' is not VM {}'s", c.state_dir, c.vm_id));
  struct stat st{};
  if (::lstat(c.state_dir.c_str(), &st) != 0) return ErrnoStatus("state dir " + c.state_dir);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid())
    return InvalidArgument(fmt::format("state dir {} is not a directory of ours", c.state_dir));
  return Status::Ok();
}

}  // namespace

Result<vm::SandboxVmPtr> SandboxVmProvider::Boot(const vm::SandboxVmSpec& spec) {
  return vm::SandboxVm::Boot(config_, spec);
}

vm::SandboxVmPtr SandboxVmProvider::Claim(const vm::SandboxVmSpec& spec, const PoolClaimant& who,
                                          const RecordClaimedVm& record, std::string* miss) {
  const std::string& socket = config_.pool.socket;
  if (config_.pool.size == 0) {
    *miss = "pool.size is 0";
    return nullptr;
  }
  if (::access(socket.c_str(), F_OK) != 0) {
    *miss = "no pool daemon: " + socket + " does not exist";
    return nullptr;
  }
  const pool::Shape shape = pool::Resolve(config_, pool::Shape{spec.vcpus, spec.memory_mib});
  auto key = pool::ShapeKey(config_, shape);
  if (!key.ok()) {
    *miss = key.status().ToString();
    return nullptr;
  }
  pool::Claimant claimant{who.ns, who.sandbox_id, who.pod, {}};
  if (auto self = IdentifyProcess(::getpid()); self.ok()) claimant.process = *self;
  auto client = pool::PoolClient::Create(socket);
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = client->Claim(shape, *key, claimant, std::chrono::milliseconds(config_.pool.claim_timeout_ms));
  if (!reply.ok()) {
    *miss = reply.status().ToString();
    return nullptr;
  }
  if (!reply->vm) {
    *miss = reply->miss_reason;
    return nullptr;
  }
  const pool::Claimed& c = *reply->vm;
  const double answer_ms = MsSince(t0);
  auto give_back = [&](const Status& why) {
    *miss = fmt::format("claimed VM {} unusable: {}", c.vm_id, why.ToString());
    if (Status st = client->Release(c.vm_id, kReleaseTimeout); !st.ok())
      kSandboxVmProviderLog.Warn("give VM {} back to the pool: {} (the pool reaps it after its claim grace)", c.vm_id,
                                 st.ToString());
    return nullptr;
  };
  if (Status st = CheckAnswer(c); !st.ok()) return give_back(st);
  if (Status st = record(c.vm_id, c.state_dir); !st.ok()) return give_back(st);
  // The agent stream the pool opened for this VM before the claim, if it
  // kept one: a first call on it costs the guest no new connection.
  UniqueFd stream;
  if (c.agent_stream) {
    auto taken = pool::TakeAgentStream(pool::AgentStreamSocketFor(socket), c.vm_id, kTakeStreamTimeout);
    if (taken.ok()) {
      stream = std::move(*taken);
    } else {
      kSandboxVmProviderLog.Warn("sandbox {}: VM {}'s agent stream not taken (dialling its agent): {}", who.sandbox_id,
                                 c.vm_id, taken.status().ToString());
    }
  }
  const bool took_stream = static_cast<bool>(stream);
  auto adopted = vm::SandboxVm::Adopt(config_, c.state_dir, std::move(stream));
  if (!adopted.ok()) return give_back(adopted.status());
  vm::SandboxVmPtr v = std::move(*adopted);
  // Ours now (vm.lock held): a failure from here stops it ourselves.
  Status usable = v->agent().status();
  if (usable.ok()) usable = pool::RemovePoolRecord(c.state_dir);
  if (!usable.ok()) {
    *miss = fmt::format("claimed VM {} unusable: {}", c.vm_id, usable.ToString());
    (void)v->Stop(std::chrono::milliseconds(0));
    return nullptr;
  }
  kSandboxVmProviderLog.Info(
      "sandbox {}: claimed pooled VM {} (shape {}, idle {} ms in the pool, hand-over {:.1f} ms, the pool's answer "
      "{:.1f} ms, adopted {:.1f} ms after it, {})",
      who.sandbox_id, c.vm_id, c.shape_key, c.idle_ms, c.claim_ms, answer_ms, MsSince(t0) - answer_ms,
      took_stream ? "its agent stream taken from the pool" : "its agent dialled");
  return v;
}

Result<vm::SandboxVmPtr> SandboxVmProvider::Adopt(const std::string& state_dir) {
  return vm::SandboxVm::Adopt(config_, state_dir);
}

std::string SandboxVmProvider::StateDirFor(std::string_view vm_id) const {
  return vm::SandboxVm::StateDirFor(config_, vm_id);
}

}  // namespace capsule::shim::pod
