// qwen35 (Qwen3.5) from GGUF: what llama.cpp's converter (conversion/qwen.py, Qwen3_5TextModel
// and the Qwen3NextModel it extends) writes, read back as the Hugging Face qwen3_5_text model.
//
// Metadata: ssm.group_count, ssm.time_step_rank, ssm.state_size are the linear layers' key
// heads, value heads and key head size; ssm.inner_size / ssm.time_step_rank the value head
// size; ssm.conv_kernel the causal conv's width; full_attention_interval (default 4) which
// layers are attention; rope.dimension_count the rotated dims of each head (a quarter);
// nextn_predict_layers blocks past the decoder form the MTP head (not run; ignored).
// rope.dimension_sections is not read: for text every section turns at the same position.
//
// Tensors, each transformation undone:
//   - every RMSNorm but the linear layers' (linear_attn.norm) was written as 1 + w;
//   - A_log as -exp(A_log) (ssm_a);
//   - conv1d [channels, 1, kernel] squeezed to [channels, kernel];
//   - with more value heads than key heads, value heads regrouped from "by key head"
//     (h = g * r + j for key head g) to tiled (stored at j * key_heads + g): the v rows of
//     in_proj_qkv and conv1d, the rows of in_proj_z, in_proj_a, in_proj_b, A_log and dt_bias,
//     and the columns of out_proj (widened to F32 first when quantized blocks straddle heads).
#include <cmath>
#include <cstring>

#include "base/half.h"
#include "format/gguf_quants.h"
#include "format/json_util.h"
#include "model/gguf_arch.h"

namespace tessera {
namespace {

using nlohmann::json;

// Per-layer GGUF suffix -> Hugging Face suffix, for the names only qwen35 has.
constexpr std::pair<std::string_view, std::string_view> kQwen35LayerNames[] = {
    {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {"attn_gate.weight", "linear_attn.in_proj_z.weight"},
    {"ssm_beta.weight", "linear_attn.in_proj_b.weight"},
    {"ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
    {"ssm_conv1d.weight", "linear_attn.conv1d.weight"},
    {"ssm_dt.bias", "linear_attn.dt_bias"},
    {"ssm_a", "linear_attn.A_log"},
    {"ssm_norm.weight", "linear_attn.norm.weight"},
    {"ssm_out.weight", "linear_attn.out_proj.weight"},
};

Expected<uint32_t> PositiveU32(const GgufFile& gguf, const std::string& key) {
  TS_ASSIGN_OR_RETURN(uint32_t v, gguf.GetU32(key));
  if (v == 0) return Corrupt(gguf.path() + ": " + key + " is 0; it must be at least 1");
  return v;
}

Status Qwen35Config(const GgufFile& gguf, const std::string& p, json& config) {
  const std::string& where = gguf.path();
  TS_ASSIGN_OR_RETURN(uint32_t conv_kernel, PositiveU32(gguf, p + "ssm.conv_kernel"));
  TS_ASSIGN_OR_RETURN(uint32_t key_dim, PositiveU32(gguf, p + "ssm.state_size"));
  TS_ASSIGN_OR_RETURN(uint32_t key_heads, PositiveU32(gguf, p + "ssm.group_count"));
  TS_ASSIGN_OR_RETURN(uint32_t value_heads, PositiveU32(gguf, p + "ssm.time_step_rank"));
  TS_ASSIGN_OR_RETURN(uint32_t inner, PositiveU32(gguf, p + "ssm.inner_size"));
  if (inner % value_heads != 0) {
    return Corrupt(where + ": " + p + "ssm.inner_size " + std::to_string(inner) +
                   " is not a multiple of " + p + "ssm.time_step_rank (value heads) " +
                   std::to_string(value_heads));
  }
  uint32_t interval = 4;  // llama.cpp's default when the key is absent
  if (gguf.Has(p + "full_attention_interval")) {
    TS_ASSIGN_OR_RETURN(interval, PositiveU32(gguf, p + "full_attention_interval"));
  }
  const auto blocks = config["num_hidden_layers"].get<uint32_t>();
  uint32_t mtp_blocks = 0;
  if (gguf.Has(p + "nextn_predict_layers")) {
    TS_ASSIGN_OR_RETURN(mtp_blocks, gguf.GetU32(p + "nextn_predict_layers"));
  }
  if (mtp_blocks >= blocks) {
    return Corrupt(where + ": " + p + "nextn_predict_layers " + std::to_string(mtp_blocks) +
                   " leaves none of the " + std::to_string(blocks) + " blocks to the decoder");
  }
  const uint32_t layers = blocks - mtp_blocks;
  json types = json::array();
  for (uint32_t i = 0; i < layers; ++i) {
    types.push_back((i + 1) % interval != 0 ? "linear_attention" : "full_attention");
  }
  // llama.cpp's head size when key_length is absent: embedding_length / head_count.
  if (!config.contains("head_dim")) {
    const auto hidden = config["hidden_size"].get<uint32_t>();
    const auto heads = config["num_attention_heads"].get<uint32_t>();
    if (heads == 0 || hidden % heads != 0) {
      return Corrupt(where + ": " + p + "attention.key_length is missing and " + p +
                     "embedding_length is not a multiple of " + p + "attention.head_count");
    }
    config["head_dim"] = hidden / heads;
  }
  const auto head_dim = config["head_dim"].get<uint32_t>();
  uint32_t rope_dims = head_dim;
  if (gguf.Has(p + "rope.dimension_count")) {
    TS_ASSIGN_OR_RETURN(rope_dims, gguf.GetU32(p + "rope.dimension_count"));
  }
  if (rope_dims == 0 || rope_dims > head_dim || rope_dims % 2 != 0) {
    return Corrupt(where + ": " + p + "rope.dimension_count " + std::to_string(rope_dims) +
                   " is not an even number of dims up to the head size " +
                   std::to_string(head_dim));
  }
  config["num_hidden_layers"] = layers;
  config["layer_types"] = types;
  config["full_attention_interval"] = interval;
  config["linear_num_key_heads"] = key_heads;
  config["linear_num_value_heads"] = value_heads;
  config["linear_key_head_dim"] = key_dim;
  config["linear_value_head_dim"] = inner / value_heads;
  config["linear_conv_kernel_dim"] = conv_kernel;
  config["partial_rotary_factor"] = static_cast<double>(rope_dims) / head_dim;
  config["attn_output_gate"] = true;
  return Status::Ok();
}

std::string Qwen35TensorName(std::string_view gguf_name, const ModelConfig& config) {
  if (!gguf_name.starts_with("blk.")) return "";
  const size_t dot = gguf_name.find('.', 4);
  if (dot == std::string_view::npos || dot == 4 || dot - 4 > 6) return "";
  uint64_t block = 0;
  for (char c : gguf_name.substr(4, dot - 4)) {
    if (c < '0' || c > '9') return "";
    block = block * 10 + static_cast<uint64_t>(c - '0');
  }
  // Blocks past the decoder are the MTP head (nextn_predict_layers), which tessera does not
  // run; under "mtp." they are bound to nothing and listed as ignored, as from Hugging Face.
  if (block >= static_cast<uint64_t>(config.num_layers)) return "mtp." + std::string(gguf_name);
  const std::string_view suffix = gguf_name.substr(dot + 1);
  for (const auto& [gguf, hf] : kQwen35LayerNames) {
    if (suffix == gguf) {
      return "model.layers." + std::string(gguf_name.substr(4, dot - 4)) + "." + std::string(hf);
    }
  }
  return "";
}

std::string DimsText(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

Status ExpectDims(const GgufTensor& t, const std::vector<uint64_t>& dims, const char* what) {
  if (t.dims == dims) return Status::Ok();
  return Corrupt("tensor " + QuoteForMessage(t.name) + " has dims " + DimsText(t.dims) +
                 "; the qwen35 metadata implies " + DimsText(dims) + " (" + what + ")");
}

// Undoes the converter's _reorder_v_heads on `count` runs of key_heads * per_key chunks of
// `chunk` bytes: stored chunk j * key_heads + g is value head g * per_key + j.
void UntileHeads(const uint8_t* in, uint8_t* out, uint64_t count, uint64_t key_heads,
                 uint64_t per_key, uint64_t chunk) {
  const uint64_t heads = key_heads * per_key;
  for (uint64_t run = 0; run < count; ++run) {
    for (uint64_t g = 0; g < key_heads; ++g) {
      for (uint64_t j = 0; j < per_key; ++j) {
        std::memcpy(out + (run * heads + g * per_key + j) * chunk,
                    in + (run * heads + j * key_heads + g) * chunk, chunk);
      }
    }
  }
}

// The tensor's values as fp32, for the small vectors restored by value.
Expected<std::vector<float>> VectorValues(const TensorInfo& info, const GgufTensor& t) {
  std::vector<float> v(info.num_elements);
  const Status st = CopyTensorToF32(info, v);
  if (!st.ok()) {
    return Unsupported("tensor " + QuoteForMessage(t.name) + " is " +
                       std::string(GgmlTypeName(t.type)) +
                       "; this qwen35 vector is read as F32, F16 or BF16 only");
  }
  return v;
}

void Own(std::vector<uint8_t> bytes, TensorInfo& info, GgufOwnedBytes& owned) {
  owned.push_back(std::move(bytes));
  info.data = std::span<const uint8_t>(owned.back());
}

void OwnF32(const std::vector<float>& v, TensorInfo& info, GgufOwnedBytes& owned) {
  std::vector<uint8_t> bytes(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
  Own(std::move(bytes), info, owned);
  info.dtype = DType::kF32;
}

bool IsOnePlusNorm(const std::string& name) {
  return name == "model.norm.weight" || name.ends_with(".input_layernorm.weight") ||
         name.ends_with(".post_attention_layernorm.weight") ||
         name.ends_with(".self_attn.q_norm.weight") || name.ends_with(".self_attn.k_norm.weight");
}

Status Qwen35RestoreTensor(const GgufTensor& t, const ModelConfig& config, TensorInfo& info,
                           GgufOwnedBytes& owned) {
  const std::string& name = info.name;
  if (name.starts_with("mtp.")) return Status::Ok();  // not run
  if (IsOnePlusNorm(name)) {
    TS_ASSIGN_OR_RETURN(std::vector<float> w, VectorValues(info, t));
    for (float& x : w) x -= 1.0f;
    OwnF32(w, info, owned);
    return Status::Ok();
  }
  if (name.find(".linear_attn.") == std::string::npos || !config.linear_attention) {
    return Status::Ok();
  }
  const LinearAttentionConfig& la = *config.linear_attention;
  const auto key_heads = static_cast<uint64_t>(la.num_key_heads);
  const auto value_heads = static_cast<uint64_t>(la.num_value_heads);
  const uint64_t per_key = value_heads / key_heads;
  const auto key_dim = static_cast<uint64_t>(la.key_head_dim);
  const auto value_dim = static_cast<uint64_t>(la.value_head_dim);
  const uint64_t qk = 2 * key_heads * key_dim, v_width = value_heads * value_dim;
  const uint64_t channels = qk + v_width;
  const auto hidden = static_cast<uint64_t>(config.hidden_size);
  const bool regrouped = per_key > 1;
  // Rows [first_row, rows) of a [rows, *] tensor, value heads of head_rows rows each.
  auto untile_rows = [&](uint64_t first_row, uint64_t head_rows) {
    if (!regrouped) return;
    const uint64_t rows = t.dims.size() == 1 ? t.dims[0] : t.rows();  // a vector: its elements
    const uint64_t row_bytes = t.data.size() / rows;
    std::vector<uint8_t> out(t.data.begin(), t.data.end());
    UntileHeads(t.data.data() + first_row * row_bytes, out.data() + first_row * row_bytes, 1,
                key_heads, per_key, head_rows * row_bytes);
    Own(std::move(out), info, owned);
  };

  if (name.ends_with(".A_log")) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {value_heads}, "ssm.time_step_rank values"));
    TS_ASSIGN_OR_RETURN(std::vector<float> a, VectorValues(info, t));
    for (float& x : a) {
      if (!(x < 0) || !std::isfinite(x)) {
        return Corrupt("tensor " + QuoteForMessage(t.name) + " holds " + std::to_string(x) +
                       "; it must hold -exp(A_log), negative and finite");
      }
      x = static_cast<float>(std::log(-static_cast<double>(x)));
    }
    OwnF32(a, info, owned);
    if (regrouped) {
      std::vector<uint8_t> out(info.data.size());
      UntileHeads(info.data.data(), out.data(), 1, key_heads, per_key, sizeof(float));
      owned.back() = std::move(out);
      info.data = std::span<const uint8_t>(owned.back());
    }
  } else if (name.ends_with(".dt_bias")) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {value_heads}, "ssm.time_step_rank values"));
    if (GgmlTraits(t.type).block_elements != 1) {
      return Unsupported("tensor " + QuoteForMessage(t.name) + " is " +
                         std::string(GgmlTypeName(t.type)) + "; a vector must be F32, F16 or BF16");
    }
    untile_rows(0, 1);
  } else if (name.ends_with(".conv1d.weight")) {
    TS_RETURN_IF_ERROR(ExpectDims(
        t, {static_cast<uint64_t>(la.conv_kernel), channels},
        "ssm.conv_kernel x (2 x ssm.group_count x ssm.state_size + ssm.inner_size) channels"));
    info.shape = {static_cast<int64_t>(channels), 1, la.conv_kernel};
    untile_rows(qk, value_dim);
  } else if (name.ends_with(".in_proj_qkv.weight")) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {hidden, channels}, "q, k and v of every head"));
    untile_rows(qk, value_dim);
  } else if (name.ends_with(".in_proj_z.weight")) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {hidden, v_width}, "ssm.inner_size gate values"));
    untile_rows(0, value_dim);
  } else if (name.ends_with(".in_proj_a.weight") || name.ends_with(".in_proj_b.weight")) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {hidden, value_heads}, "one per value head"));
    untile_rows(0, 1);
  } else if (name.ends_with(".out_proj.weight") && regrouped) {
    TS_RETURN_IF_ERROR(ExpectDims(t, {v_width, hidden}, "ssm.inner_size inputs"));
    if (auto head_bytes = GgmlRowBytes(t.type, value_dim)) {  // whole blocks per value head
      std::vector<uint8_t> out(t.data.size());
      UntileHeads(t.data.data(), out.data(), t.rows(), key_heads, per_key, *head_bytes);
      Own(std::move(out), info, owned);
      return Status::Ok();
    }
    // Blocks straddle value heads (a K-quant's 256 columns over heads of 128): the matrix is
    // widened to F32 at open (exact; 4 bytes a weight for this one matrix), then its columns
    // move.
    std::vector<float> w(t.num_elements);
    TS_RETURN_IF_ERROR(
        DequantizeToF32(t.type, t.data, w).WithContext("tensor " + QuoteForMessage(t.name)));
    std::vector<uint8_t> out(w.size() * sizeof(float));
    UntileHeads(reinterpret_cast<const uint8_t*>(w.data()), out.data(), t.rows(), key_heads,
                per_key, value_dim * sizeof(float));
    Own(std::move(out), info, owned);
    info.dtype = DType::kF32;
  }
  return Status::Ok();
}

}  // namespace

const GgufArchHooks kQwen35GgufHooks = {
    .add_config = Qwen35Config,
    .tensor_name = Qwen35TensorName,
    .restore_tensor = Qwen35RestoreTensor,
    .reads_rope_dimensions = true,
};

}  // namespace tessera
