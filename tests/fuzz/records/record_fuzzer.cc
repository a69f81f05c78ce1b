// libFuzzer target for the JSON records Capsule leaves on disk and reads back
// in another process, and the guest's /proc files the metrics read. The
// first byte picks the reader ('0' vm.json, '1' pool.json, '2' capsule.json,
// '3' pod.json, '4' a guest's /proc/meminfo and /proc/loadavg split at the
// first NUL: seeds are "<digit><text>"); the rest is the file. Checked for each record that parses:
//  - it writes back and reads again to the same value;
//  - the text it writes agrees with the input on every field both have, so
//    no value was silently narrowed, wrapped or mapped to another;
//  - capsule.json: the dirs `delete` acts on are the ones the shim writes
//    (an absolute VM dir without "." or ".." parts, the share dir one
//    component under its mounts/), never a path elsewhere on the host.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/hypervisor/vm_record.h"
#include "runtime/pool/pool_record.h"
#include "runtime/vm/guest_stats.h"
#include "runtime/vm/pod_record.h"
#include "shim/launcher/bundle_record.h"

namespace {

using nlohmann::json;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "record_fuzzer invariant broken: %s\n", what);
    std::abort();
  }
}

// JSON numbers by value; nlohmann's own == casts an unsigned to int64_t, so
// 18446744073709551615 would equal -1.
bool SameNumber(const json& a, const json& b) {
  if (a.is_number_float() || b.is_number_float()) return a == b;
  const bool a_neg = a.is_number_integer() && !a.is_number_unsigned() && a.get<int64_t>() < 0;
  const bool b_neg = b.is_number_integer() && !b.is_number_unsigned() && b.get<int64_t>() < 0;
  if (a_neg != b_neg) return false;
  return a_neg ? a.get<int64_t>() == b.get<int64_t>() : a.get<uint64_t>() == b.get<uint64_t>();
}

// Whether `out` (what the record writes) says the same as `in` (what was
// read) wherever both have a value: keys only one side has are skipped
// (unknown fields, defaults of absent ones).
bool Agrees(const json& in, const json& out) {
  if (in.is_object() && out.is_object()) {
    for (auto it = out.begin(); it != out.end(); ++it) {
      auto other = in.find(it.key());
      if (other != in.end() && !Agrees(*other, it.value())) return false;
    }
    return true;
  }
  if (in.is_array() && out.is_array()) {
    if (in.size() != out.size()) return false;
    for (size_t i = 0; i < in.size(); ++i)
      if (!Agrees(in[i], out[i])) return false;
    return true;
  }
  if (in.is_number() && out.is_number()) return SameNumber(in, out);
  return in == out;
}

void CheckAgrees(std::string_view text, const std::string& written) {
  json in = json::parse(text.begin(), text.end(), nullptr, false);
  json out = json::parse(written, nullptr, false);
  Check(!out.is_discarded(), "the record writes invalid JSON");
  Check(Agrees(in, out), "the record written back differs from the fields read");
}

void VmJson(std::string_view text) {
  namespace hv = capsule::hypervisor;
  auto rec = hv::VmRecordFromJson(text, "vm.json");
  if (!rec.ok()) return;
  std::string written = hv::VmRecordToJson(*rec);
  auto again = hv::VmRecordFromJson(written, "vm.json (written back)");
  Check(again.ok() && *again == *rec, "vm.json does not round-trip");
  CheckAgrees(text, written);
}

void PoolJson(std::string_view text) {
  namespace pool = capsule::pool;
  auto rec = pool::PoolRecordFromJson(text, "pool.json");
  if (!rec.ok()) return;
  std::string written = pool::PoolRecordToJson(*rec);
  auto again = pool::PoolRecordFromJson(written, "pool.json (written back)");
  Check(again.ok() && *again == *rec, "pool.json does not round-trip");
  CheckAgrees(text, written);
  // The daemon subtracts these from the clock and signals nothing by them,
  // but a pid of 0 or below means "the caller's group" to kill(2).
  Check(rec->created_unix_ms >= 0 && rec->claimed_unix_ms >= 0, "pool.json: a negative time");
  Check(!rec->claimed || rec->claimant.pid > 0, "pool.json: claimant pid <= 0");
}

// One path component as a container id can be: not empty, no '/', no NUL,
// not "." or "..".
bool IsComponent(std::string_view c) {
  return !c.empty() && c != "." && c != ".." && c.find('/') == std::string_view::npos &&
         c.find('\0') == std::string_view::npos;
}

bool IsCleanAbsolute(std::string_view p) {
  if (p.empty() || p.front() != '/' || p.find('\0') != std::string_view::npos) return false;
  size_t start = 1;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view c = p.substr(start, end - start);
    if (c == "." || c == "..") return false;
    start = end + 1;
  }
  return true;
}

void BundleJson(std::string_view text) {
  namespace launcher = capsule::shim::launcher;
  auto rec = launcher::BundleRecordFromJson(text, "capsule.json");
  if (!rec.ok()) return;
  std::string written = launcher::BundleRecordToJson(*rec);
  auto again = launcher::BundleRecordFromJson(written, "capsule.json (written back)");
  Check(again.ok() && *again == *rec, "capsule.json does not round-trip");
  CheckAgrees(text, written);
  Check(rec->vm_state_dir.empty() || IsCleanAbsolute(rec->vm_state_dir), "capsule.json: vm_state_dir not a clean absolute path");
  if (!rec->container_share_dir.empty()) {
    const std::string prefix = rec->vm_state_dir + "/mounts/";
    Check(!rec->vm_state_dir.empty() && rec->container_share_dir.rfind(prefix, 0) == 0 &&
              IsComponent(std::string_view(rec->container_share_dir).substr(prefix.size())),
          "capsule.json: container_share_dir is not <vm_state_dir>/mounts/<one component>");
  }
}

void PodJson(std::string_view text) {
  namespace vm = capsule::vm;
  auto rec = vm::PodRecordFromJson(text, "pod.json");
  if (!rec.ok()) return;
  std::string written = vm::PodRecordToJson(*rec);
  auto again = vm::PodRecordFromJson(written, "pod.json (written back)");
  Check(again.ok() && again->sandbox_id == rec->sandbox_id && again->ns == rec->ns &&
            again->pod_name == rec->pod_name && again->pod_namespace == rec->pod_namespace &&
            again->shim_pid == rec->shim_pid && again->started_unix_ms == rec->started_unix_ms &&
            again->claimed == rec->claimed && again->vm_ms == rec->vm_ms && again->setup_ms == rec->setup_ms,
        "pod.json does not round-trip");
  CheckAgrees(text, written);
  // `ps` and the metrics look this pid up and label series with the names.
  Check(rec->shim_pid > 0, "pod.json: shim pid <= 0");
  for (const std::string* s : {&rec->sandbox_id, &rec->ns, &rec->pod_name, &rec->pod_namespace})
    for (unsigned char c : *s) Check(c >= 0x20 && c != 0x7f, "pod.json: a control character in a name");
}

void GuestProc(std::string_view text) {
  namespace vm = capsule::vm;
  const size_t nul = text.find('\0');
  vm::GuestStats s;
  if (vm::ParseMeminfo(text.substr(0, nul), s).ok())
    Check(s.mem_available_bytes <= s.mem_total_bytes, "meminfo: more available than total");
  if (nul != std::string_view::npos && vm::ParseLoadavg(text.substr(nul + 1), s).ok())
    Check(s.load1 >= 0 && s.load1 < 1e6, "loadavg out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 8) {  // '0'..'4' are 0..4
    case 0: VmJson(text); break;
    case 1: PoolJson(text); break;
    case 2: BundleJson(text); break;
    case 3: PodJson(text); break;
    case 4: GuestProc(text); break;
    default: break;
  }
  return 0;
}
