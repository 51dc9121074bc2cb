// Malformed tokenizer.json files, bad ids and bad text: every case must fail with a one-line
// message (or be handled as documented) and never crash. Run under ASan+UBSan by scripts/test.sh.
#include <gtest/gtest.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <random>
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

json Minimal() {
  return json::parse(R"({
    "added_tokens": [{"id": 5, "content": "<s>", "special": true}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4},
              "merges": ["a b", "\u0120 a"]}
  })");
}

Status LoadStatus(const std::string& text) {
  auto tok = Tokenizer::FromJson(text);
  return tok ? Status::Ok() : tok.status();
}

void ExpectError(const json& j, ErrorCode code, const std::string& fragment) {
  Status st = LoadStatus(j.dump());
  ASSERT_FALSE(st.ok()) << "accepted: " << j.dump();
  EXPECT_EQ(st.code(), code) << st.message();
  EXPECT_NE(st.message().find(fragment), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find('\n'), std::string::npos) << "multi-line: " << st.message();
}

TEST(MalformedTokenizer, InvalidJson) {
  for (std::string text : {"", "{", "not json", "[1,2", "{\"model\": }", "\xff\xfe"}) {
    Status st = LoadStatus(text);
    EXPECT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ErrorCode::kCorrupt) << text;
  }
  EXPECT_EQ(LoadStatus("[]").code(), ErrorCode::kCorrupt);
  EXPECT_EQ(LoadStatus("{}").code(), ErrorCode::kCorrupt);
}

// Nesting far past any real file is refused before anything recurses over it (the error
// preview of a wrong "type" and the Sequence parsers would otherwise overflow the stack).
TEST(MalformedTokenizer, DeepNestingIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string& text :
       {R"({"model": {"type": )" + deep + "}}",
        R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": )" + deep + "}"}) {
    Status st = LoadStatus(text);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), ErrorCode::kCorrupt);
    EXPECT_NE(st.message().find("nests deeper than"), std::string::npos) << st.message();
  }
  // A real file's nesting still loads.
  json j = Minimal();
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       json::array({{{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}}})}};
  EXPECT_TRUE(LoadStatus(j.dump()).ok()) << LoadStatus(j.dump()).message();
}

TEST(MalformedTokenizer, UnsupportedModelType) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    json j = Minimal();
    j["model"]["type"] = type;
    ExpectError(j, ErrorCode::kUnsupported,
                std::string("unsupported tokenizer model type ") + type + "; supported: BPE");
  }
}

TEST(MalformedTokenizer, MissingOrWrongVocab) {
  json j = Minimal();
  j["model"].erase("vocab");
  ExpectError(j, ErrorCode::kCorrupt, "vocab");
  j["model"]["vocab"] = json::array({1, 2});
  ExpectError(j, ErrorCode::kCorrupt, "vocab");
  j["model"]["vocab"] = {{"a", "zero"}};
  ExpectError(j, ErrorCode::kCorrupt, "token id");
  j["model"]["vocab"] = {{"a", -3}};
  ExpectError(j, ErrorCode::kCorrupt, "token id");
  j["model"]["vocab"] = {{"a", 4000000000LL}};
  ExpectError(j, ErrorCode::kCorrupt, "token id");
  j["model"]["vocab"] = {{"a", 2000000000}};
  ExpectError(j, ErrorCode::kCorrupt, "implausibly large");
}

TEST(MalformedTokenizer, BadMerges) {
  json j = Minimal();
  j["model"]["merges"] = {"a zz"};
  ExpectError(j, ErrorCode::kCorrupt, "'zz' is not in the vocab");
  j["model"]["merges"] = {"b a"};
  ExpectError(j, ErrorCode::kCorrupt, "merged token 'ba'");
  j["model"]["merges"] = {"a b c"};
  ExpectError(j, ErrorCode::kCorrupt, "exactly one space");
  j["model"]["merges"] = {json::array({"a"})};
  ExpectError(j, ErrorCode::kCorrupt, "merges[0]");
  j["model"]["merges"] = {7};
  ExpectError(j, ErrorCode::kCorrupt, "merges[0]");
  j["model"]["merges"] = "a b";
  ExpectError(j, ErrorCode::kCorrupt, "merges");
}

TEST(MalformedTokenizer, BadRegexAndUnknownComponents) {
  json j = Minimal();
  j["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  ExpectError(j, ErrorCode::kInvalidArgument, "bad regex pattern '(unclosed'");
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
  ExpectError(j, ErrorCode::kCorrupt, "Sideways");
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", "a"}};
  ExpectError(j, ErrorCode::kCorrupt, "pattern");
  j = Minimal();
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", "[z-a]"}}}, {"content", ""}};
  ExpectError(j, ErrorCode::kInvalidArgument, "bad regex");
  j["normalizer"] = {{"type", "Precompiled"}};
  ExpectError(j, ErrorCode::kUnsupported, "Precompiled");
  j = Minimal();
  j["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  ExpectError(j, ErrorCode::kUnsupported, "UnicodeScripts");
  j = Minimal();
  j["decoder"] = {{"type", "CTC"}};
  ExpectError(j, ErrorCode::kUnsupported, "CTC");
  j = Minimal();
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single", {{{"SpecialToken", {{"id", "<cls>"}}}}}},
                         {"special_tokens", json::object()}};
  ExpectError(j, ErrorCode::kCorrupt, "<cls>");
  j = Minimal();
  j["decoder"] = {{"type", "Strip"}, {"content", "ab"}};
  ExpectError(j, ErrorCode::kCorrupt, "one character");
  j = Minimal();
  j["model"]["dropout"] = 0.1;
  ExpectError(j, ErrorCode::kUnsupported, "dropout");
}

TEST(MalformedTokenizer, AddedTokenConflicts) {
  json j = Minimal();
  j["added_tokens"].push_back({{"id", 5}, {"content", "<other>"}});
  ExpectError(j, ErrorCode::kCorrupt, "id 5 is given to both '<s>' and '<other>'");
  j = Minimal();
  j["added_tokens"].push_back({{"id", 6}, {"content", "<s>"}});
  ExpectError(j, ErrorCode::kCorrupt, "listed with ids 5 and 6");
  j = Minimal();
  j["added_tokens"].push_back({{"id", 7}, {"content", ""}});
  ExpectError(j, ErrorCode::kCorrupt, "must not be empty");
  j = Minimal();
  j["added_tokens"].push_back({{"content", "<x>"}});
  ExpectError(j, ErrorCode::kCorrupt, "missing 'id'");
  j = Minimal();
  j["added_tokens"].push_back({{"id", 8}, {"content", "<x>"}, {"lstrip", "yes"}});
  ExpectError(j, ErrorCode::kCorrupt, "lstrip");
  j = Minimal();
  j["added_tokens"] = {{"id", 9}};
  j["added_tokens"] = json::array({"<s>"});
  ExpectError(j, ErrorCode::kCorrupt, "added_tokens[0]");
}

Tokenizer LoadMinimal() {
  auto tok = Tokenizer::FromJson(Minimal().dump());
  EXPECT_TRUE(tok.has_value()) << tok.status().message();
  if (!tok) std::abort();
  return std::move(tok).value();
}

TEST(MalformedIds, DecodeRejectsUnknownIds) {
  Tokenizer tok = LoadMinimal();
  EXPECT_EQ(tok.vocab_size(), 6);
  for (int32_t bad : {-1, 6, INT32_MAX, INT32_MIN}) {
    std::vector<int32_t> ids = {0, bad};
    auto text = tok.Decode(ids, false);
    ASSERT_FALSE(text.has_value());
    EXPECT_EQ(text.status().code(), ErrorCode::kOutOfRange);
    EXPECT_NE(text.status().message().find(std::to_string(bad)), std::string::npos);
    StreamingDetokenizer stream(tok, false);
    EXPECT_FALSE(stream.Push(bad).has_value());
  }
  EXPECT_EQ(*tok.Decode(std::vector<int32_t>{}, false), "");
}

TEST(MalformedText, InvalidUtf8IsRejectedWithOffset) {
  Tokenizer tok = LoadMinimal();
  for (std::string text : {std::string("ab\xff"), std::string("\xc3"), std::string("a\xed\xa0\x80"),
                           std::string("\xc0\xaf"), std::string("ab\xf4\x90\x80\x80")}) {
    auto ids = tok.Encode(text);
    ASSERT_FALSE(ids.has_value());
    EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("not valid UTF-8"), std::string::npos);
  }
  auto ids = tok.Encode("ab\xff");
  EXPECT_NE(ids.status().message().find("offset 2"), std::string::npos) << ids.status().message();
  // NUL and other control characters are valid text.
  std::string with_nul("a\0b", 3);
  EXPECT_TRUE(tok.Encode(with_nul).has_value());
}

TEST(MalformedText, RandomBytesAndIdsNeverCrash) {
  Tokenizer tok = LoadMinimal();
  std::mt19937 rng(1234);
  for (int round = 0; round < 2000; ++round) {
    std::string text(rng() % 24, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    auto ids = tok.Encode(text, Opts((round & 1) != 0, false));
    if (ids) {
      auto back = tok.Decode(*ids, false);
      EXPECT_TRUE(back.has_value());
    }
    std::vector<int32_t> random_ids(rng() % 12);
    for (int32_t& id : random_ids) id = static_cast<int32_t>(rng() % 8) - 1;
    auto decoded = tok.Decode(random_ids, (round & 2) != 0);
    StreamingDetokenizer stream(tok, false);
    for (int32_t id : random_ids) (void)stream.Push(id);
    (void)stream.Finish();
  }
}

}  // namespace
}  // namespace tessera
