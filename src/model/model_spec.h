// ModelSpec: the architecture's one home. Built once from config.json and consumed by every
// backend and by the binding of tensors: the sizes, each layer's kind, the norm style and
// activation, the RoPE of each layer kind, and the scales. Nothing downstream looks at the
// model family to decide what to compute; it reads the spec.
//
//   TS_ASSIGN_OR_RETURN(ModelSpec spec, BuildModelSpec(config));
//   for (const LayerSpec& l : spec.layer)
//     if (l.kind == LayerKind::kGatedDeltaNet) ...   // spec.deltanet->value_heads, ...
//   const RopeSpec& rope = spec.ropes[l.rope];       // rotary_dim, inv_freq
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "format/model_config.h"

namespace tessera {

enum class LayerKind {
  kAttention,         // causal softmax attention over every earlier position
  kSlidingAttention,  // causal attention over the last `window` positions (own included)
  kGatedDeltaNet,     // linear attention with a recurrent state (qwen3_5)
};
// How RMSNorm weights scale: `w`, or zero-centred `1 + w` (qwen3_5, gemma3). Binding folds
// the 1 into the weights, so backends only ever compute x * rsqrt(mean(x^2) + eps) * w.
enum class NormStyle { kWeight, kOnePlusWeight };
enum class Activation { kSilu, kGeluTanh };  // gate activation of the gated MLP

// One RoPE: rotate_half over the first rotary_dim dims of each head (the rest pass through),
// pair i turning at pos * inv_freq[i]; cos and sin are multiplied by attention_factor.
struct RopeSpec {
  int64_t rotary_dim = 0;        // even, <= head_dim
  std::vector<double> inv_freq;  // [rotary_dim / 2]
  double attention_factor = 1.0;
  int64_t max_positions = 0;  // > 0: positions past this would need other frequencies
};

// Gated DeltaNet sizes. Value head h reads key head h / (value_heads / key_heads).
struct DeltaNetSpec {
  int64_t key_heads = 0;
  int64_t value_heads = 0;
  int64_t key_dim = 0;    // per head
  int64_t value_dim = 0;  // per head
  int64_t conv_kernel = 0;
  int64_t qk_width() const { return key_heads * key_dim; }           // q (and k) of one token
  int64_t v_width() const { return value_heads * value_dim; }        // v (and z) of one token
  int64_t conv_width() const { return 2 * qk_width() + v_width(); }  // q | k | v
  // Recurrent state floats per sequence: conv history, then one [key_dim][value_dim] matrix
  // per value head.
  int64_t conv_state_floats() const { return (conv_kernel - 1) * conv_width(); }
  int64_t matrix_state_floats() const { return value_heads * key_dim * value_dim; }
};

struct LayerSpec {
  LayerKind kind = LayerKind::kAttention;
  int64_t window = 0;  // kSlidingAttention: positions attended, own included
  int rope = 0;        // index into ModelSpec::ropes
  bool is_attention() const { return kind != LayerKind::kGatedDeltaNet; }
};

struct ModelSpec {
  ModelFamily family = ModelFamily::kLlama;
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t layers = 0;
  int64_t vocab = 0;
  double eps = 1e-6;  // every RMSNorm's
  // Attention layers (all share these sizes).
  int64_t heads = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t q_dim = 0;           // heads * head_dim
  int64_t kv_dim = 0;          // kv_heads * head_dim
  bool qkv_bias = false;       // q/k/v projections carry a bias
  bool o_bias = false;         // o_proj carries a bias (llama/qwen3 attention_bias; never qwen2)
  bool qk_norm = false;        // per-head RMSNorm of q and k before RoPE
  // q_norm/k_norm hold unit weights injected for a model trained without them
  // (model/transforms.h); qk_norm stays false. A program with a per-head norm stage runs it as
  // y = x * w (no RMS factor), which with w = 1 is exactly x.
  bool qk_norm_identity = false;
  bool output_gate = false;    // q_proj rows per head: [query | gate]; out = attn * sigmoid(gate)
  double attention_scale = 0;  // softmax(q.k * attention_scale)
  NormStyle norm_style = NormStyle::kWeight;
  bool sandwich_norms = false;  // norms on the attention and MLP outputs too (gemma3)
  Activation activation = Activation::kSilu;
  std::optional<DeltaNetSpec> deltanet;  // set when any layer is kGatedDeltaNet
  std::vector<LayerSpec> layer;          // [layers]
  std::vector<RopeSpec> ropes;           // [0]: full attention; [1]: sliding layers (gemma3)
  // Scales, folded into weights when binding (model_tensors.cc); listed for the load log.
  double embed_scale = 1.0;     // embedding rows times this at lookup
  double residual_scale = 1.0;  // attention / MLP outputs times this before the residual add
  double logit_scale = 1.0;     // logits times this

  int64_t q_proj_rows() const { return output_gate ? 2 * q_dim : q_dim; }
  int64_t count(LayerKind kind) const;
};

// Validates the combinations backends rely on (head_dim even, heads a multiple of kv_heads,
// rotary_dim <= head_dim, ...) and computes the RoPE frequencies (model/rope.h).
Expected<ModelSpec> BuildModelSpec(const ModelConfig& config);

// "24 layers (18 gated-deltanet, 6 attention), hidden 1024, ..." for the load log.
std::string DescribeModelSpec(const ModelSpec& spec);

}  // namespace tessera
