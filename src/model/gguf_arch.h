// The architecture-specific part of opening a GGUF file as a checkpoint (gguf_checkpoint.cc):
// an architecture whose file is more than the common renaming (extra metadata, tensors the
// converter transformed) gives one GgufArchHooks; the common code calls them at three points.
//
//   // gguf_arch_foo.cc
//   const GgufArchHooks kFooGgufHooks = {&FooConfig, &FooTensorName, &FooRestoreTensor};
//   // gguf_checkpoint.cc, its row of the architecture table
//   {"foo", "foo", "FooForCausalLM", false, &kFooGgufHooks},
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/model_config.h"
#include "format/safetensors.h"

namespace tessera {

// Bytes a restored tensor owns (the checkpoint keeps them alive; TensorInfo::data points here).
using GgufOwnedBytes = std::vector<std::vector<uint8_t>>;

struct GgufArchHooks {
  // After the common metadata is in `config` (prefix: "<arch>."): adds or overrides the
  // config.json fields only this architecture has. Takes over rope.dimension_count.
  Status (*add_config)(const GgufFile& gguf, const std::string& prefix,
                       nlohmann::json& config) = nullptr;
  // The Hugging Face name of a GGUF tensor ("" to use the common mapping).
  std::string (*tensor_name)(std::string_view gguf_name, const ModelConfig& config) = nullptr;
  // Undoes what the converter did to tensor `t` (already named, typed and shaped as `info`):
  // may replace info's shape, dtype and data (data then in bytes appended to `owned`).
  Status (*restore_tensor)(const GgufTensor& t, const ModelConfig& config, TensorInfo& info,
                           GgufOwnedBytes& owned) = nullptr;
};

// qwen35 (Qwen3.5: Gated DeltaNet and gated attention), gguf_arch_qwen35.cc.
extern const GgufArchHooks kQwen35GgufHooks;

}  // namespace tessera
