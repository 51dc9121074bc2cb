// Malformed config.json, generation_config.json and tokenizer_config.json: one-line errors
// naming the field and value, never a crash.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/model_config.h"
#include "format_test_util.h"

namespace tessera {
namespace {

using nlohmann::json;
using test::ExpectOneLineError;

// A valid llama config; tests change one field at a time.
json BaseConfig() {
  return json::parse(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 172,
      "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4,
      "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
      "rope_theta": 10000.0, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2})");
}

Status ParseWith(const std::string& field, const std::string& value_json) {
  json cfg = BaseConfig();
  cfg[field] = json::parse(value_json);
  return ParseModelConfig(cfg.dump()).status();
}

TEST(MalformedConfig, ControlCaseParses) {
  EXPECT_TRUE(ParseModelConfig(BaseConfig().dump()));
}

TEST(MalformedConfig, MissingRequiredFields) {
  for (const char* field : {"model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                            "num_attention_heads", "vocab_size", "max_position_embeddings"}) {
    json cfg = BaseConfig();
    cfg.erase(field);
    auto parsed = ParseModelConfig(cfg.dump());
    ExpectOneLineError(parsed.status(), ErrorCode::kCorrupt, {"config.json", field, "missing"});
  }
}

TEST(MalformedConfig, WrongTypesAndNonPositiveSizes) {
  ExpectOneLineError(ParseWith("hidden_size", "\"64\""), ErrorCode::kCorrupt,
                     {"hidden_size", "\"64\""});
  ExpectOneLineError(ParseWith("hidden_size", "0"), ErrorCode::kCorrupt, {"hidden_size", "0"});
  ExpectOneLineError(ParseWith("num_hidden_layers", "-2"), ErrorCode::kCorrupt,
                     {"num_hidden_layers", "-2"});
  ExpectOneLineError(ParseWith("vocab_size", "1e3"), ErrorCode::kCorrupt, {"vocab_size"});
  ExpectOneLineError(ParseWith("hidden_size", "99999999999"), ErrorCode::kCorrupt,
                     {"hidden_size", "99999999999"});
  ExpectOneLineError(ParseWith("tie_word_embeddings", "1"), ErrorCode::kCorrupt,
                     {"tie_word_embeddings", "true or false"});
  ExpectOneLineError(ParseWith("model_type", "3"), ErrorCode::kCorrupt, {"model_type"});
}

TEST(MalformedConfig, InfiniteOrNanValues) {
  // 1e999 overflows a double: refused by the JSON parser itself, with the offending text.
  std::string text = BaseConfig().dump();
  text.replace(text.find("1e-05"), 5, "1e999");
  ExpectOneLineError(ParseModelConfig(text).status(), ErrorCode::kCorrupt,
                     {"config.json", "1e999"});
  ExpectOneLineError(ParseWith("rms_norm_eps", "\"NaN\""), ErrorCode::kCorrupt,
                     {"rms_norm_eps", "\"NaN\""});
  ExpectOneLineError(ParseWith("rope_theta", "\"Infinity\""), ErrorCode::kCorrupt,
                     {"rope_theta", "Infinity"});
  ExpectOneLineError(ParseWith("rms_norm_eps", "0"), ErrorCode::kCorrupt, {"rms_norm_eps"});
  ExpectOneLineError(ParseWith("rms_norm_eps", "-1e-6"), ErrorCode::kCorrupt, {"rms_norm_eps"});
  ExpectOneLineError(ParseWith("rope_theta", "0.0"), ErrorCode::kCorrupt, {"rope_theta"});
  // Literal NaN is not JSON at all.
  std::string nan_text = BaseConfig().dump();
  nan_text.replace(nan_text.find("10000.0"), 7, "NaN");
  ExpectOneLineError(ParseModelConfig(nan_text).status(), ErrorCode::kCorrupt, {"invalid JSON"});
}

TEST(MalformedConfig, UnknownModelType) {
  ExpectOneLineError(ParseWith("model_type", "\"mistral\""), ErrorCode::kUnsupported,
                     {"model_type 'mistral' is not supported", "llama, qwen2, qwen3"});
}

TEST(MalformedConfig, RopeScalingSet) {
  ExpectOneLineError(ParseWith("rope_scaling", R"({"type": "dynamic", "factor": 2.0})"),
                     ErrorCode::kUnsupported, {"rope_scaling", "'dynamic'"});
  ExpectOneLineError(ParseWith("rope_scaling", R"({"type": "linear"})"), ErrorCode::kCorrupt,
                     {"rope_scaling.factor", "missing"});
  ExpectOneLineError(ParseWith("rope_scaling", R"({"type": "linear", "factor": 0.5})"),
                     ErrorCode::kCorrupt, {"rope_scaling.factor"});
  ExpectOneLineError(ParseWith("rope_scaling", R"({"factor": 2.0})"), ErrorCode::kUnsupported,
                     {"rope_scaling", "no rope_type"});
  // LongRoPE is MiniCPM's; elsewhere it is refused by name.
  ExpectOneLineError(ParseWith("rope_scaling", R"({"rope_type": "longrope", "short_factor": [1],
                                  "long_factor": [1], "original_max_position_embeddings": 64})"),
                     ErrorCode::kCorrupt, {"longrope", "head_dim / 2"});
  ExpectOneLineError(
      ParseWith("rope_scaling", R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1})"),
      ErrorCode::kCorrupt, {"rope_scaling.high_freq_factor", "missing"});
  const std::string llama3_ok =
      R"("rope_type": "llama3", "original_max_position_embeddings": 8192)";
  ExpectOneLineError(ParseWith("rope_scaling", "{" + llama3_ok +
                                                   R"(, "factor": 0.5, "low_freq_factor": 1,
                                                   "high_freq_factor": 4})"),
                     ErrorCode::kCorrupt, {"rope_scaling.factor"});
  ExpectOneLineError(ParseWith("rope_scaling", "{" + llama3_ok +
                                                   R"(, "factor": 8, "low_freq_factor": 4,
                                                   "high_freq_factor": 4})"),
                     ErrorCode::kCorrupt, {"rope_scaling.high_freq_factor", "low_freq_factor"});
  ExpectOneLineError(ParseWith("rope_scaling", R"({"rope_type": "llama3", "factor": 8,
                                  "low_freq_factor": 1, "high_freq_factor": 4,
                                  "original_max_position_embeddings": -3})"),
                     ErrorCode::kCorrupt, {"rope_scaling.original_max_position_embeddings"});
  ExpectOneLineError(ParseWith("rope_parameters", R"({"rope_type": "llama3", "factor": "big",
                                  "low_freq_factor": 1, "high_freq_factor": 4,
                                  "original_max_position_embeddings": 8192})"),
                     ErrorCode::kCorrupt, {"rope_parameters.factor"});
  ExpectOneLineError(ParseWith("rope_scaling", "5"), ErrorCode::kCorrupt, {"rope_scaling"});
  ExpectOneLineError(ParseWith("rope_parameters", R"({"rope_type": "yarn", "factor": 4})"),
                     ErrorCode::kUnsupported, {"rope_parameters", "'yarn'"});
}

TEST(MalformedConfig, InconsistentHeadSizes) {
  json cfg = BaseConfig();
  cfg["hidden_size"] = 100;  // not divisible by 8 heads, no head_dim
  ExpectOneLineError(ParseModelConfig(cfg.dump()).status(), ErrorCode::kCorrupt,
                     {"hidden_size 100", "num_attention_heads 8"});
  ExpectOneLineError(ParseWith("num_key_value_heads", "3"), ErrorCode::kCorrupt,
                     {"num_attention_heads 8", "num_key_value_heads 3"});
  ExpectOneLineError(ParseWith("num_key_value_heads", "0"), ErrorCode::kCorrupt,
                     {"num_key_value_heads"});
  ExpectOneLineError(ParseWith("head_dim", "-8"), ErrorCode::kCorrupt, {"head_dim"});
  json qwen3 = BaseConfig();
  qwen3["model_type"] = "qwen3";  // qwen3 must state head_dim
  ExpectOneLineError(ParseModelConfig(qwen3.dump()).status(), ErrorCode::kCorrupt,
                     {"head_dim", "qwen3"});
}

TEST(MalformedConfig, UnsupportedFeatures) {
  ExpectOneLineError(ParseWith("hidden_act", "\"gelu\""), ErrorCode::kUnsupported,
                     {"hidden_act", "'gelu'", "silu"});
  ExpectOneLineError(ParseWith("mlp_bias", "true"), ErrorCode::kUnsupported, {"mlp_bias"});
  json qwen2 = BaseConfig();
  qwen2["model_type"] = "qwen2";
  qwen2["use_sliding_window"] = true;
  ExpectOneLineError(ParseModelConfig(qwen2.dump()).status(), ErrorCode::kUnsupported,
                     {"use_sliding_window", "sliding-window"});
}

TEST(MalformedConfig, TokenIdsOutOfRange) {
  ExpectOneLineError(ParseWith("eos_token_id", "[2, 512]"), ErrorCode::kCorrupt,
                     {"eos_token_id", "512", "vocab_size"});
  ExpectOneLineError(ParseWith("eos_token_id", "[2, -1]"), ErrorCode::kCorrupt,
                     {"eos_token_id[1]", "-1"});
  ExpectOneLineError(ParseWith("bos_token_id", "\"<s>\""), ErrorCode::kCorrupt, {"bos_token_id"});
}

TEST(MalformedConfig, NotAConfigDocument) {
  ExpectOneLineError(ParseModelConfig("").status(), ErrorCode::kCorrupt,
                     {"config.json", "invalid JSON"});
  ExpectOneLineError(ParseModelConfig("[1]").status(), ErrorCode::kCorrupt,
                     {"config.json", "object"});
  ExpectOneLineError(ParseModelConfig("{\"model_type\": \"ll\xc3\x28\"}").status(),
                     ErrorCode::kCorrupt, {"config.json", "UTF-8"});
  ExpectOneLineError(ParseModelConfig(std::string(1 << 20, '[')).status(), ErrorCode::kCorrupt,
                     {"config.json", "nests deeper"});
  ExpectOneLineError(ParseModelConfig(R"({"model_type": "llama", "model_type": "qwen2"})").status(),
                     ErrorCode::kCorrupt, {"'model_type'", "twice"});
}

TEST(MalformedConfig, EveryTruncationIsRefusedCleanly) {
  const std::string text = BaseConfig().dump();
  for (size_t n = 0; n < text.size(); ++n) {
    auto cfg = ParseModelConfig(text.substr(0, n));
    ASSERT_FALSE(cfg) << n;
    EXPECT_EQ(cfg.status().message().find('\n'), std::string::npos);
  }
  EXPECT_TRUE(ParseModelConfig(text));
}

TEST(MalformedGenerationConfig, BadFields) {
  ExpectOneLineError(ParseGenerationConfig(R"({"eos_token_id": "2"})").status(),
                     ErrorCode::kCorrupt, {"generation_config.json", "eos_token_id"});
  ExpectOneLineError(ParseGenerationConfig(R"({"temperature": "hot"})").status(),
                     ErrorCode::kCorrupt, {"temperature", "\"hot\""});
  ExpectOneLineError(ParseGenerationConfig(R"({"top_p": 1.5})").status(), ErrorCode::kCorrupt,
                     {"top_p", "1.5"});
  ExpectOneLineError(ParseGenerationConfig(R"({"top_k": -1})").status(), ErrorCode::kCorrupt,
                     {"top_k", "-1"});
  ExpectOneLineError(ParseGenerationConfig(R"({"repetition_penalty": 0})").status(),
                     ErrorCode::kCorrupt, {"repetition_penalty"});
  ExpectOneLineError(ParseGenerationConfig(R"({"do_sample": "yes"})").status(), ErrorCode::kCorrupt,
                     {"do_sample"});
  ExpectOneLineError(ParseGenerationConfig(R"({"max_new_tokens": 0})").status(),
                     ErrorCode::kCorrupt, {"max_new_tokens"});
  ExpectOneLineError(ParseGenerationConfig("7").status(), ErrorCode::kCorrupt, {"object"});
}

TEST(MalformedTokenizerConfig, BadFields) {
  ExpectOneLineError(ParseTokenizerConfig(R"({"bos_token": 1})").status(), ErrorCode::kCorrupt,
                     {"tokenizer_config.json", "bos_token"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"eos_token": {"content": 5}})").status(),
                     ErrorCode::kCorrupt, {"eos_token", "content"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"additional_special_tokens": "<a>"})").status(),
                     ErrorCode::kCorrupt, {"additional_special_tokens", "list"});
  ExpectOneLineError(
      ParseTokenizerConfig(R"({"additional_special_tokens": ["<a>", null]})").status(),
      ErrorCode::kCorrupt, {"additional_special_tokens[1]"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"chat_template": 3})").status(), ErrorCode::kCorrupt,
                     {"chat_template"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"chat_template": [{"name": "default"}]})").status(),
                     ErrorCode::kCorrupt, {"chat_template[0].template", "missing"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"chat_template": ["x"]})").status(),
                     ErrorCode::kCorrupt, {"chat_template[0]"});
  ExpectOneLineError(
      ParseTokenizerConfig(
          R"({"chat_template": [{"name": "a", "template": "1"}, {"name": "a", "template": "2"}]})")
          .status(),
      ErrorCode::kCorrupt, {"'a'", "twice"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"model_max_length": -5})").status(),
                     ErrorCode::kCorrupt, {"model_max_length", "-5"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"model_max_length": "big"})").status(),
                     ErrorCode::kCorrupt, {"model_max_length"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"add_bos_token": "true"})").status(),
                     ErrorCode::kCorrupt, {"add_bos_token"});
  ExpectOneLineError(ParseTokenizerConfig(R"({"tokenizer_class": ["x"]})").status(),
                     ErrorCode::kCorrupt, {"tokenizer_class"});
}

TEST(MalformedTokenizerConfig, LongHostileValuesStayOneLineAndShort) {
  std::string token(10000, 'x');
  token += "\\n\\u0001";
  auto t = ParseTokenizerConfig("{\"bos_token\": [\"" + token + "\"]}");
  ExpectOneLineError(t.status(), ErrorCode::kCorrupt, {"bos_token", "..."});
  EXPECT_LT(t.status().message().size(), 400u);
}

}  // namespace
}  // namespace tessera
