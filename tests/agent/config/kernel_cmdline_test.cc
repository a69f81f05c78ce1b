// Kernel command line tokenizing, checked against lib/cmdline.c's rules.
#include "agent/config/kernel_cmdline.h"

#include <gtest/gtest.h>

namespace capsule::agent::config {
namespace {

TEST(KernelCmdline, SplitsKeysValuesAndBareWords) {
  auto p = ParseKernelCmdline("console=ttyS0 quiet panic=-1 capsule.log=debug\n");
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], (KernelParam{"console", "ttyS0"}));
  EXPECT_EQ(p[1], (KernelParam{"quiet", std::nullopt}));
  EXPECT_EQ(p[2], (KernelParam{"panic", "-1"}));
  EXPECT_EQ(p[3], (KernelParam{"capsule.log", "debug"}));
}

TEST(KernelCmdline, QuotedValueKeepsSpacesAndDropsQuotes) {
  auto p = ParseKernelCmdline(R"(a="b c d" e=f)");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], (KernelParam{"a", "b c d"}));
  EXPECT_EQ(p[1], (KernelParam{"e", "f"}));
}

TEST(KernelCmdline, FirstEqualsSplitsAndLaterOnesStayInValue) {
  auto p = ParseKernelCmdline("root=PARTUUID=abc=1");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0], (KernelParam{"root", "PARTUUID=abc=1"}));
}

TEST(KernelCmdline, EmptyValueIsNotABareWord) {
  auto p = ParseKernelCmdline("capsule.modules=");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].value, std::optional<std::string>(""));
}

TEST(KernelCmdline, DoubleDashEndsTheKernelPart) {
  auto p = ParseKernelCmdline("quiet -- capsule.log=debug init-arg");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].key, "quiet");
}

TEST(KernelCmdline, WhitespaceOnlyAndTabsAndUnterminatedQuote) {
  EXPECT_TRUE(ParseKernelCmdline(" \t\n ").empty());
  auto p = ParseKernelCmdline("a=1\t\tb=\"open end");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1], (KernelParam{"b", "open end"}));
}

}  // namespace
}  // namespace capsule::agent::config
