// ModelTensors: the checkpoint's tensors bound to named, shape-checked fields, one struct per
// decoder layer. Binding refuses a checkpoint that is missing a tensor, has a tensor of the
// wrong shape or dtype, or carries tensors tessera does not know (it would be running a model
// it only half understood).
//
//   TS_ASSIGN_OR_RETURN(auto ckpt, CheckpointTensors::Open(dir));
//   TS_ASSIGN_OR_RETURN(ModelTensors t, BindModelTensors(config, ckpt));
//   t.layers[0].q_proj->shape  // [num_heads * head_dim, hidden_size]
//   t.spec.layer[0].kind       // what the layer computes
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/model_config.h"
#include "format/safetensors.h"
#include "model/model_spec.h"
#include "model/tensor_convert.h"

namespace tessera {

// Tensor fields are TensorRefs into CheckpointTensors (with the spec's folds: (1 + w) norms,
// MiniCPM's scales, the embedding scale); null for what a layer's kind or the family lacks.
struct LayerTensors {
  TensorRef input_norm;  // [hidden], before attention or the DeltaNet
  // Attention layers (kAttention, kSlidingAttention).
  TensorRef q_proj;         // [q_proj_rows, hidden]; with an output gate, per head [q | gate]
  TensorRef q_bias;         // [q_dim]
  TensorRef k_proj;         // [kv_dim, hidden]
  TensorRef k_bias;         // [kv_dim]
  TensorRef v_proj;         // [kv_dim, hidden]
  TensorRef v_bias;         // [kv_dim]
  TensorRef o_proj;         // [hidden, q_dim]
  TensorRef o_bias;         // [hidden]
  TensorRef q_norm;         // [head_dim]
  TensorRef k_norm;         // [head_dim]
  TensorRef attn_out_norm;  // [hidden], on the attention output (gemma3 post_attention_layernorm)
  // Gated DeltaNet layers.
  TensorRef in_proj_qkv;  // [conv_width, hidden]: q | k | v
  TensorRef in_proj_z;    // [v_width, hidden], the output gate
  TensorRef in_proj_b;    // [value_heads, hidden], beta = sigmoid(b x)
  TensorRef in_proj_a;    // [value_heads, hidden], decay input
  TensorRef conv1d;       // [conv_width, 1, conv_kernel], depthwise causal
  TensorRef dt_bias;      // [value_heads]
  TensorRef a_log;        // [value_heads]
  TensorRef delta_norm;   // [value_dim], plain w, per head before the gate
  TensorRef out_proj;     // [hidden, v_width]
  // MLP.
  TensorRef post_attn_norm;  // [hidden], before the MLP (gemma3 pre_feedforward_layernorm)
  TensorRef gate_proj;       // [intermediate, hidden]
  TensorRef up_proj;         // [intermediate, hidden]
  TensorRef down_proj;       // [hidden, intermediate]
  TensorRef mlp_out_norm;    // [hidden], on the MLP output (gemma3 post_feedforward_layernorm)
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
  PackedMatrixTensors qkv;      // q, k, v stacked (a DeltaNet layer: qkv, z, b, a)
  PackedMatrixTensors o_proj;   // (a DeltaNet layer: out_proj)
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
  ModelSpec spec;
  // [vocab, hidden], scaled by spec.embed_scale; null in a package of a tied model, where it
  // is stored once, as the packed LM head (packed->lm_head), and token lookups read the head's
  // rows (then times embed_lookup_scale).
  TensorRef embed;
  float embed_lookup_scale = 1.0f;  // spec.embed_scale as applied (gemma3: in the weights' dtype)
  TensorRef final_norm;             // [hidden], with spec.logit_scale folded in
  TensorRef lm_head;                // [vocab, hidden]; the embedding's tensor (unscaled) when tied
  // A sequence classifier's head (config.num_labels > 0): score.weight [num_labels, hidden],
  // applied to the final-normed hidden state of the last token; null for a causal LM.
  TensorRef score;
  std::vector<LayerTensors> layers;
  std::vector<std::string> ignored;  // tensors present but deliberately unused
  // Set for a package with packed weights: then the projection fields of `layers` (q/k/v/o,
  // in_proj_qkv/z/b/a, out_proj, gate/up/down) and `lm_head` are null.
  std::optional<PackedModelTensors> packed;
};

Expected<ModelTensors> BindModelTensors(const ModelConfig& config, const CheckpointTensors& ckpt);

}  // namespace tessera
