// WarmPool: the core of capsule-poold. It keeps `pool.size` ready VMs per
// shape, paused while idle (QMP stop; resuming costs well under a
// millisecond), refills in the background with at most
// `pool.max_parallel_boots` refills at once and backs off after failures.
// A claim hands a ready VM over by its state dir (see pool_record.h for who
// owns it when); a claimed VM never comes back.
//
// Refill (pool.refill): "template" boots one template VM per shape
// (vm_template.h, under <state_dir>/templates/<shape key>/) and then
// restores clones of it; a clone that fails is torn down and a cold boot
// takes its place, a template that fails to build is retried with
// back-off while the shape refills by boot, and three clone failures in a
// row discard the template. "boot" cold-boots every VM. A shape's key
// covers its image (shape.h): when a file it hashes changes, the periodic
// scan re-keys the shape, stops its idle VMs and deletes its template, so
// neither an old VM nor an old template is handed out.
//
// Threads: the refill thread starts boots, restores and template builds
// (each on a thread of its own), reaps idle VMs whose VMM died, and
// periodically re-keys shapes and reaps claimed VMs nobody adopted within
// the claim grace. Claims and status calls come in on gRPC threads and
// only hold the lock to pick a VM.
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/backoff.h"
#include "runtime/common/status.h"
#include "runtime/config/config.h"
#include "runtime/host/daemon.h"
#include "runtime/host/process_cgroup.h"
#include "runtime/pool/agent_stream_handover.h"
#include "runtime/pool/pool_types.h"
#include "runtime/pool/shape.h"
#include "runtime/vm/sandbox_vm.h"
#include "runtime/vm/vm_template.h"

namespace capsule::pool {

struct WarmPoolOptions {
  config::Config config;
  // A claimed VM whose vm.lock nobody took this long after the claim is
  // reaped (its claimant gave up or died before adopting it).
  std::chrono::milliseconds claim_grace{30000};
  std::chrono::milliseconds scan_interval{5000};
  // Back-off after a failed boot doubles from the first to the last.
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  // A test seam: called with the VM's id once a claim has marked it claimed
  // and before the hand-over (resume, reply). capsule-poold never sets it;
  // a test build dies here to leave exactly what a crash inside the claim
  // window leaves.
  std::function<void(const std::string& vm_id)> after_claim_recorded;
  // Where claimants take the agent stream the pool opened for their VM
  // before the claim (agent_stream_handover.h). Empty: none is opened.
  std::string agent_stream_socket;
};

class WarmPool {
 public:
  // Reaps what an earlier daemon left in the state dir, registers the
  // default shape and starts refilling.
  static Result<std::unique_ptr<WarmPool>> Start(WarmPoolOptions options);
  // Drains (stops every idle VM, waits for boots in flight) and stops.
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  // A ready VM of the shape; with none ready (and none made within
  // pool.claim_wait_ms) but the shape's template, a clone restored for this
  // claim; else nullopt with `miss` saying why. A shape
  // seen for the first time is kept from then on (up to kMaxShapes), until
  // pool.shape_expiry_s pass without a claim (the default shape stays).
  Result<std::optional<Claimed>> Claim(const Shape& shape, const Claimant& who, std::string* miss);
  // A claimed VM its claimant will not adopt: stopped now. NOT_FOUND when
  // there is no such claimed, unadopted VM.
  Status Release(const std::string& vm_id);
  PoolStatus GetStatus() const;
  const config::Config& config() const { return o_.config; }
  void Resize(uint32_t size);
  // Stops every idle VM and waits for boots in flight (stopping them too);
  // the pool then keeps none until Resize. Returns how many were stopped.
  uint32_t Drain();

  static constexpr size_t kMaxShapes = 8;
  static constexpr const char* kVmIdPrefix = "pool-";

 private:
  struct ReadyVm {
    vm::SandboxVmPtr vm;
    int64_t ready_since_ms = 0;
    std::shared_ptr<std::atomic<bool>> died;
    UniqueFd agent_stream;  // opened while the VM ran; closed with it
  };
  struct ShapeState {
    Shape shape;
    bool configured = false;  // the default shape: never expires, refilled first
    std::chrono::steady_clock::time_point last_claim{};
    uint32_t target = 0;
    std::deque<ReadyVm> ready;
    uint32_t booting = 0, claimed = 0, boots = 0, failures = 0;
    std::string last_failure;
    std::chrono::milliseconds backoff{0};
    std::chrono::steady_clock::time_point next_boot{};
    // One per recent claim of a ready VM: when its refill may start
    // (pool.refill_holdback_ms after the claim).
    std::deque<std::chrono::steady_clock::time_point> held_back;
    std::deque<double> boot_ms;   // last kBootSamples cold boots
    std::deque<double> clone_ms;  // last kBootSamples restores
    // Template refill.
    std::optional<vm::VmTemplate> tpl;
    bool tpl_building = false;
    uint32_t tpl_builds = 0, tpl_failures = 0, clones = 0, clone_failures = 0, clone_failures_in_row = 0;
    std::string tpl_last_failure;
    std::chrono::milliseconds tpl_backoff{0};
    std::chrono::steady_clock::time_point tpl_next_build{};
  };
  static constexpr size_t kBootSamples = 64;
  static constexpr uint32_t kMaxCloneFailuresInRow = 3;

  explicit WarmPool(WarmPoolOptions options) : o_(std::move(options)), size_(o_.config.pool.size) {}
  void RefillLoop();
  // Under mu_: starts the boots that targets and limits allow.
  void StartBootsLocked();
  // Drops the hold-backs of s that are due and returns how many refills
  // it still holds back after claims (s is the pool's: hold mu_).
  static uint32_t DropDueHoldbacks(ShapeState& s, std::chrono::steady_clock::time_point now);
  // Under mu_: when the next held-back refill is due (max() when none).
  std::chrono::steady_clock::time_point NextHoldbackEndLocked() const;
  // Under mu_: ready and being made, all shapes together (pool.max_idle).
  uint32_t IdleTotalLocked() const;
  // Forgets the shapes no claim asked for in pool.shape_expiry_s: their
  // idle VMs stop and their template goes.
  void ExpireShapes();
  bool UseTemplates() const { return o_.config.pool.refill == "template"; }
  // How long a shape waits after failed boots or template builds.
  BackoffPolicy Backoffs() const { return {o_.first_backoff, o_.max_backoff}; }
  std::string TemplatesRoot() const { return o_.config.runtime.state_dir + "/templates"; }
  // pool.cgroup's sibling where boots and clones run until ready, at a low
  // CPU weight (kRefillCpuWeight).
  std::string RefillCgroup() const { return o_.config.pool.cgroup + "-refill"; }
  // Lowers the calling refill thread's CPU priority (kRefillNice).
  static void YieldToClaims();
  // Has a ready VM's agent run a container's life and its boot NIC's
  // take-over once (agent.proto Rehearse) before the VM is offered, so its
  // first pod does not pay for that code's first run in this VMM. A VM
  // whose rehearsal failed is not offered.
  Status Rehearse(vm::SandboxVm& vm) const;
  // Lets a ready VM's guest go quiet before its pause (warm_pool.cc); ends
  // at once when the pool stops or drains.
  void Settle(vm::SandboxVm& vm);
  // A ready VM: a clone of `tpl` when there is one (a boot if it fails),
  // else a cold boot.
  void BootOne(uint64_t seq, std::string key, Shape shape, std::string vm_id, std::optional<vm::VmTemplate> tpl);
  void BuildTemplateFor(uint64_t seq, std::string key, Shape shape);
  void TemplateBuilt(const std::string& key, Result<vm::VmTemplate> built);
  // Joins the boot and template threads that finished; `all`: every one,
  // waiting for those still running.
  void JoinBoots(bool all);
  void BootFinished(const std::string& key, Result<vm::SandboxVmPtr> booted, double ms, bool restored,
                    UniqueFd agent_stream);
  // A ready VM's agent stream for its future claimant, opened before the
  // VM pauses; none (logged) when that fails: the claimant dials then.
  UniqueFd OpenAgentStream(vm::SandboxVm& vm) const;
  // Under mu_: a clone of the shape's template failed.
  void CloneFailedLocked(ShapeState& s, const Status& why);
  // At start: the default shape's template if it is current; every other
  // template and every unfinished build is deleted.
  void PruneTemplates(const std::string& default_key);
  // Shapes whose image changed get their new key; their idle VMs stop and
  // their template goes.
  void RekeyShapes();
  // Stops idle VMs whose VMM exited; under no lock.
  void ReapDead();
  // Leftovers of an earlier daemon (at start) or unadopted claims (later).
  void ScanStateDir(bool at_start);
  void StopVm(vm::SandboxVmPtr vm, std::string_view why);
  // Each on a thread of its own: a drain or a restart's reaping takes as
  // long as the slowest QEMU's exit, not the sum of them.
  void StopVms(std::vector<std::pair<vm::SandboxVmPtr, std::string>> vms);
  std::string NewVmId(const std::string& key) const;

  const WarmPoolOptions o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t size_;                              // guarded by mu_
  std::map<std::string, ShapeState> shapes_;   // guarded by mu_: by shape key
  std::set<std::string> booting_ids_;          // guarded by mu_
  uint32_t booting_total_ = 0;                 // guarded by mu_
  bool draining_ = false;                      // guarded by mu_
  bool stopping_ = false;                      // guarded by mu_
  std::string accelerator_ = "unknown";        // guarded by mu_: of the last VM booted
  uint64_t next_boot_seq_ = 0;                 // guarded by mu_
  std::map<uint64_t, std::thread> boot_threads_;  // guarded by mu_
  std::vector<uint64_t> finished_boots_;       // guarded by mu_: to be joined
  std::thread refill_;
  std::unique_ptr<ProcessCgroup> cgroup_;         // pool.cgroup, made at Start
  std::unique_ptr<ProcessCgroup> refill_cgroup_;  // RefillCgroup(), made at Start
  std::unique_ptr<AgentStreamHandover> handover_;  // o_.agent_stream_socket's, made at Start
};

}  // namespace capsule::pool
