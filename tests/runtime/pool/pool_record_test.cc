// pool.json: what the daemon writes reads back the same, and a value that
// does not fit its field is refused rather than read as another number
// (found by record_fuzzer).
#include "runtime/pool/pool_record.h"

#include <gtest/gtest.h>

#include "runtime/common/file_util.h"
#include "tests/support/status_matchers.h"

namespace capsule::pool {
namespace {

PoolRecord Claimed() {
  PoolRecord r;
  r.shape_key = "2c-512m-0f3e9a";
  r.created_unix_ms = 1733140000000;
  r.claimed = true;
  r.sandbox_id = "9f2c1e";
  r.claimant = ProcessIdentity{4242, 123456, "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"};
  r.claimed_unix_ms = 1733140005000;
  return r;
}

std::string ClaimedWith(const std::string& field, const std::string& value) {
  std::string text = PoolRecordToJson(Claimed());
  const std::string key = "\"" + field + "\":";
  size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << text;
  size_t end = text.find_first_of(",}", at);
  return text.substr(0, at + key.size()) + value + text.substr(end);
}

TEST(PoolRecordTest, IdleAndClaimedRecordsRoundTrip) {
  PoolRecord idle;
  idle.shape_key = "k";
  idle.created_unix_ms = 5;
  for (const PoolRecord& r : {idle, Claimed()}) {
    auto back = PoolRecordFromJson(PoolRecordToJson(r), "pool.json");
    ASSERT_OK(back);
    EXPECT_EQ(*back, r);
  }
}

TEST(PoolRecordTest, WriteAndReadGoThroughTheFile) {
  auto dir = TempDir::Create("capsule-pool-record");
  ASSERT_OK(dir);
  ASSERT_OK(WritePoolRecord(dir->path(), Claimed()));
  auto back = ReadPoolRecord(dir->path());
  ASSERT_OK(back);
  EXPECT_EQ(*back, Claimed());
  ASSERT_OK(RemovePoolRecord(dir->path()));
  EXPECT_EQ(ReadPoolRecord(dir->path()).status().code(), Code::kNotFound);
}

TEST(PoolRecordTest, PidOutsidePidTRangeIsRefusedNotTruncated) {
  // 4294967297 used to be read as pid 1 (init), -1 and 0 as themselves.
  for (const char* pid : {"4294967297", "2147483648", "0", "-1"}) {
    auto r = PoolRecordFromJson(ClaimedWith("pid", pid), "pool.json");
    ASSERT_FALSE(r.ok()) << pid;
    EXPECT_NE(r.status().message().find("claimant.pid: must be between 1 and 2147483647"), std::string::npos) << r.status().message();
  }
}

TEST(PoolRecordTest, TimesBelowZeroOrAboveInt64AreRefusedNotWrapped) {
  // 18446744073709551615 used to be read as -1, and a claim time of
  // INT64_MIN overflowed the daemon's age computation.
  for (const char* field : {"created_unix_ms", "claimed_unix_ms"}) {
    for (const char* v : {"18446744073709551615", "-1", "-9223372036854775808"}) {
      auto r = PoolRecordFromJson(ClaimedWith(field, v), "pool.json");
      ASSERT_FALSE(r.ok()) << field << " " << v;
      EXPECT_NE(r.status().message().find(std::string(field) + ": must be between 0 and 9223372036854775807"), std::string::npos)
          << r.status().message();
    }
  }
  EXPECT_OK(PoolRecordFromJson(ClaimedWith("claimed_unix_ms", "9223372036854775807"), "pool.json"));
}

TEST(PoolRecordTest, ErrorsNameTheFileAndTheField) {
  auto r = PoolRecordFromJson(R"({"shape_key":"k","created_unix_ms":1,"claimed":true})", "/s/pool.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "/s/pool.json: sandbox_id: required");
  r = PoolRecordFromJson(ClaimedWith("start_time", "-3"), "/s/pool.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "/s/pool.json: claimant.start_time: must be between 0 and 18446744073709551615, got -3");
  EXPECT_FALSE(PoolRecordFromJson("[1]", "p").ok());
  EXPECT_FALSE(PoolRecordFromJson("{", "p").ok());
}

}  // namespace
}  // namespace capsule::pool
