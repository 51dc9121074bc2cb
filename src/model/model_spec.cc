#include "model/model_spec.h"

#include <cmath>
#include <string>

#include "model/rope.h"

namespace tessera {

int64_t ModelSpec::count(LayerKind kind) const {
  int64_t n = 0;
  for (const LayerSpec& l : layer) n += l.kind == kind ? 1 : 0;
  return n;
}

Expected<ModelSpec> BuildModelSpec(const ModelConfig& c) {
  ModelSpec s;
  s.family = c.family;
  s.hidden = c.hidden_size;
  s.intermediate = c.intermediate_size;
  s.layers = c.num_layers;
  s.vocab = c.vocab_size;
  s.eps = c.rms_norm_eps;
  s.heads = c.num_heads;
  s.kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  s.q_dim = c.num_heads * c.head_dim;
  s.kv_dim = c.num_kv_heads * c.head_dim;
  // The parser already says what each family has (qwen2: q/k/v biases, never an o bias).
  s.qkv_bias = c.attention_bias;
  s.o_bias = c.family != ModelFamily::kQwen2 && c.attention_bias;
  s.qk_norm = c.qk_norm;
  s.output_gate = c.attn_output_gate;
  s.attention_scale =
      1.0 / std::sqrt(c.query_pre_attn_scalar.value_or(static_cast<double>(c.head_dim)));
  s.norm_style = c.norm_one_plus_weight ? NormStyle::kOnePlusWeight : NormStyle::kWeight;
  s.sandwich_norms = c.sandwich_norms;
  s.activation = c.hidden_act == HiddenAct::kGeluTanh ? Activation::kGeluTanh : Activation::kSilu;
  s.embed_scale = c.embed_scale;
  s.residual_scale = c.residual_scale;
  s.logit_scale = c.logit_scale;
  if (s.head_dim % 2 != 0 || s.heads % s.kv_heads != 0) {
    return Unsupported(
        "config.json: head_dim must be even and num_attention_heads a multiple of "
        "num_key_value_heads");
  }
  if (s.output_gate && s.qkv_bias) {
    return Unsupported("config.json: a gated attention with q/k/v biases is not supported");
  }
  s.ropes.push_back(MakeRopeSpec(c, false));
  bool sliding = false;
  for (LayerType t : c.layer_types) sliding |= t == LayerType::kSlidingAttention;
  if (sliding) s.ropes.push_back(MakeRopeSpec(c, true));
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_layers) {
    return Internal("config has " + std::to_string(c.layer_types.size()) + " layer types for " +
                    std::to_string(c.num_layers) + " layers");
  }
  for (LayerType t : c.layer_types) {
    LayerSpec l;
    switch (t) {
      case LayerType::kFullAttention:
        break;
      case LayerType::kSlidingAttention:
        l.kind = LayerKind::kSlidingAttention;
        l.window = c.sliding_window;
        l.rope = 1;
        break;
      case LayerType::kLinearAttention:
        l.kind = LayerKind::kGatedDeltaNet;
        break;
    }
    s.layer.push_back(l);
  }
  if (s.count(LayerKind::kGatedDeltaNet) > 0) {
    if (!c.linear_attention) return Internal("linear layers without linear_attention sizes");
    const LinearAttentionConfig& la = *c.linear_attention;
    s.deltanet = DeltaNetSpec{la.num_key_heads, la.num_value_heads, la.key_head_dim,
                              la.value_head_dim, la.conv_kernel};
  }
  return s;
}

std::string DescribeModelSpec(const ModelSpec& s) {
  std::string text =
      std::string(ModelFamilyName(s.family)) + ": " + std::to_string(s.layers) + " layers (";
  const std::pair<LayerKind, const char*> kinds[] = {{LayerKind::kAttention, "attention"},
                                                     {LayerKind::kSlidingAttention, "sliding"},
                                                     {LayerKind::kGatedDeltaNet, "gated-deltanet"}};
  bool first = true;
  for (const auto& [kind, name] : kinds) {
    if (s.count(kind) == 0) continue;
    text += (first ? "" : ", ") + std::to_string(s.count(kind)) + " " + name;
    first = false;
  }
  text += "), hidden " + std::to_string(s.hidden) + ", heads " + std::to_string(s.heads) + "/" +
          std::to_string(s.kv_heads) + "x" + std::to_string(s.head_dim);
  if (s.ropes[0].rotary_dim != s.head_dim) {
    text += ", rotary " + std::to_string(s.ropes[0].rotary_dim);
  }
  if (s.output_gate) text += ", gated attention";
  if (s.norm_style == NormStyle::kOnePlusWeight) text += ", (1+w) norms";
  if (s.sandwich_norms) text += ", sandwich norms";
  if (s.activation == Activation::kGeluTanh) text += ", gelu-tanh";
  if (s.embed_scale != 1.0) text += ", embedding x" + std::to_string(s.embed_scale);
  if (s.residual_scale != 1.0) text += ", residual x" + std::to_string(s.residual_scale);
  if (s.logit_scale != 1.0) text += ", logits x" + std::to_string(s.logit_scale);
  return text;
}

}  // namespace tessera
