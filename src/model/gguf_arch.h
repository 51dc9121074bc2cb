// The architecture-specific part of opening a GGUF file as a checkpoint (gguf_checkpoint.cc):
// what llama.cpp's converter (convert_hf_to_gguf.py) writes differently for an architecture,
// and what the loader does to undo it. A row of the architecture table points at one
// GgufArchHooks; a row without one needs nothing beyond the shared llama-style mapping. The
// common code reads the data fields and calls the functions at three points (config, tensor
// names, each tensor).
//
//   // gguf_arch_foo.cc
//   const GgufArchHooks kFooGgufHooks = {.add_config = FooConfig, .norm_shift = 1.0f};
//   // gguf_checkpoint.cc, its row of the architecture table
//   {"foo", "foo", "FooForCausalLM", false, &kFooGgufHooks},
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/model_config.h"
#include "format/safetensors.h"

namespace tessera {

// Bytes a restored tensor owns (the checkpoint keeps them alive; TensorInfo::data points here).
using GgufOwnedBytes = std::vector<std::vector<uint8_t>>;
using GgufNamePair = std::pair<std::string_view, std::string_view>;

struct GgufArchHooks {
  // After the shared metadata is in `config` (sizes, heads, head_dim when key_length is given,
  // eps, rope_theta, tie, hidden_act, bos/eos; prefix: "<arch>."): adds or overrides the
  // config.json fields only this architecture has, from its metadata keys and tensors.
  Status (*add_config)(const GgufFile& gguf, const std::string& prefix,
                       nlohmann::json& config) = nullptr;
  // The Hugging Face name of a GGUF tensor ("" to use the common mapping).
  std::string (*tensor_name)(std::string_view gguf_name, const ModelConfig& config) = nullptr;
  // Undoes what the converter did to tensor `t` (already named, typed and shaped as `info`):
  // may replace info's shape, dtype and data (data then in bytes appended to `owned`).
  Status (*restore_tensor)(const GgufTensor& t, const ModelConfig& config, TensorInfo& info,
                           GgufOwnedBytes& owned) = nullptr;
  // Per-layer GGUF suffix -> Hugging Face suffix where this architecture differs from llama.
  std::span<const GgufNamePair> layer_names = {};
  // Global tensors add_config reads as metadata (not weights of the model).
  std::span<const std::string_view> metadata_tensors = {};
  // The converter added this to every "*norm.weight" (Gemma's zero-centred (1 + w) norms);
  // the loader subtracts it back into an F32 copy, so the weights are Hugging Face's again.
  float norm_shift = 0.0f;
  // The converter interleaved q/k weight rows per head (permuted_qk) but left their biases in
  // Hugging Face order (MiniCPMModel.modify_tensors permutes ".weight" only).
  bool qk_biases_in_hf_order = false;
  // add_config reads rope.scaling.type itself (MiniCPM's LongRoPE).
  bool reads_rope_scaling = false;
  // add_config reads rope.dimension_count itself (partial rotary, Qwen3.5).
  bool reads_rope_dimensions = false;
};

// gemma3 (Gemma3ForCausalLM and the text model of Gemma3ForConditionalGeneration),
// gguf_arch_extras.cc.
extern const GgufArchHooks kGemma3GgufHooks;
// minicpm (MiniCPMForCausalLM: MiniCPM 1/2/4), gguf_arch_extras.cc.
extern const GgufArchHooks kMiniCpmGgufHooks;
// qwen35 (Qwen3.5: Gated DeltaNet and gated attention), gguf_arch_qwen35.cc.
extern const GgufArchHooks kQwen35GgufHooks;

// The Hugging Face suffix `hooks` gives a per-layer GGUF suffix; empty when it has none.
std::string_view GgufLayerNameOverride(const GgufArchHooks& hooks, std::string_view gguf_suffix);

}  // namespace tessera
