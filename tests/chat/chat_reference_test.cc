// Every public reference vector of /work/shared/tokenizers/reference/*.chat.json renders
// byte-identically, and exactly the vectors recorded as errors raise (with the same message).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "test_support.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

std::string ReferenceDir() {
  return test::SharedDir() + "/tokenizers/reference";
}

ordered_json ReadJson(const std::string& path) {
  auto text = ReadFileToString(path);
  EXPECT_TRUE(text.has_value()) << path;
  if (!text) return {};
  auto j = ordered_json::parse(*text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

class ChatReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatReferenceTest, RendersEveryVector) {
  const std::string folder = GetParam();
  ordered_json manifest = ReadJson(ReferenceDir() + "/manifest.json");
  ASSERT_TRUE(manifest["checkpoints"].contains(folder));
  const ordered_json& passed = manifest["checkpoints"][folder]["chat"]["special_tokens_passed"];

  auto config = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/" + folder);
  ASSERT_TRUE(config.has_value()) << config.status().message();
  // The render context uses the special tokens the manifest lists. Where the folder has a
  // tokenizer_config.json, the loader must find exactly those tokens itself.
  if (FileExists(test::SharedDir() + "/tokenizers/" + folder + "/tokenizer_config.json")) {
    EXPECT_EQ(config->special_tokens.dump(), passed.dump());
  }
  config->special_tokens = passed;

  auto tmpl = jinja::Template::Parse(config->source);
  ASSERT_TRUE(tmpl.has_value()) << tmpl.status().message();

  ordered_json vectors = ReadJson(ReferenceDir() + "/" + folder + ".chat.json");
  ASSERT_TRUE(vectors.is_array());
  ASSERT_FALSE(vectors.empty());
  size_t errors = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    const ordered_json& v = vectors[i];
    ordered_json ctx = MakeChatContext(*config, v["messages"],
                                       v["add_generation_prompt"].get<bool>(), v["kwargs"]);
    bool raised = false;
    auto out = tmpl->Render(ctx, {}, &raised);
    SCOPED_TRACE(folder + " vector " + std::to_string(i) + ": " + v["messages"].dump());
    if (v["rendered"].is_null()) {
      ++errors;
      ASSERT_FALSE(out.has_value()) << "expected an error, rendered: " << *out;
      EXPECT_TRUE(raised);
      EXPECT_EQ(out.status().message(), v["error"].get<std::string>());
    } else {
      ASSERT_TRUE(out.has_value()) << out.status().message();
      EXPECT_EQ(*out, v["rendered"].get<std::string>());
    }
  }
  // The public part holds some of the manifest's error cases, never more than all of them.
  EXPECT_LE(errors, manifest["checkpoints"][folder]["chat"]["render_errors"].get<size_t>());
}

INSTANTIATE_TEST_SUITE_P(AllFolders, ChatReferenceTest,
                         ::testing::Values("Qwen2.5-1.5B-Instruct", "Qwen3-4B", "MiniCPM-V-4_5",
                                           "gemma-3-1b-it", "Meta-Llama-3-8B", "Qwen3.5-4B"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// The held-out set uses the same conversations' shapes; these exercise tool-call history and
// role-order rules on the real templates with expectations derived from the templates' text.
TEST(ChatTemplates, QwenToolCallHistory) {
  auto config = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/Qwen2.5-1.5B-Instruct");
  ASSERT_TRUE(config.has_value());
  auto tmpl = jinja::Template::Parse(config->source);
  ASSERT_TRUE(tmpl.has_value());
  ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather",
                                        "arguments": {"city": "Paris", "unit": "C"}}}]},
    {"role": "tool", "content": "18C"}])");
  auto out = tmpl->Render(MakeChatContext(*config, messages, false, ordered_json::object()));
  ASSERT_TRUE(out.has_value()) << out.status().message();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
            "assistant.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
            "{\"city\": \"Paris\", \"unit\": \"C\"}}\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18C\n</tool_response><|im_end|>\n");
}

TEST(ChatTemplates, Qwen35SystemNotFirstRaises) {
  auto config = LoadChatTemplateConfig(test::SharedDir() + "/tokenizers/Qwen3.5-4B");
  ASSERT_TRUE(config.has_value());
  auto tmpl = jinja::Template::Parse(config->source);
  ASSERT_TRUE(tmpl.has_value()) << tmpl.status().message();
  ordered_json messages = ordered_json::parse(
      R"([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])");
  bool raised = false;
  auto out =
      tmpl->Render(MakeChatContext(*config, messages, true, ordered_json::object()), {}, &raised);
  ASSERT_FALSE(out.has_value());
  EXPECT_TRUE(raised);
  EXPECT_EQ(out.status().message(), "System message must be at the beginning.");
}

}  // namespace
}  // namespace tessera
