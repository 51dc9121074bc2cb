// Runs the built `tessera tokenize` / `tessera detokenize` commands on the Qwen3 tokenizer and
// compares with the Hugging Face reference vectors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::json;

std::string ModelDir() {
  return test::SharedDir() + "/tokenizers/Qwen3-4B";
}

TEST(TokenizeCli, EncodesJsonLinesLikeReference) {
  json cases =
      json::parse(test::ReadFile(test::SharedDir() + "/tokenizers/reference/Qwen3-4B.encode.json"));
  std::string input, expected, ids_input, expected_text;
  for (size_t i = 0; i < 20 && i < cases.size(); ++i) {
    input += cases[i]["text"].dump() + "\n";
    expected += cases[i]["ids"].dump() + "\n";
    ids_input += cases[i]["ids"].dump() + "\n";
    expected_text += json(cases[i]["decoded"]).dump() + "\n";
  }
  auto r = test::RunTessera({"tokenize", "--model", ModelDir()}, input + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  auto d = test::RunTessera({"detokenize", "--model", ModelDir()}, ids_input);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, expected_text);
}

// --model FILE.gguf: the tokenizer rebuilt from the file's tokenizer.ggml.* keys (written here
// as llama.cpp's converter writes Qwen3's) encodes and decodes like Hugging Face's.
TEST(TokenizeCli, GgufFileTokenizesLikeReference) {
  ModelConfig config;
  config.vocab_size = 151936;  // Qwen3's embedding rows: ids past the tokenizer are [PADn]
  test::GgufWriter writer;
  ASSERT_TRUE(test::AddGgufTokenizer(ModelDir(), config, "qwen2", false, &writer).ok());
  test::TempDir tmp;
  const std::string file = tmp.path() + "/qwen3-tokenizer.gguf";
  test::WriteFile(file, writer.Build());
  json cases =
      json::parse(test::ReadFile(test::SharedDir() + "/tokenizers/reference/Qwen3-4B.encode.json"));
  std::string input, expected, ids_input, expected_text;
  for (const json& c : cases) {
    input += c["text"].dump() + "\n";
    expected += c["ids"].dump() + "\n";
    ids_input += c["ids"].dump() + "\n";
    expected_text += json(c["decoded"]).dump() + "\n";
  }
  auto r = test::RunTessera({"tokenize", "--model", file}, input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);
  auto d = test::RunTessera({"detokenize", "--model", file}, ids_input);
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, expected_text);
  // A file that is not GGUF is refused with the reader's error, not read as a folder.
  test::WriteFile(tmp.path() + "/not.gguf", "GGUF");
  auto bad = test::RunTessera({"tokenize", "--model", tmp.path() + "/not.gguf"}, "\"a\"\n");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("not.gguf"), std::string::npos) << bad.err;
}

TEST(TokenizeCli, SpecialFlags) {
  auto r = test::RunTessera(
      {"tokenize", "--model", test::SharedDir() + "/tokenizers/gemma-3-1b-it", "--add-special"},
      "\"<start_of_turn>\"\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[2,105]\n");  // README: <bos>=2, <start_of_turn>=105
  auto d = test::RunTessera({"detokenize", "--model", ModelDir(), "--skip-special"},
                            "[151644,151645]\n");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "\"\"\n");
}

TEST(TokenizeCli, BadLinesNameTheLine) {
  auto r = test::RunTessera({"tokenize", "--model", ModelDir()}, "\"ok\"\n[1,2]\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;
  auto bad_json = test::RunTessera({"tokenize", "--model", ModelDir()}, "\"unterminated\n");
  EXPECT_EQ(bad_json.exit_code, 1);
  EXPECT_NE(bad_json.err.find("line 1"), std::string::npos) << bad_json.err;
  auto d = test::RunTessera({"detokenize", "--model", ModelDir()}, "[1]\n\n[1,-5]\n");
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_NE(d.err.find("line 3"), std::string::npos) << d.err;
  auto big = test::RunTessera({"detokenize", "--model", ModelDir()}, "[999999999]\n");
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_NE(big.err.find("line 1"), std::string::npos) << big.err;
  auto nodir = test::RunTessera({"tokenize", "--model", "/nonexistent"}, "\"x\"\n");
  EXPECT_NE(nodir.exit_code, 0);
  EXPECT_EQ(nodir.signal, 0);
}

TEST(TokenizeCli, InvalidUtf8FromByteTokensBecomesReplacementChar) {
  // 127 is the byte-level token for byte 0xC3 alone ("Ã"): an incomplete UTF-8 sequence.
  auto d = test::RunTessera({"detokenize", "--model", ModelDir()}, "[127]\n");
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(d.out, "\"\xEF\xBF\xBD\"\n");
}

}  // namespace
}  // namespace tessera
