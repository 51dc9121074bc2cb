// ModelTensors: the checkpoint's tensors bound to named, shape-checked fields, one struct per
// decoder layer. Binding refuses a checkpoint that is missing a tensor, has a tensor of the
// wrong shape or dtype, or carries tensors tessera does not know (it would be running a model
// it only half understood).
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, CheckpointTensors::Open(dir));
//   TS_ASSIGN_OR_RETURN(ModelTensors t, BindModelTensors(config, ckpt));
//   t.layers[0].q_proj->shape  // [num_heads * head_dim, hidden_size]
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/model_config.h"
#include "format/safetensors.h"

namespace tessera {

// Derived sizes used everywhere; computed once from the config.
struct ModelDims {
  int64_t hidden = 0;        // hidden_size
  int64_t intermediate = 0;  // intermediate_size
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t q_dim = 0;   // heads * head_dim
  int64_t kv_dim = 0;  // kv_heads * head_dim
  int64_t vocab = 0;
  bool qkv_bias = false;  // q/k/v projections carry a bias
  bool o_bias = false;    // o_proj carries a bias (llama/qwen3 attention_bias; never qwen2)
  bool qk_norm = false;   // per-head RMSNorm of q and k before RoPE (qwen3)
};
ModelDims DimsFromConfig(const ModelConfig& config);

// A tensor field is a non-owning pointer into CheckpointTensors; null only for optional
// fields the architecture does not have (biases, q_norm/k_norm).
struct LayerTensors {
  const TensorInfo* input_norm = nullptr;      // [hidden]
  const TensorInfo* q_proj = nullptr;          // [q_dim, hidden]
  const TensorInfo* q_bias = nullptr;          // [q_dim]
  const TensorInfo* k_proj = nullptr;          // [kv_dim, hidden]
  const TensorInfo* k_bias = nullptr;          // [kv_dim]
  const TensorInfo* v_proj = nullptr;          // [kv_dim, hidden]
  const TensorInfo* v_bias = nullptr;          // [kv_dim]
  const TensorInfo* o_proj = nullptr;          // [hidden, q_dim]
  const TensorInfo* o_bias = nullptr;          // [hidden]
  const TensorInfo* q_norm = nullptr;          // [head_dim]
  const TensorInfo* k_norm = nullptr;          // [head_dim]
  const TensorInfo* post_attn_norm = nullptr;  // [hidden]
  const TensorInfo* gate_proj = nullptr;       // [intermediate, hidden]
  const TensorInfo* up_proj = nullptr;         // [intermediate, hidden]
  const TensorInfo* down_proj = nullptr;       // [hidden, intermediate]
};

// Weights a `tessera convert` package already holds in a backend's packed layout (named by
// the safetensors metadata key kPackedLayoutKey). The model layer only binds the raw buffers
// by name and dtype; the backend that owns the layout checks their sizes before use.
inline constexpr char kPackedLayoutKey[] = "tessera_packed_layout";
inline constexpr char kPackedFormatKey[] =
    "tessera_packed_format";  // "f32", "bf16", "int8", "int4"

struct PackedMatrixTensors {
  const TensorInfo* data = nullptr;         // U8 [bytes], the panels
  const TensorInfo* row_scale = nullptr;    // F32, or null when the format has none
  const TensorInfo* row_offset = nullptr;   // I32, or null
  const TensorInfo* block_scale = nullptr;  // BF16, or null
};
// The buffers of a packed matrix as a package names and types them, in the field order above.
struct PackedPart {
  const char* name;
  DType dtype;
};
inline constexpr PackedPart kPackedParts[4] = {{"data", DType::kU8},
                                               {"row_scale", DType::kF32},
                                               {"row_offset", DType::kI32},
                                               {"block_scale", DType::kBF16}};
struct PackedLayerTensors {
  PackedMatrixTensors qkv;  // q, k, v stacked
  PackedMatrixTensors o_proj;
  PackedMatrixTensors gate_up;  // gate, up stacked
  PackedMatrixTensors down_proj;
};
struct PackedModelTensors {
  std::string layout;  // e.g. "tessera-cpu-panels-1"
  std::string format;  // "f32", "bf16", "int8", "int4"
  std::vector<PackedLayerTensors> layers;
  PackedMatrixTensors lm_head;
};
// "tessera.layers.3.qkv.data", or "tessera.lm_head.row_scale" for layer < 0.
std::string PackedTensorName(int64_t layer, std::string_view matrix, std::string_view part);

struct ModelTensors {
  ModelDims dims;
  // [vocab, hidden]; null in a package of a tied model, where it is stored once, as the
  // packed LM head (packed->lm_head), and token lookups read the head's rows.
  const TensorInfo* embed = nullptr;
  const TensorInfo* final_norm = nullptr;  // [hidden]
  const TensorInfo* lm_head = nullptr;     // [vocab, hidden]; == embed when tied
  std::vector<LayerTensors> layers;
  std::vector<std::string> ignored;  // tensors present but deliberately unused
  // Set for a package with packed weights: then the projection fields of `layers` (q/k/v/o,
  // gate/up/down) and `lm_head` are null.
  std::optional<PackedModelTensors> packed;
};

Expected<ModelTensors> BindModelTensors(const ModelConfig& config, const CheckpointTensors& ckpt);

}  // namespace tessera
