// The Qwen3.5 part of writing a Hugging Face checkpoint as GGUF (support/hf_to_gguf.h), as
// llama.cpp's converter does it (conversion/qwen.py: Qwen3_5TextModel, with Qwen3NextModel
// and _LinearAttentionVReorderBase under it): the "qwen35" metadata keys, the tensor names,
// and each transformation it applies (1 + w norms, -exp(A_log), the squeezed conv1d, value
// heads regrouped to tiled order when there are more of them than key heads), and the MTP
// head of a config with mtp_num_hidden_layers (_Qwen35MtpMixin: its blocks after the decoder's,
// nextn_predict_layers; without that field the converter writes none of the mtp.* tensors).
//
//   const int64_t mtp = test::Qwen35MtpLayers(config_json_text);
//   TS_RETURN_IF_ERROR(test::AddQwen35GgufKeys(config, mtp, &writer));
//   TS_ASSIGN_OR_RETURN(auto out, test::Qwen35ConvertTensor(hf_name, config, mtp, values, shape));
#pragma once

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
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
      {"linear_attn.out_proj.weight", "ssm_out.weight"},
      // The MTP head's own (NEXTN_*), after _Qwen35MtpMixin's renaming.
      {"eh_proj.weight", "nextn.eh_proj.weight"},
      {"enorm.weight", "nextn.enorm.weight"},
      {"hnorm.weight", "nextn.hnorm.weight"},
      {"shared_head.norm.weight", "nextn.shared_head_norm.weight"}};
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
// mtp_num_hidden_layers (text_config's over the top level's, as the converter merges them).
inline int64_t Qwen35MtpLayers(const std::string& config_json) {
  const nlohmann::json j = nlohmann::json::parse(config_json);
  const nlohmann::json& text = j.contains("text_config") ? j["text_config"] : j;
  if (text.contains("mtp_num_hidden_layers")) return text["mtp_num_hidden_layers"].get<int64_t>();
  return j.value("mtp_num_hidden_layers", int64_t{0});
}

inline Status AddQwen35GgufKeys(const ModelConfig& c, int64_t mtp_layers, GgufWriter* w) {
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
  if (mtp_layers > 0) w->AddU32(p + "nextn_predict_layers", static_cast<uint32_t>(mtp_layers));
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

// One tensor as the converter writes it: its (renamed) Hugging Face name, values transformed
// and Hugging Face shape (reversed into GGUF dims by the caller).
struct ConvertedTensor {
  std::string hf_name;
  std::vector<float> values;
  std::vector<int64_t> shape;
};

// Qwen3NextModel.modify_tensors' value transformations (and the regrouping under it).
inline void Qwen35TransformValues(ConvertedTensor& t, const ModelConfig& c) {
  const LinearAttentionConfig& la = *c.linear_attention;
  const int64_t per_key = la.num_value_heads / la.num_key_heads;
  const int64_t qk_rows = 2 * la.num_key_heads * la.key_head_dim;
  std::vector<float>& v = t.values;
  std::vector<int64_t>& shape = t.shape;
  auto ends = [&](std::string_view s) { return t.hf_name.ends_with(s); };
  if (per_key > 1 && t.hf_name.find(".linear_attn.") != std::string::npos) {
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
    for (float& x : v) x += 1.0f;  // every RMSNorm but the linear layers' (MTP's enorm too)
  }
}

// What the converter writes for Hugging Face tensor `hf` (already without "language_model."):
// nothing for the vision tower, nor for mtp.* without MTP layers; an MTP layer's tensor as
// block num_layers + i; mtp.fc and the MTP norms once per MTP block.
inline Expected<std::vector<ConvertedTensor>> Qwen35ConvertTensor(const std::string& hf,
                                                                  const ModelConfig& c,
                                                                  int64_t mtp_layers,
                                                                  std::vector<float> v,
                                                                  std::vector<int64_t> shape) {
  std::vector<ConvertedTensor> out;
  if (hf.find("visual.") != std::string::npos) return out;
  if (hf.rfind("mtp.", 0) == 0) {
    if (mtp_layers == 0) return out;
    if (hf.rfind("mtp.layers.", 0) == 0) {
      const size_t dot = hf.find('.', 11);
      if (dot == std::string::npos) return Unsupported("no GGUF name for " + hf);
      const int64_t i = std::stoll(hf.substr(11, dot - 11));
      out.push_back({"model.layers." + std::to_string(c.num_layers + i) + hf.substr(dot),
                     std::move(v), std::move(shape)});
    } else {
      static const std::pair<const char*, const char*> kRemap[] = {
          {"mtp.fc.weight", "eh_proj.weight"},
          {"mtp.pre_fc_norm_embedding.weight", "enorm.weight"},
          {"mtp.pre_fc_norm_hidden.weight", "hnorm.weight"},
          {"mtp.norm.weight", "shared_head.norm.weight"}};
      const char* to = nullptr;
      for (const auto& [from, renamed] : kRemap) {
        if (hf == from) to = renamed;
      }
      if (to == nullptr) return Unsupported("no GGUF name for " + hf);
      for (int64_t b = c.num_layers; b < c.num_layers + mtp_layers; ++b) {
        out.push_back({"model.layers." + std::to_string(b) + "." + to, v, shape});
      }
    }
  } else {
    out.push_back({hf, std::move(v), std::move(shape)});
  }
  for (ConvertedTensor& t : out) Qwen35TransformValues(t, c);
  return out;
}

}  // namespace tessera::test
