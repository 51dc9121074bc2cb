// Malformed inputs through the real CLI: each must end with a one-line error on stderr and a
// non-zero exit code, never a crash (these also run under ASan+UBSan).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

std::string U64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A raw safetensors file: header length, header JSON as given, then `data_bytes` zero bytes.
std::string RawSafetensors(const std::string& header, size_t data_bytes) {
  return U64(header.size()) + header + std::string(data_bytes, '\0');
}

class CliMalformed : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.File("model");
    SyntheticModelSpec spec;  // a valid model; each test breaks one thing
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir_, spec).ok());
    // A minimal valid tokenizer so only the broken part can fail.
    test::WriteFile(dir_ + "/tokenizer.json", R"({"version":"1.0","added_tokens":[],
      "normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,
      "model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[]}})");
  }

  void ExpectCleanFailure(const std::vector<std::string>& args, const std::string& needle,
                          const std::string& input = "") {
    auto r = test::RunTessera(args, input);
    EXPECT_EQ(r.signal, 0) << "crashed: " << r.err;
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.exit_code, -1);
    ASSERT_FALSE(r.err.empty());
    // Progress lines of the phases that ran before the failure (base/progress.h: "phase..."
    // and "phase: done in T s") may come first; the error itself is one line, the last.
    std::string error = r.err;
    for (size_t nl; (nl = error.find('\n')) != std::string::npos && nl + 1 < error.size();) {
      const std::string line = error.substr(0, nl);
      const bool progress = line.ends_with("...") || line.find(": done in ") != std::string::npos;
      EXPECT_TRUE(progress) << "not one line: " << r.err;
      if (!progress) break;
      error.erase(0, nl + 1);
    }
    EXPECT_EQ(error.find('\n'), error.size() - 1) << "not one line: " << r.err;
    EXPECT_NE(error.find(needle), std::string::npos) << r.err;
  }

  void ExpectGenerateFails(const std::string& needle) {
    ExpectCleanFailure({"generate", "--model", dir_, "--prompt-ids", "1,2", "--max-tokens", "2"},
                       needle);
  }

  void WriteWeights(const std::string& bytes) {
    test::WriteFile(dir_ + "/model.safetensors", bytes);
  }

  test::TempDir tmp_;
  std::string dir_;
};

TEST_F(CliMalformed, ValidModelRuns) {
  auto r = test::RunTessera(
      {"generate", "--model", dir_, "--prompt-ids", "1,2", "--max-tokens", "3", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"generated_ids\""), std::string::npos);
}

TEST_F(CliMalformed, TruncatedSafetensors) {
  std::string good = test::ReadFile(dir_ + "/model.safetensors");
  WriteWeights(good.substr(0, good.size() / 2));
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, FileShorterThanTheLengthPrefix) {
  WriteWeights("\x10\x00\x00");
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, HeaderLengthPastTheEnd) {
  WriteWeights(U64(1u << 20) + "{}");
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, OverlappingOffsets) {
  WriteWeights(RawSafetensors(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      24));
  ExpectGenerateFails("overlap");
}

TEST_F(CliMalformed, OutOfRangeOffsets) {
  WriteWeights(RawSafetensors(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, UnknownDtype) {
  WriteWeights(RawSafetensors(R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,4]}})", 4));
  ExpectGenerateFails("Q7");
}

TEST_F(CliMalformed, ElementCountMismatch) {
  WriteWeights(RawSafetensors(R"({"a":{"dtype":"F32","shape":[3,3],"data_offsets":[0,16]}})", 16));
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, InvalidUtf8InHeader) {
  WriteWeights(
      RawSafetensors("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4));
  ExpectGenerateFails("model.safetensors");
}

TEST_F(CliMalformed, ConfigMissingAField) {
  std::string cfg = test::ReadFile(dir_ + "/config.json");
  size_t at = cfg.find("\"num_hidden_layers\"");
  ASSERT_NE(at, std::string::npos);
  cfg.replace(at, std::strlen("\"num_hidden_layers\""), "\"renamed_layers\"");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("num_hidden_layers");
}

TEST_F(CliMalformed, ConfigHoldingNaN) {
  std::string cfg = test::ReadFile(dir_ + "/config.json");
  size_t at = cfg.find("\"rope_theta\": ");
  ASSERT_NE(at, std::string::npos);
  size_t end = cfg.find(',', at);
  cfg.replace(at, end - at, "\"rope_theta\": NaN");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("config.json");
  cfg.replace(cfg.find("NaN"), 3, "\"NaN\"");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("rope_theta");
}

TEST_F(CliMalformed, UnknownModelType) {
  std::string cfg = test::ReadFile(dir_ + "/config.json");
  cfg.replace(cfg.find("\"llama\""), 7, "\"mamba\"");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("mamba");
}

TEST_F(CliMalformed, TokenizerOfAnUnknownModelType) {
  test::WriteFile(dir_ + "/tokenizer.json",
                  R"({"version":"1.0","model":{"type":"Unigram","vocab":[["a",0.0]]}})");
  ExpectGenerateFails("Unigram");
  ExpectCleanFailure({"tokenize", "--model", dir_}, "Unigram", "\"hello\"\n");
}

// The 2026 families through the CLI: a DeltaNet tensor of the wrong shape, an unknown layer
// kind, a missing DeltaNet size.
TEST_F(CliMalformed, Qwen35CheckpointsBrokenOneWayAtATime) {
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kQwen3_5;
  spec.layers = 4;
  spec.partial_rotary_factor = 0.25;
  ASSERT_TRUE(WriteSyntheticCheckpoint(dir_, spec).ok());
  const std::string good_config = test::ReadFile(dir_ + "/config.json");
  auto r =
      test::RunTessera({"generate", "--model", dir_, "--prompt-ids", "1,2", "--max-tokens", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;  // the control case runs

  SyntheticModelSpec narrow = spec;
  narrow.linear_value_dim = 10;  // weights for value heads of 10; the config says 12
  ASSERT_TRUE(WriteSyntheticCheckpoint(dir_, narrow).ok());
  test::WriteFile(dir_ + "/config.json", good_config);
  ExpectGenerateFails("linear_attn.");

  ASSERT_TRUE(WriteSyntheticCheckpoint(dir_, spec).ok());
  std::string cfg = good_config;
  cfg.replace(cfg.find("\"linear_attention\""), 18, "\"mamba2_mixer\"");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("mamba2_mixer");

  cfg = good_config;
  cfg.replace(cfg.find("\"linear_num_value_heads\""), 24, "\"renamed_value_heads\"");
  test::WriteFile(dir_ + "/config.json", cfg);
  ExpectGenerateFails("linear_num_value_heads");
}

TEST_F(CliMalformed, PromptIdOutsideTheVocabulary) {
  ExpectCleanFailure({"generate", "--model", dir_, "--prompt-ids", "1,99999"}, "99999");
}

TEST_F(CliMalformed, MissingModelDirectory) {
  ExpectCleanFailure({"generate", "--model", tmp_.File("nope"), "--prompt", "x"}, "nope");
}

// `serve` with a flag whose value can be checked up front exits 2 with one line before it
// listens, instead of starting a worker that fails and is restarted forever. A regression would
// listen and never exit: the run is bounded, and its whole process group killed at the limit.
TEST_F(CliMalformed, ServeRefusesBadFlagsBeforeListening) {
  struct Case {
    std::vector<std::string> flags;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--placement", "bogus"}, "--placement 'bogus': unknown backend 'bogus'"},
      {{"--placement", "reference:1,gpu"}, "unknown backend 'gpu'; available: reference, cpu"},
      {{"--placement", "cpu:x"}, "the layer count must be a positive integer"},
      {{"--placement", "cpu,reference"}, "needs a layer count"},
      // The synthetic model has 2 layers: checked against its config.json, no load needed.
      {{"--placement", "cpu:3"}, "--placement does not fit the model 'model'"},
      {{"--placement", "reference:1,cpu:2"}, "places more than the model's 2 layers"},
      {{"--port", "70000"}, "--port must be between 0 and 65535"},
      {{"--http-threads", "0"}, "--http-threads must be between 1 and 64"},
      {{"--context", "-1"}, "--context must be between"},
      {{"--tls-cert", tmp_.File("cert.pem")}, "--tls-cert and --tls-key must be given together"},
      {{"--tool-call-syntax", "mistral"},
       "--tool-call-syntax 'mistral': the syntax must be none, hermes, llama3_json, gemma_json or "
       "qwen3_xml"},
      {{"--tool-call-syntax", "other=hermes"}, "no served model is named other"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"serve",     "--model", dir_, "--host",
                                     "127.0.0.1", "--port",  "0",  "--no-auth"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const std::string what = c.flags[0] + " " + c.flags[1];
    auto r = test::RunTessera(args, "", /*timeout_ms=*/60000);
    ASSERT_FALSE(r.timed_out) << what << ": serve did not exit; stdout: " << r.out
                              << " stderr: " << r.err;
    EXPECT_EQ(r.signal, 0) << what << ": " << r.err;
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_EQ(r.out.find("listening"), std::string::npos) << what << ": " << r.out;
    ASSERT_FALSE(r.err.empty()) << what;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": not one line: " << r.err;
    EXPECT_TRUE(r.err.starts_with("tessera serve: ")) << what << ": " << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << what << ": " << r.err;
  }
  // The placement's syntax and kinds are checked before any model is looked at.
  auto r = test::RunTessera({"serve", "--model", tmp_.File("nope"), "--placement", "bogus"}, "",
                            /*timeout_ms=*/60000);
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("unknown backend 'bogus'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(CliLimits, ContextPastTheModelsPositionsIsRefused) {
  auto r = test::RunTessera({"generate", "--model", test::SharedDir() + "/models/stories260k",
                             "--prompt", "x", "--context", "200000000"});
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("max_position_embeddings (512)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
