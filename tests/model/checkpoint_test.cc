// Loading refuses checkpoints it does not fully understand, with one line naming the tensor.
#include "model/checkpoint.h"

#include <gtest/gtest.h>

#include "format/model_kind.h"
#include "format/safetensors.h"
#include "model/synthetic_checkpoint.h"
#include "test_support.h"

namespace tessera {
namespace {

// Writes a valid tiny checkpoint, then replaces its weights with `edit(tensors)`.
std::string WriteEdited(const test::TempDir& tmp, const SyntheticModelSpec& spec,
                        const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  std::string dir = tmp.File("m");
  EXPECT_TRUE(WriteSyntheticCheckpoint(dir, spec).ok());
  auto file = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(file) << file.status().message();
  std::vector<TensorToWrite> tensors;
  for (const TensorInfo& t : file->tensors()) {
    std::vector<float> v(t.num_elements);
    EXPECT_TRUE(CopyTensorToF32(t, v).ok());
    tensors.push_back(MakeTensor(t.name, DType::kF32, t.shape, v));
  }
  edit(tensors);
  EXPECT_TRUE(WriteSafetensors(dir + "/model.safetensors", tensors).ok());
  return dir;
}

void ExpectRefused(const std::string& dir, const std::string& needle) {
  auto ckpt = OpenCheckpoint(dir);
  ASSERT_FALSE(ckpt) << "loaded a broken checkpoint";
  const std::string msg = ckpt.status().message();
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(Checkpoint, LoadsAValidSyntheticModel) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kQwen3;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.File("m"), spec).ok());
  auto ckpt = OpenCheckpoint(tmp.File("m"));
  ASSERT_TRUE(ckpt) << ckpt.status().message();
  EXPECT_EQ((*ckpt)->tensors.layers.size(), 2u);
  EXPECT_NE((*ckpt)->tensors.layers[0].q_norm.info, nullptr);
  EXPECT_EQ((*ckpt)->tensors.lm_head.info, (*ckpt)->tensors.embed.info);  // tied
}

// The task-model presets: published shapes, and the embedding model's sentence-transformers
// files, which DetectModelKind reads (the checkpoint itself loads as the qwen3 it is).
TEST(Checkpoint, TaskModelPresets) {
  auto qwen3 = SyntheticPreset("qwen3-0.6b");
  auto qwen35 = SyntheticPreset("qwen3.5-0.8b");
  ASSERT_TRUE(qwen3 && qwen35);
  for (const char* name : {"qwen3-embedding-0.6b", "qwen3-reranker-0.6b", "qwen3guard-gen-0.6b"}) {
    auto p = SyntheticPreset(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(p->family, ModelFamily::kQwen3) << name;
    EXPECT_EQ(p->hidden, qwen3->hidden) << name;
    EXPECT_EQ(p->layers, qwen3->layers) << name;
    EXPECT_EQ(p->sentence_transformers, std::string(name) == "qwen3-embedding-0.6b") << name;
  }
  auto decider = SyntheticPreset("decider-0.8b");
  ASSERT_TRUE(decider.has_value());
  EXPECT_EQ(decider->family, ModelFamily::kQwen3_5);
  EXPECT_EQ(decider->linear_value_heads, qwen35->linear_value_heads);

  // The embedding preset's files at a small size.
  auto spec = SyntheticPreset("qwen3-embedding-0.6b");
  ASSERT_TRUE(spec.has_value());
  spec->hidden = 64;
  spec->intermediate = 96;
  spec->layers = 2;
  spec->heads = 4;
  spec->kv_heads = 2;
  spec->head_dim = 16;
  spec->vocab = 256;
  test::TempDir tmp;
  ASSERT_TRUE(WriteSyntheticCheckpoint(tmp.path(), *spec).ok());
  auto kind = DetectModelKind(tmp.path());
  ASSERT_TRUE(kind.has_value()) << kind.status().message();
  EXPECT_EQ(kind->kind, ModelKind::kEmbed);
  EXPECT_TRUE(kind->normalize);
  EXPECT_EQ(kind->prompts.at("document"), "");
  EXPECT_TRUE(kind->prompts.at("query").starts_with("Instruct: "));
  EXPECT_TRUE(kind->prompts.at("query").ends_with("\nQuery:"));
  EXPECT_TRUE(OpenCheckpoint(tmp.path()).has_value());
}

TEST(Checkpoint, RefusesAMissingTensor) {
  test::TempDir tmp;
  auto dir = WriteEdited(tmp, {}, [](auto& t) {
    std::erase_if(
        t, [](const TensorToWrite& x) { return x.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  ExpectRefused(dir, "model.layers.1.mlp.up_proj.weight");
}

TEST(Checkpoint, RefusesAWrongShape) {
  test::TempDir tmp;
  auto dir = WriteEdited(tmp, {}, [](auto& t) {
    for (auto& x : t) {
      if (x.name == "model.layers.0.self_attn.k_proj.weight") {
        x = MakeTensor(x.name, DType::kF32, {8, 64}, std::vector<float>(8 * 64, 0.5f));
      }
    }
  });
  ExpectRefused(dir, "model.layers.0.self_attn.k_proj.weight");
}

TEST(Checkpoint, RefusesAnUnknownTensor) {
  test::TempDir tmp;
  auto dir = WriteEdited(tmp, {}, [](auto& t) {
    t.push_back(MakeTensor("model.layers.0.mlp.extra_proj.weight", DType::kF32, {2},
                           std::vector<float>{1, 2}));
  });
  ExpectRefused(dir, "model.layers.0.mlp.extra_proj.weight");
}

TEST(Checkpoint, RefusesAnUntiedModelWithoutItsHead) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.tied = false;
  auto dir = WriteEdited(tmp, spec, [](auto& t) {
    std::erase_if(t, [](const TensorToWrite& x) { return x.name == "lm_head.weight"; });
  });
  ExpectRefused(dir, "lm_head.weight");
}

TEST(Checkpoint, RefusesQwen2WithoutBiases) {
  test::TempDir tmp;
  SyntheticModelSpec spec;
  spec.family = ModelFamily::kQwen2;
  auto dir = WriteEdited(tmp, spec, [](auto& t) {
    std::erase_if(t,
                  [](const TensorToWrite& x) { return x.name.find(".bias") != std::string::npos; });
  });
  ExpectRefused(dir, "q_proj.bias");
}

TEST(Checkpoint, RefusesAMissingDirectoryClearly) {
  auto ckpt = OpenCheckpoint("/nonexistent/tessera-model");
  ASSERT_FALSE(ckpt);
  EXPECT_NE(ckpt.status().message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace tessera
