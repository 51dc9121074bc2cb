// A GGUF model loaded in place: the tokenizer metadata read typed (a wrong type named), stop
// ids, and Ollama's system and params layers applied as defaults a request overrides.
#include "runtime/gguf_loading.h"

#include <gtest/gtest.h>

#include "model/synthetic_checkpoint.h"
#include "runtime/loaded_model.h"
#include "support/gguf_writer.h"
#include "support/hf_to_gguf.h"
#include "test_support.h"

namespace tessera {
namespace {

Expected<GgufTokenizerData> ReadFrom(const test::GgufWriter& w, std::string* keep) {
  *keep = w.Build();
  auto file = GgufFile::Parse(
      "t.gguf", std::span(reinterpret_cast<const uint8_t*>(keep->data()), keep->size()));
  if (!file) return file.status();
  return ReadGgufTokenizerData(*file);
}

TEST(GgufLoading, ReadsTheTokenizerKeysTyped) {
  test::GgufWriter w;
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "qwen2");
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "<|end|>"});
  w.AddI32Array("tokenizer.ggml.token_type", {1, 1, 3});
  w.AddStringArray("tokenizer.ggml.merges", {"a b"});
  w.AddU32("tokenizer.ggml.eos_token_id", 2);
  w.AddU32("tokenizer.ggml.eot_token_id", 2);
  w.AddBool("tokenizer.ggml.add_bos_token", false);
  w.AddString("tokenizer.chat_template", "{{ messages[0].content }}");
  std::string bytes;
  auto data = ReadFrom(w, &bytes);
  ASSERT_TRUE(data) << data.status().ToString();
  EXPECT_EQ(data->pre, "qwen2");
  EXPECT_EQ(data->tokens.size(), 3u);
  EXPECT_EQ(data->token_types[2], 3);
  EXPECT_EQ(data->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(data->eos_id, 2u);
  EXPECT_FALSE(data->bos_id);
  EXPECT_EQ(data->add_bos_token, false);
  EXPECT_EQ(data->chat_template, "{{ messages[0].content }}");
  // eos and eot are one id: listed once; ids outside the vocabulary are left out.
  EXPECT_EQ(GgufStopIds(*data, 3), std::vector<int32_t>{2});
  EXPECT_TRUE(GgufStopIds(*data, 2).empty());
  auto tmpl = GgufChatTemplate(*data);
  ASSERT_TRUE(tmpl && *tmpl);
  EXPECT_EQ((*tmpl)->special_tokens["eos_token"], "<|end|>");
}

TEST(GgufLoading, RefusesWrongTypesAndAMissingTokenizer) {
  test::GgufWriter wrong;
  wrong.AddString("tokenizer.ggml.model", "gpt2");
  wrong.AddString("tokenizer.ggml.bos_token_id", "1");
  std::string bytes;
  auto data = ReadFrom(wrong, &bytes);
  ASSERT_FALSE(data);
  EXPECT_NE(data.status().message().find("tokenizer.ggml.bos_token_id"), std::string::npos)
      << data.status().message();

  test::GgufWriter none;
  none.AddString("general.architecture", "llama");
  data = ReadFrom(none, &bytes);
  ASSERT_FALSE(data);
  EXPECT_EQ(data.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(data.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

TEST(GgufLoading, OllamaLayersAreDefaults) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.vocab = 4352;
  spec.max_position = 128;
  ASSERT_TRUE(WriteSyntheticModel(tmp.File("hf"), spec).ok());
  // The synthetic tokenizer splits like GPT-2; "smollm" is the nearest supported pre name and
  // the prompts here have no digits, where the two differ.
  ASSERT_TRUE(test::WriteGgufOfCheckpoint(tmp.File("hf"), "smollm", tmp.File("m.gguf")).ok());
  GgufModel gguf;
  gguf.path = tmp.File("m.gguf");
  gguf.system_prompt = "Be terse.";
  OllamaParams params;
  params.temperature = 0.5;
  params.top_k = 7;
  params.stop = {"zzz"};
  params.num_predict = 3;
  params.seed = 9;
  gguf.params = params;
  ModelLoadOptions o;
  o.placement = "reference";
  o.parallel = 1;
  auto m = LoadedModel::Open(gguf, o);
  ASSERT_TRUE(m) << m.status().ToString();
  EXPECT_TRUE((*m)->has_chat_template());
  EXPECT_EQ((*m)->sampling_defaults().temperature, 0.5);
  EXPECT_EQ((*m)->sampling_defaults().top_k, 7);
  EXPECT_EQ((*m)->request_defaults().stop, std::vector<std::string>{"zzz"});
  EXPECT_EQ((*m)->request_defaults().max_tokens, 3);
  EXPECT_EQ((*m)->request_defaults().seed, 9);
  EXPECT_FALSE((*m)->stop_ids().empty());

  const nlohmann::ordered_json user = {{{"role", "user"}, {"content", "hello"}}};
  auto rendered = (*m)->RenderChat(user, {});
  ASSERT_TRUE(rendered) << rendered.status().ToString();
  EXPECT_NE(rendered->rendered.find("Be terse."), std::string::npos) << rendered->rendered;
  const nlohmann::ordered_json with_system = {{{"role", "system"}, {"content", "Own."}},
                                              {{"role", "user"}, {"content", "hello"}}};
  rendered = (*m)->RenderChat(with_system, {});
  ASSERT_TRUE(rendered);
  EXPECT_EQ(rendered->rendered.find("Be terse."), std::string::npos);
  EXPECT_NE(rendered->rendered.find("Own."), std::string::npos);

  // Without layers: no defaults beyond the file's.
  GgufModel bare;
  bare.path = tmp.File("m.gguf");
  auto plain = LoadedModel::Open(bare, o);
  ASSERT_TRUE(plain) << plain.status().ToString();
  EXPECT_FALSE(plain->get()->default_system_prompt());
  EXPECT_FALSE(plain->get()->request_defaults().max_tokens);
}

// A minicpm checkpoint with a SentencePiece tokenizer (stories260k's, a Llama 2 style
// vocabulary like MiniCPM's own) written as MiniCPMModel writes it: the model loads, and the
// tokenizer rebuilt from the file's tokenizer.ggml.* keys encodes the reference prompts as
// llama2.c does.
TEST(GgufLoading, MiniCpmWithASentencePieceVocabulary) {
  test::TempDir tmp;
  const std::string dir = tmp.File("hf");
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kMiniCpm;
  spec.vocab = 512;
  spec.scale_emb = 12.0;
  spec.scale_depth = 1.4;
  spec.dim_model_base = 16.0;
  ASSERT_TRUE(WriteSyntheticCheckpoint(dir, spec).ok());
  const std::string stories = test::SharedDir() + "/models/stories260k";
  for (const char* f : {"/tokenizer.json", "/tokenizer_config.json"}) {
    test::WriteFile(dir + f, test::ReadFile(stories + f));
  }
  const Status written = test::WriteGgufOfCheckpoint(dir, "", tmp.File("m.gguf"));
  ASSERT_TRUE(written.ok()) << written.ToString();
  GgufModel gguf;
  gguf.path = tmp.File("m.gguf");
  ModelLoadOptions o;
  o.placement = "reference";
  o.parallel = 1;
  auto m = LoadedModel::Open(gguf, o);
  ASSERT_TRUE(m) << m.status().ToString();
  const nlohmann::json ref =
      nlohmann::json::parse(test::ReadFile(stories + "/reference_greedy.json"));
  for (const nlohmann::json& c : ref["cases"]) {
    auto ids = (*m)->EncodeText(c["prompt"].get<std::string>(), true);
    ASSERT_TRUE(ids) << ids.status().ToString();
    EXPECT_EQ(*ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["prompt"];
  }
}

}  // namespace
}  // namespace tessera
