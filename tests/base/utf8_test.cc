#include "base/utf8.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera {
namespace {

std::vector<char32_t> Decode(std::string_view s) {
  std::vector<char32_t> out;
  size_t pos = 0;
  char32_t cp;
  while (NextCodepoint(s, &pos, &cp)) out.push_back(cp);
  return out;
}

TEST(Utf8, DecodesAllLengths) {
  EXPECT_EQ(Decode("a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80"),
            (std::vector<char32_t>{U'a', 0xE9, 0x4E2D, 0x1F600}));
}

TEST(Utf8, IllFormedBecomesReplacement) {
  // Overlong, surrogate, truncated and stray continuation bytes.
  EXPECT_EQ(Decode("\xC0\xAF"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(Decode("\xED\xA0\x80"), (std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(Decode("\xE4\xB8"), (std::vector<char32_t>{0xFFFD}));
  EXPECT_EQ(Decode("\x80x"), (std::vector<char32_t>{0xFFFD, U'x'}));
  EXPECT_FALSE(IsValidUtf8("\xF5\x80\x80\x80"));
  EXPECT_TRUE(IsValidUtf8("\xEF\xBF\xBD ok"));
}

TEST(Utf8, RoundTripsEncoding) {
  for (char32_t cp : {char32_t{0}, char32_t{0x7F}, char32_t{0x80}, char32_t{0x7FF},
                      char32_t{0x800}, char32_t{0xFFFF}, char32_t{0x10000}, char32_t{0x10FFFF}}) {
    std::string s;
    AppendUtf8(&s, cp);
    EXPECT_EQ(Decode(s), std::vector<char32_t>{cp});
  }
  std::string s;
  AppendUtf8(&s, 0xD800);
  EXPECT_EQ(s, "\xEF\xBF\xBD");
}

TEST(Utf8, CompletePrefixHoldsBackPartialCharacters) {
  std::string smile = "\xF0\x9F\x98\x80";
  for (size_t k = 1; k < 4; ++k) {
    EXPECT_EQ(CompleteUtf8PrefixLength("ab" + smile.substr(0, k)), 2u) << k;
  }
  EXPECT_EQ(CompleteUtf8PrefixLength("ab" + smile), 6u);
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xFF"), 3u);      // never valid: do not stall
  EXPECT_EQ(CompleteUtf8PrefixLength("ab\xE0\x80"), 4u);  // invalid second byte
}

}  // namespace
}  // namespace tessera
