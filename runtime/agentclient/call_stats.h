// Latency histograms of one VM's agent calls, by RPC, kept by the process
// that owns the VM (the shim, or the pool daemon while the VM idles) and
// written as <vm dir>/agent-calls.json for the metrics endpoint, which runs
// in another process. Written when an RPC is seen for the first time and
// otherwise at most every `min_interval`, so the file costs nothing on a
// busy path.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "runtime/common/status.h"

namespace capsule::agentclient {

inline constexpr const char* kCallStatsFile = "agent-calls.json";
// Upper bounds (seconds) of the histogram's buckets; one more counts the rest.
inline constexpr std::array<double, 14> kCallBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                        0.25,  0.5,    1,     2.5,  5,     10,   30};

struct RpcStats {
  uint64_t count = 0;
  uint64_t errors = 0;
  double sum_seconds = 0;
  std::array<uint64_t, kCallBuckets.size() + 1> buckets{};  // per bucket, not cumulative
};
using CallStatsSnapshot = std::map<std::string, RpcStats, std::less<>>;

class CallStats {
 public:
  using Sink = std::function<void(const std::string& json)>;
  explicit CallStats(Sink sink = {}, std::chrono::milliseconds min_interval = std::chrono::milliseconds(2000));
  void Record(std::string_view rpc, double seconds, bool ok);
  CallStatsSnapshot Snapshot() const;

 private:
  const Sink sink_;
  const std::chrono::milliseconds min_interval_;
  mutable std::mutex mu_;
  CallStatsSnapshot stats_;                               // guarded by mu_
  std::chrono::steady_clock::time_point last_flush_{};    // guarded by mu_
  std::mutex sink_mu_;                                    // one write at a time
};

std::string CallStatsToJson(const CallStatsSnapshot& s);
// Bounded and checked: the file is read by another process.
Result<CallStatsSnapshot> CallStatsFromJson(std::string_view text, std::string_view source);

}  // namespace capsule::agentclient
