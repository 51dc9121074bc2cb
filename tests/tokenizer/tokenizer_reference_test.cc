// Checks the tokenizer against vectors produced by Hugging Face tokenizers (Rust) for five real
// tokenizer.json files, and against llama2.c's encoding for stories260k. Every expectation comes
// from the reference files; nothing is computed by the code under test.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "test_support.h"
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

json LoadJson(const std::string& path) {
  json j = json::parse(test::ReadFile(path), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

// Tokenizers are large (up to 33 MB of JSON); load each once per process.
const Tokenizer& LoadTokenizer(const std::string& path) {
  static std::map<std::string, Tokenizer> cache;
  auto it = cache.find(path);
  if (it == cache.end()) {
    auto tok = Tokenizer::FromFile(path);
    if (!tok) {
      ADD_FAILURE() << tok.status().message();
      std::abort();
    }
    it = cache.emplace(path, std::move(tok).value()).first;
  }
  return it->second;
}

std::string Show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  s += ']';
  return s;
}

std::string StreamDecode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                         std::string* error) {
  StreamingDetokenizer stream(tok, skip);
  std::string out;
  for (int32_t id : ids) {
    auto piece = stream.Push(id);
    if (!piece) {
      *error = piece.status().message();
      return out;
    }
    // Each piece must be whole characters.
    if (!piece->empty() && !IsValidUtf8(*piece)) *error = "piece is not valid UTF-8";
    out += *piece;
  }
  out += stream.Finish();
  return out;
}

class ReferenceVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceVectors, EncodeDecodeAndStreamMatchHuggingFace) {
  const std::string name = GetParam();
  const Tokenizer& tok =
      LoadTokenizer(test::SharedDir() + "/tokenizers/" + name + "/tokenizer.json");
  json cases = LoadJson(test::SharedDir() + "/tokenizers/reference/" + name + ".encode.json");
  ASSERT_TRUE(cases.is_array());
  int ids_ok = 0, special_ok = 0, decoded_ok = 0, stream_ok = 0, stream_skip_ok = 0;
  for (const json& c : cases) {
    std::string text = c["text"].get<std::string>();
    auto expected_ids = c["ids"].get<std::vector<int32_t>>();
    auto expected_special = c["ids_with_special"].get<std::vector<int32_t>>();
    std::string expected_decoded = c["decoded"].get<std::string>();

    auto ids = tok.Encode(text);
    ASSERT_TRUE(ids.has_value()) << ids.status().message();
    if (*ids == expected_ids) {
      ++ids_ok;
    } else {
      ADD_FAILURE() << name << " ids differ for " << json(text).dump() << "\n  got  " << Show(*ids)
                    << "\n  want " << Show(expected_ids);
    }
    auto with_special = tok.Encode(text, Opts(true, false));
    ASSERT_TRUE(with_special.has_value());
    if (*with_special == expected_special) {
      ++special_ok;
    } else {
      ADD_FAILURE() << name << " ids_with_special differ for " << json(text).dump();
    }
    auto decoded = tok.Decode(expected_ids, false);
    ASSERT_TRUE(decoded.has_value()) << decoded.status().message();
    if (*decoded == expected_decoded) {
      ++decoded_ok;
    } else {
      ADD_FAILURE() << name << " decoded differs for " << json(text).dump() << "\n  got  "
                    << json(*decoded).dump() << "\n  want " << json(expected_decoded).dump();
    }
    // Streaming property: concatenated pieces equal the reference decode (which the
    // skip_special=false decode must reproduce) and the skip_special=true decode.
    std::string error;
    std::string streamed = StreamDecode(tok, expected_special, false, &error);
    auto full = tok.Decode(expected_special, false);
    ASSERT_TRUE(full.has_value());
    if (error.empty() && streamed == *full) {
      ++stream_ok;
    } else {
      ADD_FAILURE() << name << " stream differs for " << json(text).dump() << " " << error
                    << "\n  got  " << json(streamed).dump() << "\n  want " << json(*full).dump();
    }
    error.clear();
    std::string streamed_skip = StreamDecode(tok, expected_special, true, &error);
    auto full_skip = tok.Decode(expected_special, true);
    ASSERT_TRUE(full_skip.has_value());
    if (error.empty() && streamed_skip == *full_skip)
      ++stream_skip_ok;
    else
      ADD_FAILURE() << name << " skip-special stream differs for " << json(text).dump();
  }
  std::printf(
      "%s: ids %d/%zu, ids_with_special %d/%zu, decoded %d/%zu, stream %d/%zu, "
      "stream(skip_special) %d/%zu\n",
      name.c_str(), ids_ok, cases.size(), special_ok, cases.size(), decoded_ok, cases.size(),
      stream_ok, cases.size(), stream_skip_ok, cases.size());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceVectors,
                         ::testing::Values("Qwen2.5-1.5B-Instruct", "Qwen3-4B", "MiniCPM-V-4_5",
                                           "gemma-3-1b-it", "Meta-Llama-3-8B"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

TEST(Stories260k, PromptIdsAndDecodedTextMatchLlama2c) {
  std::string dir = test::SharedDir() + "/models/stories260k";
  const Tokenizer& tok = LoadTokenizer(dir + "/tokenizer.json");
  json ref = LoadJson(dir + "/reference_greedy.json");
  ASSERT_TRUE(ref["cases"].is_array());
  int ok = 0;
  for (const json& c : ref["cases"]) {
    std::string prompt = c["prompt"].get<std::string>();
    auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
    auto generated = c["generated_ids"].get<std::vector<int32_t>>();
    auto ids = tok.Encode(prompt, Opts(true, false));
    ASSERT_TRUE(ids.has_value()) << ids.status().message();
    EXPECT_EQ(Show(*ids), Show(prompt_ids)) << json(prompt).dump();
    std::vector<int32_t> all = prompt_ids;
    all.insert(all.end(), generated.begin(), generated.end());
    auto text = tok.Decode(all, true);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text, c["text"].get<std::string>()) << c["id"];
    std::string error;
    EXPECT_EQ(StreamDecode(tok, all, true, &error), c["text"].get<std::string>()) << error;
    ok += (*ids == prompt_ids && *text == c["text"].get<std::string>()) ? 1 : 0;
  }
  std::printf("stories260k: %d/%zu cases\n", ok, ref["cases"].size());
}

TEST(SpecialTokens, SplitSpecialTokensEncodesMarkersAsText) {
  const Tokenizer& tok = LoadTokenizer(test::SharedDir() + "/tokenizers/Qwen3-4B/tokenizer.json");
  std::string text = "<|im_start|>user\nhi<|im_end|>";
  auto normal = tok.Encode(text);
  ASSERT_TRUE(normal.has_value());
  EXPECT_EQ(normal->front(), 151644);  // the README's id for <|im_start|>
  auto split = tok.Encode(text, Opts(false, true));
  ASSERT_TRUE(split.has_value());
  for (int32_t id : *split) EXPECT_FALSE(tok.IsSpecial(id)) << id;
  auto back = tok.Decode(*split, false);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, text);
  // Non-special added tokens (e.g. <think>, special=false in the file) are still matched.
  auto think = tok.Encode("<think>x", Opts(false, true));
  ASSERT_TRUE(think.has_value());
  EXPECT_EQ(think->front(), 151667);
}

TEST(SpecialTokens, IdsAndLookups) {
  const Tokenizer& gemma =
      LoadTokenizer(test::SharedDir() + "/tokenizers/gemma-3-1b-it/tokenizer.json");
  EXPECT_EQ(gemma.vocab_size(), 262145);
  EXPECT_EQ(gemma.TokenToId("<bos>"), 2);
  EXPECT_EQ(gemma.TokenToId("<start_of_turn>"), 105);
  EXPECT_TRUE(gemma.IsSpecial(106));
  EXPECT_EQ(gemma.IdToToken(1), "<eos>");
  EXPECT_FALSE(gemma.IdToToken(262145).has_value());
  const Tokenizer& llama =
      LoadTokenizer(test::SharedDir() + "/tokenizers/Meta-Llama-3-8B/tokenizer.json");
  EXPECT_EQ(llama.vocab_size(), 128256);
  EXPECT_EQ(llama.TokenToId("<|begin_of_text|>"), 128000);
  const Tokenizer& minicpm =
      LoadTokenizer(test::SharedDir() + "/tokenizers/MiniCPM-V-4_5/tokenizer.json");
  EXPECT_EQ(minicpm.vocab_size(), 151748);
}

}  // namespace
}  // namespace tessera
