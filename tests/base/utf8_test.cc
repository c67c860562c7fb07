#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace placer {
namespace {

TEST(Utf8, CheckNamesTheFieldAndTheByte) {
  EXPECT_TRUE(CheckUtf8("R\xc3\xa9sum\xc3\xa9", "prompt").ok());
  const absl::Status bad = CheckUtf8("ab\xc3(", "params.stop[1]");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(),
            "params.stop[1]: invalid UTF-8 at byte 2 (text must be well-formed UTF-8)");
}

TEST(Utf8, EveryCharacterLengthAndEveryKindOfIllFormedSequence) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("a\xc2\x80\xe0\xa0\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"));
  EXPECT_EQ(FirstInvalidUtf8("a\xc0\xaf"), 1u);           // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("ab\xed\xbf\xbf"), 2u);      // a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0u);    // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("abc\x80"), 3u);             // a lone continuation
  EXPECT_EQ(FirstInvalidUtf8("\xe2\x82\xac\xe2\x82"), 3u);  // cut off at the end
}

TEST(Utf8, LongTextIsCheckedToItsEnd) {
  // Past a 16-bit boundary and with a bad byte at the very end.
  std::string text(70000, 'x');
  for (std::size_t i = 0; i + 3 < text.size(); i += 1000) text.replace(i, 3, "\xe2\x82\xac");
  EXPECT_TRUE(IsValidUtf8(text));
  text.back() = '\xff';
  EXPECT_EQ(FirstInvalidUtf8(text), text.size() - 1);
}

}  // namespace
}  // namespace placer
