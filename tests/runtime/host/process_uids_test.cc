// StatusField: the one reader of /proc/<pid>/status lines.
#include "runtime/host/process_uids.h"

#include <gtest/gtest.h>

namespace capsule {
namespace {

TEST(StatusFieldTest, FindsAWholeKeyOnAnyLineAndDropsLeadingBlanks) {
  const std::string status = "Name:\tpause\nUmask:\t0022\nUid:\t65535\t65535\t65535\t65535\nCapEff:\t0000000000000000\n";
  EXPECT_EQ(StatusField(status, "Name"), "pause");
  EXPECT_EQ(StatusField(status, "Uid"), "65535\t65535\t65535\t65535");
  EXPECT_EQ(StatusField(status, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(status, "Cap"), "") << "a prefix of a key is not the key";
  EXPECT_EQ(StatusField(status, "NoNewPrivs"), "");
  EXPECT_EQ(StatusField("Seccomp: 2", "Seccomp"), "2") << "no trailing newline";
}

}  // namespace
}  // namespace capsule
