// Writes Hugging Face checkpoint directories with deterministic random weights at any shape:
// config.json, generation_config.json and model.safetensors (or N shards plus
// model.safetensors.index.json). Used by the tests and by `tessera synth`.
//
//   SyntheticModelSpec spec;
//   spec.family = ModelFamily::kQwen3; spec.layers = 2; spec.kv_heads = 1; spec.dtype =
//   DType::kBF16; TS_RETURN_IF_ERROR(WriteSyntheticCheckpoint("/tmp/tiny-qwen3", spec));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/progress.h"
#include "base/status.h"
#include "format/dtype.h"
#include "format/model_config.h"

namespace tessera {

struct SyntheticModelSpec {
  ModelFamily family = ModelFamily::kLlama;
  int64_t hidden = 64;
  int64_t intermediate = 96;
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;  // written explicitly to config.json for qwen3 (and when it differs)
  int64_t vocab = 128;
  int64_t max_position = 256;
  bool tied = true;
  bool attention_bias = false;  // llama/qwen3 only; qwen2 always has q/k/v biases
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_llama3;  // written as rope_scaling {"rope_type": "llama3"}
  double rms_norm_eps = 1e-6;
  DType dtype = DType::kF32;  // F32, F16 or BF16
  int shards = 1;             // > 1 writes an index and that many shard files
  uint64_t seed = 1;
  int64_t bos_token_id = 1;
  int64_t eos_token_id = 2;

  // qwen3_5: every full_attention_interval-th layer is (gated) full attention, the others
  // Gated DeltaNet of these sizes; written as published (text_config nested, weights under
  // model.language_model., a vision tower and MTP head that are present but unused).
  int64_t full_attention_interval = 4;
  int64_t linear_key_heads = 2;
  int64_t linear_value_heads = 4;
  int64_t linear_key_dim = 8;
  int64_t linear_value_dim = 12;
  int64_t linear_conv_kernel = 4;
  double partial_rotary_factor = 1.0;  // written when != 1 (qwen3_5 presets: 0.25)
  // gemma3: every sliding_window_pattern-th layer is global, the others sliding.
  int64_t sliding_window = 0;
  int64_t sliding_window_pattern = 6;
  double rope_local_theta = 10000.0;
  double query_pre_attn_scalar = 0;  // 0: head_dim
  // minicpm (muP scales) and its LongRoPE.
  double scale_emb = 1.0;
  double scale_depth = 1.0;
  double dim_model_base = 1.0;
  std::optional<LongRopeScaling> rope_longrope;
  // Norm weights: w = norm_offset + 0.1 U(-1, 1); zero-centred families get 0 (so 1 + w ~ 1).
  bool nested_config = true;  // qwen3_5 / gemma3: the multimodal layout (false: *_text)
  // Also write a sentence-transformers embedding model's files, as Qwen3-Embedding publishes
  // them: modules.json, 1_Pooling (last-token pooling), 2_Normalize, and
  // config_sentence_transformers.json with its "query" instruction prompt.
  bool sentence_transformers = false;
  // Non-empty: a sequence classifier (Qwen3ForSequenceClassification) with these classes in
  // id2label/label2id and a score head score.weight [classes, hidden] instead of an LM head.
  std::vector<std::string> class_labels;
};

// `progress` gets phases "generating weights" (layers) and "writing tensors" (bytes).
Status WriteSyntheticCheckpoint(const std::string& dir, const SyntheticModelSpec& spec,
                                const ProgressCallback& progress = {});

// Real models' exact shapes, for benchmarks without downloads: "smollm2-135m", "smollm2-360m",
// "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen3-0.6b", "qwen3-1.7b", "llama3.2-1b" (with its llama3
// RoPE scaling), "qwen3.5-0.8b", "qwen3.5-2b", "minicpm4-0.5b", "minicpm5-2b", "gemma3-270m",
// "gemma3-1b"; and the task models: "qwen3-embedding-0.6b" (with its sentence-transformers
// files), "qwen3-reranker-0.6b", "qwen3guard-gen-0.6b", "decider-0.8b" (a Qwen3.5-0.8B;
// these three are causal LMs, their kind comes from the catalog) and "qwen3-0.6b-seqcls" (a
// sequence classifier with id2label negative/neutral/positive). BF16 like the published
// weights.
Expected<SyntheticModelSpec> SyntheticPreset(std::string_view name);
std::vector<std::string> SyntheticPresetNames();

// A preset's checkpoint plus a working byte-level BPE tokenizer (tokenizer.json,
// tokenizer_config.json with a ChatML template); eos is <|im_end|>.
Status WriteSyntheticModel(const std::string& dir, SyntheticModelSpec spec,
                           const ProgressCallback& progress = {});

}  // namespace tessera
