// Feature tests on tiny hand-written tokenizer.json files. The expected ids were worked out by
// hand from the Hugging Face `tokenizers` rules (merge ranks, split behaviors, added-token
// flags), independently of this implementation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

using nlohmann::json;

// Built field by field: designated initializers warn when EncodeOptions gains fields.
EncodeOptions Opts(bool add_special_tokens, bool split_special_tokens) {
  EncodeOptions o;
  o.add_special_tokens = add_special_tokens;
  o.split_special_tokens = split_special_tokens;
  return o;
}

// A SentencePiece-style model: Metaspace (prepend_scheme first), <unk>, fused unknowns.
json SentencePieceStyle() {
  return json::parse(R"({
    "added_tokens": [
      {"id": 0, "content": "<unk>", "special": true},
      {"id": 1, "content": "<s>", "special": true},
      {"id": 2, "content": "</s>", "special": true}
    ],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                      "split": true},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"},
      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": false,
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5, "c": 6,
                "\u2581a": 7, "ab": 8, "\u2581ab": 9},
      "merges": ["\u2581 a", ["a", "b"], "\u2581a b"]}
  })");
}

Tokenizer Load(const json& j) {
  auto tok = Tokenizer::FromJson(j.dump());
  EXPECT_TRUE(tok.has_value()) << tok.status().message();
  if (!tok) std::abort();
  return std::move(tok).value();
}

std::vector<int32_t> Ids(const Tokenizer& tok, const std::string& text, EncodeOptions o = {}) {
  auto ids = tok.Encode(text, o);
  EXPECT_TRUE(ids.has_value()) << ids.status().message();
  return ids ? *ids : std::vector<int32_t>{-1};
}

std::string Text(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip = false) {
  auto text = tok.Decode(ids, skip);
  EXPECT_TRUE(text.has_value()) << text.status().message();
  return text ? *text : "<error>";
}

TEST(Bpe, MergesAsStringsAndPairsFollowRank) {
  Tokenizer tok = Load(SentencePieceStyle());
  // "▁ab": (▁,a) rank 0 first, then (▁a,b) rank 2 -> "▁ab".
  EXPECT_EQ(Ids(tok, "ab"), (std::vector<int32_t>{9}));
  // " b" -> "▁b" already starts with ▁ (no prefix added); no merge applies.
  EXPECT_EQ(Ids(tok, " b"), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(Ids(tok, "ab", Opts(true, false)), (std::vector<int32_t>{1, 9, 2}));
}

TEST(Bpe, UnknownCharactersFuseIntoOneUnk) {
  json j = SentencePieceStyle();
  Tokenizer fused = Load(j);
  EXPECT_EQ(Ids(fused, "xyz"), (std::vector<int32_t>{3, 0}));
  j["model"]["fuse_unk"] = false;
  Tokenizer separate = Load(j);
  EXPECT_EQ(Ids(separate, "xyz"), (std::vector<int32_t>{3, 0, 0, 0}));
}

TEST(Bpe, ByteFallbackUsesByteTokensAndDecodesThem) {
  json j = SentencePieceStyle();
  j["model"]["byte_fallback"] = true;
  j["model"]["vocab"]["<0xC3>"] = 20;
  j["model"]["vocab"]["<0xA9>"] = 21;
  Tokenizer tok = Load(j);
  // "é" is U+00E9 = C3 A9; "x" has no byte tokens here, so it falls back to <unk>.
  EXPECT_EQ(Ids(tok, "\xC3\xA9x"), (std::vector<int32_t>{3, 20, 21, 0}));
  EXPECT_EQ(Text(tok, {3, 20, 21, 4}),
            "\xC3\xA9"
            "a");
  // A lone continuation byte is invalid: one U+FFFD per byte token.
  EXPECT_EQ(Text(tok, {4, 21, 21, 4}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "a");
}

TEST(Bpe, IgnoreMergesTakesWholeWordFromVocab) {
  json j = SentencePieceStyle();
  j["model"]["vocab"]["\u2581abc"] = 30;
  Tokenizer merging = Load(j);
  EXPECT_EQ(Ids(merging, "abc"), (std::vector<int32_t>{9, 6}));
  j["model"]["ignore_merges"] = true;
  Tokenizer whole = Load(j);
  EXPECT_EQ(Ids(whole, "abc"), (std::vector<int32_t>{30}));
}

TEST(AddedTokens, LstripRstripAndSingleWord) {
  json j = SentencePieceStyle();
  j["added_tokens"].push_back(
      {{"id", 11}, {"content", "<mask>"}, {"lstrip", true}, {"special", true}});
  Tokenizer lstrip = Load(j);
  // "a" | " <mask>" | " b" -> ▁a, <mask>, ▁ b (not at the start: no prefix ▁).
  EXPECT_EQ(Ids(lstrip, "a <mask> b"), (std::vector<int32_t>{7, 11, 3, 5}));
  EXPECT_EQ(Text(lstrip, {7, 11, 3, 5}), "a<mask> b");
  EXPECT_EQ(Text(lstrip, {7, 11, 3, 5}, true), "a b");

  j["added_tokens"][3]["lstrip"] = false;
  j["added_tokens"][3]["rstrip"] = true;
  Tokenizer rstrip = Load(j);
  // "a " | "<mask> " | "b" -> "▁a▁" splits into ▁a, ▁.
  EXPECT_EQ(Ids(rstrip, "a <mask> b"), (std::vector<int32_t>{7, 3, 11, 5}));

  json k = SentencePieceStyle();
  k["added_tokens"].push_back(
      {{"id", 12}, {"content", "cc"}, {"single_word", true}, {"normalized", false}});
  Tokenizer single = Load(k);
  EXPECT_EQ(Ids(single, "cc ccc"), (std::vector<int32_t>{12, 3, 6, 6, 6}));
}

TEST(AddedTokens, SplitSpecialTokensTreatsThemAsText) {
  Tokenizer tok = Load(SentencePieceStyle());
  EXPECT_EQ(Ids(tok, "<s>a"), (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(Ids(tok, "<s>a", Opts(false, true)), (std::vector<int32_t>{3, 0, 4}));
}

// A character-level model for checking Split behaviors and Digits through the merges they allow.
json SplitModel(const json& pre_tokenizer) {
  json j = json::parse(R"({
    "model": {"type": "BPE",
      "vocab": {"a": 0, "b": 1, "-": 2, "a-": 3, "-b": 4, "a-b": 5, "--": 6,
                "1": 7, "2": 8, "12": 9},
      "merges": ["a -", "a- b", "- b", "- -", "1 2"]},
    "decoder": {"type": "Fuse"}
  })");
  j["pre_tokenizer"] = pre_tokenizer;
  return j;
}

json SplitOn(const std::string& behavior, bool invert = false) {
  return {{"type", "Split"},
          {"pattern", {{"String", "-"}}},
          {"behavior", behavior},
          {"invert", invert}};
}

TEST(PreTokenizers, SplitBehaviors) {
  EXPECT_EQ(Ids(Load(SplitModel(nullptr)), "a-b"), (std::vector<int32_t>{5}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("Isolated"))), "a-b"), (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("Removed"))), "a-b"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("MergedWithPrevious"))), "a-b"),
            (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("MergedWithNext"))), "a-b"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("MergedWithPrevious"))), "a--b"),
            (std::vector<int32_t>{3, 2, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("Contiguous"))), "a--b"), (std::vector<int32_t>{0, 6, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("Isolated"))), "a--b"), (std::vector<int32_t>{0, 2, 2, 1}));
  EXPECT_EQ(Ids(Load(SplitModel(SplitOn("Removed", true))), "a-b"), (std::vector<int32_t>{2}));
  json regex = {{"type", "Split"}, {"pattern", {{"Regex", "-+"}}}, {"behavior", "Isolated"}};
  EXPECT_EQ(Ids(Load(SplitModel(regex)), "a--b"), (std::vector<int32_t>{0, 6, 1}));
}

TEST(PreTokenizers, Digits) {
  json individual = {{"type", "Digits"}, {"individual_digits", true}};
  json grouped = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(Ids(Load(SplitModel(individual)), "12a"), (std::vector<int32_t>{7, 8, 0}));
  EXPECT_EQ(Ids(Load(SplitModel(grouped)), "12a"), (std::vector<int32_t>{9, 0}));
}

TEST(Normalizers, LowercaseStripAndRegexReplace) {
  json j = SplitModel(nullptr);
  j["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
      {"type": "Strip", "strip_left": true, "strip_right": true},
      {"type": "Lowercase"},
      {"type": "Replace", "pattern": {"Regex": "_+"}, "content": "-"}]})");
  Tokenizer tok = Load(j);
  EXPECT_EQ(Ids(tok, "  A__B \n"), (std::vector<int32_t>{5}));
}

TEST(Decoders, MetaspaceDropsFirstReplacementOnly) {
  json j = SentencePieceStyle();
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}};
  Tokenizer tok = Load(j);
  EXPECT_EQ(Text(tok, {7, 7, 3, 5}), "a a b");
}

TEST(Streaming, HoldsBackIncompleteByteRuns) {
  json j = SentencePieceStyle();
  j["model"]["byte_fallback"] = true;
  j["model"]["vocab"]["<0xC3>"] = 20;
  j["model"]["vocab"]["<0xA9>"] = 21;
  Tokenizer tok = Load(j);
  StreamingDetokenizer stream(tok, false);
  EXPECT_EQ(*stream.Push(7), "a");  // leading "▁" stripped at the start
  EXPECT_EQ(*stream.Push(20), "");  // half of "é"
  EXPECT_EQ(*stream.Push(21), "");  // run still open: more bytes could invalidate it
  EXPECT_EQ(*stream.Push(3), "\xC3\xA9 ");
  EXPECT_EQ(*stream.Push(4), "a");
  EXPECT_EQ(stream.Finish(), "");
}

}  // namespace
}  // namespace tessera
