// `tessera render-chat` end to end: JSON Lines in, one JSON object per line out, checked
// against reference vectors.
#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

std::vector<ordered_json> OutputLines(const std::string& out) {
  std::vector<ordered_json> lines;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) lines.push_back(ordered_json::parse(line, nullptr, false));
  return lines;
}

// `model`: the folder's reference vectors rendered from `model` (default: the folder itself).
void CheckFolder(const std::string& folder, size_t max_vectors, std::string model = "") {
  if (model.empty()) model = test::SharedDir() + "/tokenizers/" + folder;
  auto text =
      ReadFileToString(test::SharedDir() + "/tokenizers/reference/" + folder + ".chat.json");
  ASSERT_TRUE(text.has_value());
  ordered_json vectors = ordered_json::parse(*text);
  std::string input;
  size_t n = std::min(max_vectors, vectors.size());
  for (size_t i = 0; i < n; ++i) {
    ordered_json req = {{"messages", vectors[i]["messages"]},
                        {"add_generation_prompt", vectors[i]["add_generation_prompt"]},
                        {"kwargs", vectors[i]["kwargs"]}};
    input += req.dump() + "\n";
  }
  auto r = test::RunTessera({"render-chat", "--model", model}, input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<ordered_json> lines = OutputLines(r.out);
  ASSERT_EQ(lines.size(), n) << r.out;
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE(folder + " vector " + std::to_string(i));
    if (vectors[i]["rendered"].is_null()) {
      EXPECT_EQ(lines[i]["error"], vectors[i]["error"]);
    } else {
      EXPECT_EQ(lines[i]["rendered"], vectors[i]["rendered"]);
    }
  }
}

TEST(RenderChatCli, MatchesReferenceVectors) {
  CheckFolder("Qwen3-4B", 12);
  CheckFolder("gemma-3-1b-it", 14);  // includes raise_exception cases
  CheckFolder("Qwen3.5-4B", 6);      // template from chat_template.jinja
}

// A GGUF file's tokenizer.chat_template, written with its special tokens as llama.cpp's
// converter writes Qwen3's, renders like the folder's.
TEST(RenderChatCli, GgufFileMatchesReferenceVectors) {
  ModelConfig config;
  config.vocab_size = 151936;
  test::GgufWriter writer;
  ASSERT_TRUE(test::AddGgufTokenizer(test::SharedDir() + "/tokenizers/Qwen3-4B", config, "qwen2",
                                     /*chat_template=*/true, &writer)
                  .ok());
  test::TempDir tmp;
  const std::string file = tmp.path() + "/qwen3.gguf";
  test::WriteFile(file, writer.Build());
  CheckFolder("Qwen3-4B", 42, file);
  // Without tokenizer.chat_template the file is refused with a line that says so.
  test::GgufWriter bare;
  ASSERT_TRUE(test::AddGgufTokenizer(test::SharedDir() + "/tokenizers/Qwen3-4B", config, "qwen2",
                                     /*chat_template=*/false, &bare)
                  .ok());
  test::WriteFile(tmp.path() + "/bare.gguf", bare.Build());
  auto r = test::RunTessera({"render-chat", "--model", tmp.path() + "/bare.gguf"}, "");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;
}

TEST(RenderChatCli, BadLinesGiveErrorObjectsAndContinue) {
  std::string dir = test::SharedDir() + "/tokenizers/Qwen2.5-1.5B-Instruct";
  auto r = test::RunTessera({"render-chat", "--model", dir},
                            "not json\n{\"messages\": 5}\n"
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<ordered_json> lines = OutputLines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(lines[0].contains("error"));
  EXPECT_TRUE(lines[1].contains("error"));
  ASSERT_TRUE(lines[2].contains("rendered")) << lines[2].dump();
  EXPECT_NE(lines[2]["rendered"].get<std::string>().find("<|im_start|>user\nhi<|im_end|>"),
            std::string::npos);
}

TEST(RenderChatCli, MissingModelDirectoryFails) {
  auto r = test::RunTessera({"render-chat", "--model", "/nonexistent/model"}, "");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("render-chat"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
