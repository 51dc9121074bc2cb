// Well-formed config.json, generation_config.json and tokenizer_config.json, including every
// real file in shared/.
#include "format/model_config.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/mapped_file.h"
#include "format/json_util.h"
#include "test_support.h"

namespace tessera {
namespace {

std::string ReadShared(const std::string& relative) {
  return test::ReadFile(test::SharedDir() + "/" + relative);
}

TEST(ModelConfig, ParsesStories260k) {
  auto cfg = ParseModelConfig(ReadShared("models/stories260k/config.json"));
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->family, ModelFamily::kLlama);
  EXPECT_EQ(ModelFamilyName(cfg->family), "llama");
  EXPECT_EQ(cfg->hidden_size, 64);
  EXPECT_EQ(cfg->intermediate_size, 172);
  EXPECT_EQ(cfg->num_layers, 5);
  EXPECT_EQ(cfg->num_heads, 8);
  EXPECT_EQ(cfg->num_kv_heads, 4);
  EXPECT_EQ(cfg->head_dim, 8);
  EXPECT_EQ(cfg->vocab_size, 512);
  EXPECT_EQ(cfg->max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(cfg->rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(cfg->rope_theta, 10000.0);
  EXPECT_TRUE(cfg->tie_word_embeddings);
  EXPECT_FALSE(cfg->attention_bias);
  EXPECT_FALSE(cfg->qk_norm);
  EXPECT_EQ(cfg->bos_token_id, 1);
  EXPECT_EQ(cfg->eos_token_ids, std::vector<int64_t>{2});
}

TEST(ModelConfig, AppliesTransformersDefaultsForLlama) {
  // No num_key_value_heads, head_dim, tie_word_embeddings, eps or theta: class defaults.
  auto cfg = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 96,
      "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 6,
      "vocab_size": 100, "max_position_embeddings": 128, "rope_scaling": null})");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->num_kv_heads, 6);
  EXPECT_EQ(cfg->head_dim, 16);
  EXPECT_FALSE(cfg->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(cfg->rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(cfg->rope_theta, 10000.0);
  EXPECT_FALSE(cfg->bos_token_id.has_value());
  EXPECT_TRUE(cfg->eos_token_ids.empty());
}

TEST(ModelConfig, LlamaAttentionBiasAndEosList) {
  auto cfg = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 64,
      "attention_bias": true, "mlp_bias": false, "eos_token_id": [10, 20, 30]})");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_TRUE(cfg->attention_bias);
  EXPECT_EQ(cfg->eos_token_ids, (std::vector<int64_t>{10, 20, 30}));
}

TEST(ModelConfig, ParsesQwen2StyleConfig) {
  // The shape of Qwen2.5-1.5B-Instruct's config.json.
  auto cfg = ParseModelConfig(R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 1536,
    "initializer_range": 0.02, "intermediate_size": 8960, "max_position_embeddings": 32768,
    "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 12,
    "num_hidden_layers": 28, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.1", "use_cache": true,
    "use_sliding_window": false, "vocab_size": 151936})");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->family, ModelFamily::kQwen2);
  EXPECT_EQ(cfg->head_dim, 128);
  EXPECT_EQ(cfg->num_kv_heads, 2);
  EXPECT_TRUE(cfg->attention_bias);  // always, for qwen2
  EXPECT_FALSE(cfg->qk_norm);
  EXPECT_TRUE(cfg->tie_word_embeddings);
  EXPECT_DOUBLE_EQ(cfg->rope_theta, 1e6);
  EXPECT_EQ(cfg->eos_token_ids, std::vector<int64_t>{151645});
}

TEST(ModelConfig, ParsesQwen3StyleConfigWithExplicitHeadDim) {
  // Qwen3-4B: head_dim 128 although hidden_size / heads = 80.
  auto cfg = ParseModelConfig(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2560,
    "intermediate_size": 9728, "max_position_embeddings": 40960, "max_window_layers": 36,
    "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
    "use_sliding_window": false, "vocab_size": 151936})");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_EQ(cfg->family, ModelFamily::kQwen3);
  EXPECT_EQ(cfg->head_dim, 128);
  EXPECT_TRUE(cfg->qk_norm);
  EXPECT_FALSE(cfg->attention_bias);
  EXPECT_DOUBLE_EQ(cfg->rope_theta, 1e6);  // an integer in the file is fine
}

TEST(ModelConfig, AcceptsDefaultRopeParameters) {
  auto cfg = ParseModelConfig(R"({"model_type": "llama", "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 1, "num_attention_heads": 4,
      "vocab_size": 300, "max_position_embeddings": 64,
      "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0}})");
  ASSERT_TRUE(cfg) << cfg.status().message();
  EXPECT_DOUBLE_EQ(cfg->rope_theta, 500000.0);
}

TEST(GenerationConfig, ParsesStories260k) {
  auto g = ParseGenerationConfig(ReadShared("models/stories260k/generation_config.json"));
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->eos_token_ids, std::vector<int64_t>{2});
  EXPECT_EQ(g->bos_token_id, 1);
  EXPECT_FALSE(g->do_sample);
  EXPECT_EQ(g->max_length, 512);
  EXPECT_FALSE(g->temperature.has_value());
}

TEST(GenerationConfig, ParsesSamplingFields) {
  auto g = ParseGenerationConfig(R"({"bos_token_id": 151643, "pad_token_id": 151643,
      "do_sample": true, "eos_token_id": [151645, 151643], "repetition_penalty": 1.1,
      "temperature": 0.7, "top_p": 0.8, "top_k": 20, "min_p": 0, "max_new_tokens": 100,
      "transformers_version": "4.37.0"})");
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int64_t>{151645, 151643}));
  EXPECT_EQ(g->pad_token_id, 151643);
  EXPECT_TRUE(g->do_sample);
  EXPECT_DOUBLE_EQ(*g->temperature, 0.7);
  EXPECT_DOUBLE_EQ(*g->top_p, 0.8);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_DOUBLE_EQ(*g->min_p, 0.0);
  EXPECT_DOUBLE_EQ(*g->repetition_penalty, 1.1);
  EXPECT_EQ(g->max_new_tokens, 100);
  EXPECT_FALSE(g->max_length.has_value());
}

TEST(TokenizerConfig, ParsesStories260k) {
  auto t = ParseTokenizerConfig(ReadShared("models/stories260k/tokenizer_config.json"));
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->add_bos_token, true);
  EXPECT_EQ(t->add_eos_token, false);
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
  EXPECT_EQ(t->unk_token, "<unk>");
  EXPECT_FALSE(t->pad_token.has_value());  // null in the file
  EXPECT_EQ(t->model_max_length, 512);
  EXPECT_FALSE(t->clean_up_tokenization_spaces);
  EXPECT_EQ(t->tokenizer_class, "LlamaTokenizerFast");
  EXPECT_TRUE(t->chat_templates.empty());
}

TEST(TokenizerConfig, ParsesEveryRealTokenizerConfig) {
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(test::SharedDir() + "/tokenizers")) {
    std::string path = entry.path().string() + "/tokenizer_config.json";
    if (!FileExists(path)) continue;
    auto t = ParseTokenizerConfig(test::ReadFile(path));
    ASSERT_TRUE(t) << path << ": " << t.status().message();
    EXPECT_TRUE(t->eos_token.has_value()) << path;
    EXPECT_FALSE(t->tokenizer_class.empty()) << path;
    ++parsed;
  }
  EXPECT_GE(parsed, 5);
}

TEST(TokenizerConfig, RealFilesDetails) {
  auto llama3 =
      ParseTokenizerConfig(ReadShared("tokenizers/Meta-Llama-3-8B/tokenizer_config.json"));
  ASSERT_TRUE(llama3) << llama3.status().message();
  EXPECT_FALSE(llama3->model_max_length.has_value());  // 1e30 means unbounded
  EXPECT_TRUE(llama3->clean_up_tokenization_spaces);
  EXPECT_EQ(llama3->bos_token, "<|begin_of_text|>");
  ASSERT_EQ(llama3->chat_templates.size(), 1u);
  EXPECT_EQ(llama3->chat_templates[0].name, "default");

  auto qwen =
      ParseTokenizerConfig(ReadShared("tokenizers/Qwen2.5-1.5B-Instruct/tokenizer_config.json"));
  ASSERT_TRUE(qwen) << qwen.status().message();
  EXPECT_FALSE(qwen->bos_token.has_value());
  EXPECT_EQ(qwen->eos_token, "<|im_end|>");
  EXPECT_EQ(qwen->pad_token, "<|endoftext|>");
  EXPECT_EQ(qwen->additional_special_tokens.size(), 13u);
  EXPECT_EQ(qwen->additional_special_tokens.front(), "<|im_start|>");
  EXPECT_EQ(qwen->model_max_length, 131072);
  EXPECT_EQ(qwen->add_bos_token, false);
  ASSERT_EQ(qwen->chat_templates.size(), 1u);
  EXPECT_NE(qwen->chat_templates[0].source.find("<|im_start|>"), std::string::npos);
}

TEST(TokenizerConfig, ObjectTokensAndNamedTemplates) {
  auto t = ParseTokenizerConfig(R"({
    "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
    "eos_token": "</s>",
    "additional_special_tokens": ["<a>", {"content": "<b>"}],
    "chat_template": [{"name": "default", "template": "{{ x }}"},
                      {"name": "tool_use", "template": "{{ tools }}"}],
    "model_max_length": 1e30})");
  ASSERT_TRUE(t) << t.status().message();
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->additional_special_tokens, (std::vector<std::string>{"<a>", "<b>"}));
  ASSERT_EQ(t->chat_templates.size(), 2u);
  EXPECT_EQ(t->chat_templates[1].name, "tool_use");
  EXPECT_EQ(t->chat_templates[1].source, "{{ tools }}");
  EXPECT_FALSE(t->model_max_length.has_value());
  EXPECT_FALSE(t->add_bos_token.has_value());
}

TEST(JsonUtil, ParsesAndReadsTypedFields) {
  auto doc = ParseJsonDocument(R"({"n": 3, "x": 2.5, "s": "hi", "b": true, "z": null,
      "l": [1, 2], "brackets": "[[[[{{{{"})",
                               "t.json", 4);
  ASSERT_TRUE(doc) << doc.status().message();  // brackets inside strings do not count
  JsonObjectReader r(*doc, "t.json");
  EXPECT_EQ(*r.RequiredPositiveInt("n"), 3);
  EXPECT_EQ(*r.OptionalFiniteDouble("x", 0, 10), 2.5);
  EXPECT_EQ(*r.OptionalString("s"), "hi");
  EXPECT_EQ(*r.OptionalBool("b"), true);
  EXPECT_FALSE(r.OptionalInt("z", 0, 10)->has_value());  // null counts as absent
  EXPECT_FALSE(r.Has("z"));
  EXPECT_EQ(*r.IntOrIntList("l"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(*r.IntOrIntList("n"), std::vector<int64_t>{3});
}

TEST(JsonUtil, DepthLimitIsExact) {
  std::string ok = std::string(4, '[') + std::string(4, ']');
  EXPECT_TRUE(ParseJsonDocument(ok, "t.json", 4));
  std::string deep = std::string(5, '[') + std::string(5, ']');
  EXPECT_FALSE(ParseJsonDocument(deep, "t.json", 4));
}

TEST(JsonUtil, DuplicateKeysCanBeAllowed) {
  auto doc = ParseJsonDocument(R"({"a": 1, "a": 2})", "t.json", 64, DuplicateKeys::kKeepLast);
  ASSERT_TRUE(doc);
  EXPECT_EQ((*doc)["a"], 2);
  // The same key in different objects is not a duplicate.
  EXPECT_TRUE(ParseJsonDocument(R"({"a": {"a": 1}, "b": {"a": 2}})", "t.json"));
}

TEST(ModelConfig, Llama3RopeScalingIsReadFromEitherPlace) {
  const std::string base = R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
      "max_position_embeddings": 128, )";
  auto a = ParseModelConfig(base + R"("rope_theta": 500000.0, "rope_scaling": {"factor": 32.0,
      "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192,
      "rope_type": "llama3"}})");
  ASSERT_TRUE(a) << a.status().message();
  ASSERT_TRUE(a->rope_llama3.has_value());
  EXPECT_EQ(a->rope_llama3->factor, 32.0);
  EXPECT_EQ(a->rope_llama3->low_freq_factor, 1.0);
  EXPECT_EQ(a->rope_llama3->high_freq_factor, 4.0);
  EXPECT_EQ(a->rope_llama3->original_max_position_embeddings, 8192);
  EXPECT_EQ(a->rope_theta, 500000.0);
  auto b = ParseModelConfig(base + R"("rope_parameters": {"rope_type": "llama3", "factor": 8,
      "high_freq_factor": 4, "low_freq_factor": 1, "original_max_position_embeddings": 4096,
      "rope_theta": 250000.0}})");
  ASSERT_TRUE(b) << b.status().message();
  ASSERT_TRUE(b->rope_llama3.has_value());
  EXPECT_EQ(b->rope_llama3->factor, 8.0);
  EXPECT_EQ(b->rope_llama3->original_max_position_embeddings, 4096);
  EXPECT_EQ(b->rope_theta, 250000.0);
  auto plain = ParseModelConfig(base + R"("rope_scaling": null})");
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->rope_llama3.has_value());
}

}  // namespace
}  // namespace tessera
