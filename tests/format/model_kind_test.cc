// DetectModelKind: what a checkpoint is for, from its explicit markers only.
#include "format/model_kind.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_support.h"

namespace tessera {
namespace {

using test::TempDir;
using test::WriteFile;

const char* kCausalConfig = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"})";

void WriteEmbeddingFiles(const TempDir& d, const std::string& pooling_flag) {
  WriteFile(d.File("config.json"), kCausalConfig);
  WriteFile(d.File("modules.json"), R"([
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
  ])");
  ::mkdir(d.File("1_Pooling").c_str(), 0755);
  WriteFile(d.File("1_Pooling/config.json"),
            R"({"word_embedding_dimension": 1024, "pooling_mode_cls_token": false, ")" +
                pooling_flag + R"(": true})");
}

TEST(ModelKind, NamesRoundTrip) {
  for (ModelKind k : {ModelKind::kChat, ModelKind::kEmbed, ModelKind::kRerank, ModelKind::kGuard,
                      ModelKind::kClassify, ModelKind::kDecide, ModelKind::kCompletion}) {
    EXPECT_EQ(ParseModelKind(ModelKindName(k)), k);
  }
  EXPECT_FALSE(ParseModelKind("chatt").has_value());
}

TEST(ModelKind, CausalLmWithAChatTemplateIsChat) {
  TempDir d;
  WriteFile(d.File("config.json"), kCausalConfig);
  WriteFile(d.File("tokenizer_config.json"), R"({"chat_template": "{{ messages }}"})");
  auto info = DetectModelKind(d.path());
  ASSERT_TRUE(info.has_value()) << info.status().message();
  EXPECT_EQ(info->kind, ModelKind::kChat);
  EXPECT_NE(info->evidence.find("Qwen3ForCausalLM"), std::string::npos);
  // chat_template.jinja alone is a template too (LoadChatTemplateConfig reads it first).
  TempDir j;
  WriteFile(j.File("config.json"), kCausalConfig);
  WriteFile(j.File("chat_template.jinja"), "{{ messages }}");
  EXPECT_EQ(DetectModelKind(j.path())->kind, ModelKind::kChat);
}

// stories260k: a tokenizer_config.json without chat_template (or none at all), or a null one.
TEST(ModelKind, CausalLmWithoutAChatTemplateIsACompletionModel) {
  for (const char* tokenizer_config :
       {"", R"({"bos_token": "<s>"})", R"({"chat_template": null})"}) {
    TempDir d;
    WriteFile(d.File("config.json"), kCausalConfig);
    if (*tokenizer_config != 0) WriteFile(d.File("tokenizer_config.json"), tokenizer_config);
    auto info = DetectModelKind(d.path());
    ASSERT_TRUE(info.has_value()) << info.status().message();
    EXPECT_EQ(info->kind, ModelKind::kCompletion) << tokenizer_config;
    EXPECT_NE(info->evidence.find("no chat template"), std::string::npos) << info->evidence;
  }
  TempDir bad;
  WriteFile(bad.File("config.json"), kCausalConfig);
  WriteFile(bad.File("tokenizer_config.json"), "[1, 2]");
  EXPECT_FALSE(DetectModelKind(bad.path()));
}

TEST(ModelKind, LastTokenPoolingIsAnEmbeddingModelWithItsPrompts) {
  TempDir d;
  WriteEmbeddingFiles(d, "pooling_mode_lasttoken");
  WriteFile(d.File("config_sentence_transformers.json"),
            R"({"prompts": {"query": "Instruct: Given a web search query\nQuery:", "document": ""},
                "default_prompt_name": null})");
  auto info = DetectModelKind(d.path());
  ASSERT_TRUE(info.has_value()) << info.status().message();
  EXPECT_EQ(info->kind, ModelKind::kEmbed);
  EXPECT_TRUE(info->normalize);
  ASSERT_EQ(info->prompts.size(), 2u);
  EXPECT_EQ(info->prompts.at("query"), "Instruct: Given a web search query\nQuery:");
  EXPECT_EQ(info->prompts.at("document"), "");
}

TEST(ModelKind, OtherPoolingIsRefusedNamingIt) {
  TempDir d;
  WriteEmbeddingFiles(d, "pooling_mode_mean_tokens");
  auto info = DetectModelKind(d.path());
  ASSERT_FALSE(info.has_value());
  EXPECT_EQ(info.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(info.status().message().find("pooling_mode_mean_tokens"), std::string::npos)
      << info.status().message();
  EXPECT_NE(info.status().message().find("last-token"), std::string::npos);
}

TEST(ModelKind, PoolingPathMayNotLeaveTheCheckpoint) {
  TempDir d;
  WriteFile(d.File("config.json"), kCausalConfig);
  WriteFile(d.File("modules.json"),
            R"([{"path": "../x", "type": "sentence_transformers.models.Pooling"}])");
  auto info = DetectModelKind(d.path());
  ASSERT_FALSE(info.has_value());
  EXPECT_NE(info.status().message().find("leaves the checkpoint"), std::string::npos);
}

TEST(ModelKind, SequenceClassifierReadsItsLabelsInOrder) {
  TempDir d;
  WriteFile(d.File("config.json"), R"({"architectures": ["Qwen3ForSequenceClassification"],
      "id2label": {"1": "positive", "0": "negative", "2": "neutral"}})");
  auto info = DetectModelKind(d.path());
  ASSERT_TRUE(info.has_value()) << info.status().message();
  EXPECT_EQ(info->kind, ModelKind::kClassify);
  EXPECT_EQ(info->labels, (std::vector<std::string>{"negative", "positive", "neutral"}));
}

TEST(ModelKind, BadClassifiersAndArchitecturesSayWhatWasFound) {
  struct Case {
    const char* config;
    const char* expect;
  } cases[] = {
      {R"({"architectures": ["Qwen3ForSequenceClassification"]})", "needs id2label"},
      {R"({"architectures": ["Qwen3ForSequenceClassification"], "id2label": {"0": "a", "2": "b"}})",
       "indices 0..1"},
      {R"({"architectures": ["Qwen3ForSequenceClassification"], "id2label": {"x": "a"}})",
       "found key"},
      {R"({"architectures": ["Qwen3ForSequenceClassification"], "id2label": {"0": 5}})",
       "indices 0..0"},
      {R"({"architectures": ["BertForMaskedLM"]})", "BertForMaskedLM"},
      {R"({"architectures": ["A", "B"]})", "list of one name"},
      {R"([1, 2])", "expected a JSON object"},
  };
  for (const Case& c : cases) {
    TempDir d;
    WriteFile(d.File("config.json"), c.config);
    auto info = DetectModelKind(d.path());
    ASSERT_FALSE(info.has_value()) << c.config;
    EXPECT_NE(info.status().message().find(c.expect), std::string::npos)
        << c.config << " -> " << info.status().message();
  }
}

TEST(ModelKind, MissingConfigIsAnError) {
  TempDir d;
  EXPECT_FALSE(DetectModelKind(d.path()).has_value());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(ModelKindName, InASentenceWithItsArticle) {
  EXPECT_EQ(AModelOfKind(ModelKind::kChat), "a chat model");
  EXPECT_EQ(AModelOfKind(ModelKind::kEmbed), "an embed model");
  EXPECT_EQ(AModelOfKind(ModelKind::kClassify), "a classify model");
  EXPECT_EQ(AModelOfKind(ModelKind::kGuard), "a guard model");
  EXPECT_EQ(AModelOfKind(ModelKind::kCompletion), "a completion model");
}

}  // namespace
}  // namespace tessera
