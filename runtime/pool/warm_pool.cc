// See warm_pool.h.
#include "runtime/pool/warm_pool.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>

#include <fmt/format.h>

#include "runtime/common/elapsed.h"
#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/host/process_priority.h"
#include "runtime/host/process_usage.h"
#include "runtime/pool/pool_record.h"
#include "runtime/wire/guest_abi.h"

namespace capsule::pool {
namespace {

const log::Logger kWarmPoolLog("pool");
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
// A rehearsal takes ~0.2 s under TCG; one that hangs must not hold a refill.
constexpr milliseconds kRehearseTimeout{30000};
// Dial, token and the guest's side of a new connection: a few tens of ms
// under TCG on an idle VM.
constexpr milliseconds kAgentStreamTimeout{5000};
// A ready VM is paused only once its guest has gone quiet (Settle): QEMU's
// threads ran or waited to run at most kSettleBusyNs over the last
// kSettleQuiet, polled every kSettleStep (WaitUntil), for at most kSettleMax.
constexpr milliseconds kSettleStep{50};
constexpr milliseconds kSettleQuiet{200};
constexpr uint64_t kSettleBusyNs = 5'000'000;
constexpr milliseconds kSettleMax{3000};


std::vector<std::string> VmDirs(const std::string& state_dir) {
  std::vector<std::string> out;
  const std::string root = state_dir + "/vm";
  DIR* d = ::opendir(root.c_str());
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    if (e->d_name[0] != '.') out.push_back(root + "/" + e->d_name);
  }
  if (d != nullptr) ::closedir(d);
  return out;
}

uint64_t RssBytes(pid_t pid) {
  auto usage = ProcessUsage(pid);
  return usage.ok() ? usage->rss_bytes : 0;
}

double Median(std::deque<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool ClaimantAlive(const ProcessIdentity& who) { return OpenProcess(who).ok(); }

}  // namespace

Result<std::unique_ptr<WarmPool>> WarmPool::Start(WarmPoolOptions options) {
  std::unique_ptr<WarmPool> p(new WarmPool(std::move(options)));
  const Shape shape = Resolve(p->o_.config, Shape{});
  ASSIGN_OR_RETURN(std::string key, ShapeKey(p->o_.config, shape));
  RETURN_IF_ERROR(MkdirAll(p->o_.config.runtime.state_dir + "/vm", 0700));
  if (!p->o_.config.pool.cgroup.empty()) {
    auto cg = ProcessCgroup::Join(p->o_.config.pool.cgroup, {});
    if (!cg.ok()) return std::move(cg).status().WithContext("pool.cgroup");
    p->cgroup_ = std::move(*cg);
    // Refills run in a sibling group of their own (SandboxVmSpec::cgroup)
    // until they are ready: their nice ranks them only inside a group, so
    // the group as a whole weighs as one nice-10 thread against the pods'.
    // Ready VMs move to pool.cgroup at the normal weight, which a claimed
    // VM keeps until its shim moves it (or for good without a pod cgroup).
    // Measured (TCG, 2 cores): a warm pod's stop p50 296 -> 212 ms when the
    // clone refilling beside it yielded.
    auto refill = ProcessCgroup::Join(p->RefillCgroup(), {});
    if (!refill.ok()) return std::move(refill).status().WithContext("pool.cgroup's refill group");
    if (Status st = (*refill)->SetCpuWeight(kRefillCpuWeight); !st.ok())
      kWarmPoolLog.Warn("{}: refills weigh as much as the pods: {}", p->RefillCgroup(), st.ToString());
    p->refill_cgroup_ = std::move(*refill);
  }
  if (!p->o_.agent_stream_socket.empty()) {
    auto h = AgentStreamHandover::Start(p->o_.agent_stream_socket);
    if (!h.ok()) return std::move(h).status().WithContext("the agent stream hand-over");
    p->handover_ = std::move(*h);
  }
  p->ScanStateDir(/*at_start=*/true);
  {
    std::lock_guard lock(p->mu_);
    ShapeState& s = p->shapes_[key];
    s.shape = shape;
    s.configured = true;
    s.target = p->size_;
  }
  p->PruneTemplates(key);
  kWarmPoolLog.Info("keeping {} ready VM(s) of {} (shape {}) made by {}, at most {} at once, state in {}", p->size_,
                    Describe(shape), key, p->o_.config.pool.refill, p->o_.config.pool.max_parallel_boots,
                    p->o_.config.runtime.state_dir);
  p->refill_ = std::thread([p = p.get()] { p->RefillLoop(); });
  return p;
}

WarmPool::~WarmPool() {
  const uint32_t stopped = Drain();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (refill_.joinable()) refill_.join();
  JoinBoots(/*all=*/true);  // a thread left joinable would end the daemon (std::terminate)
  // Ours alone (pool.cgroup and its refill group), even when a killed
  // predecessor made them.
  if (refill_cgroup_) refill_cgroup_->RemoveOwnDirs();
  if (cgroup_) cgroup_->RemoveOwnDirs();
  kWarmPoolLog.Info("pool stopped ({} idle VM(s) stopped)", stopped);
}

std::string WarmPool::NewVmId(const std::string& key) const {
  unsigned char r[4] = {};
  if (::getrandom(r, sizeof r, 0) != sizeof r) {
    const auto t = Clock::now().time_since_epoch().count();
    std::memcpy(r, &t, sizeof r);
  }
  return fmt::format("{}{}-{:02x}{:02x}{:02x}{:02x}", kVmIdPrefix, key.substr(0, 8), r[0], r[1], r[2], r[3]);
}

void WarmPool::RefillLoop() {
  auto next_scan = Clock::now() + o_.scan_interval;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    StartBootsLocked();
    cv_.wait_until(lock, std::min({next_scan, Clock::now() + milliseconds(1000), NextHoldbackEndLocked()}));
    if (stopping_) break;
    lock.unlock();
    JoinBoots(/*all=*/false);
    ReapDead();
    ExpireShapes();
    if (Clock::now() >= next_scan) {
      RekeyShapes();
      ScanStateDir(/*at_start=*/false);
      next_scan = Clock::now() + o_.scan_interval;
    }
    lock.lock();
  }
}

uint32_t WarmPool::IdleTotalLocked() const {
  uint32_t n = 0;
  for (const auto& [key, s] : shapes_) n += static_cast<uint32_t>(s.ready.size()) + s.booting;
  return n;
}

uint32_t WarmPool::DropDueHoldbacks(ShapeState& s, Clock::time_point now) {
  while (!s.held_back.empty() && s.held_back.front() <= now) s.held_back.pop_front();
  return static_cast<uint32_t>(s.held_back.size());
}

Clock::time_point WarmPool::NextHoldbackEndLocked() const {
  auto next = Clock::time_point::max();
  for (const auto& [key, s] : shapes_)
    if (!s.held_back.empty()) next = std::min(next, s.held_back.front());
  return next;
}

void WarmPool::StartBootsLocked() {
  if (draining_ || stopping_) return;
  const auto now = Clock::now();
  const uint32_t max = o_.config.pool.max_parallel_boots;
  uint32_t idle = IdleTotalLocked();
  // The configured shape first, then the others, under one cap of idle VMs.
  std::vector<std::pair<const std::string*, ShapeState*>> order;
  for (auto& [key, s] : shapes_)
    if (s.configured) order.emplace_back(&key, &s);
  for (auto& [key, s] : shapes_)
    if (!s.configured) order.emplace_back(&key, &s);
  for (auto [key_ptr, s_ptr] : order) {
    const std::string& key = *key_ptr;
    ShapeState& s = *s_ptr;
    // A claimed VM's pod is starting: its refill waits (pool.refill_holdback_ms).
    const uint32_t held = DropDueHoldbacks(s, now);
    const bool wanted = s.ready.size() + s.booting + held < s.target && idle < o_.config.pool.max_idle;
    // A template first: it takes a boot's time once, then each VM is a restore.
    if (UseTemplates() && wanted && !s.tpl && !s.tpl_building && now >= s.tpl_next_build && booting_total_ < max) {
      const uint64_t seq = next_boot_seq_++;
      s.tpl_building = true;
      ++booting_total_;
      kWarmPoolLog.Info("building the template of shape {} ({})", key, Describe(s.shape));
      boot_threads_[seq] = std::thread([this, seq, key = key, shape = s.shape] { BuildTemplateFor(seq, key, shape); });
    }
    while (booting_total_ < max && s.ready.size() + s.booting + held < s.target && idle < o_.config.pool.max_idle &&
           now >= s.next_boot) {
      const uint64_t seq = next_boot_seq_++;
      const std::string id = NewVmId(key);
      ++s.booting;
      ++idle;
      ++booting_total_;
      booting_ids_.insert(id);
      kWarmPoolLog.Info("{} {} for shape {} ({} ready, {} under way, target {})", s.tpl ? "restoring" : "booting", id,
                        key, s.ready.size(), s.booting, s.target);
      boot_threads_[seq] = std::thread(
          [this, seq, key = key, shape = s.shape, id, tpl = s.tpl] { BootOne(seq, key, shape, id, tpl); });
    }
  }
}

// A refill thread: what it spawns (QEMU, virtiofsd, the vsock back end)
// inherits its nice value, so a refill never slows a pod that starts.
void WarmPool::YieldToClaims() {
  if (Status st = SetThreadNice(kRefillNice); !st.ok())
    kWarmPoolLog.Warn("refills run at the pods' CPU priority: {}", st.ToString());
}

// What a guest still had to do when it was paused, it does when its pod
// resumes it, in the middle of that pod's start. A clone has more of it
// than a booted VM (the guest's answer to the devices plugged in at the
// restore and to its rehearsal, timers that were due in the template):
// measured, a StartContainer or CreateContainer of 1 in 8 to 5 in 8 warm
// pods on template clones waited 45-100 ms for the guest to read the call
// (capsule-vsockd's packet trace: delivered at once, read late; the agent's
// own handling as usual), where pods on booted VMs never did; with the
// clone left running 1.5 s before its pause, none of 8 did. So a ready VM
// runs until its QEMU has been about idle for kSettleQuiet. A guest that
// never goes quiet is paused after kSettleMax all the same.
void WarmPool::Settle(vm::SandboxVm& vm) {
  const auto t0 = Clock::now();
  auto first = ThreadsBusyNs(vm.vmm_pid());
  if (!first.ok()) return;  // QEMU is gone: the pause that follows says so
  // (when, busy ns) samples spanning the last kSettleQuiet.
  std::deque<std::pair<Clock::time_point, uint64_t>> window = {{t0, *first}};
  bool quiet = false, cut_short = false;
  WaitUntil(
      [&] {
        {
          std::lock_guard lock(mu_);
          cut_short = stopping_ || draining_;
        }
        auto busy = ThreadsBusyNs(vm.vmm_pid());
        cut_short = cut_short || !busy.ok();
        if (cut_short) return true;
        window.emplace_back(Clock::now(), *busy);
        while (window.size() > 2 && window.back().first - window[1].first >= kSettleQuiet) window.pop_front();
        // Threads that exit take their time with them: never a negative count.
        const uint64_t used =
            window.back().second > window.front().second ? window.back().second - window.front().second : 0;
        quiet = window.back().first - window.front().first >= kSettleQuiet && used <= kSettleBusyNs;
        return quiet;
      },
      kSettleMax, BackoffPolicy{kSettleStep, kSettleStep});
  if (cut_short) return;
  const uint64_t last = window.back().second;
  const double busy_ms = static_cast<double>(last > *first ? last - *first : 0) / 1e6;
  if (quiet) {
    kWarmPoolLog.Info("{}: its guest went quiet {:.0f} ms after the rehearsal (QEMU busy {:.0f} ms meanwhile)", vm.id(),
                      MsSince(t0), busy_ms);
  } else {
    kWarmPoolLog.Warn("{}: its guest was still busy {:.0f} ms after the rehearsal (QEMU busy {:.0f} ms); pausing it "
                      "anyway", vm.id(), MsSince(t0), busy_ms);
  }
}

Status WarmPool::Rehearse(vm::SandboxVm& vm) const {
  agentclient::v1::RehearseRequest req;
  // A dense VM's containers come on erofs disks: their modules load now.
  if (o_.config.guest.device_set == config::DeviceSet::kDense) req.add_storage_drivers("blk");
  if (const auto nic = vm.boot_nic()) req.set_boot_nic_mac(nic->mac);
  // The shared fs is the VM's, not the pod's, and the pod's /dev/shm is
  // the same for every pod: both mounted now, not at the claim.
  if (vm.has_shared_fs()) *req.add_storages() = vm.SharedFsStorage();
  *req.add_storages() = vm::SandboxVm::PodShmStorage();
  // The host's clock and fresh entropy, as a claim sends them: applied now
  // too, so the VM idles fresh and the claim's own are not that code's
  // first run.
  RETURN_IF_ERROR_CTX(vm::SandboxVm::HostFreshness(req.mutable_time(), req.mutable_randomness()), vm.id());
  ASSIGN_OR_RETURN(agentclient::AgentClient * agent, vm.agent());
  auto done = agent->Rehearse(req, kRehearseTimeout);
  if (!done.ok() && done.status().code() == Code::kUnimplemented) {
    // An agent without an engine or a network: nothing of it to play.
    kWarmPoolLog.Warn("{}: no rehearsal (its first pod pays for that code's first run): {}", vm.id(),
                      done.status().ToString());
    return Status::Ok();
  }
  if (!done.ok()) return std::move(done).status();
  std::string ahead;
  for (const auto& s : req.storages()) ahead += (ahead.empty() ? "" : ", ") + s.mount_point();
  kWarmPoolLog.Info("{}: rehearsed a container's start in {} ms in the guest{}, mounted ahead of the pod: {}", vm.id(),
                    done->elapsed_ms(), req.boot_nic_mac().empty() ? "" : ", with the boot NIC's take-over", ahead);
  return Status::Ok();
}

UniqueFd WarmPool::OpenAgentStream(vm::SandboxVm& vm) const {
  if (!handover_) return UniqueFd();
  const auto t0 = Clock::now();
  auto stream = agentclient::OpenAgentStream(
      [&vm](milliseconds t) { return vm.DialGuest(guest_abi::kAgentVsockPort, t); }, vm.vmm().agent_token(),
      kAgentStreamTimeout);
  if (!stream.ok()) {
    kWarmPoolLog.Warn("{}: no agent stream for its claimant (it will dial): {}", vm.id(), stream.status().ToString());
    return UniqueFd();
  }
  kWarmPoolLog.Debug("{}: agent stream for its claimant opened in {:.1f} ms", vm.id(), MsSince(t0));
  return std::move(*stream);
}

void WarmPool::BootOne(uint64_t seq, std::string key, Shape shape, std::string vm_id,
                       std::optional<vm::VmTemplate> tpl) {
  YieldToClaims();
  vm::SandboxVmSpec spec;
  spec.id = vm_id;
  spec.vcpus = shape.vcpus;
  spec.memory_mib = shape.memory_mib;
  if (refill_cgroup_) spec.cgroup = RefillCgroup();
  auto t0 = Clock::now();
  Result<vm::SandboxVmPtr> booted = Unavailable("no VM");
  UniqueFd agent_stream;
  bool restored = false;
  if (tpl) {
    booted = vm::SandboxVm::Restore(o_.config, spec, *tpl);
    restored = booted.ok();
    if (!booted.ok()) {
      kWarmPoolLog.Warn("{}: the clone of template {} failed, booting instead: {}", vm_id, tpl->key,
                        booted.status().ToString());
      std::lock_guard lock(mu_);
      if (auto it = shapes_.find(key); it != shapes_.end()) CloneFailedLocked(it->second, booted.status());
    }
  }
  if (!restored) {
    t0 = Clock::now();
    booted = vm::SandboxVm::Boot(o_.config, spec);
  }
  if (booted.ok()) {
    // Idle VMs sit paused, in the pool's cgroup; the pool's mark says whose
    // the VM is.
    // A VM that could not play a pod's start (or put its NIC back after)
    // is not one to offer.
    Status st = Rehearse(**booted).WithContext("rehearsal");
    if (st.ok()) agent_stream = OpenAgentStream(**booted);
    if (st.ok()) Settle(**booted);
    if (st.ok()) st = (*booted)->vmm().Pause();
    if (st.ok() && cgroup_) st = ProcessCgroup::Join(o_.config.pool.cgroup, (*booted)->HostPids()).status();
    if (st.ok()) st = WritePoolRecord((*booted)->state_dir(), PoolRecord{key, NowUnixMs(), false, "", {}, 0});
    if (!st.ok()) {
      StopVm(std::move(*booted), "could not be made ready");
      booted = std::move(st).WithContext("make " + vm_id + " ready");
    }
  }
  BootFinished(key, std::move(booted), MsSince(t0), restored, std::move(agent_stream));
  std::lock_guard lock(mu_);
  booting_ids_.erase(vm_id);  // a failed boot's too (its dir went with it)
  finished_boots_.push_back(seq);
  cv_.notify_all();
}

void WarmPool::CloneFailedLocked(ShapeState& s, const Status& why) {
  ++s.clone_failures;
  s.tpl_last_failure = "clone: " + why.ToString();
  if (++s.clone_failures_in_row < kMaxCloneFailuresInRow || !s.tpl) return;
  kWarmPoolLog.Error(
      "{} clones of template {} failed in a row: discarding it (the shape refills by boot until a new one "
      "is built)",
      s.clone_failures_in_row, s.tpl->key);
  const std::string dir = s.tpl->dir;
  s.tpl.reset();
  s.clone_failures_in_row = 0;
  s.tpl_backoff = Backoffs().After(s.tpl_backoff);
  s.tpl_next_build = Clock::now() + s.tpl_backoff;
  if (Status st = vm::RemoveTemplate(o_.config, dir); !st.ok())
    kWarmPoolLog.Warn("remove template {}: {}", dir, st.ToString());
}

void WarmPool::BuildTemplateFor(uint64_t seq, std::string key, Shape shape) {
  YieldToClaims();
  TemplateBuilt(key, vm::BuildTemplate(o_.config, TemplatesRoot(), vm::TemplateSpec{key, shape.vcpus, shape.memory_mib}));
  std::lock_guard lock(mu_);
  finished_boots_.push_back(seq);
  cv_.notify_all();
}

void WarmPool::TemplateBuilt(const std::string& key, Result<vm::VmTemplate> built) {
  std::unique_lock lock(mu_);
  --booting_total_;
  auto it = shapes_.find(key);
  if (it == shapes_.end()) {
    lock.unlock();
    // Re-keyed while it was built: its image is not the shape's any more.
    if (built.ok()) (void)vm::RemoveTemplate(o_.config, built->dir);
    return;
  }
  ShapeState& s = it->second;
  s.tpl_building = false;
  if (!built.ok()) {
    ++s.tpl_failures;
    s.tpl_last_failure = "build: " + built.status().ToString();
    s.tpl_backoff = Backoffs().After(s.tpl_backoff);
    s.tpl_next_build = Clock::now() + s.tpl_backoff;
    kWarmPoolLog.Error("template of shape {} failed (next try in {} ms; VMs are booted meanwhile): {}", key,
                       s.tpl_backoff.count(), built.status().ToString());
    return;
  }
  ++s.tpl_builds;
  s.tpl_backoff = milliseconds(0);
  s.clone_failures_in_row = 0;
  s.tpl = std::move(*built);
  kWarmPoolLog.Info("template of shape {} ready in {:.0f} ms: the shape refills by restoring clones", key,
                    s.tpl->build_ms);
}

void WarmPool::BootFinished(const std::string& key, Result<vm::SandboxVmPtr> booted, double ms, bool restored,
                            UniqueFd agent_stream) {
  std::unique_lock lock(mu_);
  auto found = shapes_.find(key);
  if (found == shapes_.end()) {
    // The shape was re-keyed meanwhile: this VM runs the old image.
    --booting_total_;
    if (booted.ok()) booting_ids_.erase((*booted)->id());
    lock.unlock();
    if (booted.ok()) StopVm(std::move(*booted), "its shape's image changed while it was made");
    return;
  }
  ShapeState& s = found->second;
  --s.booting;
  --booting_total_;
  if (!booted.ok()) {
    ++s.failures;
    s.last_failure = booted.status().ToString();
    s.backoff = Backoffs().After(s.backoff);
    s.next_boot = Clock::now() + s.backoff;
    kWarmPoolLog.Error("boot for shape {} failed after {:.0f} ms (next try in {} ms): {}", key, ms, s.backoff.count(),
                       s.last_failure);
    return;
  }
  vm::SandboxVmPtr v = std::move(*booted);
  booting_ids_.erase(v->id());
  if (draining_ || stopping_ || s.ready.size() >= s.target || IdleTotalLocked() >= o_.config.pool.max_idle) {
    lock.unlock();
    StopVm(std::move(v), "not needed any more (draining, resized, or pool.max_idle reached)");
    return;
  }
  s.backoff = milliseconds(0);
  accelerator_ = std::string(hypervisor::AcceleratorName(v->accelerator()));
  std::deque<double>& samples = restored ? s.clone_ms : s.boot_ms;
  if (restored) {
    ++s.clones;
    s.clone_failures_in_row = 0;
  } else {
    ++s.boots;
  }
  samples.push_back(ms);
  if (samples.size() > kBootSamples) samples.pop_front();
  ReadyVm r{std::move(v), NowUnixMs(), std::make_shared<std::atomic<bool>>(false), std::move(agent_stream)};
  r.vm->OnExit([died = r.died, this](const hypervisor::VmExit&) {
    died->store(true);
    cv_.notify_all();
  });
  kWarmPoolLog.Info("{} ready in {:.0f} ms by {} (shape {}: {} ready)", r.vm->id(), ms, restored ? "restore" : "boot",
                    key, s.ready.size() + 1);
  s.ready.push_back(std::move(r));
}

void WarmPool::JoinBoots(bool all) {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu_);
    if (all) {
      for (auto& [seq, t] : boot_threads_) done.push_back(std::move(t));
      boot_threads_.clear();
    }
    for (uint64_t seq : finished_boots_) {
      auto it = boot_threads_.find(seq);
      if (it == boot_threads_.end()) continue;
      done.push_back(std::move(it->second));
      boot_threads_.erase(it);
    }
    finished_boots_.clear();
  }
  for (auto& t : done) t.join();
}

void WarmPool::ReapDead() {
  std::vector<vm::SandboxVmPtr> dead;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, s] : shapes_) {
      for (auto it = s.ready.begin(); it != s.ready.end();) {
        if (it->died->load()) {
          dead.push_back(std::move(it->vm));
          it = s.ready.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
  for (auto& v : dead) StopVm(std::move(v), "its VMM exited while idle");
}

void WarmPool::StopVm(vm::SandboxVmPtr v, std::string_view why) {
  if (!v) return;
  const std::string id = v->id();
  kWarmPoolLog.Info("stopping {}: {}", id, why);
  // No pod ever ran in it (or its pod is gone): nothing in the guest needs
  // a clean power-off, so QEMU quits at once, paused or not.
  if (Status st = v->Stop(milliseconds(0)); !st.ok()) kWarmPoolLog.Warn("stop {}: {}", id, st.ToString());
}

void WarmPool::StopVms(std::vector<std::pair<vm::SandboxVmPtr, std::string>> vms) {
  std::vector<std::thread> stoppers;
  stoppers.reserve(vms.size());
  for (auto& [v, why] : vms)
    stoppers.emplace_back([this, v = std::move(v), why = std::move(why)]() mutable { StopVm(std::move(v), why); });
  for (auto& t : stoppers) t.join();
}

void WarmPool::PruneTemplates(const std::string& default_key) {
  const std::string root = TemplatesRoot();
  for (const std::string& name : ListDir(root)) {
    const std::string dir = root + "/" + name;
    std::string why;
    if (name != default_key) {
      why = name.find('.') != std::string::npos ? "an unfinished build" : "not of a shape this pool keeps (or stale)";
    } else if (!UseTemplates()) {
      why = "pool.refill is boot";
    } else {
      auto t = vm::LoadTemplate(dir);
      if (t.ok() && o_.config.guest.device_set == config::DeviceSet::kDense) {
        if (Status st = vm::AttachSealedRam(*t); !st.ok()) t = std::move(st);
      }
      if (t.ok()) {
        kWarmPoolLog.Info("template {} (built {} ms ago) serves shape {}", dir, NowUnixMs() - t->created_unix_ms, name);
        std::lock_guard lock(mu_);
        shapes_[default_key].tpl = std::move(*t);
        continue;
      }
      why = "unreadable: " + t.status().ToString();
    }
    kWarmPoolLog.Info("removing template {}: {}", dir, why);
    if (Status st = vm::RemoveTemplate(o_.config, dir); !st.ok())
      kWarmPoolLog.Warn("remove {}: {}", dir, st.ToString());
  }
}

void WarmPool::RekeyShapes() {
  std::vector<std::pair<std::string, Shape>> shapes;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, s] : shapes_) shapes.emplace_back(key, s.shape);
  }
  std::vector<std::pair<std::string, std::string>> changed;  // old key, new key
  for (const auto& [key, shape] : shapes) {
    auto now = ShapeKey(o_.config, shape);
    if (!now.ok()) {
      kWarmPoolLog.Warn("shape {}: {}", key, now.status().ToString());
      continue;
    }
    if (*now != key) changed.emplace_back(key, *now);
  }
  if (changed.empty()) return;
  std::vector<vm::SandboxVmPtr> stale;
  std::vector<std::string> stale_templates;
  {
    std::lock_guard lock(mu_);
    for (const auto& [old_key, new_key] : changed) {
      auto it = shapes_.find(old_key);
      if (it == shapes_.end() || shapes_.count(new_key) != 0) continue;
      ShapeState s = std::move(it->second);
      shapes_.erase(it);
      for (auto& r : s.ready) stale.push_back(std::move(r.vm));
      s.ready.clear();
      if (s.tpl) stale_templates.push_back(s.tpl->dir);
      s.tpl.reset();
      s.tpl_building = false;  // a build in flight finds its key gone and deletes what it made
      s.tpl_next_build = {};
      // Boots in flight count against the old key; they stop what they made.
      s.booting = 0;
      kWarmPoolLog.Info("shape {} ({}) changed its image: now {}; its idle VMs and its template go", old_key,
                        Describe(s.shape), new_key);
      shapes_.emplace(new_key, std::move(s));
    }
  }
  cv_.notify_all();
  for (auto& v : stale) StopVm(std::move(v), "its shape's image changed");
  for (const auto& dir : stale_templates)
    if (Status st = vm::RemoveTemplate(o_.config, dir); !st.ok())
      kWarmPoolLog.Warn("remove {}: {}", dir, st.ToString());
}

void WarmPool::ExpireShapes() {
  const auto now = Clock::now();
  const auto expiry = std::chrono::seconds(o_.config.pool.shape_expiry_s);
  std::vector<std::pair<vm::SandboxVmPtr, std::string>> idle;
  std::vector<std::string> templates;
  {
    std::lock_guard lock(mu_);
    for (auto it = shapes_.begin(); it != shapes_.end();) {
      ShapeState& s = it->second;
      if (s.configured || now - s.last_claim < expiry) {
        ++it;
        continue;
      }
      kWarmPoolLog.Info("shape {} ({}) had no claim for {} s: forgetting it, {} idle VM(s) and {}", it->first,
                        Describe(s.shape), o_.config.pool.shape_expiry_s, s.ready.size(),
                        s.tpl ? "its template" : "no template");
      for (auto& r : s.ready) idle.emplace_back(std::move(r.vm), "its shape expired");
      if (s.tpl) templates.push_back(s.tpl->dir);
      // Boots and builds in flight find the shape gone and stop what they made.
      it = shapes_.erase(it);
    }
  }
  if (idle.empty() && templates.empty()) return;
  cv_.notify_all();
  StopVms(std::move(idle));
  for (const auto& dir : templates)
    if (Status st = vm::RemoveTemplate(o_.config, dir); !st.ok())
      kWarmPoolLog.Warn("remove {}: {}", dir, st.ToString());
}

void WarmPool::ScanStateDir(bool at_start) {
  std::vector<std::pair<vm::SandboxVmPtr, std::string>> left;
  for (const std::string& dir : VmDirs(o_.config.runtime.state_dir)) {
    const std::string id = dir.substr(dir.rfind('/') + 1);
    {
      std::lock_guard lock(mu_);
      if (booting_ids_.count(id) != 0) continue;
      bool ours = false;
      for (const auto& [key, s] : shapes_)
        for (const auto& r : s.ready) ours = ours || r.vm->id() == id;
      if (ours) continue;
    }
    auto record = ReadPoolRecord(dir);
    std::string why;
    if (record.ok() && !record->claimed) {
      if (!at_start) continue;  // another pool's? only ours at start: this daemon's predecessor
      why = "an idle VM left by an earlier pool daemon";
    } else if (record.ok()) {
      const int64_t age_ms = NowUnixMs() - record->claimed_unix_ms;
      const bool alive = ClaimantAlive(record->claimant);
      if (alive && age_ms < o_.claim_grace.count()) continue;
      why = alive ? fmt::format("claimed {} ms ago for sandbox {} but never adopted", age_ms, record->sandbox_id)
                  : fmt::format("claimed for sandbox {} by pid {}, which died before adopting it", record->sandbox_id,
                                record->claimant.pid);
    } else if (record.status().code() == Code::kNotFound && at_start && id.rfind(kVmIdPrefix, 0) == 0) {
      why = "a boot an earlier pool daemon did not finish";
    } else {
      continue;  // not the pool's (a shim's VM, or already adopted)
    }
    // Adopt takes vm.lock: a claimant that adopted it meanwhile keeps it.
    auto v = vm::SandboxVm::Adopt(o_.config, dir);
    if (!v.ok()) {
      if (v.status().code() != Code::kFailedPrecondition)
        kWarmPoolLog.Warn("cannot reap {} ({}): {}", id, why, v.status().ToString());
      continue;
    }
    left.emplace_back(std::move(*v), std::move(why));
  }
  StopVms(std::move(left));
}

Result<std::optional<Claimed>> WarmPool::Claim(const Shape& requested, const Claimant& who, std::string* miss) {
  const auto t0 = Clock::now();
  const Shape shape = Resolve(o_.config, requested);
  ASSIGN_OR_RETURN(std::string key, ShapeKey(o_.config, shape));
  ReadyVm r;
  std::optional<vm::VmTemplate> restore;  // no ready VM: a clone made for this claim
  std::string restore_id;
  {
    std::unique_lock lock(mu_);
    auto it = shapes_.find(key);
    if (it == shapes_.end()) {
      if (shapes_.size() >= kMaxShapes) {
        *miss = fmt::format("no VM of shape {} ({}) and the pool keeps at most {} shapes", key, Describe(shape),
                            kMaxShapes);
        return std::optional<Claimed>();
      }
      ShapeState& s = shapes_[key];
      s.shape = shape;
      s.last_claim = Clock::now();  // asked for: kept for pool.shape_expiry_s from now
      s.target = draining_ ? 0 : size_;
      cv_.notify_all();
      *miss = fmt::format("no VM of shape {} ({}) yet: the pool keeps {} from now on", key, Describe(shape), s.target);
      return std::optional<Claimed>();
    }
    ShapeState* sp = &it->second;
    auto first_live = [&] {
      return std::find_if(sp->ready.begin(), sp->ready.end(), [](const ReadyVm& v) { return !v.died->load(); });
    };
    // The oldest live one; dead ones are left to the refill thread's reaping.
    auto live = first_live();
    if (live == sp->ready.end() && !sp->held_back.empty()) {
      // Refills held back for earlier claims' pods: this pod needs one now.
      sp->held_back.clear();
      StartBootsLocked();
    }
    if (live == sp->ready.end() && sp->tpl && sp->booting > 0 && o_.config.pool.claim_wait_ms > 0) {
      // A clone under way ends well before a cold boot would: wait for it.
      const auto deadline = Clock::now() + milliseconds(o_.config.pool.claim_wait_ms);
      cv_.wait_until(lock, deadline, [&] {
        auto again = shapes_.find(key);
        if (stopping_ || draining_ || again == shapes_.end()) return true;
        sp = &again->second;
        return first_live() != sp->ready.end() || sp->booting == 0;
      });
      if (auto again = shapes_.find(key); again != shapes_.end()) {
        sp = &again->second;
        live = first_live();
        if (live != sp->ready.end())
          kWarmPoolLog.Info("claim for sandbox {} waited {:.0f} ms for a clone", who.sandbox_id, MsSince(t0));
      } else {
        *miss = fmt::format("shape {} changed its image while the claim waited", key);
        return std::optional<Claimed>();
      }
    }
    ShapeState& s = *sp;
    s.last_claim = Clock::now();
    if (live == s.ready.end() && UseTemplates() && s.tpl && !draining_ && !stopping_) {
      // A restore takes a fraction of a cold boot (a dense clone's even
      // less): the claim makes its own clone, at the pods' priority.
      restore = s.tpl;
      restore_id = NewVmId(key);
      booting_ids_.insert(restore_id);  // not an orphan to reap while it is made
    } else if (live == s.ready.end()) {
      *miss = fmt::format("no ready VM of shape {} ({}): {} booting, target {}", key, Describe(shape), s.booting,
                          s.target);
      return std::optional<Claimed>();
    } else {
      r = std::move(*live);
      s.ready.erase(live);
      ++s.claimed;
      if (o_.config.pool.refill_holdback_ms > 0)
        s.held_back.push_back(Clock::now() + milliseconds(o_.config.pool.refill_holdback_ms));
    }
  }
  if (restore) {
    vm::SandboxVmSpec spec;
    spec.id = restore_id;
    spec.vcpus = shape.vcpus;
    spec.memory_mib = shape.memory_mib;
    const auto r0 = Clock::now();
    auto made = vm::SandboxVm::Restore(o_.config, spec, *restore);
    {
      std::lock_guard lock(mu_);
      booting_ids_.erase(restore_id);
      if (auto it = shapes_.find(key); it != shapes_.end()) {
        if (made.ok()) {
          ++it->second.claimed;
          ++it->second.clones;
          it->second.clone_ms.push_back(MsSince(r0));
          if (it->second.clone_ms.size() > kBootSamples) it->second.clone_ms.pop_front();
        } else {
          CloneFailedLocked(it->second, made.status());
        }
      }
    }
    if (!made.ok()) {
      *miss = fmt::format("no ready VM of shape {} and the clone made for the claim failed: {}", key,
                          made.status().ToString());
      return std::optional<Claimed>();
    }
    kWarmPoolLog.Info("no ready VM of shape {}: {} restored for sandbox {} in {:.0f} ms", key, restore_id,
                      who.sandbox_id, MsSince(r0));
    r.vm = std::move(*made);
    r.ready_since_ms = NowUnixMs();
  }
  const std::string id = r.vm->id();
  const std::string dir = r.vm->state_dir();
  // Mark it claimed first: from here a daemon crash leaves it to the
  // claimant, and a claimant that never adopts it is reaped after the grace.
  Status st = WritePoolRecord(dir, PoolRecord{key, r.ready_since_ms, true, who.sandbox_id, who.process, NowUnixMs()});
  if (st.ok() && o_.after_claim_recorded) o_.after_claim_recorded(id);
  // Made at the refills' priority; the pod's VM runs at the normal one.
  if (Status nice = restore ? Status::Ok() : SetProcessesNice(r.vm->HostPids(), 0); !nice.ok())
    kWarmPoolLog.Warn("{} keeps the refills' CPU priority: {}", id, nice.ToString());
  if (st.ok() && !restore) st = r.vm->vmm().Resume().WithContext("resume " + id);  // a claim's own clone runs
  if (st.ok()) st = r.vm->Detach();
  // The refill starts only now: its boot forks children, and a child forked
  // while this VM's lock was still open would hold that lock until its exec.
  cv_.notify_all();
  if (!st.ok()) {
    StopVm(std::move(r.vm), "its hand-over failed");
    *miss = "the hand-over of " + id + " failed: " + st.ToString();
    return std::optional<Claimed>();
  }
  Claimed c{id, dir, key, NowUnixMs() - r.ready_since_ms, MsSince(t0)};
  // Held until the claimant takes it, at most as long as the claim waits
  // for its adoption.
  if (handover_ && r.agent_stream)
    c.agent_stream = handover_->Offer(id, who.process, std::move(r.agent_stream), o_.claim_grace);
  kWarmPoolLog.Info("{} claimed for sandbox {} {} (pid {}) after {} ms idle; hand-over {:.2f} ms", id, who.sandbox_id,
                    who.pod, who.process.pid, c.idle_ms, c.claim_ms);
  return std::optional<Claimed>(std::move(c));
}

Status WarmPool::Release(const std::string& vm_id) {
  if (vm_id.find('/') != std::string::npos || vm_id.rfind(kVmIdPrefix, 0) != 0)
    return InvalidArgument("vm_id '" + vm_id + "' is not a pool VM id");
  const std::string dir = vm::SandboxVm::StateDirFor(o_.config, vm_id);
  auto record = ReadPoolRecord(dir);
  if (!record.ok() || !record->claimed) return NotFound("no claimed, unadopted pool VM " + vm_id);
  if (handover_) handover_->Withdraw(vm_id);
  auto v = vm::SandboxVm::Adopt(o_.config, dir);
  if (!v.ok()) return std::move(v).status().WithContext("release " + vm_id);
  StopVm(std::move(*v), "released by its claimant");
  return Status::Ok();
}

PoolStatus WarmPool::GetStatus() const {
  PoolStatus out;
  // What /proc and the template's memfd say is read after the lock: a
  // smaps_rollup walks a VM's page tables, and claims wait on this lock.
  struct Costs {
    std::vector<pid_t> vmms;
    std::shared_ptr<const UniqueFd> sealed;
  };
  std::vector<Costs> costs;
  std::unique_lock lock(mu_);
  out.max_parallel_boots = o_.config.pool.max_parallel_boots;
  out.state_dir = o_.config.runtime.state_dir;
  out.draining = draining_;
  out.accelerator = accelerator_;
  for (const auto& [key, s] : shapes_) {
    ShapeStatus st;
    st.key = key;
    st.shape = s.shape;
    st.target = s.target;
    st.ready = static_cast<uint32_t>(s.ready.size());
    st.booting = s.booting;
    st.claimed = s.claimed;
    st.boots = s.boots;
    st.boot_failures = s.failures;
    st.last_failure = s.last_failure;
    st.boot_p50_ms = Median(s.boot_ms);
    st.boot_last_ms = s.boot_ms.empty() ? 0 : s.boot_ms.back();
    st.backoff_ms = static_cast<uint64_t>(s.backoff.count());
    const auto now = Clock::now();
    const auto due_later = [&](const Clock::time_point& due) { return due > now; };
    st.refills_held_back = static_cast<uint32_t>(std::count_if(s.held_back.begin(), s.held_back.end(), due_later));
    st.refill = UseTemplates() && s.tpl ? "template" : "boot";
    if (s.tpl) {
      st.template_key = s.tpl->key;
      st.template_created_unix_ms = s.tpl->created_unix_ms;
      st.template_build_ms = s.tpl->build_ms;
    }
    st.template_building = s.tpl_building;
    st.template_builds = s.tpl_builds;
    st.template_failures = s.tpl_failures;
    st.template_last_failure = s.tpl_last_failure;
    st.clones = s.clones;
    st.clone_failures = s.clone_failures;
    st.clone_p50_ms = Median(s.clone_ms);
    st.clone_last_ms = s.clone_ms.empty() ? 0 : s.clone_ms.back();
    st.device_set = std::string(config::DeviceSetName(o_.config.guest.device_set));
    Costs& c = costs.emplace_back();
    for (const auto& r : s.ready) c.vmms.push_back(r.vm->vmm_pid());
    if (s.tpl) c.sealed = s.tpl->sealed_ram;
    out.shapes.push_back(std::move(st));
  }
  lock.unlock();
  for (size_t i = 0; i < out.shapes.size(); ++i) {
    ShapeStatus& st = out.shapes[i];
    const Costs& c = costs[i];
    uint64_t rss = 0, own = 0;
    for (pid_t pid : c.vmms) {
      rss += RssBytes(pid);
      own += ReadProcessMemory(pid).value_or(ProcessMemory{}).own_bytes;
    }
    st.idle_vm_rss_bytes = c.vmms.empty() ? 0 : rss / c.vmms.size();
    st.idle_vm_own_bytes = c.vmms.empty() ? 0 : own / c.vmms.size();
    struct stat sealed{};
    if (c.sealed && ::fstat(c.sealed->get(), &sealed) == 0)
      st.template_shared_bytes = static_cast<uint64_t>(sealed.st_blocks) * 512;
  }
  return out;
}

void WarmPool::Resize(uint32_t size) {
  std::vector<vm::SandboxVmPtr> surplus;
  {
    std::lock_guard lock(mu_);
    size_ = size;
    draining_ = false;
    for (auto& [key, s] : shapes_) {
      s.target = size;
      s.next_boot = {};
      while (s.ready.size() > size) {
        surplus.push_back(std::move(s.ready.back().vm));
        s.ready.pop_back();
      }
    }
  }
  cv_.notify_all();
  kWarmPoolLog.Info("resized to {} ready VM(s) per shape", size);
  for (auto& v : surplus) StopVm(std::move(v), "the pool was resized");
}

uint32_t WarmPool::Drain() {
  std::vector<vm::SandboxVmPtr> idle;
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    for (auto& [key, s] : shapes_) {
      s.target = 0;
      for (auto& r : s.ready) idle.push_back(std::move(r.vm));
      s.ready.clear();
    }
  }
  kWarmPoolLog.Info("draining {} idle VM(s)", idle.size());
  const auto n = static_cast<uint32_t>(idle.size());
  std::vector<std::pair<vm::SandboxVmPtr, std::string>> stopping;
  for (auto& v : idle) stopping.emplace_back(std::move(v), "the pool is draining");
  StopVms(std::move(stopping));
  // Boots in flight stop themselves when they finish (BootFinished), on
  // their own threads and after counting themselves out: join those too,
  // so no VM of the pool outlives the drain.
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return booting_total_ == 0; });
  }
  JoinBoots(/*all=*/true);
  return n;
}

}  // namespace capsule::pool
