// See warm_pool.h.
#include "runtime/pool/warm_pool.h"

#include <dirent.h>
#include <sys/random.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "runtime/common/file_util.h"
#include "runtime/common/logging.h"
#include "runtime/pool/pool_record.h"

namespace capsule::pool {
namespace {

const log::Logger kLog("pool");
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// An idle VM's guest was paused: it powers off at once when resumed for
// DestroySandbox, and a stuck one is killed after this.
constexpr milliseconds kStopGrace{2000};

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

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
  auto status = ReadFile(fmt::format("/proc/{}/status", pid));
  if (!status.ok()) return 0;
  const auto at = status->find("VmRSS:");
  if (at == std::string::npos) return 0;
  return std::strtoull(status->c_str() + at + 6, nullptr, 10) * 1024;
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
  }
  p->ScanStateDir(/*at_start=*/true);
  {
    std::lock_guard lock(p->mu_);
    ShapeState& s = p->shapes_[key];
    s.shape = shape;
    s.target = p->size_;
  }
  kLog.Info("keeping {} ready VM(s) of {} (shape {}), at most {} boot(s) at once, state in {}", p->size_,
            Describe(shape), key, p->o_.config.pool.max_parallel_boots, p->o_.config.runtime.state_dir);
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
  JoinFinishedBoots();
  // Ours alone (pool.cgroup), even when a killed predecessor made it.
  if (cgroup_) cgroup_->RemoveOwnDirs();
  kLog.Info("pool stopped ({} idle VM(s) stopped)", stopped);
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
    cv_.wait_until(lock, std::min(next_scan, Clock::now() + milliseconds(1000)));
    if (stopping_) break;
    lock.unlock();
    JoinFinishedBoots();
    ReapDead();
    if (Clock::now() >= next_scan) {
      ScanStateDir(/*at_start=*/false);
      next_scan = Clock::now() + o_.scan_interval;
    }
    lock.lock();
  }
}

void WarmPool::StartBootsLocked() {
  if (draining_ || stopping_) return;
  const auto now = Clock::now();
  for (auto& [key, s] : shapes_) {
    while (booting_total_ < o_.config.pool.max_parallel_boots && s.ready.size() + s.booting < s.target &&
           now >= s.next_boot) {
      const uint64_t seq = next_boot_seq_++;
      const std::string id = NewVmId(key);
      ++s.booting;
      ++booting_total_;
      booting_ids_.insert(id);
      kLog.Info("booting {} for shape {} ({} ready, {} booting, target {})", id, key, s.ready.size(),
                s.booting, s.target);
      boot_threads_[seq] = std::thread([this, seq, key = key, shape = s.shape, id] { BootOne(seq, key, shape, id); });
    }
  }
}

void WarmPool::BootOne(uint64_t seq, std::string key, Shape shape, std::string vm_id) {
  vm::SandboxVmSpec spec;
  spec.id = vm_id;
  spec.vcpus = shape.vcpus;
  spec.memory_mib = shape.memory_mib;
  const auto t0 = Clock::now();
  Result<vm::SandboxVmPtr> booted = vm::SandboxVm::Boot(o_.config, spec);
  if (booted.ok()) {
    // Idle VMs sit paused, in the pool's cgroup; the pool's mark says whose
    // the VM is.
    Status st = (*booted)->vmm().Pause();
    if (st.ok() && cgroup_) st = ProcessCgroup::Join(o_.config.pool.cgroup, (*booted)->HostPids()).status();
    if (st.ok()) st = WritePoolRecord((*booted)->state_dir(), PoolRecord{key, NowUnixMs(), false, "", {}, 0});
    if (!st.ok()) {
      StopVm(std::move(*booted), "could not be made ready");
      booted = std::move(st).WithContext("make " + vm_id + " ready");
    }
  }
  BootFinished(key, std::move(booted), MsSince(t0));
  std::lock_guard lock(mu_);
  finished_boots_.push_back(seq);
  cv_.notify_all();
}

void WarmPool::BootFinished(const std::string& key, Result<vm::SandboxVmPtr> booted, double ms) {
  std::unique_lock lock(mu_);
  ShapeState& s = shapes_[key];
  --s.booting;
  --booting_total_;
  if (!booted.ok()) {
    ++s.failures;
    s.last_failure = booted.status().ToString();
    s.backoff = std::min(o_.max_backoff, s.backoff.count() == 0 ? o_.first_backoff : s.backoff * 2);
    s.next_boot = Clock::now() + s.backoff;
    kLog.Error("boot for shape {} failed after {:.0f} ms (next try in {} ms): {}", key, ms, s.backoff.count(),
               s.last_failure);
    return;
  }
  vm::SandboxVmPtr v = std::move(*booted);
  booting_ids_.erase(v->id());
  if (draining_ || stopping_ || s.ready.size() >= s.target) {
    lock.unlock();
    StopVm(std::move(v), "not needed any more (draining or resized)");
    return;
  }
  s.backoff = milliseconds(0);
  accelerator_ = std::string(hypervisor::AcceleratorName(v->accelerator()));
  ++s.boots;
  s.boot_ms.push_back(ms);
  if (s.boot_ms.size() > kBootSamples) s.boot_ms.pop_front();
  ReadyVm r{std::move(v), NowUnixMs(), std::make_shared<std::atomic<bool>>(false)};
  r.vm->OnExit([died = r.died, this](const hypervisor::VmExit&) {
    died->store(true);
    cv_.notify_all();
  });
  kLog.Info("{} ready in {:.0f} ms (shape {}: {} ready)", r.vm->id(), ms, key, s.ready.size() + 1);
  s.ready.push_back(std::move(r));
}

void WarmPool::JoinFinishedBoots() {
  std::vector<std::thread> done;
  {
    std::lock_guard lock(mu_);
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
  kLog.Info("stopping {}: {}", id, why);
  // A paused guest cannot power itself off: let it run for its last words.
  (void)v->vmm().Resume();
  if (Status st = v->Stop(kStopGrace); !st.ok()) kLog.Warn("stop {}: {}", id, st.ToString());
}

void WarmPool::ScanStateDir(bool at_start) {
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
        kLog.Warn("cannot reap {} ({}): {}", id, why, v.status().ToString());
      continue;
    }
    StopVm(std::move(*v), why);
  }
}

Result<std::optional<Claimed>> WarmPool::Claim(const Shape& requested, const Claimant& who, std::string* miss) {
  const auto t0 = Clock::now();
  const Shape shape = Resolve(o_.config, requested);
  ASSIGN_OR_RETURN(std::string key, ShapeKey(o_.config, shape));
  ReadyVm r;
  {
    std::lock_guard lock(mu_);
    auto it = shapes_.find(key);
    if (it == shapes_.end()) {
      if (shapes_.size() >= kMaxShapes) {
        *miss = fmt::format("no VM of shape {} ({}) and the pool keeps at most {} shapes", key, Describe(shape),
                            kMaxShapes);
        return std::optional<Claimed>();
      }
      ShapeState& s = shapes_[key];
      s.shape = shape;
      s.target = draining_ ? 0 : size_;
      cv_.notify_all();
      *miss = fmt::format("no VM of shape {} ({}) yet: the pool keeps {} from now on", key, Describe(shape), s.target);
      return std::optional<Claimed>();
    }
    ShapeState& s = it->second;
    // The oldest live one; dead ones are left to the refill thread's reaping.
    auto live = std::find_if(s.ready.begin(), s.ready.end(), [](const ReadyVm& v) { return !v.died->load(); });
    if (live == s.ready.end()) {
      *miss = fmt::format("no ready VM of shape {} ({}): {} booting, target {}", key, Describe(shape), s.booting,
                          s.target);
      return std::optional<Claimed>();
    }
    r = std::move(*live);
    s.ready.erase(live);
    ++s.claimed;
  }
  const std::string id = r.vm->id();
  const std::string dir = r.vm->state_dir();
  // Mark it claimed first: from here a daemon crash leaves it to the
  // claimant, and a claimant that never adopts it is reaped after the grace.
  Status st = WritePoolRecord(dir, PoolRecord{key, r.ready_since_ms, true, who.sandbox_id, who.process, NowUnixMs()});
  if (st.ok()) st = r.vm->vmm().Resume().WithContext("resume " + id);
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
  kLog.Info("{} claimed for sandbox {} {} (pid {}) after {} ms idle; hand-over {:.2f} ms", id, who.sandbox_id,
            who.pod, who.process.pid, c.idle_ms, c.claim_ms);
  return std::optional<Claimed>(std::move(c));
}

Status WarmPool::Release(const std::string& vm_id) {
  if (vm_id.find('/') != std::string::npos || vm_id.rfind(kVmIdPrefix, 0) != 0)
    return InvalidArgument("vm_id '" + vm_id + "' is not a pool VM id");
  const std::string dir = vm::SandboxVm::StateDirFor(o_.config, vm_id);
  auto record = ReadPoolRecord(dir);
  if (!record.ok() || !record->claimed) return NotFound("no claimed, unadopted pool VM " + vm_id);
  auto v = vm::SandboxVm::Adopt(o_.config, dir);
  if (!v.ok()) return std::move(v).status().WithContext("release " + vm_id);
  StopVm(std::move(*v), "released by its claimant");
  return Status::Ok();
}

PoolStatus WarmPool::GetStatus() const {
  PoolStatus out;
  std::lock_guard lock(mu_);
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
    uint64_t rss = 0;
    for (const auto& r : s.ready) rss += RssBytes(r.vm->vmm_pid());
    st.idle_vm_rss_bytes = s.ready.empty() ? 0 : rss / s.ready.size();
    out.shapes.push_back(std::move(st));
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
  kLog.Info("resized to {} ready VM(s) per shape", size);
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
  kLog.Info("draining {} idle VM(s)", idle.size());
  const auto n = static_cast<uint32_t>(idle.size());
  for (auto& v : idle) StopVm(std::move(v), "the pool is draining");
  // Boots in flight stop themselves when they finish (BootFinished).
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return booting_total_ == 0; });
  return n;
}

}  // namespace capsule::pool
