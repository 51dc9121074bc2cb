#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

// Feeds pieces one at a time and returns everything released.
std::string FilterAll(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                      bool* stopped) {
  StopStringFilter f(std::move(stops));
  std::string out;
  *stopped = false;
  for (const std::string& p : pieces) {
    auto step = f.Push(p);
    out += step.text;
    if (step.stopped) {
      *stopped = true;
      return out;
    }
  }
  return out + f.Finish();
}

TEST(StopStrings, StopInsideOnePiece) {
  bool stopped;
  EXPECT_EQ(FilterAll({"END"}, {"abc END def"}, &stopped), "abc ");
  EXPECT_TRUE(stopped);
}

TEST(StopStrings, StopSplitAcrossPiecesNeverLeaks) {
  StopStringFilter f({"END"});
  auto a = f.Push("abc E");
  EXPECT_EQ(a.text, "abc ");  // "E" could start END: held back
  auto b = f.Push("N");
  EXPECT_EQ(b.text, "");
  auto c = f.Push("D tail");
  EXPECT_EQ(c.text, "");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(f.Finish(), "");
}

TEST(StopStrings, HeldTextIsReleasedWhenItDoesNotMatch) {
  bool stopped;
  EXPECT_EQ(FilterAll({"END"}, {"abc E", "N", "x"}, &stopped), "abc ENx");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(FilterAll({"END"}, {"abc EN"}, &stopped), "abc EN");  // Finish flushes the held prefix
}

TEST(StopStrings, EarliestOfSeveralWins) {
  bool stopped;
  EXPECT_EQ(FilterAll({"zz", "b"}, {"a", "bzz"}, &stopped), "a");
  EXPECT_TRUE(stopped);
}

// The stop string that ended the text is named: the earliest found, the first listed on a
// tie; none before a stop or when nothing matched.
TEST(StopStrings, NamesTheStopStringThatMatched) {
  StopStringFilter f({"zz", "b", "bz"});
  EXPECT_EQ(f.Push("a").text, "a");
  EXPECT_EQ(f.matched(), "");
  EXPECT_TRUE(f.Push("bzz").stopped);
  EXPECT_EQ(f.matched(), "b");
  StopStringFilter none({"END"});
  none.Push("abc");
  none.Finish();
  EXPECT_EQ(none.matched(), "");
}

TEST(StopStrings, OneCharacterPerPieceEverySplit) {
  const std::string text = "Once upon a time, Lily went home.";
  for (const std::string stop : {"Lily", "time,", "e.", "Once"}) {
    std::vector<std::string> pieces;
    for (char c : text) pieces.emplace_back(1, c);
    bool stopped;
    std::string out = FilterAll({stop}, pieces, &stopped);
    EXPECT_TRUE(stopped);
    EXPECT_EQ(out, text.substr(0, text.find(stop))) << stop;
  }
}

TEST(StopStrings, EmptyStopStringsAreIgnored) {
  bool stopped;
  EXPECT_EQ(FilterAll({""}, {"abc"}, &stopped), "abc");
  EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace tessera
