// The Qwen3.5 part of writing a Hugging Face checkpoint as GGUF (support/hf_to_gguf.h), as
// llama.cpp's converter does it (conversion/qwen.py: Qwen3_5TextModel, with Qwen3NextModel
// and _LinearAttentionVReorderBase under it): the "qwen35" metadata keys, the tensor names,
// and each transformation it applies (1 + w norms, -exp(A_log), the squeezed conv1d, value
// heads regrouped to tiled order when there are more of them than key heads).
//
//   test::AddQwen35GgufKeys(config, &writer);
//   auto t = test::Qwen35GgufTensor("model.layers.0.linear_attn.A_log", config, values, shape);
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/model_config.h"
#include "support/gguf_writer.h"

namespace tessera::test {

// The GGUF name of a Qwen3.5 text-model tensor ("" when it is not one of the names only
// qwen35 has); `hf` already without "language_model." (the converter drops it).
inline std::string Qwen35GgufTensorNameOf(const std::string& hf) {
  static const std::pair<const char*, const char*> kLayer[] = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
      {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
      {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
      {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
      {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
      {"linear_attn.dt_bias", "ssm_dt.bias"},  // renamed dt_proj.bias, mapped to SSM_DT
      {"linear_attn.A_log", "ssm_a"},
      {"linear_attn.norm.weight", "ssm_norm.weight"},
      {"linear_attn.out_proj.weight", "ssm_out.weight"}};
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string suffix = hf.substr(dot + 1);
  for (const auto& [from, to] : kLayer) {
    if (suffix == from) return "blk." + hf.substr(prefix.size(), dot - prefix.size()) + "." + to;
  }
  return "";
}

// Qwen3NextModel.set_gguf_parameters' keys and _Qwen35MRopeMixin's default sections (the
// common ones are the caller's). Refuses layer_types that full_attention_interval cannot say.
inline Status AddQwen35GgufKeys(const ModelConfig& c, GgufWriter* w) {
  const LinearAttentionConfig& la = *c.linear_attention;
  // The interval that layer_types follow (the converter writes the config's, default 4).
  int64_t interval = 1;
  while (interval <= c.num_layers &&
         c.layer_types[static_cast<size_t>(interval - 1)] != LayerType::kFullAttention) {
    ++interval;
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool linear = (i + 1) % interval != 0;
    if (linear != (c.layer_types[static_cast<size_t>(i)] == LayerType::kLinearAttention)) {
      return Unsupported("layer_types do not follow one full_attention_interval");
    }
  }
  const std::string p = "qwen35.";
  w->AddU32(p + "ssm.conv_kernel", static_cast<uint32_t>(la.conv_kernel));
  w->AddU32(p + "ssm.state_size", static_cast<uint32_t>(la.key_head_dim));
  w->AddU32(p + "ssm.group_count", static_cast<uint32_t>(la.num_key_heads));
  w->AddU32(p + "ssm.time_step_rank", static_cast<uint32_t>(la.num_value_heads));
  w->AddU32(p + "ssm.inner_size", static_cast<uint32_t>(la.value_head_dim * la.num_value_heads));
  w->AddU32(p + "full_attention_interval", static_cast<uint32_t>(interval));
  w->AddU32(p + "rope.dimension_count",
            static_cast<uint32_t>(static_cast<double>(c.head_dim) * c.partial_rotary_factor));
  w->AddI32Array(p + "rope.dimension_sections", {11, 11, 10, 0});
  return Status::Ok();
}

// _LinearAttentionVReorderBase._reorder_v_heads along rows [first_row, rows): value head
// g * per_key + j (grouped by key head g) moves to j * key_heads + g (tiled).
inline void TileValueHeads(std::vector<float>& v, int64_t first_row, int64_t head_rows,
                           int64_t cols, int64_t key_heads, int64_t per_key) {
  const std::vector<float> in = v;
  const int64_t chunk = head_rows * cols, base = first_row * cols;
  for (int64_t g = 0; g < key_heads; ++g) {
    for (int64_t j = 0; j < per_key; ++j) {
      std::copy_n(in.begin() + base + (g * per_key + j) * chunk, chunk,
                  v.begin() + base + (j * key_heads + g) * chunk);
    }
  }
}

// One tensor as the converter writes it: its values transformed and its Hugging Face shape
// (reversed into GGUF dims by the caller); nullopt when the converter leaves it out (the MTP
// head of a config without mtp_num_hidden_layers, the vision tower).
struct ConvertedTensor {
  std::vector<float> values;
  std::vector<int64_t> shape;
};
inline std::optional<ConvertedTensor> Qwen35ConvertTensor(const std::string& hf,
                                                          const ModelConfig& c,
                                                          std::vector<float> v,
                                                          std::vector<int64_t> shape) {
  if (hf.rfind("mtp.", 0) == 0 || hf.find("visual.") != std::string::npos) return std::nullopt;
  const LinearAttentionConfig& la = *c.linear_attention;
  const int64_t per_key = la.num_value_heads / la.num_key_heads;
  const int64_t qk_rows = 2 * la.num_key_heads * la.key_head_dim;
  auto ends = [&](std::string_view s) { return hf.ends_with(s); };
  if (per_key > 1 && hf.find(".linear_attn.") != std::string::npos) {
    const int64_t cols = shape.size() == 2 ? shape[1] : 1;
    if (ends(".in_proj_qkv.weight")) {
      TileValueHeads(v, qk_rows, la.value_head_dim, cols, la.num_key_heads, per_key);
    } else if (ends(".in_proj_z.weight")) {
      TileValueHeads(v, 0, la.value_head_dim, cols, la.num_key_heads, per_key);
    } else if (ends(".in_proj_a.weight") || ends(".in_proj_b.weight") || ends(".A_log") ||
               ends(".dt_bias")) {
      TileValueHeads(v, 0, 1, cols, la.num_key_heads, per_key);
    } else if (ends(".conv1d.weight")) {
      TileValueHeads(v, qk_rows, la.value_head_dim, shape[2], la.num_key_heads, per_key);
    } else if (ends(".out_proj.weight")) {  // its columns: each row on its own
      for (int64_t r = 0; r < shape[0]; ++r) {
        std::vector<float> row(v.begin() + r * shape[1], v.begin() + (r + 1) * shape[1]);
        TileValueHeads(row, 0, la.value_head_dim, 1, la.num_key_heads, per_key);
        std::copy(row.begin(), row.end(), v.begin() + r * shape[1]);
      }
    }
  }
  if (ends(".A_log")) {
    for (float& x : v) x = -std::exp(x);
  } else if (ends(".conv1d.weight")) {
    shape = {shape[0], shape[2]};  // squeeze()
  } else if (ends("norm.weight") && !ends("linear_attn.norm.weight")) {
    for (float& x : v) x += 1.0f;
  }
  return ConvertedTensor{std::move(v), std::move(shape)};
}

}  // namespace tessera::test
