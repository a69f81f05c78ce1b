#include "runtime/common/printable.h"

#include <gtest/gtest.h>

namespace capsule {
namespace {

TEST(PrintableTest, ControlBytesAndBrokenUtf8AreEscapedAndTextStays) {
  EXPECT_EQ(Printable("plain text 1-2", 100), "plain text 1-2");
  EXPECT_EQ(Printable(std::string("a\0b\x1b[1m\r\n\x7f", 10), 100), "a\\x00b\\x1b[1m\\x0d\\x0a\\x7f");
  EXPECT_EQ(Printable("a\tb", 100), "a\\x09b");
  EXPECT_EQ(Printable("a\tb", 100, /*keep_tabs=*/true), "a\tb");
  // UTF-8 stays; C1 controls (U+009B is CSI), overlong forms, surrogates
  // and stray continuation bytes do not.
  EXPECT_EQ(Printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82", 100), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82");
  EXPECT_EQ(Printable("\xc2\x9b" "2J", 100), "\\xc2\\x9b2J");
  EXPECT_EQ(Printable("\xc0\xaf \xed\xa0\x80 \x80", 100), "\\xc0\\xaf \\xed\\xa0\\x80 \\x80");
  EXPECT_EQ(Printable("\xe2\x82", 100), "\\xe2\\x82");  // cut short
}

TEST(PrintableTest, LongTextIsCutOnACharacterAndSaysByHowMuch) {
  EXPECT_EQ(Printable("abcdef", 4), "abcd... (2 more bytes)");
  EXPECT_EQ(Printable("abcd", 4), "abcd");
  // A sequence that would cross the bound is left out whole.
  EXPECT_EQ(Printable("ab\xc3\xa9", 3), "ab... (2 more bytes)");
  EXPECT_EQ(Printable("", 0), "");
}

}  // namespace
}  // namespace capsule
