#include "runtime/agentclient/call_stats.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

namespace capsule::agentclient {
namespace {

TEST(CallStatsTest, BucketsCountsErrorsAndTheFileRoundTrip) {
  std::vector<std::string> written;
  CallStats stats([&](const std::string& json) { written.push_back(json); }, std::chrono::hours(1));
  stats.Record("Check", 0.0004, true);      // first bucket
  stats.Record("Check", 0.02, true);        // <= 0.025
  stats.Record("Check", 120, false);        // beyond the last bound
  stats.Record("CreateContainer", 0.3, true);
  // Written on each RPC's first call only (the interval is an hour here).
  ASSERT_EQ(written.size(), 2u);
  const CallStatsSnapshot s = stats.Snapshot();
  const RpcStats& check = s.at("Check");
  EXPECT_EQ(check.count, 3u);
  EXPECT_EQ(check.errors, 1u);
  EXPECT_NEAR(check.sum_seconds, 120.0204, 1e-9);
  EXPECT_EQ(check.buckets[0], 1u);
  EXPECT_EQ(check.buckets[4], 1u);
  EXPECT_EQ(check.buckets.back(), 1u);
  auto back = CallStatsFromJson(CallStatsToJson(s), "agent-calls.json");
  ASSERT_OK(back);
  EXPECT_EQ(back->at("Check").buckets, check.buckets);
  EXPECT_EQ(back->at("CreateContainer").count, 1u);
  auto last = CallStatsFromJson(written.back(), "agent-calls.json");
  ASSERT_OK(last);
  EXPECT_EQ(last->at("CreateContainer").count, 1u);
}

TEST(CallStatsTest, ABadFileIsRefusedNamingWhatIsWrong) {
  CallStats stats;
  stats.Record("Check", 0.01, true);
  const std::string good = CallStatsToJson(stats.Snapshot());
  auto mutate = [&](const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(good);
    f(j);
    return CallStatsFromJson(j.dump(), "agent-calls.json");
  };
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["Check"]["count"] = 0; }).ok()) << "buckets exceed count";
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["Check"]["errors"] = 5; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["Check"]["sum_seconds"] = -1; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["Check"]["buckets"].push_back(1); }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["bad name\"}"] = j["rpcs"]["Check"]; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["bucket_bounds"][0] = 0.5; }).ok());
  EXPECT_FALSE(mutate([](auto& j) { j["rpcs"]["Check"]["buckets"][0] = -1; }).ok());
  EXPECT_FALSE(CallStatsFromJson("[]", "agent-calls.json").ok());
  EXPECT_FALSE(CallStatsFromJson(std::string(300 * 1024, ' '), "agent-calls.json").ok());
  auto st = mutate([](auto& j) { j["rpcs"]["Check"]["count"] = 0; });
  EXPECT_NE(st.status().message().find("agent-calls.json: rpcs.Check"), std::string::npos) << st.status().ToString();
}

TEST(CallStatsTest, OnlyRpcNamesAreKept) {
  CallStats stats;
  stats.Record("", 0.1, true);
  stats.Record("with space", 0.1, true);
  stats.Record(std::string(100, 'a'), 0.1, true);
  EXPECT_TRUE(stats.Snapshot().empty());
}

}  // namespace
}  // namespace capsule::agentclient
