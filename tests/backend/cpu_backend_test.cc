// The CPU backend as a whole: logits against the fp32 reference backend on synthetic
// checkpoints of every family, on every ISA path this machine has; quantized top-1 agreement
// under teacher forcing; stories260k token-exact; hybrid placements.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/model_executor.h"
#include "engine/run_sequence.h"
#include "logits_test_util.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

using test::AllLogits;
using test::Load;
using test::MaxAbsDiff;
using test::RandomTokens;
using test::Top1Agreement;

SyntheticModelSpec SmallSpec(ModelFamily family, DType dtype) {
  SyntheticModelSpec s;
  s.family = family;
  s.hidden = 64;
  s.intermediate = 80;  // not a multiple of 32: padded inputs of down_proj
  s.layers = 3;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = family == ModelFamily::kQwen3 ? 12 : 8;
  s.vocab = 128;
  s.max_position = 64;
  s.tied = family != ModelFamily::kQwen2;
  s.attention_bias = family == ModelFamily::kLlama;  // llama with q/k/v/o biases
  s.dtype = dtype;
  s.rope_theta = family == ModelFamily::kLlama ? 10000.0 : 1000000.0;
  s.seed = 3 + static_cast<uint64_t>(family);
  return s;
}

struct ParityCase {
  ModelFamily family;
  CpuIsa isa;
};

class CpuParity : public ::testing::TestWithParam<ParityCase> {};

std::string ParityName(const ::testing::TestParamInfo<ParityCase>& info) {
  return std::string(ModelFamilyName(info.param.family)) + "_" +
         std::string(CpuIsaName(info.param.isa));
}

// The same weights (F32 checkpoint in F32 mode, BF16 checkpoint in BF16 mode) and fp32
// arithmetic in another order: max |diff| below 1e-4 on logits of magnitude up to ~37.
TEST_P(CpuParity, LogitsMatchTheReferenceBackend) {
  const ParityCase& c = GetParam();
  if (!CpuSupports(c.isa)) GTEST_SKIP() << "CPU lacks " << CpuIsaName(c.isa);
  test::TempDir tmp;
  const std::vector<int32_t> tokens = RandomTokens(40, 128, 17);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    std::string dir = tmp.File(std::string(DTypeName(dtype)));
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir, SmallSpec(c.family, dtype)).ok());
    auto ckpt = OpenCheckpoint(dir);
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    auto ref = Load(*ckpt, "reference", WeightFormat::kAuto, 64, 7);
    ASSERT_TRUE(ref);
    std::vector<float> want = AllLogits(*ref, tokens);
    auto cpu = Load(*ckpt, "cpu", WeightFormat::kAuto, 64, 7, c.isa);  // auto: F32 or BF16
    ASSERT_TRUE(cpu);
    std::vector<float> got = AllLogits(*cpu, tokens);
    double prefill_diff = MaxAbsDiff(got, want);
    // Decode one token at a time (GEMV paths) in a second slot.
    std::vector<float> step(128), stepped;
    for (size_t i = 0; i < tokens.size(); ++i) {
      ASSERT_TRUE(cpu->Forward(1, static_cast<int64_t>(i), std::span(&tokens[i], 1), step).ok());
      stepped.insert(stepped.end(), step.begin(), step.end());
    }
    double decode_diff = MaxAbsDiff(stepped, want);
    double scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    std::printf("[ measured ] %s %s %s: max |logit| %.2f, max diff prefill %.3g decode %.3g\n",
                std::string(ModelFamilyName(c.family)).c_str(),
                std::string(CpuIsaName(c.isa)).c_str(), std::string(DTypeName(dtype)).c_str(),
                scale, prefill_diff, decode_diff);
    EXPECT_LT(prefill_diff, 1e-4);
    EXPECT_LT(decode_diff, 1e-4);
  }
}

std::vector<ParityCase> ParityCases() {
  std::vector<ParityCase> v;
  for (ModelFamily f : {ModelFamily::kLlama, ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    for (CpuIsa isa :
         {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx2Vnni, CpuIsa::kAvx512, CpuIsa::kAvx512Amx})
      v.push_back({f, isa});
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(All, CpuParity, ::testing::ValuesIn(ParityCases()), ParityName);

// Decode steps past 512 positions with 3 kv heads on 2 threads take the split-over-positions
// attention path (every family with attention_decode_split: AVX2, AVX2-VNNI, AVX-512), over the
// paged block pool, after a 600-token prompt through the blocked kernel; their logits still
// match the fp32 reference backend.
class CpuDecodeSplit : public ::testing::TestWithParam<CpuIsa> {};

TEST_P(CpuDecodeSplit, LongContextDecodeMatchesTheReference) {
  if (!CpuSupports(GetParam())) GTEST_SKIP() << "CPU lacks " << CpuIsaName(GetParam());
  test::TempDir tmp;
  SyntheticModelSpec spec = SmallSpec(ModelFamily::kLlama, DType::kF32);
  spec.hidden = 48;
  spec.heads = 6;
  spec.kv_heads = 3;
  spec.head_dim = 8;
  spec.max_position = 1024;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  const std::vector<int32_t> tokens = RandomTokens(700, spec.vocab, 23);
  auto ref = Load(*ckpt, "reference", WeightFormat::kAuto, 704, 256);
  ASSERT_TRUE(ref);
  const std::vector<float> want = AllLogits(*ref, tokens);
  auto placement = ParsePlacement("cpu", spec.layers);
  ASSERT_TRUE(placement);
  ModelExecutor::Options o;
  o.max_slots = 1;
  o.max_seq = 704;
  o.max_batch_tokens = 256;
  o.backend.threads = 2;  // 3 kv heads do not divide evenly over 2 threads: split
  o.backend.cpu_isa = GetParam();
  auto cpu = ModelExecutor::Load(*ckpt, *placement, o);
  ASSERT_TRUE(cpu) << cpu.status().message();
  const size_t vocab = static_cast<size_t>(spec.vocab);
  std::vector<float> step(vocab);
  ASSERT_TRUE((*cpu)->Forward(0, 0, std::span(tokens.data(), 600), step).ok());
  double worst = 0;
  for (size_t i = 600; i < tokens.size(); ++i) {
    ASSERT_TRUE((*cpu)->Forward(0, static_cast<int64_t>(i), std::span(&tokens[i], 1), step).ok());
    for (size_t v = 0; v < vocab; ++v) {
      worst = std::max(worst, std::fabs(static_cast<double>(step[v]) - want[i * vocab + v]));
    }
  }
  std::printf("[ measured ] %s decode at 600-699 positions: max |diff| %.3g\n",
              std::string(CpuIsaName(GetParam())).c_str(), worst);
  EXPECT_LT(worst, 1e-4);
}
INSTANTIATE_TEST_SUITE_P(SplitFamilies, CpuDecodeSplit,
                         ::testing::Values(CpuIsa::kAvx2, CpuIsa::kAvx2Vnni, CpuIsa::kAvx512),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(CpuIsaName(info.param));
                         });

// INT8 / INT4 against the fp32 reference on a bigger synthetic model: the arg-max at each of
// 256 teacher-forced positions.
// A BF16 model big enough that 256 teacher-forced positions mean something.
SyntheticModelSpec MidSpec(ModelFamily family, uint64_t seed) {
  SyntheticModelSpec s;
  s.family = family;
  s.hidden = 256;
  s.intermediate = 512;
  s.layers = 4;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 32;
  s.vocab = 512;
  s.max_position = 300;
  s.dtype = DType::kBF16;
  s.seed = seed;
  return s;
}

TEST(CpuQuantized, Top1AgreementUnderTeacherForcing) {
  test::TempDir tmp;
  for (ModelFamily family : {ModelFamily::kLlama, ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    SyntheticModelSpec s = MidSpec(family, 99 + static_cast<uint64_t>(family));
    std::string dir = tmp.File(std::string(ModelFamilyName(family)));
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir, s).ok());
    auto ckpt = OpenCheckpoint(dir);
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    const std::vector<int32_t> tokens = RandomTokens(256, s.vocab, 5);
    auto ref = Load(*ckpt, "reference", WeightFormat::kAuto, 300, 64);
    ASSERT_TRUE(ref);
    std::vector<float> want = AllLogits(*ref, tokens);
    for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
      auto cpu = Load(*ckpt, "cpu", f, 300, 64);
      ASSERT_TRUE(cpu);
      double agree = Top1Agreement(AllLogits(*cpu, tokens), want, s.vocab);
      std::printf("[ measured ] %s %s top-1 agreement over 256 positions: %.4f\n",
                  std::string(ModelFamilyName(family)).c_str(),
                  std::string(WeightFormatName(f)).c_str(), agree);
      EXPECT_GE(agree, f == WeightFormat::kInt4 ? 0.97 : 0.99) << WeightFormatName(f);
    }
  }
}

// BackendOptions::bf16_activations: prompt rows rounded to bf16 and multiplied with vdpbf16ps.
// Prefill lands near the exact BF16 path (bounds below are what it measured, with margin);
// decode rows keep the exact path bit for bit.
TEST(CpuBf16Activations, PrefillNearTheExactPathDecodeIdentical) {
  if (!ProbedCpuTraits().avx512_bf16) GTEST_SKIP() << "needs AVX512_BF16";
  test::TempDir tmp;
  for (bool tied : {true, false}) {
    SyntheticModelSpec s = MidSpec(ModelFamily::kQwen3, 123);
    s.tied = tied;
    const std::string dir = tmp.File(tied ? "tied" : "untied");
    ASSERT_TRUE(WriteSyntheticCheckpoint(dir, s).ok());
    auto ckpt = OpenCheckpoint(dir);
    ASSERT_TRUE(ckpt) << ckpt.status().message();
    auto load = [&](bool bf16_acts) {
      ModelExecutor::Options o;
      o.max_slots = 2;
      o.max_seq = 300;
      o.max_batch_tokens = 64;
      o.backend.weights = WeightFormat::kBF16;
      o.backend.bf16_activations = bf16_acts;
      auto exec = ModelExecutor::Load(*ckpt, *ParsePlacement("cpu", s.layers), o);
      EXPECT_TRUE(exec) << exec.status().message();
      return exec ? std::move(*exec) : nullptr;
    };
    auto exact = load(false), fast = load(true);
    ASSERT_TRUE(exact && fast);
    const std::vector<int32_t> tokens = RandomTokens(256, s.vocab, 9);
    const std::vector<float> want = AllLogits(*exact, tokens);
    const std::vector<float> got = AllLogits(*fast, tokens);
    double scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    const double diff = MaxAbsDiff(got, want), agree = Top1Agreement(got, want, s.vocab);
    std::printf(
        "[ measured ] bf16 activations, %s head: max |logit| %.2f, max diff %.3g, "
        "top-1 %.4f\n",
        tied ? "tied" : "untied", scale, diff, agree);
    EXPECT_GT(diff, 0.0);  // it is a different computation
    EXPECT_LE(diff, 0.02 * scale);
    EXPECT_GE(agree, tied ? 0.99 : 0.95);
    // Decode rows take the exact path: the same bits.
    std::vector<float> a(static_cast<size_t>(s.vocab)), b = a;
    for (size_t i = 0; i < 8; ++i) {
      ASSERT_TRUE(exact->Forward(1, static_cast<int64_t>(i), std::span(&tokens[i], 1), a).ok());
      ASSERT_TRUE(fast->Forward(1, static_cast<int64_t>(i), std::span(&tokens[i], 1), b).ok());
      EXPECT_EQ(a, b) << i;
    }
  }
}

// bf16 activations where they cannot apply are refused at load, not ignored: another weight
// format, kernels without vdpbf16ps (avx2), or an AVX-512 CPU without AVX512_BF16 (this
// machine's Xeon under KVM, Ice Lake): the message names the missing feature, or the
// --cpu-isa that has it.
TEST(CpuBf16Activations, RefusedWhereTheyCannotApply) {
  test::TempDir tmp;
  SyntheticModelSpec small = SmallSpec(ModelFamily::kQwen3, DType::kBF16);
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("small"), small).ok());
  auto ckpt = OpenCheckpoint(tmp.File("small"));
  ASSERT_TRUE(ckpt);
  auto load = [&](CpuIsa isa, WeightFormat weights) {
    ModelExecutor::Options o;
    o.backend.cpu_isa = isa;
    o.max_seq = 32;
    o.backend.weights = weights;
    o.backend.bf16_activations = true;
    return ModelExecutor::Load(*ckpt, *ParsePlacement("cpu", small.layers), o);
  };
  const bool bf16 = ProbedCpuTraits().avx512_bf16;
  int checked = 0;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kScalar}) {
    if (!CpuSupports(isa)) continue;
    auto int8 = load(isa, WeightFormat::kInt8);
    ASSERT_FALSE(int8);
    EXPECT_NE(int8.status().message().find("bf16 activations apply to bf16 weights"),
              std::string::npos)
        << int8.status().message();
    auto exec = load(isa, WeightFormat::kBF16);
    if (isa == CpuIsa::kAvx512 && bf16) {
      EXPECT_TRUE(exec) << exec.status().message();
      continue;
    }
    ASSERT_FALSE(exec) << CpuIsaName(isa);
    const std::string message = exec.status().message();
    EXPECT_NE(message.find("AVX512_BF16"), std::string::npos) << message;
    EXPECT_NE(message.find(bf16 ? "--cpu-isa avx512" : "this CPU lacks AVX512_BF16"),
              std::string::npos)
        << message;
    ++checked;
  }
  EXPECT_GE(checked, 1);  // scalar at least
}

// The avx512amx family runs INT8 prompt rows on AMX tiles with the AVX-512 kernel's integer
// sums, and decode rows on the AVX-512 kernel: a model's logits have the same bits on both
// families, for every prompt position and for decode steps after it.
TEST(CpuAmx, ModelLogitsAreTheAvx512Bits) {
  if (!CpuSupports(CpuIsa::kAvx512Amx)) GTEST_SKIP() << "this CPU lacks AMX-INT8";
  test::TempDir tmp;
  SyntheticModelSpec s = MidSpec(ModelFamily::kQwen3, 321);
  s.intermediate = 544;  // the down projection's width is 32 past a multiple of 64 (the tail)
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), s).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto load = [&](CpuIsa isa) {
    ModelExecutor::Options o;
    o.backend.cpu_isa = isa;
    o.max_slots = 2;
    o.max_seq = 300;
    o.max_batch_tokens = 64;
    o.backend.weights = WeightFormat::kInt8;
    auto exec = ModelExecutor::Load(*ckpt, *ParsePlacement("cpu", s.layers), o);
    EXPECT_TRUE(exec) << exec.status().message();
    return exec ? std::move(*exec) : nullptr;
  };
  auto avx = load(CpuIsa::kAvx512), amx = load(CpuIsa::kAvx512Amx);
  ASSERT_TRUE(avx && amx);
  const std::vector<int32_t> tokens = RandomTokens(150, s.vocab, 13);
  const std::vector<float> want = AllLogits(*avx, tokens), got = AllLogits(*amx, tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  std::vector<float> a(static_cast<size_t>(s.vocab)), b = a;
  for (size_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(avx->Forward(1, static_cast<int64_t>(i), std::span(&tokens[i], 1), a).ok());
    ASSERT_TRUE(amx->Forward(1, static_cast<int64_t>(i), std::span(&tokens[i], 1), b).ok());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << i;
  }
}

// ---- stories260k: a real trained model ----

std::string StoriesDir() {
  return test::SharedDir() + "/models/stories260k";
}

nlohmann::json StoriesReferences() {
  return nlohmann::json::parse(test::ReadFile(StoriesDir() + "/reference_greedy.json"));
}

struct StoriesCase {
  std::string placement;
  CpuIsa isa;
};

class Stories260kCpu : public ::testing::TestWithParam<StoriesCase> {};

TEST_P(Stories260kCpu, GreedyMatchesRunCTokenForToken) {
  const StoriesCase& c = GetParam();
  if (!CpuSupports(c.isa)) GTEST_SKIP() << "CPU lacks " << CpuIsaName(c.isa);
  auto ckpt = OpenCheckpoint(StoriesDir());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto exec =
      Load(*ckpt, c.placement, WeightFormat::kAuto, 512, 512, c.isa);  // F32 checkpoint: F32
  ASSERT_TRUE(exec);
  nlohmann::json refs = StoriesReferences();
  ASSERT_GE(refs["cases"].size(), 1u);
  for (const auto& rc : refs["cases"]) {
    SequenceRequest req;
    req.prompt_ids = rc["prompt_ids"].get<std::vector<int32_t>>();
    req.max_new_tokens = rc["max_new_tokens"].get<int64_t>();
    req.stop_ids = {2};
    auto result = RunOneSequence(*exec, std::move(req), /*top_logits_k=*/10);
    ASSERT_TRUE(result) << result.status().message();
    EXPECT_EQ(result->generated_ids, rc["generated_ids"].get<std::vector<int32_t>>()) << rc["id"];
    const auto& top = result->top_logits.at(0);
    const auto& ref_top = rc["first_step_top10_logits"];
    ASSERT_EQ(top.size(), ref_top.size());
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_EQ(top[i].first, ref_top[i][0].get<int32_t>()) << rc["id"] << " rank " << i;
      EXPECT_NEAR(top[i].second, ref_top[i][1].get<double>(), 1e-4) << rc["id"] << " rank " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Placements, Stories260kCpu,
                         ::testing::Values(StoriesCase{"cpu", CpuIsa::kAvx512},
                                           StoriesCase{"cpu", CpuIsa::kAvx2},
                                           StoriesCase{"cpu", CpuIsa::kScalar},
                                           StoriesCase{"reference:2,cpu", CpuIsa::kAvx512},
                                           StoriesCase{"cpu:2,reference", CpuIsa::kAvx512},
                                           StoriesCase{"cpu:1,cpu:3,cpu", CpuIsa::kAvx512}),
                         [](const ::testing::TestParamInfo<StoriesCase>& info) {
                           std::string p = info.param.placement;
                           for (char& ch : p) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return p + "_" + std::string(CpuIsaName(info.param.isa));
                         });

// Quantized stories260k under teacher forcing on its own greedy continuations. A 260K-weight
// model with 64-wide rows is far more sensitive to quantization than the synthetic ones
// (two INT4 blocks per row): measured 0.9981 BF16, 0.9793 INT8, 0.8496 INT4 over 532
// positions. The bounds below guard those figures; they are not the synthetic targets.
TEST(Stories260kCpuQuantized, Top1AgreementOnReferenceContinuations) {
  auto ckpt = OpenCheckpoint(StoriesDir());
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  nlohmann::json refs = StoriesReferences();
  auto ref = Load(*ckpt, "reference", WeightFormat::kAuto, 512, 512);
  ASSERT_TRUE(ref);
  for (WeightFormat f : {WeightFormat::kBF16, WeightFormat::kInt8, WeightFormat::kInt4}) {
    auto cpu = Load(*ckpt, "cpu", f, 512, 512);
    ASSERT_TRUE(cpu);
    double same = 0, total = 0;
    for (const auto& rc : refs["cases"]) {
      auto seq = rc["prompt_ids"].get<std::vector<int32_t>>();
      for (int32_t t : rc["generated_ids"].get<std::vector<int32_t>>()) seq.push_back(t);
      double agree = Top1Agreement(AllLogits(*cpu, seq), AllLogits(*ref, seq), 512);
      same += agree * static_cast<double>(seq.size());
      total += static_cast<double>(seq.size());
    }
    std::printf("[ measured ] stories260k %s top-1 agreement over %.0f positions: %.4f\n",
                std::string(WeightFormatName(f)).c_str(), total, same / total);
    const double bound = f == WeightFormat::kBF16 ? 0.99 : f == WeightFormat::kInt8 ? 0.97 : 0.83;
    EXPECT_GE(same / total, bound) << WeightFormatName(f);
  }
  // BF16 with bf16 activations (prompt rows rounded; AVX512_BF16 only).
  if (!ProbedCpuTraits().avx512_bf16) return;
  ModelExecutor::Options o;
  o.max_seq = 512;
  o.max_batch_tokens = 512;
  o.backend.weights = WeightFormat::kBF16;
  o.backend.bf16_activations = true;
  auto fast = ModelExecutor::Load(*ckpt, *ParsePlacement("cpu", (*ckpt)->config.num_layers), o);
  ASSERT_TRUE(fast) << fast.status().message();
  double same = 0, total = 0;
  for (const auto& rc : refs["cases"]) {
    auto seq = rc["prompt_ids"].get<std::vector<int32_t>>();
    for (int32_t t : rc["generated_ids"].get<std::vector<int32_t>>()) seq.push_back(t);
    same += Top1Agreement(AllLogits(**fast, seq), AllLogits(*ref, seq), 512) *
            static_cast<double>(seq.size());
    total += static_cast<double>(seq.size());
  }
  std::printf(
      "[ measured ] stories260k bf16 + bf16 activations top-1 agreement over %.0f "
      "positions: %.4f\n",
      total, same / total);
  EXPECT_GE(same / total, 0.99);
}

// ---- hybrid placement and errors ----

TEST(CpuHybrid, ReferenceThenCpuIsCloseToEitherAlone) {
  test::TempDir tmp;
  ASSERT_TRUE(
      WriteSyntheticCheckpoint(tmp.File("m"), SmallSpec(ModelFamily::kQwen3, DType::kF32)).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  const std::vector<int32_t> tokens = RandomTokens(30, 128, 23);
  auto ref = AllLogits(*Load(*ckpt, "reference", WeightFormat::kAuto, 64, 8), tokens);
  auto cpu = AllLogits(*Load(*ckpt, "cpu", WeightFormat::kAuto, 64, 8), tokens);
  auto hybrid = AllLogits(*Load(*ckpt, "reference:2,cpu", WeightFormat::kAuto, 64, 8), tokens);
  auto split = AllLogits(*Load(*ckpt, "cpu:1,cpu", WeightFormat::kAuto, 64, 8), tokens);
  EXPECT_LT(MaxAbsDiff(hybrid, ref), 1e-4);
  EXPECT_LT(MaxAbsDiff(hybrid, cpu), 1e-4);
  EXPECT_EQ(split, cpu);  // two CPU stages run the same kernels on the same rows
}

TEST(CpuBackend, NamesItsPathAndRefusesBadRequests) {
  test::TempDir tmp;
  ASSERT_TRUE(
      WriteSyntheticCheckpoint(tmp.File("m"), SmallSpec(ModelFamily::kLlama, DType::kBF16)).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto b = MakeCpuBackend({.weights = WeightFormat::kInt4, .threads = 2}, CpuIsa::kScalar);
  EXPECT_FALSE(b->LoadLayers(**ckpt, {2, 5}, {1, 16}).ok());
  EXPECT_FALSE(b->LoadLayers(**ckpt, {0, 3}, {1, 0}).ok());
  ASSERT_TRUE(b->LoadLayers(**ckpt, {0, 3}, {1, 16}).ok());
  EXPECT_EQ(b->name(), "cpu-scalar-int4");
  EXPECT_GT(b->resident_weight_bytes(), 0u);
  std::vector<float> hidden(64 * 2);
  EXPECT_EQ(b->ForwardLayers({{{.slot = 0, .start_pos = 15, .n_tokens = 2, .blocks = {}}}}, hidden)
                .code(),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(
      b->ForwardLayers({{{.slot = 3, .start_pos = 0, .n_tokens = 2, .blocks = {}}}}, hidden).code(),
      ErrorCode::kOutOfRange);
  EXPECT_FALSE(
      b->ForwardLayers({{{.slot = 0, .start_pos = 0, .n_tokens = 3, .blocks = {}}}}, hidden).ok());
  std::vector<float> logits(128);
  EXPECT_FALSE(
      b->ComputeLogits(std::span<const float>(hidden.data(), 64), 1, logits, LogitRows::kPositions)
          .ok());  // no head
  auto auto_fmt = MakeCpuBackend({}, CpuIsa::kAvx2);
  ASSERT_TRUE(auto_fmt->LoadLayers(**ckpt, {0, 3}, {1, 16}).ok());
  EXPECT_EQ(auto_fmt->name(),
            CpuSupports(CpuIsa::kAvx2) ? "cpu-avx2-bf16" : std::string("cpu-scalar-bf16"));
}

}  // namespace
}  // namespace tessera
