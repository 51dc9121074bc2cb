// Load-time transforms (model/transforms.h) on synthetic checkpoints: KV-head replication and
// identity QK-norm injection must leave every position's fp32 logits bit-identical, on the
// reference backend (fp32/bf16 weights; llama, qwen2 with q/k/v biases, qwen3 with q/k norms,
// hybrid qwen3_5 and sliding gemma3) and on the cpu backend at f32 weights. The identities are
// shown not to be vacuous: tiled instead of repeated KV heads, and the injected unit norms run
// as a real RMSNorm, both change the logits. Replication is also checked against a replicated
// checkpoint the test writes to disk itself, and the refusals name the numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/half.h"
#include "engine/model_executor.h"
#include "format/safetensors.h"
#include "model/checkpoint.h"
#include "model/synthetic_checkpoint.h"
#include "model/tensor_convert.h"
#include "model/transforms.h"
#include "test_support.h"

namespace tessera {
namespace {

const std::vector<int32_t> kPrompt = {1, 17, 99, 3, 64, 127, 5, 42, 42, 8, 77};

SyntheticModelSpec TinySpec(ModelFamily family, DType dtype, int64_t heads, int64_t kv_heads) {
  SyntheticModelSpec s;
  s.family = family;
  s.dtype = dtype;
  s.hidden = 64;
  s.intermediate = 80;
  s.layers = 2;
  s.vocab = 128;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = 64 / heads == 4 ? 4 : 8;  // even; qwen3 writes it explicitly
  s.tied = heads % 16 != 0;              // one untied case among the 16-head ones
  s.rope_theta = family == ModelFamily::kLlama ? 10000.0 : 1000000.0;
  s.seed = 3 + static_cast<uint64_t>(heads) * 5 + static_cast<uint64_t>(kv_heads) * 7 +
           static_cast<uint64_t>(family) * 11 + static_cast<uint64_t>(dtype);
  return s;
}

std::shared_ptr<const Checkpoint> WriteAndOpen(const std::string& dir,
                                               const SyntheticModelSpec& spec) {
  Status written = WriteSyntheticCheckpoint(dir, spec);
  EXPECT_TRUE(written.ok()) << written.message();
  auto ckpt = OpenCheckpoint(dir);
  EXPECT_TRUE(ckpt) << ckpt.status().message();
  return ckpt ? *ckpt : nullptr;
}

// Every position's logits ([prompt, vocab]) from one forward pass over the prompt.
std::vector<float> AllLogits(const std::shared_ptr<const Checkpoint>& ckpt,
                             const std::string& backend, const BackendOptions& options = {}) {
  if (!ckpt) return {};
  auto placement = ParsePlacement(backend, ckpt->config.num_layers);
  EXPECT_TRUE(placement) << placement.status().message();
  if (!placement) return {};
  ModelExecutor::Options o;
  o.max_seq = 32;
  o.max_batch_tokens = 16;
  o.backend = options;
  auto exec = ModelExecutor::Load(ckpt, *placement, o);
  EXPECT_TRUE(exec) << exec.status().message();
  if (!exec) return {};
  const auto vocab = static_cast<size_t>(ckpt->config.vocab_size);
  std::vector<float> last(vocab), all(kPrompt.size() * vocab);
  Status run = (*exec)->Forward(0, 0, kPrompt, last, all);
  EXPECT_TRUE(run.ok()) << run.message();
  return all;
}

// Bit-identical, not merely equal as floats (memcmp also tells -0 from 0).
::testing::AssertionResult SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "first difference at " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An independent replication, written as a checkpoint: config.json's num_key_value_heads set
// to `target` and the k/v rows of each KV head repeated (g0 g0 g1 g1) or, deliberately wrong,
// tiled (g0 g1 g0 g1). Flat configs, one tensor file (llama/qwen2/qwen3 synthetic checkpoints).
Status WriteReplicatedCopy(const std::string& src, const std::string& dst, int64_t kv_heads,
                           int64_t target, bool tiled) {
  std::filesystem::create_directories(dst);
  nlohmann::json config = nlohmann::json::parse(test::ReadFile(src + "/config.json"));
  config["num_key_value_heads"] = target;
  test::WriteFile(dst + "/config.json", config.dump(2));
  if (std::filesystem::exists(src + "/generation_config.json")) {
    test::WriteFile(dst + "/generation_config.json",
                    test::ReadFile(src + "/generation_config.json"));
  }
  TS_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(src + "/model.safetensors"));
  std::vector<TensorToWrite> out;
  const int64_t repeat = target / kv_heads;
  for (const TensorInfo& t : file.tensors()) {
    TensorToWrite w{t.name, t.dtype, t.shape, {}};
    bool kv = false;
    for (const char* suffix : {"k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias"}) {
      kv |= EndsWith(t.name, suffix);
    }
    if (!kv) {
      w.bytes.assign(t.data.begin(), t.data.end());
    } else {
      const size_t block = t.data.size() / static_cast<size_t>(kv_heads);
      w.shape[0] *= repeat;
      for (int64_t j = 0; j < target; ++j) {
        const int64_t from = tiled ? j % kv_heads : j / repeat;
        const auto* head = t.data.data() + static_cast<size_t>(from) * block;
        w.bytes.insert(w.bytes.end(), head, head + block);
      }
    }
    out.push_back(std::move(w));
  }
  return WriteSafetensors(dst + "/model.safetensors", out, file.metadata());
}

bool SameTensorBytes(const TensorRef& a, const TensorRef& b) {
  if (!a || !b) return !a && !b;
  return a->dtype == b->dtype && a->shape == b->shape && a->data.size() == b->data.size() &&
         std::memcmp(a->data.data(), b->data.data(), a->data.size()) == 0;
}

// A shallow copy the test can edit (spec flags, packed marker); its tensor refs still point
// into `source`, which the caller keeps alive.
std::shared_ptr<Checkpoint> EditableCopy(const Checkpoint& source) {
  return std::make_shared<Checkpoint>(Checkpoint{source.dir, source.config, source.generation,
                                                 source.has_generation_config, CheckpointTensors{},
                                                 source.tensors});
}

struct ReplicationCase {
  ModelFamily family;
  DType dtype;
  int64_t heads, kv_heads, target;
};

std::string ReplicationName(const ::testing::TestParamInfo<ReplicationCase>& info) {
  const ReplicationCase& c = info.param;
  return std::string(ModelFamilyName(c.family)) + "_" + std::string(DTypeName(c.dtype)) + "_" +
         std::to_string(c.heads) + "x" + std::to_string(c.kv_heads) + "_to_" +
         std::to_string(c.target);
}

class KvReplication : public ::testing::TestWithParam<ReplicationCase> {};

TEST_P(KvReplication, LogitsBitIdenticalAndTilingIsNot) {
  const ReplicationCase& c = GetParam();
  test::TempDir tmp;
  const SyntheticModelSpec spec = TinySpec(c.family, c.dtype, c.heads, c.kv_heads);
  auto base = WriteAndOpen(tmp.File("base"), spec);
  ASSERT_TRUE(base);
  auto replicated = ReplicateKvHeads(base, c.target);
  ASSERT_TRUE(replicated) << replicated.status().message();
  const Checkpoint& r = **replicated;
  EXPECT_EQ(r.tensors.spec.kv_heads, c.target);
  EXPECT_EQ(r.tensors.spec.kv_dim, c.target * spec.head_dim);
  EXPECT_EQ(r.config.num_kv_heads, c.target);
  EXPECT_EQ(base->tensors.spec.kv_heads, c.kv_heads);  // the source is untouched
  for (const LayerTensors& L : r.tensors.layers) {
    ASSERT_TRUE(L.k_proj && L.v_proj);
    EXPECT_EQ(L.k_proj->dtype, c.dtype);  // rows copied, never widened
    EXPECT_EQ(L.k_proj->shape, (std::vector<int64_t>{c.target * spec.head_dim, spec.hidden}));
    EXPECT_EQ(L.v_proj->shape, L.k_proj->shape);
    EXPECT_EQ(static_cast<bool>(L.k_bias), c.family == ModelFamily::kQwen2);
    EXPECT_EQ(static_cast<bool>(L.k_norm), c.family == ModelFamily::kQwen3);
  }

  const std::vector<float> want = AllLogits(base, "reference");
  EXPECT_TRUE(SameBits(AllLogits(*replicated, "reference"), want));

  // The same tensors as a checkpoint replicated on disk by the test, which runs alike.
  ASSERT_TRUE(WriteReplicatedCopy(tmp.File("base"), tmp.File("repeated"), c.kv_heads, c.target,
                                  /*tiled=*/false)
                  .ok());
  auto repeated = OpenCheckpoint(tmp.File("repeated"));
  ASSERT_TRUE(repeated) << repeated.status().message();
  for (size_t i = 0; i < r.tensors.layers.size(); ++i) {
    const LayerTensors& a = r.tensors.layers[i];
    const LayerTensors& b = (*repeated)->tensors.layers[i];
    EXPECT_TRUE(SameTensorBytes(a.k_proj, b.k_proj)) << "layer " << i;
    EXPECT_TRUE(SameTensorBytes(a.v_proj, b.v_proj)) << "layer " << i;
    EXPECT_TRUE(SameTensorBytes(a.k_bias, b.k_bias)) << "layer " << i;
    EXPECT_TRUE(SameTensorBytes(a.v_bias, b.v_bias)) << "layer " << i;
  }
  EXPECT_TRUE(SameBits(AllLogits(*repeated, "reference"), want));

  // Tiled heads pair queries with the wrong keys and values: the identity is not vacuous.
  ASSERT_TRUE(WriteReplicatedCopy(tmp.File("base"), tmp.File("tiled"), c.kv_heads, c.target,
                                  /*tiled=*/true)
                  .ok());
  auto tiled = OpenCheckpoint(tmp.File("tiled"));
  ASSERT_TRUE(tiled) << tiled.status().message();
  const std::vector<float> wrong = AllLogits(*tiled, "reference");
  ASSERT_EQ(wrong.size(), want.size());
  EXPECT_FALSE(SameBits(wrong, want)) << "tiled KV heads gave the same logits";
}

INSTANTIATE_TEST_SUITE_P(
    Transforms, KvReplication,
    ::testing::Values(ReplicationCase{ModelFamily::kLlama, DType::kF32, 8, 2, 4},
                      ReplicationCase{ModelFamily::kLlama, DType::kF32, 8, 2, 8},
                      ReplicationCase{ModelFamily::kLlama, DType::kBF16, 16, 2, 8},
                      ReplicationCase{ModelFamily::kLlama, DType::kBF16, 16, 2, 16},
                      ReplicationCase{ModelFamily::kLlama, DType::kF32, 16, 4, 8},
                      ReplicationCase{ModelFamily::kQwen2, DType::kF32, 8, 2, 8},
                      ReplicationCase{ModelFamily::kQwen2, DType::kBF16, 8, 2, 4},
                      ReplicationCase{ModelFamily::kQwen3, DType::kF32, 8, 2, 4},
                      ReplicationCase{ModelFamily::kQwen3, DType::kBF16, 8, 2, 8}),
    ReplicationName);

// Hybrid and sliding models: DeltaNet layers are left alone, sliding layers replicate too.
TEST(KvReplicationFamilies, Qwen35AndGemma3BitIdentical) {
  test::TempDir tmp;
  SyntheticModelSpec qwen35 = TinySpec(ModelFamily::kQwen3_5, DType::kBF16, 4, 2);
  qwen35.layers = 4;  // DeltaNet, DeltaNet, DeltaNet, gated attention
  qwen35.head_dim = 16;
  qwen35.partial_rotary_factor = 0.25;
  SyntheticModelSpec gemma = TinySpec(ModelFamily::kGemma3, DType::kF32, 4, 2);
  gemma.layers = 4;
  gemma.head_dim = 16;
  gemma.sliding_window = 5;
  gemma.sliding_window_pattern = 2;
  gemma.rope_local_theta = 1e4;
  for (const auto& [name, spec] : {std::pair{"qwen35", qwen35}, std::pair{"gemma3", gemma}}) {
    SCOPED_TRACE(name);
    auto base = WriteAndOpen(tmp.File(name), spec);
    ASSERT_TRUE(base);
    auto replicated = ReplicateKvHeads(base, 4);
    ASSERT_TRUE(replicated) << replicated.status().message();
    EXPECT_TRUE(SameBits(AllLogits(*replicated, "reference"), AllLogits(base, "reference")));
  }
}

// The caller may drop the source: the transformed checkpoint keeps it (and its mapping) alive.
TEST(KvReplicationLifetime, ViewOutlivesCallersSource) {
  test::TempDir tmp;
  auto base = WriteAndOpen(tmp.File("m"), TinySpec(ModelFamily::kQwen2, DType::kBF16, 8, 2));
  ASSERT_TRUE(base);
  const std::vector<float> want = AllLogits(base, "reference");
  auto replicated = ReplicateKvHeads(std::move(base), 8);
  ASSERT_TRUE(replicated) << replicated.status().message();
  base.reset();
  auto injected = InjectIdentityQkNorm(*replicated);  // chained: a view of a view
  ASSERT_TRUE(injected) << injected.status().message();
  replicated->reset();
  EXPECT_TRUE(SameBits(AllLogits(*injected, "reference"), want));
}

struct InjectionCase {
  ModelFamily family;
  DType dtype;
};

class QkNormInjection : public ::testing::TestWithParam<InjectionCase> {};

TEST_P(QkNormInjection, LogitsBitIdenticalAndRealUnitNormIsNot) {
  const InjectionCase& c = GetParam();
  test::TempDir tmp;
  const SyntheticModelSpec spec = TinySpec(c.family, c.dtype, 8, 2);
  auto base = WriteAndOpen(tmp.File("m"), spec);
  ASSERT_TRUE(base);
  auto injected = InjectIdentityQkNorm(base);
  ASSERT_TRUE(injected) << injected.status().message();
  const Checkpoint& q = **injected;
  EXPECT_FALSE(q.tensors.spec.qk_norm);
  EXPECT_TRUE(q.tensors.spec.qk_norm_identity);
  EXPECT_FALSE(base->tensors.spec.qk_norm_identity);
  for (const LayerTensors& L : q.tensors.layers) {
    for (const TensorRef* norm : {&L.q_norm, &L.k_norm}) {
      ASSERT_TRUE(*norm);
      EXPECT_EQ((*norm)->dtype, c.dtype);
      EXPECT_EQ((*norm)->shape, std::vector<int64_t>{spec.head_dim});
      std::vector<float> w;
      ASSERT_TRUE(WidenToF32(*norm, &w).ok());
      EXPECT_EQ(w, std::vector<float>(static_cast<size_t>(spec.head_dim), 1.0f));
    }
  }
  const std::vector<float> want = AllLogits(base, "reference");
  EXPECT_TRUE(SameBits(AllLogits(*injected, "reference"), want));

  // Unit weights run as a real RMSNorm are not the identity: without the pass-through flag
  // the injection would change the model.
  auto as_rms_norm = EditableCopy(q);
  as_rms_norm->tensors.spec.qk_norm = true;
  as_rms_norm->tensors.spec.qk_norm_identity = false;
  const std::vector<float> wrong = AllLogits(as_rms_norm, "reference");
  ASSERT_EQ(wrong.size(), want.size());
  EXPECT_FALSE(SameBits(wrong, want)) << "a unit RMSNorm left the logits unchanged";
}

INSTANTIATE_TEST_SUITE_P(Transforms, QkNormInjection,
                         ::testing::Values(InjectionCase{ModelFamily::kLlama, DType::kF32},
                                           InjectionCase{ModelFamily::kLlama, DType::kBF16},
                                           InjectionCase{ModelFamily::kQwen2, DType::kF32},
                                           InjectionCase{ModelFamily::kQwen2, DType::kBF16}),
                         [](const ::testing::TestParamInfo<InjectionCase>& info) {
                           return std::string(ModelFamilyName(info.param.family)) + "_" +
                                  std::string(DTypeName(info.param.dtype));
                         });

// The cpu backend at f32 weights: its own logits, with and without each transform.
TEST(TransformsOnCpuBackend, LogitsBitIdentical) {
  test::TempDir tmp;
  BackendOptions f32;
  f32.weights = WeightFormat::kF32;
  for (ModelFamily family : {ModelFamily::kLlama, ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    SCOPED_TRACE(std::string(ModelFamilyName(family)));
    auto base = WriteAndOpen(tmp.File(std::string(ModelFamilyName(family))),
                             TinySpec(family, DType::kF32, 8, 2));
    ASSERT_TRUE(base);
    const std::vector<float> want = AllLogits(base, "cpu", f32);
    for (int64_t target : {4, 8}) {
      auto replicated = ReplicateKvHeads(base, target);
      ASSERT_TRUE(replicated) << replicated.status().message();
      EXPECT_TRUE(SameBits(AllLogits(*replicated, "cpu", f32), want)) << "kv heads " << target;
    }
    if (family == ModelFamily::kQwen3) continue;  // has real q/k norms
    auto injected = InjectIdentityQkNorm(base);
    ASSERT_TRUE(injected) << injected.status().message();
    EXPECT_TRUE(SameBits(AllLogits(*injected, "cpu", f32), want)) << "injected q/k norms";
  }
}

::testing::AssertionResult RefusedNaming(const Expected<std::shared_ptr<const Checkpoint>>& r,
                                         const std::vector<std::string>& words) {
  if (r) return ::testing::AssertionFailure() << "accepted";
  if (r.status().code() != ErrorCode::kInvalidArgument) {
    return ::testing::AssertionFailure()
           << "code " << ErrorCodeName(r.status().code()) << ": " << r.status().message();
  }
  for (const std::string& w : words) {
    if (r.status().message().find(w) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "'" << r.status().message() << "' lacks '" << w << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(TransformRefusals, NameWhatIsWrong) {
  test::TempDir tmp;
  auto llama = WriteAndOpen(tmp.File("llama"), TinySpec(ModelFamily::kLlama, DType::kF32, 8, 2));
  auto qwen3 = WriteAndOpen(tmp.File("qwen3"), TinySpec(ModelFamily::kQwen3, DType::kF32, 8, 2));
  ASSERT_TRUE(llama && qwen3);
  // 8 query heads, 2 KV heads.
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(llama, 3), {"2 KV heads to 3", "multiple of 2"}));
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(llama, 16), {"to 16", "divide the 8 query heads"}));
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(llama, 6), {"to 6"}));
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(llama, 0), {"to 0"}));
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(llama, -2), {"to -2"}));
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(nullptr, 4), {"no checkpoint"}));

  auto packed = EditableCopy(*llama);
  packed->tensors.packed = PackedModelTensors{"tessera-cpu-panels-1", "f32", {}, {}};
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(packed, 4), {"packed", "source checkpoint"}));

  auto no_attention = EditableCopy(*llama);
  for (LayerSpec& l : no_attention->tensors.spec.layer) l.kind = LayerKind::kGatedDeltaNet;
  EXPECT_TRUE(RefusedNaming(ReplicateKvHeads(no_attention, 4), {"no attention layers"}));
  EXPECT_TRUE(RefusedNaming(InjectIdentityQkNorm(no_attention), {"no attention layers"}));

  EXPECT_TRUE(RefusedNaming(InjectIdentityQkNorm(qwen3), {"already has q_norm/k_norm"}));
  auto injected = InjectIdentityQkNorm(llama);
  ASSERT_TRUE(injected) << injected.status().message();
  EXPECT_TRUE(RefusedNaming(InjectIdentityQkNorm(*injected), {"already has injected"}));
  // Replicating the KV heads of an injected model is fine: k_norm is per head_dim.
  EXPECT_TRUE(ReplicateKvHeads(*injected, 8));
}

}  // namespace
}  // namespace tessera
