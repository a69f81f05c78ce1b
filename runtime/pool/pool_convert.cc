// See pool_convert.h.
#include "runtime/pool/pool_convert.h"

namespace capsule::pool {

v1::Shape ToProto(const Shape& s) {
  v1::Shape out;
  out.set_vcpus(s.vcpus);
  out.set_memory_mib(s.memory_mib);
  return out;
}

Shape FromProto(const v1::Shape& s) { return Shape{s.vcpus(), s.memory_mib()}; }

v1::Claimant ToProto(const Claimant& c) {
  v1::Claimant out;
  out.set_namespace_(c.ns);
  out.set_sandbox_id(c.sandbox_id);
  out.set_pod_name(c.pod);
  out.set_pid(static_cast<uint32_t>(c.process.pid));
  out.set_pid_start_time(c.process.start_time);
  return out;
}

Claimant FromProto(const v1::Claimant& c) {
  Claimant out;
  out.ns = c.namespace_();
  out.sandbox_id = c.sandbox_id();
  out.pod = c.pod_name();
  out.process.pid = static_cast<pid_t>(c.pid());
  out.process.start_time = c.pid_start_time();
  out.process.boot_id = CurrentBootId();  // a claimant is always of this boot
  return out;
}

void ToProto(const Claimed& c, v1::ClaimResponse* out) {
  out->set_ready(true);
  out->set_vm_id(c.vm_id);
  out->set_state_dir(c.state_dir);
  out->set_shape_key(c.shape_key);
  out->set_idle_ms(static_cast<uint64_t>(c.idle_ms));
  out->set_claim_ms(c.claim_ms);
  out->set_agent_stream(c.agent_stream);
}

Claimed FromProto(const v1::ClaimResponse& r) {
  return Claimed{r.vm_id(),     r.state_dir(), r.shape_key(), static_cast<int64_t>(r.idle_ms()),
                 r.claim_ms(), r.agent_stream()};
}

v1::StatusResponse ToProto(const PoolStatus& s) {
  v1::StatusResponse out;
  out.set_max_parallel_boots(s.max_parallel_boots);
  out.set_state_dir(s.state_dir);
  out.set_draining(s.draining);
  out.set_accelerator(s.accelerator);
  out.set_ksm(s.ksm);
  for (const ShapeStatus& st : s.shapes) {
    v1::ShapeStatus* p = out.add_shapes();
    p->set_key(st.key);
    *p->mutable_shape() = ToProto(st.shape);
    p->set_target(st.target);
    p->set_ready(st.ready);
    p->set_booting(st.booting);
    p->set_claimed(st.claimed);
    p->set_boots(st.boots);
    p->set_boot_failures(st.boot_failures);
    p->set_last_failure(st.last_failure);
    p->set_boot_p50_ms(st.boot_p50_ms);
    p->set_boot_last_ms(st.boot_last_ms);
    p->set_idle_vm_rss_bytes(st.idle_vm_rss_bytes);
    p->set_device_set(st.device_set);
    p->set_template_shared_bytes(st.template_shared_bytes);
    p->set_idle_vm_own_bytes(st.idle_vm_own_bytes);
    p->set_backoff_ms(st.backoff_ms);
    p->set_refills_held_back(st.refills_held_back);
    p->set_refill(st.refill);
    p->set_template_key(st.template_key);
    p->set_template_created_unix_ms(st.template_created_unix_ms);
    p->set_template_build_ms(st.template_build_ms);
    p->set_template_building(st.template_building);
    p->set_template_builds(st.template_builds);
    p->set_template_failures(st.template_failures);
    p->set_template_last_failure(st.template_last_failure);
    p->set_clones(st.clones);
    p->set_clone_failures(st.clone_failures);
    p->set_clone_p50_ms(st.clone_p50_ms);
    p->set_clone_last_ms(st.clone_last_ms);
  }
  return out;
}

PoolStatus FromProto(const v1::StatusResponse& r) {
  PoolStatus out;
  out.max_parallel_boots = r.max_parallel_boots();
  out.state_dir = r.state_dir();
  out.draining = r.draining();
  out.accelerator = r.accelerator();
  out.ksm = r.ksm();
  for (const auto& p : r.shapes()) {
    ShapeStatus st;
    st.key = p.key();
    st.shape = FromProto(p.shape());
    st.target = p.target();
    st.ready = p.ready();
    st.booting = p.booting();
    st.claimed = p.claimed();
    st.boots = p.boots();
    st.boot_failures = p.boot_failures();
    st.last_failure = p.last_failure();
    st.boot_p50_ms = p.boot_p50_ms();
    st.boot_last_ms = p.boot_last_ms();
    st.idle_vm_rss_bytes = p.idle_vm_rss_bytes();
    st.device_set = p.device_set();
    st.template_shared_bytes = p.template_shared_bytes();
    st.idle_vm_own_bytes = p.idle_vm_own_bytes();
    st.backoff_ms = p.backoff_ms();
    st.refills_held_back = p.refills_held_back();
    st.refill = p.refill();
    st.template_key = p.template_key();
    st.template_created_unix_ms = p.template_created_unix_ms();
    st.template_build_ms = p.template_build_ms();
    st.template_building = p.template_building();
    st.template_builds = p.template_builds();
    st.template_failures = p.template_failures();
    st.template_last_failure = p.template_last_failure();
    st.clones = p.clones();
    st.clone_failures = p.clone_failures();
    st.clone_p50_ms = p.clone_p50_ms();
    st.clone_last_ms = p.clone_last_ms();
    out.shapes.push_back(std::move(st));
  }
  return out;
}

}  // namespace capsule::pool
