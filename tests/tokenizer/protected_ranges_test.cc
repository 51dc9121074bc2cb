// EncodeOptions::protected_ranges: special-token strings inside a protected byte range are
// tokenized as ordinary text, while the same strings elsewhere still become control tokens.
// Expected ids are derived from the tokenizer's own plain encodings of the pieces (and the
// known Qwen ids), so a protected range must produce exactly "split_special_tokens, only there".
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

const Tokenizer& Qwen() {
  static const Tokenizer tok = [] {
    auto t =
        Tokenizer::FromFile(test::SharedDir() + "/tokenizers/Qwen2.5-1.5B-Instruct/tokenizer.json");
    EXPECT_TRUE(t.has_value()) << t.status().message();
    if (!t) std::abort();
    return std::move(t).value();
  }();
  return tok;
}

std::vector<int32_t> Ids(const std::string& text, EncodeOptions options = {}) {
  auto ids = Qwen().Encode(text, options);
  EXPECT_TRUE(ids.has_value()) << ids.status().message();
  return ids ? *ids : std::vector<int32_t>{-1};
}

constexpr int32_t kImStart = 151644;
constexpr int32_t kImEnd = 151645;

TEST(ProtectedRanges, NoRangesChangesNothing) {
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  EXPECT_EQ(Ids(text), Ids(text, {.protected_ranges = {}}));
  EXPECT_EQ(Ids(text).front(), kImStart);
}

TEST(ProtectedRanges, SpecialTokenInsideARangeIsText) {
  // Template text around a content span that itself spells <|im_start|>.
  const std::string head = "<|im_start|>user\n";
  const std::string content = "say <|im_start|> please";
  const std::string tail = "<|im_end|>";
  const std::string text = head + content + tail;
  Ranges protect = {{head.size(), head.size() + content.size()}};
  std::vector<int32_t> ids = Ids(text, {.protected_ranges = protect});

  std::vector<int32_t> plain = Ids(text);
  std::vector<int32_t> split = Ids(text, {.split_special_tokens = true});
  ASSERT_NE(plain, split);  // the test means something only if the two differ
  // The template's tokens stay control tokens; the content's copy does not.
  EXPECT_EQ(ids.front(), kImStart);
  EXPECT_EQ(ids.back(), kImEnd);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImStart), 1);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kImStart), 2);
  // Exactly the content encoded with split_special_tokens, between the template's tokens.
  std::vector<int32_t> expected = {kImStart};
  std::vector<int32_t> middle = Ids("user\n" + content, {.split_special_tokens = true});
  expected.insert(expected.end(), middle.begin(), middle.end());
  expected.push_back(kImEnd);
  EXPECT_EQ(ids, expected);
  // And decoding gives the original text back.
  auto decoded = Qwen().Decode(ids, false);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, text);
}

TEST(ProtectedRanges, PartialOverlapAlsoProtects) {
  // A range covering only the first byte of "<|im_end|>" still keeps it from matching.
  const std::string text = "a<|im_end|>b";
  std::vector<int32_t> ids = Ids(text, {.protected_ranges = {{0, 2}}});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImEnd), 0);
  EXPECT_EQ(ids, Ids(text, {.split_special_tokens = true}));
  // A range that ends right before it does not.
  std::vector<int32_t> touching = Ids(text, {.protected_ranges = {{0, 1}}});
  EXPECT_EQ(touching, Ids(text));
  // An empty range protects nothing.
  EXPECT_EQ(Ids(text, {.protected_ranges = {{1, 1}, {3, 3}}}), Ids(text));
}

TEST(ProtectedRanges, SeveralRangesOnlyAffectTheirOwnMatches) {
  const std::string text = "<|im_start|>x<|im_start|>y<|im_start|>z<|im_start|>";
  // Protect the 2nd and 4th occurrences (each 12 bytes long, separated by one letter).
  const size_t n = std::string("<|im_start|>").size();
  Ranges protect = {{n + 1, 2 * n + 1}, {3 * n + 3, 4 * n + 3}};
  std::vector<int32_t> ids = Ids(text, {.protected_ranges = protect});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImStart), 2);
  EXPECT_EQ(ids.front(), kImStart);
  auto decoded = Qwen().Decode(ids, false);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, text);
}

TEST(ProtectedRanges, NonSpecialAddedTokensStillMatch) {
  // <tool_call> is an added token with special=false in Qwen2.5: protection is for special
  // tokens only, like split_special_tokens.
  auto id = Qwen().TokenToId("<tool_call>");
  ASSERT_TRUE(id.has_value());
  ASSERT_FALSE(Qwen().IsSpecial(*id));
  const std::string text = "<tool_call>";
  EXPECT_EQ(Ids(text, {.protected_ranges = {{0, text.size()}}}), std::vector<int32_t>{*id});
}

TEST(ProtectedRanges, BadRangesAreInvalidArgument) {
  const std::string text = "hello";
  for (const Ranges& bad : {Ranges{{0, 6}}, Ranges{{3, 2}}, Ranges{{2, 4}, {3, 5}},
                            Ranges{{3, 4}, {0, 1}}, Ranges{{9, 9}}}) {
    auto ids = Qwen().Encode(text, {.protected_ranges = bad});
    ASSERT_FALSE(ids.has_value());
    EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("protected_ranges"), std::string::npos);
  }
}

// A hand-written tokenizer whose special token is matched after normalization (normalized
// true, Lowercase normalizer), to cover the normalized-matcher path.
TEST(ProtectedRanges, NormalizedSpecialTokens) {
  nlohmann::json j = nlohmann::json::parse(R"({
    "added_tokens": [{"id": 9, "content": "<x>", "special": true, "normalized": true}],
    "normalizer": {"type": "Lowercase"},
    "pre_tokenizer": null,
    "decoder": {"type": "Fuse"},
    "model": {"type": "BPE", "vocab": {"<": 0, "x": 1, ">": 2, "a": 3, "b": 4}, "merges": []}
  })");
  auto tok = Tokenizer::FromJson(j.dump());
  ASSERT_TRUE(tok.has_value()) << tok.status().message();
  auto encode = [&](const std::string& text, Ranges protect) {
    auto ids = tok->Encode(text, {.protected_ranges = protect});
    EXPECT_TRUE(ids.has_value()) << ids.status().message();
    return ids ? *ids : std::vector<int32_t>{-1};
  };
  // Unchanged by normalization: offsets map directly, only the protected copy is text.
  EXPECT_EQ(encode("<x>a<x>", {}), (std::vector<int32_t>{9, 3, 9}));
  EXPECT_EQ(encode("<x>a<x>", {{4, 7}}), (std::vector<int32_t>{9, 3, 0, 1, 2}));
  // Changed by normalization ("<X>" -> "<x>"): the whole piece touching the range is text.
  EXPECT_EQ(encode("<X>b<X>", {}), (std::vector<int32_t>{9, 4, 9}));
  EXPECT_EQ(encode("<X>b<X>", {{4, 7}}), (std::vector<int32_t>{0, 1, 2, 4, 0, 1, 2}));
}

}  // namespace
}  // namespace tessera
