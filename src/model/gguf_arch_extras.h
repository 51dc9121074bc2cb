// What llama.cpp's converter (convert_hf_to_gguf.py) writes differently for some GGUF
// architectures, and what the loader does to undo it: config fields only that family has,
// layer tensor names that differ from llama's, tensors that are metadata rather than weights,
// and a constant the converter added to every norm weight. The architecture table in
// gguf_checkpoint.cc points a row at one of these; a row without one needs nothing beyond the
// shared llama-style mapping.
//
//   const GgufArchExtras& gemma = kGemma3GgufExtras;
//   TS_RETURN_IF_ERROR(gemma.add_config(gguf, "gemma3.", &config));  // after the shared fields
//   std::string_view hf = GgufLayerNameOverride(gemma, "ffn_norm.weight");
//   // "pre_feedforward_layernorm.weight"
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "format/gguf.h"

namespace tessera {

using GgufNamePair = std::pair<std::string_view, std::string_view>;

struct GgufArchExtras {
  // Adds the config.json fields only this architecture has, from its metadata keys and
  // tensors; `prefix` is "<arch>."; `config` already holds the shared fields (sizes, heads,
  // head_dim when key_length is given, eps, rope_theta, tie, hidden_act, bos/eos).
  Status (*add_config)(const GgufFile& gguf, const std::string& prefix,
                       nlohmann::json* config) = nullptr;
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
};

// gemma3 (Gemma3ForCausalLM and the text model of Gemma3ForConditionalGeneration).
extern const GgufArchExtras kGemma3GgufExtras;
// minicpm (MiniCPMForCausalLM: MiniCPM 1/2/4).
extern const GgufArchExtras kMiniCpmGgufExtras;

// The Hugging Face suffix `extras` gives a per-layer GGUF suffix; empty when it has none.
std::string_view GgufLayerNameOverride(const GgufArchExtras& extras, std::string_view gguf_suffix);

}  // namespace tessera
