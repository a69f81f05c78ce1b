// Field-by-field copy; memory.stat keys map to the MemoryStat fields of the
// same name (containerd's cgroups v2 stats do the same).
#include "agent/engine/metrics_proto.h"

namespace capsule::engine {
namespace {

namespace v2 = io::containerd::cgroups::v2;

void MemoryToProto(const CgroupMetrics::Memory& m, v2::MemoryStat* out) {
  out->set_usage(m.usage);
  out->set_usage_limit(m.usage_limit);
  out->set_swap_usage(m.swap_usage);
  out->set_swap_limit(m.swap_limit);
  out->set_anon(m.Stat("anon"));
  out->set_file(m.Stat("file"));
  out->set_kernel_stack(m.Stat("kernel_stack"));
  out->set_slab(m.Stat("slab"));
  out->set_sock(m.Stat("sock"));
  out->set_shmem(m.Stat("shmem"));
  out->set_file_mapped(m.Stat("file_mapped"));
  out->set_file_dirty(m.Stat("file_dirty"));
  out->set_file_writeback(m.Stat("file_writeback"));
  out->set_anon_thp(m.Stat("anon_thp"));
  out->set_inactive_anon(m.Stat("inactive_anon"));
  out->set_active_anon(m.Stat("active_anon"));
  out->set_inactive_file(m.Stat("inactive_file"));
  out->set_active_file(m.Stat("active_file"));
  out->set_unevictable(m.Stat("unevictable"));
  out->set_slab_reclaimable(m.Stat("slab_reclaimable"));
  out->set_slab_unreclaimable(m.Stat("slab_unreclaimable"));
  out->set_pgfault(m.Stat("pgfault"));
  out->set_pgmajfault(m.Stat("pgmajfault"));
  out->set_workingset_refault(m.Stat("workingset_refault_anon") + m.Stat("workingset_refault_file") +
                              m.Stat("workingset_refault"));
  out->set_workingset_activate(m.Stat("workingset_activate_anon") + m.Stat("workingset_activate_file") +
                               m.Stat("workingset_activate"));
  out->set_workingset_nodereclaim(m.Stat("workingset_nodereclaim"));
  out->set_pgrefill(m.Stat("pgrefill"));
  out->set_pgscan(m.Stat("pgscan"));
  out->set_pgsteal(m.Stat("pgsteal"));
  out->set_pgactivate(m.Stat("pgactivate"));
  out->set_pgdeactivate(m.Stat("pgdeactivate"));
  out->set_pglazyfree(m.Stat("pglazyfree"));
  out->set_pglazyfreed(m.Stat("pglazyfreed"));
  out->set_thp_fault_alloc(m.Stat("thp_fault_alloc"));
  out->set_thp_collapse_alloc(m.Stat("thp_collapse_alloc"));
}

}  // namespace

void ToProto(const CgroupMetrics& in, v2::Metrics* out) {
  out->Clear();
  if (in.pids) {
    out->mutable_pids()->set_current(in.pids->current);
    out->mutable_pids()->set_limit(in.pids->limit);
  }
  if (in.cpu) {
    v2::CPUStat* c = out->mutable_cpu();
    c->set_usage_usec(in.cpu->usage_usec);
    c->set_user_usec(in.cpu->user_usec);
    c->set_system_usec(in.cpu->system_usec);
    c->set_nr_periods(in.cpu->nr_periods);
    c->set_nr_throttled(in.cpu->nr_throttled);
    c->set_throttled_usec(in.cpu->throttled_usec);
  }
  if (in.memory) MemoryToProto(*in.memory, out->mutable_memory());
  if (in.memory_events) {
    v2::MemoryEvents* e = out->mutable_memory_events();
    e->set_low(in.memory_events->low);
    e->set_high(in.memory_events->high);
    e->set_max(in.memory_events->max);
    e->set_oom(in.memory_events->oom);
    e->set_oom_kill(in.memory_events->oom_kill);
  }
  for (const auto& io : in.io) {
    v2::IOEntry* e = out->mutable_io()->add_usage();
    e->set_major(io.major);
    e->set_minor(io.minor);
    e->set_rbytes(io.rbytes);
    e->set_wbytes(io.wbytes);
    e->set_rios(io.rios);
    e->set_wios(io.wios);
  }
  for (const auto& h : in.hugetlb) {
    v2::HugeTlbStat* s = out->add_hugetlb();
    s->set_pagesize(h.pagesize);
    s->set_current(h.current);
    s->set_max(h.max);
  }
}

}  // namespace capsule::engine
