#include "format/ordered_json.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace tessera {
namespace {

using ojson = nlohmann::ordered_json;

// nlohmann's own ordered parser is the reference for every document within the limits: the
// same values, the same member order, the same answer to a repeated key.
void ExpectSameAsNlohmann(const std::string& text) {
  SCOPED_TRACE(text.substr(0, 200));
  const ojson expected = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  auto parsed = ParseOrderedJson(text, JsonParseLimits{64, 100000});
  if (expected.is_discarded()) {
    EXPECT_FALSE(parsed.has_value());
    return;
  }
  ASSERT_TRUE(parsed.has_value()) << parsed.status().message();
  EXPECT_EQ(parsed->dump(), expected.dump());
}

TEST(OrderedJson, MatchesNlohmannOnDocuments) {
  for (const char* text : {
           R"({})",
           R"([])",
           R"(null)",
           R"(true)",
           R"(-12)",
           R"(18446744073709551615)",
           R"(1.5e300)",
           R"("caf\u00e9 \ud83d\ude00")",
           R"({"z": 1, "a": [1, 2, {"y": null, "b": false}], "m": {"q": "w"}})",
           R"({"a": 1, "b": 2, "a": 3})",              // repeated key: first place, last value
           R"({"a": {"x": 1}, "b": 2, "a": [true]})",  // repeated key whose value changes kind
           R"([[[[]]], {}, [{}], {"": ""}])",
           R"({"a": 1,})",
           R"([1 2])",
           R"({"a" 1})",
           R"()",
           R"(  )",
           R"({} x)",
           R"("\x")",
           R"(1e999)",
           R"({"a": "unterminated)",
           "[\"\xff\"]",
       }) {
    ExpectSameAsNlohmann(text);
  }
}

TEST(OrderedJson, MatchesNlohmannOnLargeObjectsWithRepeats) {
  // Past the scanned size the keys are indexed: repeats must still land on their first place.
  std::mt19937 rng(7);
  for (int members : {15, 16, 17, 40, 3000}) {
    std::string text = "{";
    for (int i = 0; i < members; ++i) {
      const int key = static_cast<int>(rng() % (members / 2 + 1));  // about half are repeats
      if (i) text += ",";
      text += "\"k" + std::to_string(key) + "\": {\"i\": " + std::to_string(i) + "}";
    }
    text += "}";
    ExpectSameAsNlohmann(text);
  }
}

TEST(OrderedJson, RefusesDepthPastTheLimitAndSaysSo) {
  JsonParseLimits limits;
  limits.max_depth = 4;
  EXPECT_TRUE(ParseOrderedJson("[[[[1]]]]", limits).has_value());
  auto deep = ParseOrderedJson("[[[[[1]]]]]", limits);
  ASSERT_FALSE(deep.has_value());
  EXPECT_EQ(deep.status().code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(deep.status().message(), "the JSON is nested deeper than 4 levels");
  // A hostile depth is refused at the limit, not after a stack overflow.
  EXPECT_FALSE(ParseOrderedJson(std::string(1000000, '['), {}).has_value());
}

TEST(OrderedJson, RefusesAnObjectPastTheMemberLimit) {
  JsonParseLimits limits;
  limits.max_object_members = 3;
  EXPECT_TRUE(ParseOrderedJson(R"({"a": 1, "b": 2, "c": 3, "a": 4})", limits).has_value());
  auto wide = ParseOrderedJson(R"({"a": 1, "b": 2, "c": 3, "d": 4})", limits);
  ASSERT_FALSE(wide.has_value());
  EXPECT_EQ(wide.status().message(), "the JSON has an object of more than 3 members");
  // The limit is per object: three objects of three members each are fine.
  EXPECT_TRUE(ParseOrderedJson(R"([{"a":1,"b":2,"c":3},{"a":1,"b":2,"c":3},{"d":{"e":1}}])", limits)
                  .has_value());
}

TEST(OrderedJson, ParsesEightyThousandKeysWhenAllowed) {
  // The red team's body: one object of 80,000 keys. Within a raised limit it parses (in time
  // linear in its size: the CTest timeout would catch the quadratic parse); under the default
  // limit it is refused.
  std::string text = "{";
  for (int i = 0; i < 80000; ++i) {
    if (i) text += ",";
    text += "\"key" + std::to_string(i) + "\":" + std::to_string(i);
  }
  text += "}";
  auto all = ParseOrderedJson(text, JsonParseLimits{32, 100000});
  ASSERT_TRUE(all.has_value()) << all.status().message();
  EXPECT_EQ(all->size(), 80000u);
  EXPECT_EQ(all->begin().key(), "key0");
  EXPECT_EQ((*all)["key79999"], 79999);
  EXPECT_FALSE(ParseOrderedJson(text).has_value());
}

TEST(OrderedJson, SyntaxErrorsSayWhere) {
  auto bad =
      ParseOrderedJson(R"({"a": 1,, "b": 2})", {}, "the body");  // the second comma is column 9
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(
      bad.status().message().find("the body is not valid JSON: parse error at line 1, column 9"),
      std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace tessera
