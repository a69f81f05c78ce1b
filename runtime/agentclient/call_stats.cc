// See call_stats.h.
#include "runtime/agentclient/call_stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace capsule::agentclient {
namespace {

using nlohmann::json;

constexpr size_t kMaxBytes = 256 * 1024;
constexpr size_t kMaxRpcs = 64;
constexpr size_t kMaxRpcName = 64;

bool ValidRpcName(std::string_view n) {
  if (n.empty() || n.size() > kMaxRpcName) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

CallStats::CallStats(Sink sink, std::chrono::milliseconds min_interval)
    : sink_(std::move(sink)), min_interval_(min_interval) {}

void CallStats::Record(std::string_view rpc, double seconds, bool ok) {
  if (!ValidRpcName(rpc)) return;
  if (!(seconds >= 0)) seconds = 0;
  std::string text;
  {
    std::lock_guard lock(mu_);
    auto it = stats_.find(rpc);
    const bool first = it == stats_.end();
    if (first) {
      if (stats_.size() >= kMaxRpcs) return;
      it = stats_.emplace(std::string(rpc), RpcStats{}).first;
    }
    RpcStats& s = it->second;
    ++s.count;
    if (!ok) ++s.errors;
    s.sum_seconds += seconds;
    size_t b = 0;
    while (b < kCallBuckets.size() && seconds > kCallBuckets[b]) ++b;
    ++s.buckets[b];
    const auto now = std::chrono::steady_clock::now();
    if (!sink_ || (!first && now - last_flush_ < min_interval_)) return;
    last_flush_ = now;
    text = CallStatsToJson(stats_);
  }
  std::lock_guard lock(sink_mu_);
  sink_(text);
}

CallStatsSnapshot CallStats::Snapshot() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string CallStatsToJson(const CallStatsSnapshot& s) {
  json rpcs = json::object();
  for (const auto& [name, r] : s)
    rpcs[name] = {{"count", r.count}, {"errors", r.errors}, {"sum_seconds", r.sum_seconds}, {"buckets", r.buckets}};
  json bounds = json::array();
  for (double b : kCallBuckets) bounds.push_back(b);
  return json{{"bucket_bounds", bounds}, {"rpcs", rpcs}}.dump() + "\n";
}

Result<CallStatsSnapshot> CallStatsFromJson(std::string_view text, std::string_view source) {
  const std::string where(source);
  if (text.size() > kMaxBytes) return InvalidArgument(where + ": larger than 256 KiB");
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("rpcs") || !j["rpcs"].is_object())
    return InvalidArgument(where + ": not an object with 'rpcs'");
  const json& bounds = j.value("bucket_bounds", json());
  if (!bounds.is_array() || bounds.size() != kCallBuckets.size())
    return InvalidArgument(where + ": 'bucket_bounds' are not this build's");
  for (size_t i = 0; i < kCallBuckets.size(); ++i)
    if (!bounds[i].is_number() || bounds[i].get<double>() != kCallBuckets[i])
      return InvalidArgument(where + ": 'bucket_bounds' are not this build's");
  if (j["rpcs"].size() > kMaxRpcs) return InvalidArgument(where + ": too many RPCs");
  CallStatsSnapshot out;
  for (const auto& [name, r] : j["rpcs"].items()) {
    const std::string field = where + ": rpcs." + name;
    if (!ValidRpcName(name)) return InvalidArgument(where + ": RPC name '" + name.substr(0, kMaxRpcName) + "' is invalid");
    if (!r.is_object()) return InvalidArgument(field + " is not an object");
    RpcStats s;
    const json& count = r.value("count", json());
    const json& errors = r.value("errors", json());
    const json& sum = r.value("sum_seconds", json());
    const json& buckets = r.value("buckets", json());
    if (!count.is_number_unsigned() || !errors.is_number_unsigned()) return InvalidArgument(field + ": counts are not unsigned integers");
    if (!sum.is_number() || !(sum.get<double>() >= 0) || std::isinf(sum.get<double>()))
      return InvalidArgument(field + ".sum_seconds is not a non-negative number");
    if (!buckets.is_array() || buckets.size() != s.buckets.size()) return InvalidArgument(field + ".buckets has the wrong size");
    s.count = count.get<uint64_t>();
    s.errors = errors.get<uint64_t>();
    s.sum_seconds = sum.get<double>();
    uint64_t total = 0;
    for (size_t i = 0; i < s.buckets.size(); ++i) {
      if (!buckets[i].is_number_unsigned()) return InvalidArgument(field + ".buckets are not unsigned integers");
      s.buckets[i] = buckets[i].get<uint64_t>();
      if (s.buckets[i] > s.count || total > s.count - s.buckets[i]) return InvalidArgument(field + ": buckets exceed count");
      total += s.buckets[i];
    }
    if (total != s.count || s.errors > s.count) return InvalidArgument(field + ": buckets or errors disagree with count");
    out.emplace(name, s);
  }
  return out;
}

}  // namespace capsule::agentclient
