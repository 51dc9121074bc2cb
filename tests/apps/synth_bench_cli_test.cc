// `tessera synth` writes a loadable model with a working tokenizer; `tessera bench --json`
// reports every documented field.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/synthetic_checkpoint.h"
#include "model/synthetic_tokenizer.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace tessera {
namespace {

TEST(SyntheticTokenizer, RoundTripsTextAndKnowsItsSpecialTokens) {
  auto files = MakeSyntheticTokenizer(4000);
  ASSERT_TRUE(files) << files.status().message();
  auto tok = Tokenizer::FromJson(files->tokenizer_json);
  ASSERT_TRUE(tok) << tok.status().message();
  EXPECT_EQ(tok->vocab_size(), files->vocab_size);
  EXPECT_GT(files->vocab_size, 256 + 100);  // merges were learned
  for (const char* text : {"The river moved slowly past the old mill.",
                           "naïve café 日本語 🙂", "  tabs\tand\nnewlines  ", ""}) {
    auto ids = tok->Encode(text);
    ASSERT_TRUE(ids) << ids.status().message();
    auto back = tok->Decode(*ids, false);
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, text);
  }
  // Learned merges make common English shorter than its byte count.
  auto ids = tok->Encode("the river and the mill");
  ASSERT_TRUE(ids);
  EXPECT_LT(ids->size(), 12u);
  auto chat = tok->Encode("<|im_start|>user");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->front(), files->im_start_id);
  EXPECT_TRUE(tok->IsSpecial(files->im_end_id));
}

TEST(SynthCli, RefusesUnknownPresetsAndBadDtypes) {
  test::TempDir tmp;
  auto r = test::RunTessera({"synth", "--preset", "gpt-9", "--out", tmp.File("x")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("smollm2-135m"), std::string::npos) << r.err;
  r = test::RunTessera(
      {"synth", "--preset", "qwen3-0.6b", "--out", tmp.File("x"), "--dtype", "q3"});
  EXPECT_EQ(r.exit_code, 2);
  r = test::RunTessera(
      {"synth", "--preset", "qwen3-0.6b", "--out", tmp.File("x"), "--vocab", "100"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--vocab"), std::string::npos) << r.err;
}

// A 512-token synthetic bf16 model: enough to load and run every bench path quickly.
Status WriteTinyModel(const std::string& dir) {
  SyntheticModelSpec spec;
  spec.vocab = 512;
  spec.dtype = DType::kBF16;
  return WriteSyntheticModel(dir, spec);
}

TEST(BenchCli, ReportsEveryField) {
  test::TempDir tmp;
  ASSERT_TRUE(WriteTinyModel(tmp.File("m")).ok());
  for (const char* dtype : {"bf16", "int8", "int4"}) {
    auto r = test::RunTessera({"bench", "--model", tmp.File("m"), "--dtype", dtype, "--threads",
                               "1", "--prompt-tokens", "8,16", "--gen-tokens", "4", "--repeat", "2",
                               "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    for (const char* key : {"load_s", "prefill_tok_s", "decode_tok_s", "ttft_ms", "peak_rss_mib",
                            "decode_gb_s", "dtype", "threads"}) {
      EXPECT_TRUE(j.contains(key)) << key;
    }
    EXPECT_EQ(j["dtype"], dtype);
    EXPECT_GT(j["prefill_tok_s"]["8"].get<double>(), 0);
    EXPECT_GT(j["prefill_tok_s"]["16"].get<double>(), 0);
    EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  }
  auto bad = test::RunTessera({"bench", "--model", tmp.File("m"), "--dtype", "int3"});
  EXPECT_EQ(bad.exit_code, 2);
}

// Stream counts through the scheduler: each count's figures, and against one stream the
// per-repeat ratios of decode rates with their median.
TEST(BenchCli, ReportsConcurrencyScalingPerRepeat) {
  test::TempDir tmp;
  ASSERT_TRUE(WriteTinyModel(tmp.File("m")).ok());
  auto r = test::RunTessera({"bench", "--model", tmp.File("m"), "--dtype", "int8", "--threads", "1",
                             "--prompt-tokens", "8", "--gen-tokens", "6", "--repeat", "3",
                             "--concurrency", "1,3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("concurrency")) << r.out;
  const auto& one = j["concurrency"]["1"];
  const auto& three = j["concurrency"]["3"];
  EXPECT_GT(one["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(three["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(three["ttft_p99_ms"].get<double>(), 0);
  EXPECT_FALSE(one.contains("decode_vs_one_stream_per_repeat"));
  auto ratios = three["decode_vs_one_stream_per_repeat"].get<std::vector<double>>();
  ASSERT_EQ(ratios.size(), 3u);
  for (double x : ratios) EXPECT_GT(x, 0);
  std::sort(ratios.begin(), ratios.end());
  EXPECT_DOUBLE_EQ(three["decode_vs_one_stream"].get<double>(), ratios[1]);
}

}  // namespace
}  // namespace tessera
