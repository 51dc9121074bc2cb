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
    // The cpu backend's KV cache follows the weights: fp32 for this F32 checkpoint with no
    // flag (exact, 1e-4), bf16 when asked (the first step's logits within 5e-2, measured up to
    // 0.025). kv_cache nullptr: no --kv-cache flag at all.
    struct Run {
      const char* placement;
      const char* kv_cache;
      double logit_tolerance;
    };
    for (const Run& run : {Run{"reference", "f32", 1e-4}, Run{"reference:2,reference", "f32", 1e-4},
                           Run{"cpu", nullptr, 1e-4}, Run{"cpu", "f32", 1e-4},
                           Run{"reference:2,cpu", nullptr, 1e-4}, Run{"cpu", "bf16", 5e-2}}) {
      const bool exact = run.kv_cache == nullptr || std::string(run.kv_cache) == "f32";
      SCOPED_TRACE(std::string(run.placement) + " kv " + (run.kv_cache ? run.kv_cache : "default"));
      std::vector<std::string> argv = {"generate",
                                       "--model",
                                       ModelDir(),
                                       "--prompt",
                                       c["prompt"].get<std::string>(),
                                       "--max-tokens",
                                       std::to_string(c["max_new_tokens"].get<int>()),
                                       "--json",
                                       "--top-logits",
                                       "10",
                                       "--placement",
                                       run.placement};
      if (run.kv_cache != nullptr) argv.insert(argv.end(), {"--kv-cache", run.kv_cache});
      auto r = test::RunTessera(argv);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto out = nlohmann::json::parse(r.out);
      EXPECT_EQ(out["prompt_ids"], c["prompt_ids"]) << c["id"];
      if (exact) {
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

// The built-in demo model by name, with an empty store: the same tokens as ../shared's copy;
// pull has nothing to download and rm nothing to remove.
TEST(GenerateCli, TheBuiltInModelByName) {
  test::TempDir store;
  ::setenv("TESSERA_MODELS", store.path().c_str(), 1);
  auto builtin = test::RunTessera({"generate", "--model", "stories260k", "--prompt", "Lily and Tom",
                                   "--max-tokens", "16", "--json"});
  auto pull = test::RunTessera({"pull", "stories260k"});
  auto rm = test::RunTessera({"rm", "stories260k"});
  ::unsetenv("TESSERA_MODELS");
  auto by_path = test::RunTessera({"generate", "--model", ModelDir(), "--prompt", "Lily and Tom",
                                   "--max-tokens", "16", "--json"});
  ASSERT_EQ(builtin.exit_code, 0) << builtin.err;
  ASSERT_EQ(by_path.exit_code, 0) << by_path.err;
  EXPECT_EQ(nlohmann::json::parse(builtin.out)["generated_ids"],
            nlohmann::json::parse(by_path.out)["generated_ids"]);
  EXPECT_EQ(pull.exit_code, 0) << pull.err;
  EXPECT_NE(pull.out.find("nothing to download"), std::string::npos) << pull.out;
  EXPECT_NE(rm.exit_code, 0);
  EXPECT_NE(rm.err.find("built-in demo model"), std::string::npos) << rm.err;
}

// --cpu-isa is a flag, never an environment variable: a name that is no kernel family is an
// error listing the families (exit 2) before anything loads; a family this CPU lacks is refused
// before anything loads too, naming the ones it has; a family it has gives the same tokens as
// the default.
TEST(GenerateCli, CpuIsaFlagIsCheckedAndHonoured) {
  const std::vector<std::string> base = {"generate",     "--model",      ModelDir(), "--prompt",
                                         "Lily and Tom", "--max-tokens", "12",       "--json"};
  auto with = [&](const std::string& isa) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), {"--cpu-isa", isa});
    return test::RunTessera(argv);
  };
  auto bogus = with("bogus");
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("--cpu-isa"), std::string::npos) << bogus.err;
  EXPECT_NE(bogus.err.find("scalar, avx2, avx2vnni, avx512 or avx512amx"), std::string::npos)
      << bogus.err;
  auto plain = test::RunTessera(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto want = nlohmann::json::parse(plain.out)["generated_ids"];
  auto scalar = with("scalar");
  ASSERT_EQ(scalar.exit_code, 0) << scalar.err;
  EXPECT_EQ(nlohmann::json::parse(scalar.out)["generated_ids"], want);
  // AVX-512 with AMX is the family most machines lack; where it is present nothing is refused.
  auto amx = with("avx512amx");
  if (amx.exit_code != 0) {
    EXPECT_NE(amx.err.find("this CPU runs"), std::string::npos) << amx.err;
    EXPECT_NE(amx.err.find("scalar"), std::string::npos) << amx.err;
  } else {
    EXPECT_EQ(nlohmann::json::parse(amx.out)["generated_ids"], want);
  }
}

// Every command that loads a model takes --cpu-isa (its --help lists it), and refuses a family
// this CPU lacks before loading anything (exit 2), naming the missing features and the families
// the CPU runs (those `tessera --version` lists).
TEST(CliCpuIsa, EveryModelCommandTakesItAndRefusesAFamilyThisCpuLacks) {
  const auto version = test::RunTessera({"--version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  const std::string runs_marker = "(this CPU runs ";
  const size_t at = version.out.find(runs_marker);
  ASSERT_NE(at, std::string::npos) << version.out;
  const std::string runs = version.out.substr(at + runs_marker.size(),
                                              version.out.find(')', at) - at - runs_marker.size());
  std::string lacking;  // the first family not in "avx512, avx2, scalar"
  for (const char* isa : {"avx512amx", "avx2vnni", "avx512", "avx2"}) {
    if ((", " + runs + ", ").find(", " + std::string(isa) + ", ") == std::string::npos) {
      lacking = isa;
      break;
    }
  }
  const std::string model = ModelDir();
  const std::vector<std::vector<std::string>> commands = {
      {"generate", "--model", model, "--prompt", "Lily", "--max-tokens", "2"},
      {"chat", "--model", model, "--prompt", "Lily", "--max-tokens", "2"},
      {"bench", "--model", model, "--prompt-tokens", "4", "--gen-tokens", "2"},
      {"serve", "--model", model, "--port", "0"},
  };
  for (const auto& command : commands) {
    auto help = test::RunTessera({command[0], "--help"});
    EXPECT_EQ(help.exit_code, 0) << command[0];
    EXPECT_NE(help.out.find("--cpu-isa"), std::string::npos) << command[0] << ": " << help.out;
    if (lacking.empty()) continue;  // this CPU runs every family
    std::vector<std::string> argv = command;
    argv.insert(argv.end(), {"--cpu-isa", lacking});
    auto r = test::RunTessera(argv);
    EXPECT_EQ(r.exit_code, 2) << command[0] << ": " << r.err;
    EXPECT_NE(r.err.find("--cpu-isa " + lacking + ": this CPU lacks "), std::string::npos)
        << command[0] << ": " << r.err;
    EXPECT_NE(r.err.find("this CPU runs " + runs), std::string::npos)
        << command[0] << ": " << r.err;
  }
  if (lacking.empty()) GTEST_SKIP() << "this CPU runs every family; nothing to refuse";
}

}  // namespace
}  // namespace tessera
