#include "runtime/vm/guest_stats.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace capsule::vm {
namespace {

constexpr const char* kMeminfo =
    "MemTotal:         241532 kB\n"
    "MemFree:          180000 kB\n"
    "MemAvailable:     200104 kB\n"
    "Buffers:               0 kB\n";

TEST(GuestStatsTest, ParsesWhatALinuxGuestSays) {
  GuestStats s;
  ASSERT_OK(ParseMeminfo(kMeminfo, s));
  EXPECT_EQ(s.mem_total_bytes, 241532u * 1024);
  EXPECT_EQ(s.mem_available_bytes, 200104u * 1024);
  ASSERT_OK(ParseLoadavg("0.08 0.02 0.01 1/52 113\n", s));
  EXPECT_DOUBLE_EQ(s.load1, 0.08);
}

// The guest is hostile: whatever it puts in its /proc is refused unless it
// is exactly the shape a kernel writes, and no value can overflow.
TEST(GuestStatsTest, LiesAreRefusedNamingTheField) {
  GuestStats s;
  const char* bad_meminfo[] = {
      "",
      "MemTotal: 100 kB\n",                                          // no MemAvailable
      "MemTotal: 100 kB\nMemAvailable: 200 kB\n",                    // more available than total
      "MemTotal: -5 kB\nMemAvailable: 1 kB\n",                       // negative
      "MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n",     // overflows
      "MemTotal: 18446744073709551 kB\nMemAvailable: 1 kB\n",        // * 1024 overflows
      "MemTotal: 100 MB\nMemAvailable: 1 kB\n",                      // another unit
      "MemTotal: 1e9 kB\nMemAvailable: 1 kB\n",
      "MemTotal:\nMemAvailable: 1 kB\n",
      "MemTotal: kB\nMemAvailable: 1 kB\n",
  };
  for (const char* text : bad_meminfo) {
    auto st = ParseMeminfo(text, s);
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_NE(st.message().find("meminfo"), std::string::npos) << st.ToString();
  }
  EXPECT_FALSE(ParseMeminfo(std::string(20000, 'x'), s).ok());
  for (const char* text : {"", "nan 0 0", "-1 0 0", "1e300 1 1", "abc", "1.0x 2"})
    EXPECT_FALSE(ParseLoadavg(text, s).ok()) << text;
}

}  // namespace
}  // namespace capsule::vm
