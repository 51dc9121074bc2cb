#include "model/gguf_checkpoint.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "format/gguf_quants.h"
#include "format/json_util.h"
#include "model/gguf_arch.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

using nlohmann::json;

struct ArchitectureInfo {
  const char* gguf_name;                 // general.architecture
  const char* model_type;                // config.json model_type
  const char* hf_class;                  // config.json architectures[0]
  bool permuted_qk;                      // llama.cpp's converter interleaves q/k rows per head
  const GgufArchHooks* hooks = nullptr;  // what else the converter does (gguf_arch.h)
};
constexpr ArchitectureInfo kArchitectures[] = {
    {"llama", "llama", "LlamaForCausalLM", true},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", false},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", false},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM", false, &kGemma3GgufHooks},
    {"minicpm", "minicpm", "MiniCPMForCausalLM", true, &kMiniCpmGgufHooks},
    {"qwen35", "qwen3_5_text", "Qwen3_5ForCausalLM", false, &kQwen35GgufHooks},
};

// Per-layer GGUF suffix -> Hugging Face suffix (after "blk.N." / "model.layers.N.").
constexpr std::array<std::pair<std::string_view, std::string_view>, 18> kLayerNames = {{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"token_embd.weight", "model.embed_tokens.weight"},  // the last three are global
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
}};
constexpr size_t kGlobalNames = 3;

const ArchitectureInfo* FindArchitecture(std::string_view name) {
  for (const ArchitectureInfo& a : kArchitectures) {
    if (name == a.gguf_name) return &a;
  }
  return nullptr;
}

std::string SupportedArchitectures() {
  std::string out;
  for (const ArchitectureInfo& a : kArchitectures)
    out += (out.empty() ? "" : ", ") + std::string(a.gguf_name);
  return out;
}

// What the checkpoint keeps alive: the mapped file and the tensors rewritten to undo the
// converter (re-ordered q/k rows, un-shifted norms, an architecture's hooks' output).
struct GgufCheckpointData {
  GgufFile file;
  GgufOwnedBytes rewritten;
};

// The tensor as F32 values minus `shift` (undoing the converter's norm shift).
Expected<std::vector<uint8_t>> UnshiftedF32(const TensorInfo& info, float shift) {
  std::vector<float> values;
  TS_RETURN_IF_ERROR(WidenToF32(info, &values));
  for (float& v : values) v -= shift;
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Undoes convert_hf_to_gguf.py's LlamaModel.permute: per head of head_dim rows, Hugging Face row
// h (rotate_half order: the first half's pairs, then the second's) was written as row
// 2 * (h % (head_dim / 2)) + h / (head_dim / 2) (interleaved pairs, ggml's rope order).
Expected<std::vector<uint8_t>> UnpermuteRows(const GgufTensor& t, uint64_t heads,
                                             const std::string& where) {
  // A 1-D bias has one element per row; a matrix has dims[0] per row.
  const bool vector = t.dims.size() == 1;
  const uint64_t rows = vector ? t.dims[0] : t.rows();
  const uint64_t row_bytes = t.data.size() / rows;
  if (heads == 0 || rows % heads != 0 || (rows / heads) % 2 != 0 ||
      row_bytes * rows != t.data.size() || (vector && GgmlTraits(t.type).block_elements != 1)) {
    return Corrupt(where + ": tensor '" + t.name + "' has " + std::to_string(rows) +
                   " rows, which do not split into " + std::to_string(heads) +
                   " heads of an even size");
  }
  const uint64_t head_dim = rows / heads, half = head_dim / 2;
  std::vector<uint8_t> out(t.data.size());
  for (uint64_t head = 0; head < heads; ++head) {
    for (uint64_t h = 0; h < head_dim; ++h) {
      const uint64_t from = head * head_dim + 2 * (h % half) + h / half;
      std::memcpy(out.data() + (head * head_dim + h) * row_bytes, t.data.data() + from * row_bytes,
                  row_bytes);
    }
  }
  return out;
}

}  // namespace

std::string HfTensorName(std::string_view gguf_name, std::string_view architecture) {
  const ArchitectureInfo* arch = FindArchitecture(architecture);
  for (size_t i = kLayerNames.size() - kGlobalNames; i < kLayerNames.size(); ++i) {
    if (gguf_name == kLayerNames[i].first) return std::string(kLayerNames[i].second);
  }
  if (gguf_name.substr(0, 4) != "blk.") return "";
  const size_t dot = gguf_name.find('.', 4);
  if (dot == std::string_view::npos || dot == 4 || dot - 4 > 6) return "";
  const std::string_view index = gguf_name.substr(4, dot - 4);
  for (char c : index) {
    if (c < '0' || c > '9') return "";
  }
  if (index.size() > 1 && index[0] == '0') return "";
  const std::string_view suffix = gguf_name.substr(dot + 1);
  if (arch != nullptr && arch->hooks != nullptr) {
    const std::string_view hf = GgufLayerNameOverride(*arch->hooks, suffix);
    if (!hf.empty()) return "model.layers." + std::string(index) + "." + std::string(hf);
  }
  for (size_t i = 0; i < kLayerNames.size() - kGlobalNames; ++i) {
    if (suffix == kLayerNames[i].first) {
      return "model.layers." + std::string(index) + "." + std::string(kLayerNames[i].second);
    }
  }
  return "";
}

Expected<std::string> GgufConfigJson(const GgufFile& gguf) {
  const std::string& where = gguf.path();
  TS_ASSIGN_OR_RETURN(std::string_view arch_name, gguf.GetString("general.architecture"));
  const ArchitectureInfo* arch = FindArchitecture(arch_name);
  if (arch == nullptr) {
    return Unsupported(
        where + ": GGUF architecture " + QuoteForMessage(arch_name) +
        " is not supported; tessera runs these from GGUF: " + SupportedArchitectures());
  }
  const std::string p = std::string(arch_name) + ".";
  json config;
  config["model_type"] = arch->model_type;
  config["architectures"] = json::array({arch->hf_class});
  TS_ASSIGN_OR_RETURN(uint32_t layers, gguf.GetU32(p + "block_count"));
  if (layers > gguf.tensors().size()) {  // each layer has tensors; no huge per-layer tables
    return Corrupt(where + ": " + p + "block_count " + std::to_string(layers) +
                   " is more than the file's " + std::to_string(gguf.tensors().size()) +
                   " tensors");
  }
  TS_ASSIGN_OR_RETURN(uint32_t hidden, gguf.GetU32(p + "embedding_length"));
  TS_ASSIGN_OR_RETURN(uint32_t ffn, gguf.GetU32(p + "feed_forward_length"));
  TS_ASSIGN_OR_RETURN(uint32_t heads, gguf.GetU32(p + "attention.head_count"));
  TS_ASSIGN_OR_RETURN(uint32_t context, gguf.GetU32(p + "context_length"));
  TS_ASSIGN_OR_RETURN(float eps, gguf.GetF32(p + "attention.layer_norm_rms_epsilon"));
  uint32_t kv_heads = heads;
  if (gguf.Has(p + "attention.head_count_kv")) {
    TS_ASSIGN_OR_RETURN(kv_heads, gguf.GetU32(p + "attention.head_count_kv"));
  }
  // llama.cpp's rule: key_length when given, else embedding_length / head_count.
  if (gguf.Has(p + "attention.key_length")) {
    TS_ASSIGN_OR_RETURN(uint32_t key_length, gguf.GetU32(p + "attention.key_length"));
    uint32_t value_length = key_length;
    if (gguf.Has(p + "attention.value_length")) {
      TS_ASSIGN_OR_RETURN(value_length, gguf.GetU32(p + "attention.value_length"));
    }
    if (value_length != key_length) {
      return Unsupported(where + ": " + p + "attention.key_length " + std::to_string(key_length) +
                         " differs from value_length " + std::to_string(value_length) +
                         "; tessera runs equal key and value head sizes");
    }
    config["head_dim"] = key_length;
  }
  const GgufArchHooks* hooks = arch->hooks;
  if (gguf.Has(p + "rope.scaling.type") && !(hooks && hooks->reads_rope_scaling)) {
    TS_ASSIGN_OR_RETURN(std::string_view scaling, gguf.GetString(p + "rope.scaling.type"));
    if (scaling == "linear") {
      // Positions divided by the factor (Gemma 3 4B and larger, on their global layers).
      TS_ASSIGN_OR_RETURN(float factor, gguf.GetF32(p + "rope.scaling.factor"));
      if (!std::isfinite(factor) || !(factor >= 1.0f)) {
        return Corrupt(where + ": " + p + "rope.scaling.factor " +
                       JsonForMessage(json(static_cast<double>(factor))) + " must be >= 1");
      }
      config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", static_cast<double>(factor)}};
    } else if (scaling != "none") {
      return Unsupported(where + ": " + p + "rope.scaling.type " + QuoteForMessage(scaling) +
                         " is not supported from GGUF; only unscaled or linear RoPE");
    }
  }
  if (gguf.FindTensor("rope_freqs.weight") != nullptr) {
    return Unsupported(where +
                       ": the tensor 'rope_freqs.weight' (Llama 3 RoPE frequency "
                       "factors) is not supported from GGUF yet; use the Hugging Face "
                       "checkpoint");
  }
  float rope_theta = 10000.0f;
  if (gguf.Has(p + "rope.freq_base")) {
    TS_ASSIGN_OR_RETURN(rope_theta, gguf.GetF32(p + "rope.freq_base"));
  }
  if (!(hooks && hooks->reads_rope_dimensions) && gguf.Has(p + "rope.dimension_count")) {
    TS_ASSIGN_OR_RETURN(uint32_t rope_dims, gguf.GetU32(p + "rope.dimension_count"));
    const uint32_t head_dim = config.contains("head_dim") ? config["head_dim"].get<uint32_t>()
                                                          : (heads ? hidden / heads : 0);
    if (rope_dims != head_dim) {
      return Unsupported(where + ": " + p + "rope.dimension_count " + std::to_string(rope_dims) +
                         " rotates part of each head of " + std::to_string(head_dim) +
                         "; tessera runs full-head RoPE for " + std::string(arch_name));
    }
  }
  const GgufTensor* embed = gguf.FindTensor("token_embd.weight");
  if (embed == nullptr || embed->dims.size() != 2) {
    return Corrupt(where + ": the tensor 'token_embd.weight' (the embedding, [hidden, vocab]) is " +
                   (embed ? "not 2-D" : "missing"));
  }
  config["hidden_size"] = hidden;
  config["intermediate_size"] = ffn;
  config["num_hidden_layers"] = layers;
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = kv_heads;
  config["vocab_size"] = embed->dims[1];
  config["max_position_embeddings"] = context;
  config["rms_norm_eps"] = static_cast<double>(eps);
  config["rope_theta"] = static_cast<double>(rope_theta);
  config["tie_word_embeddings"] = gguf.FindTensor("output.weight") == nullptr;
  config["hidden_act"] = "silu";
  if (std::string(arch_name) != "qwen2") {
    config["attention_bias"] = gguf.FindTensor("blk.0.attn_q.bias") != nullptr;
  }
  if (gguf.Has("tokenizer.ggml.bos_token_id")) {
    TS_ASSIGN_OR_RETURN(uint32_t bos, gguf.GetU32("tokenizer.ggml.bos_token_id"));
    config["bos_token_id"] = bos;
  }
  if (gguf.Has("tokenizer.ggml.eos_token_id")) {
    TS_ASSIGN_OR_RETURN(uint32_t eos, gguf.GetU32("tokenizer.ggml.eos_token_id"));
    config["eos_token_id"] = eos;
  }
  if (hooks != nullptr && hooks->add_config != nullptr) {
    TS_RETURN_IF_ERROR(hooks->add_config(gguf, p, config));
  }
  return config.dump();
}

Expected<std::shared_ptr<const Checkpoint>> OpenGgufCheckpoint(const std::string& path) {
  TS_ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  auto data = std::make_shared<GgufCheckpointData>();
  data->file = std::move(file);
  const GgufFile& gguf = data->file;
  TS_ASSIGN_OR_RETURN(std::string config_text, GgufConfigJson(gguf));
  auto config = ParseModelConfig(config_text);
  if (!config) return config.status().WithContext(path + " (config from GGUF metadata)");
  const ArchitectureInfo* arch = FindArchitecture(*gguf.GetString("general.architecture"));

  std::vector<TensorInfo> tensors;
  tensors.reserve(gguf.tensors().size());
  const GgufArchHooks* hooks = arch->hooks;
  for (const GgufTensor& t : gguf.tensors()) {
    if (hooks != nullptr &&
        std::find(hooks->metadata_tensors.begin(), hooks->metadata_tensors.end(), t.name) !=
            hooks->metadata_tensors.end()) {
      continue;  // read into the config (e.g. MiniCPM's LongRoPE factors)
    }
    TensorInfo info;
    const std::string tensor_name = hooks != nullptr && hooks->tensor_name != nullptr
                                        ? hooks->tensor_name(t.name, *config)
                                        : std::string();
    info.name = tensor_name.empty() ? HfTensorName(t.name, arch->gguf_name) : tensor_name;
    if (info.name.empty()) {
      return Unsupported(path + ": tensor " + QuoteForMessage(t.name) +
                         " has no counterpart tessera knows for " + arch->gguf_name);
    }
    switch (t.type) {
      case GgmlType::kF32:
        info.dtype = DType::kF32;
        break;
      case GgmlType::kF16:
        info.dtype = DType::kF16;
        break;
      case GgmlType::kBF16:
        info.dtype = DType::kBF16;
        break;
      default: {
        const Status supported = CheckDequantizable(t.type);
        if (!supported.ok()) {
          return supported.WithContext(path + ": tensor " + QuoteForMessage(t.name));
        }
        info.dtype = DType::kGgmlBlocks;
        info.ggml_type = t.type;
      }
    }
    for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it) {
      info.shape.push_back(static_cast<int64_t>(*it));
    }
    info.num_elements = t.num_elements;
    info.data = t.data;
    info.file = path;
    const bool is_q = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_q.bias");
    const bool is_k = t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_k.bias");
    const bool bias_in_hf_order =
        t.name.ends_with(".bias") && hooks != nullptr && hooks->qk_biases_in_hf_order;
    if (arch->permuted_qk && (is_q || is_k) && !bias_in_hf_order) {
      const uint64_t heads = static_cast<uint64_t>(is_q ? config->num_heads : config->num_kv_heads);
      TS_ASSIGN_OR_RETURN(std::vector<uint8_t> rows, UnpermuteRows(t, heads, path));
      data->rewritten.push_back(std::move(rows));
      info.data = std::span<const uint8_t>(data->rewritten.back());
    }
    if (hooks != nullptr && hooks->norm_shift != 0.0f && t.name.ends_with("norm.weight")) {
      auto unshifted = UnshiftedF32(info, hooks->norm_shift);
      if (!unshifted) return unshifted.status().WithContext(path);
      data->rewritten.push_back(std::move(*unshifted));
      info.data = std::span<const uint8_t>(data->rewritten.back());
      info.dtype = DType::kF32;
      info.ggml_type = GgmlType::kF32;
    }
    if (hooks != nullptr && hooks->restore_tensor != nullptr) {
      const Status restored = hooks->restore_tensor(t, *config, info, data->rewritten);
      if (!restored.ok()) return restored.WithContext(path);
    }
    tensors.push_back(std::move(info));
  }
  TS_ASSIGN_OR_RETURN(CheckpointTensors files,
                      CheckpointTensors::FromTensors(std::move(tensors), std::move(data)));
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint{path, std::move(*config), GenerationConfig{},
                                                      false, std::move(files), ModelTensors{}});
  auto bound = BindModelTensors(ckpt->config, ckpt->files);
  if (!bound) return bound.status().WithContext(path);
  ckpt->tensors = std::move(*bound);
  return std::shared_ptr<const Checkpoint>(std::move(ckpt));
}

}  // namespace tessera
