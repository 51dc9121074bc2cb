// `tessera generate` end to end on stories260k: prompt text -> ids -> greedy -> text, all
// compared with llama2.c run.c's reference generations.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace tessera {
namespace {

std::string ModelDir() {
  return test::SharedDir() + "/models/stories260k";
}

TEST(GenerateCli, MatchesRunCReferencesThroughTheTokenizer) {
  auto refs = nlohmann::json::parse(test::ReadFile(ModelDir() + "/reference_greedy.json"));
  for (const auto& c : refs["cases"]) {
    // The cpu backend's KV cache in fp32 (exact to 1e-4) and in bf16 (the default: the first
    // step's logits within 5e-2, measured up to 0.025).
    struct Run {
      const char* placement;
      const char* kv_cache;
      double logit_tolerance;
    };
    for (const Run& run :
         {Run{"reference", "f32", 1e-4}, Run{"reference:2,reference", "f32", 1e-4},
          Run{"cpu", "f32", 1e-4}, Run{"reference:2,cpu", "f32", 1e-4}, Run{"cpu", "bf16", 5e-2}}) {
      SCOPED_TRACE(std::string(run.placement) + " kv " + run.kv_cache);
      auto r = test::RunTessera(
          {"generate", "--model", ModelDir(), "--prompt", c["prompt"].get<std::string>(),
           "--max-tokens", std::to_string(c["max_new_tokens"].get<int>()), "--json", "--top-logits",
           "10", "--placement", run.placement, "--kv-cache", run.kv_cache});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto out = nlohmann::json::parse(r.out);
      EXPECT_EQ(out["prompt_ids"], c["prompt_ids"]) << c["id"];
      if (std::string(run.kv_cache) == "f32") {
        EXPECT_EQ(out["generated_ids"], c["generated_ids"]) << c["id"];
        EXPECT_EQ(out["text"], c["text"]) << c["id"];
        EXPECT_EQ(out["completion_text"], c["completion_text"]) << c["id"];
        EXPECT_EQ(out["stop_reason"], c["stop_reason"]) << c["id"];
        ASSERT_EQ(out["top_logits"].size(), c["generated_ids"].size());
      }
      // A bf16 cache follows the reference until a step whose top two logits are closer than
      // its rounding (tests/engine/kv_precision_test.cc measures how far); the first step is
      // checked here.
      ASSERT_FALSE(out["top_logits"].empty());
      for (size_t i = 0; i < 10; ++i) {
        EXPECT_EQ(out["top_logits"][0][i][0], c["first_step_top10_logits"][i][0]);
        EXPECT_NEAR(out["top_logits"][0][i][1].get<double>(),
                    c["first_step_top10_logits"][i][1].get<double>(), run.logit_tolerance);
      }
    }
  }
}

TEST(GenerateCli, StreamedTextEqualsTheJsonCompletion) {
  auto json = test::RunTessera({"generate", "--model", ModelDir(), "--prompt", "Lily and Tom",
                                "--max-tokens", "40", "--json"});
  auto streamed = test::RunTessera(
      {"generate", "--model", ModelDir(), "--prompt", "Lily and Tom", "--max-tokens", "40"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err;
  auto out = nlohmann::json::parse(json.out);
  EXPECT_EQ(streamed.out, out["completion_text"].get<std::string>() + "\n");
  auto echoed = test::RunTessera({"generate", "--model", ModelDir(), "--prompt", "Lily and Tom",
                                  "--max-tokens", "40", "--echo"});
  ASSERT_EQ(echoed.exit_code, 0) << echoed.err;
  EXPECT_EQ(echoed.out, out["text"].get<std::string>() + "\n");
}

TEST(GenerateCli, StopsAtTheEosIdOfGenerationConfig) {
  // Copy stories260k with an eos id the model emits early: 267 (".") appears in every story.
  test::TempDir tmp;
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    test::WriteFile(tmp.File(f), test::ReadFile(ModelDir() + "/" + f));
  }
  test::WriteFile(tmp.File("generation_config.json"), R"({"eos_token_id": [2, 267]})");
  auto r = test::RunTessera({"generate", "--model", tmp.path(), "--prompt", "Once upon a time",
                             "--max-tokens", "60", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["stop_reason"], "stop");
  EXPECT_EQ(out["generated_ids"].back(), 267);
  EXPECT_LT(out["generated_ids"].size(), 60u);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(GenerateCli, ResolvesAModelNameThroughTheStore) {
  // A catalog name installed in $TESSERA_MODELS (here a copy of stories260k under that name).
  test::TempDir store;
  std::string dir = store.File("smollm2-135m-instruct");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors",
                        "tokenizer.json", "tokenizer_config.json"}) {
    test::WriteFile(dir + "/" + f, test::ReadFile(ModelDir() + "/" + f));
  }
  ::setenv("TESSERA_MODELS", store.path().c_str(), 1);
  auto by_name = test::RunTessera({"generate", "--model", "smollm2-135m-instruct", "--prompt",
                                   "Lily and Tom", "--max-tokens", "8", "--json"});
  auto by_path = test::RunTessera({"generate", "--model", ModelDir(), "--prompt", "Lily and Tom",
                                   "--max-tokens", "8", "--json"});
  auto missing = test::RunTessera({"generate", "--model", "qwen3-0.6b", "--prompt", "x"});
  ::unsetenv("TESSERA_MODELS");
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_EQ(nlohmann::json::parse(by_name.out)["generated_ids"],
            nlohmann::json::parse(by_path.out)["generated_ids"]);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("tessera pull qwen3-0.6b"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace tessera
