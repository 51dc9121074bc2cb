// GGUF tokenizer metadata that is unsupported or inconsistent is refused with one line saying
// what is wrong; nothing crashes.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "gguf_test_util.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tessera {
namespace {

using test::TinyByteLevel;

// Unsupported names and inconsistent metadata are refused with one line saying what is wrong.
void ExpectRefused(const GgufTokenizerData& g, ErrorCode code, const std::string& needle) {
  auto tok = TokenizerFromGguf(g);
  ASSERT_FALSE(tok.has_value()) << needle;
  EXPECT_EQ(tok.status().code(), code) << tok.status().message();
  EXPECT_NE(tok.status().message().find(needle), std::string::npos) << tok.status().message();
  EXPECT_EQ(tok.status().message().find('\n'), std::string::npos) << tok.status().message();
}

TEST(GgufRefusals, UnknownModelsAndPreNamesAreNamed) {
  GgufTokenizerData g = TinyByteLevel("qwen2");
  g.model = "bert";
  ExpectRefused(g, ErrorCode::kUnsupported, "'bert' is not supported");
  ExpectRefused(g, ErrorCode::kUnsupported, "qwen2, qwen35, llama-bpe");
  g.model = "";
  ExpectRefused(g, ErrorCode::kUnsupported, "tokenizer.ggml.model is missing");
  g.model = "gpt2";
  g.pre = "deepseek-llm";
  ExpectRefused(g, ErrorCode::kUnsupported, "tokenizer.ggml.pre 'deepseek-llm' is not supported");
  g.pre = "";
  ExpectRefused(g, ErrorCode::kUnsupported, "tokenizer.ggml.pre is missing");
  g.pre = "default";
  ExpectRefused(g, ErrorCode::kUnsupported,
                "'default' is not supported for tokenizer.ggml.model 'gpt2'");
  g = TinyByteLevel("qwen2");
  g.model = "llama";
  g.scores.assign(g.tokens.size(), 0.0f);
  ExpectRefused(g, ErrorCode::kUnsupported,
                "'qwen2' is not supported for tokenizer.ggml.model 'llama'");
}

TEST(GgufRefusals, InconsistentMetadataIsCorrupt) {
  GgufTokenizerData base = TinyByteLevel("qwen2");
  GgufTokenizerData g = base;
  g.eos_id = 9999;
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.eos_token_id = 9999 is outside");
  g = base;
  g.token_types.pop_back();
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.token_type has 257 entries for 258");
  g = base;
  g.token_types[5] = 9;
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.token_type[5] = 9");
  g = base;
  g.tokens[7] = "";
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.tokens[7] is empty");
  g = base;
  g.tokens[7] = "\xff";
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.tokens[7] is not valid UTF-8");
  g = base;
  g.tokens[8] = g.tokens[9];
  ExpectRefused(g, ErrorCode::kCorrupt, "is listed with ids 8 and 9");
  g = base;
  g.merges = {"1 2", "x zz"};
  ExpectRefused(g, ErrorCode::kCorrupt, "merges[1]: token 'zz' is not in the vocab");
  g.merges = {"1 2", "a b"};
  ExpectRefused(g, ErrorCode::kCorrupt, "merges[1]: merged token 'ab' is not in the vocab");
  g.merges = {"12"};
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.merges[0]: expected \"left right\"");
  g.merges.clear();
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.merges is missing or empty");
  g = base;
  g.add_bos_token = true;
  ExpectRefused(g, ErrorCode::kCorrupt, "add_bos_token is true but tokenizer.ggml.bos_token_id");
  g = base;
  g.token_types[200] = static_cast<int32_t>(GgufTokenType::kUnused);
  g.add_eos_token = true;
  g.eos_id = 200;
  ExpectRefused(g, ErrorCode::kCorrupt, "eos_token_id = 200 is an unused filler id");
  g = base;
  g.pre = "llama-bpe";  // llama.cpp adds BOS by default for Llama 3
  ExpectRefused(g, ErrorCode::kCorrupt, "(llama.cpp's default for this pre-tokenizer)");
  g = base;
  g.tokens.clear();
  g.token_types.clear();
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.tokens is missing or empty");
  g = base;
  g.model = "llama";
  g.pre = "default";
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.scores has 0 entries for 258 tokens");
  g.scores.assign(g.tokens.size(), 0.0f);
  g.scores[3] = std::numeric_limits<float>::quiet_NaN();
  ExpectRefused(g, ErrorCode::kCorrupt, "tokenizer.ggml.scores[3] is not a finite number");
}

}  // namespace
}  // namespace tessera
