// ModelExecutor::Step, the batched forward of continuous batching: a sequence's logits must
// be bit-identical whether its tokens ran alone or in a batch with other sequences' decode
// tokens and prompt chunks (every backend, weight format and layer kind), since the scheduler
// promises the same greedy tokens alone or batched.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "backend/cpu/cpu_backend.h"
#include "engine/decoding.h"
#include "engine/model_executor.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

constexpr int kSlots = 4;
constexpr int64_t kChunk = 16;  // prompt tokens per step
constexpr int kDecodeSteps = 6;

enum class Arch { kLlama, kQwen3, kQwen35, kGemma3 };

SyntheticModelSpec SpecFor(Arch arch) {
  SyntheticModelSpec s;
  s.hidden = 64;
  s.intermediate = 96;
  s.vocab = 160;
  s.max_position = 128;
  s.layers = 3;
  s.heads = 4;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.seed = 5 + static_cast<uint64_t>(arch);
  switch (arch) {
    case Arch::kLlama:
      break;
    case Arch::kQwen3:
      s.family = ModelFamily::kQwen3;
      break;
    case Arch::kQwen35:  // DeltaNet, DeltaNet, DeltaNet, gated attention
      s.family = ModelFamily::kQwen3_5;
      s.layers = 4;
      s.partial_rotary_factor = 0.25;
      s.linear_key_heads = 2;
      s.linear_value_heads = 4;
      s.linear_key_dim = 8;
      s.linear_value_dim = 12;
      break;
    case Arch::kGemma3:  // sliding windows of 5 positions between global layers
      s.family = ModelFamily::kGemma3;
      s.layers = 4;
      s.kv_heads = 1;
      s.sliding_window = 5;
      s.sliding_window_pattern = 2;
      s.rope_local_theta = 1e4;
      break;
  }
  return s;
}

// A sequence's script: its prompt (prefilled in kChunk pieces) then kDecodeSteps greedy tokens.
struct Script {
  std::vector<int32_t> prompt;
  int64_t pos = 0;
  std::vector<int32_t> generated;
  std::vector<std::vector<float>> logits;  // every step's logits, in order
  bool done() const { return static_cast<int>(generated.size()) >= kDecodeSteps; }
  // The tokens of its next step.
  std::vector<int32_t> Next() const {
    const int64_t n = static_cast<int64_t>(prompt.size());
    if (pos < n) {
      return {prompt.begin() + pos, prompt.begin() + std::min(n, pos + kChunk)};
    }
    return {generated.back()};
  }
  void Took(int64_t n, std::span<const float> row) {
    pos += n;
    if (pos >= static_cast<int64_t>(prompt.size())) {
      logits.emplace_back(row.begin(), row.end());
      generated.push_back(ArgMax(row));
    }
  }
};

std::vector<Script> Scripts(int64_t vocab) {
  std::vector<Script> s(kSlots);
  const size_t lengths[kSlots] = {1, 7, 40, 23};
  for (int i = 0; i < kSlots; ++i)
    s[i].prompt = test::RandomTokens(lengths[i], vocab, 100 + static_cast<uint32_t>(i));
  return s;
}

// Block tables that scatter each sequence over the whole KV pool (backend.h), in a shuffled
// order, where the identity layout keeps slot s in blocks [s * per_slot, ...).
std::vector<std::vector<int32_t>> ScatteredTables(const ModelExecutor& exec) {
  const int64_t per_slot = KvBlocksFor(exec.max_seq());
  std::vector<int32_t> all(static_cast<size_t>(exec.kv_blocks()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
  std::mt19937 rng(7);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(exec.max_slots()));
  for (size_t s = 0; s < tables.size(); ++s) {
    tables[s].assign(all.begin() + static_cast<std::ptrdiff_t>(s * per_slot),
                     all.begin() + static_cast<std::ptrdiff_t>((s + 1) * per_slot));
  }
  return tables;
}

// Runs the scripts: `together` puts every unfinished sequence in each step; otherwise one
// sequence runs to its end before the next starts. `tables`: each slot's block table (null:
// the identity layout).
void RunScripts(ModelExecutor& exec, std::vector<Script>& scripts, bool together,
                const std::vector<std::vector<int32_t>>* tables = nullptr) {
  const size_t vocab = static_cast<size_t>(exec.spec().vocab);
  for (int guard = 0; guard < 5000; ++guard) {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<int> who;
    for (int i = 0; i < kSlots; ++i) {
      if (scripts[i].done()) continue;
      tokens.push_back(scripts[i].Next());
      who.push_back(i);
      if (!together) break;
    }
    if (who.empty()) return;
    std::vector<ModelExecutor::StepInput> inputs;
    for (size_t k = 0; k < who.size(); ++k)
      inputs.push_back({who[k], scripts[who[k]].pos, tokens[k],
                        tables ? std::span<const int32_t>((*tables)[static_cast<size_t>(who[k])])
                               : std::span<const int32_t>()});
    std::vector<float> logits(who.size() * vocab);
    const Status st = exec.Step(inputs, logits);
    ASSERT_TRUE(st.ok()) << st.message();
    for (size_t k = 0; k < who.size(); ++k) {
      scripts[who[k]].Took(static_cast<int64_t>(tokens[k].size()),
                           std::span<const float>(logits).subspan(k * vocab, vocab));
    }
  }
  FAIL() << "the scripts did not finish";
}

using Param = std::tuple<Arch, WeightFormat, const char*>;
class BatchStep : public ::testing::TestWithParam<Param> {};

TEST_P(BatchStep, SequenceResultsDoNotDependOnTheBatch) {
  const auto [arch, format, backend] = GetParam();
  test::TempDir tmp;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), SpecFor(arch)).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto placement = ParsePlacement(backend, (*ckpt)->config.num_layers);
  ASSERT_TRUE(placement) << placement.status().message();
  for (KvCacheType kv : {KvCacheType::kF32, KvCacheType::kBF16}) {
    SCOPED_TRACE(kv == KvCacheType::kBF16 ? "bf16 KV cache" : "fp32 KV cache");
    ModelExecutor::Options o;
    o.max_slots = kSlots;
    o.max_seq = 128;
    o.max_batch_tokens = 64;
    o.backend.weights = format;
    o.backend.kv_cache = kv;
    auto exec = ModelExecutor::Load(*ckpt, *placement, o);
    ASSERT_TRUE(exec) << exec.status().message();
    const int64_t vocab = (*exec)->spec().vocab;

    // Alone in the identity layout; together with each sequence scattered over the pool.
    std::vector<Script> alone = Scripts(vocab), together = Scripts(vocab);
    const auto tables = ScatteredTables(**exec);
    RunScripts(**exec, alone, false);
    RunScripts(**exec, together, true, &tables);
    for (int i = 0; i < kSlots; ++i) {
      SCOPED_TRACE("sequence " + std::to_string(i));
      EXPECT_EQ(alone[i].generated, together[i].generated);
      ASSERT_EQ(alone[i].logits.size(), together[i].logits.size());
      for (size_t t = 0; t < alone[i].logits.size(); ++t) {
        EXPECT_EQ(alone[i].logits[t], together[i].logits[t]) << "step " << t;  // bit for bit
      }
    }
    // The steps that mixed decode rows and a prompt chunk happened: sequence 2's 40-token
    // prompt took 3 steps while sequences 0 and 1 were already decoding.
    EXPECT_GT(together[0].generated.size(), 0u);
  }
}

// Past 256 positions a model whose kv heads do not divide among the threads splits decode
// attention over positions; batched rows must keep each row's own split and merge.
TEST(BatchStepLong, SplitDecodeAttentionIsTheSameBatched) {
  SyntheticModelSpec spec = SpecFor(Arch::kLlama);
  spec.kv_heads = 1;
  spec.heads = 3;
  spec.max_position = 1024;
  test::TempDir tmp;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  auto placement = ParsePlacement("cpu", (*ckpt)->config.num_layers);
  ASSERT_TRUE(placement);
  for (WeightFormat format : {WeightFormat::kBF16, WeightFormat::kInt8}) {
    ModelExecutor::Options o;
    o.max_slots = kSlots;
    o.max_seq = 1024;
    o.max_batch_tokens = kSlots * kChunk;
    o.backend.weights = format;
    o.backend.threads = 2;  // 1 kv head over 2 threads: split
    // The int8 run reads a bf16 KV cache (its split kernels too).
    o.backend.kv_cache = format == WeightFormat::kInt8 ? KvCacheType::kBF16 : KvCacheType::kF32;
    auto exec = ModelExecutor::Load(*ckpt, *placement, o);
    ASSERT_TRUE(exec) << exec.status().message();
    auto scripts = [&] {
      std::vector<Script> s(kSlots);
      const size_t lengths[kSlots] = {600, 5, 700, 300};
      for (int i = 0; i < kSlots; ++i)
        s[i].prompt = test::RandomTokens(lengths[i], 160, 900 + static_cast<uint32_t>(i));
      return s;
    };
    std::vector<Script> alone = scripts(), together = scripts();
    const auto tables = ScatteredTables(**exec);
    RunScripts(**exec, alone, false);
    RunScripts(**exec, together, true, &tables);
    for (int i = 0; i < kSlots; ++i) {
      ASSERT_EQ(alone[i].logits.size(), together[i].logits.size());
      for (size_t t = 0; t < alone[i].logits.size(); ++t)
        EXPECT_EQ(alone[i].logits[t], together[i].logits[t]) << "sequence " << i << " step " << t;
    }
  }
}

TEST(BatchStepErrors, RefusesBadInputs) {
  test::TempDir tmp;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), SpecFor(Arch::kLlama)).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt);
  auto placement = ParsePlacement("cpu", (*ckpt)->config.num_layers);
  ASSERT_TRUE(placement);
  ModelExecutor::Options o;
  o.max_slots = 2;
  o.max_seq = 32;
  o.max_batch_tokens = 8;
  o.kv_blocks = 3;  // slot 1's identity block and one more
  auto exec = ModelExecutor::Load(*ckpt, *placement, o);
  ASSERT_TRUE(exec);
  const size_t vocab = static_cast<size_t>((*exec)->spec().vocab);
  std::vector<int32_t> one{1}, nine(9, 1), bad{-1};
  std::vector<float> logits2(2 * vocab), logits1(vocab);
  using In = ModelExecutor::StepInput;
  // Two chunks for one slot.
  std::vector<In> same_slot{{0, 0, one, {}}, {0, 1, one, {}}};
  EXPECT_FALSE((*exec)->Step(same_slot, logits2).ok());
  // Over the step's token budget.
  std::vector<In> too_many{{0, 0, nine, {}}};
  EXPECT_FALSE((*exec)->Step(too_many, logits1).ok());
  // Past the context, and a token outside the vocabulary.
  std::vector<In> past{{1, 32, one, {}}};
  EXPECT_FALSE((*exec)->Step(past, logits1).ok());
  std::vector<In> oov{{1, 0, bad, {}}};
  EXPECT_FALSE((*exec)->Step(oov, logits1).ok());
  // Slot out of range.
  std::vector<In> slot{{2, 0, one, {}}};
  EXPECT_FALSE((*exec)->Step(slot, logits1).ok());
  // A block table naming a block outside the pool (of 3), a negative one, and the pool's
  // last block, which is fine.
  std::vector<int32_t> outside{3}, negative{-1}, last{2};
  std::vector<In> far{{0, 0, one, outside}};
  EXPECT_FALSE((*exec)->Step(far, logits1).ok());
  std::vector<In> below{{0, 0, one, negative}};
  EXPECT_FALSE((*exec)->Step(below, logits1).ok());
  std::vector<In> fine{{0, 0, one, last}};
  EXPECT_TRUE((*exec)->Step(fine, logits1).ok());
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const char* arch[] = {"llama", "qwen3", "qwen35", "gemma3"};
  return std::string(arch[static_cast<int>(std::get<0>(info.param))]) + "_" +
         std::string(WeightFormatName(std::get<1>(info.param))) + "_" + std::get<2>(info.param);
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, BatchStep,
    ::testing::Combine(::testing::Values(Arch::kLlama, Arch::kQwen3, Arch::kQwen35, Arch::kGemma3),
                       ::testing::Values(WeightFormat::kF32, WeightFormat::kBF16,
                                         WeightFormat::kInt8, WeightFormat::kInt4),
                       ::testing::Values("cpu")),
    ParamName);
INSTANTIATE_TEST_SUITE_P(
    Reference, BatchStep,
    ::testing::Combine(::testing::Values(Arch::kLlama, Arch::kQwen35, Arch::kGemma3),
                       ::testing::Values(WeightFormat::kAuto), ::testing::Values("reference")),
    ParamName);

}  // namespace
}  // namespace tessera
