// A Hugging Face checkpoint folder (llama, qwen2, qwen3; any float dtype) written as an F32
// GGUF file the way llama.cpp's convert_hf_to_gguf.py writes one: the architecture's metadata
// keys, tensors renamed with their dims reversed, llama's q/k rows interleaved per head, and the
// tokenizer as tokenizer.ggml.* keys (byte-level BPE: every vocabulary id's token, the
// "[PAD<id>]" UNUSED fillers up to the model's vocabulary, added special tokens as CONTROL and
// the others USER_DEFINED, the merges, the special ids from tokenizer_config.json and
// config.json, add_bos_token, tokenizer.chat_template).
//
//   TS_RETURN_IF_ERROR(test::WriteGgufOfCheckpoint(dir, "qwen2", "/tmp/m.gguf"));  // pre: the
//   // tokenizer.ggml.pre name the caller knows the tokenizer to be
//   TS_RETURN_IF_ERROR(test::WriteGgufOfCheckpoint(dir, "qwen2", "/tmp/m.f16.gguf", true,
//                                                  GgmlType::kF16));  // as --outtype f16
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/mapped_file.h"
#include "format/model_config.h"
#include "format/safetensors.h"
#include "model/checkpoint.h"
#include "support/gguf_writer.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tessera::test {

// Hugging Face name -> GGUF name, as llama.cpp's tensor map has them ("" when unknown).
inline std::string GgufTensorNameOf(const std::string& hf) {
  static const std::map<std::string, std::string> kGlobal = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"}};
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.o_proj.bias", "attn_output.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  if (auto it = kGlobal.find(hf); it != kGlobal.end()) return it->second;
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  auto it = kLayer.find(hf.substr(dot + 1));
  return it == kLayer.end() ? "" : "blk." + index + "." + it->second;
}

// convert_hf_to_gguf.py's LlamaModel.permute: reshape(heads, 2, rows/heads/2, ...), swap the
// first two inner axes: within a head, row (half j, index i) moves to row 2i + j.
inline std::vector<float> PermuteLlamaRows(const std::vector<float>& w, int64_t rows,
                                           int64_t heads) {
  const int64_t cols = static_cast<int64_t>(w.size()) / rows;
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t from = h * head_dim + j * half + i, to = h * head_dim + 2 * i + j;
        std::copy_n(w.begin() + from * cols, cols, out.begin() + to * cols);
      }
    }
  }
  return out;
}

// The tokenizer keys of a byte-level BPE tokenizer.json (+ tokenizer_config.json) in `dir`.
inline Status AddGgufTokenizer(const std::string& dir, const ModelConfig& config,
                               const std::string& pre, bool chat_template, GgufWriter* w) {
  auto text = ReadFileToString(dir + "/tokenizer.json", 64u << 20);
  if (!text) return text.status();
  const nlohmann::json tok = nlohmann::json::parse(*text);
  if (tok["model"]["type"] != "BPE") return Unsupported(dir + ": not a BPE tokenizer");
  std::vector<std::string> tokens(static_cast<size_t>(config.vocab_size));
  std::vector<int32_t> types(tokens.size(), static_cast<int32_t>(GgufTokenType::kUnused));
  for (auto it = tok["model"]["vocab"].begin(); it != tok["model"]["vocab"].end(); ++it) {
    const size_t id = it.value().get<size_t>();
    if (id >= tokens.size()) return Corrupt(dir + ": token id " + std::to_string(id) + " >= vocab");
    tokens[id] = it.key();
    types[id] = static_cast<int32_t>(GgufTokenType::kNormal);
  }
  for (const auto& added : tok["added_tokens"]) {
    const size_t id = added["id"].get<size_t>();
    if (id >= tokens.size()) return Corrupt(dir + ": token id " + std::to_string(id) + " >= vocab");
    tokens[id] = added["content"].get<std::string>();
    types[id] = static_cast<int32_t>(added.value("special", false) ? GgufTokenType::kControl
                                                                   : GgufTokenType::kUserDefined);
  }
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] == static_cast<int32_t>(GgufTokenType::kUnused)) {
      tokens[id] = "[PAD" + std::to_string(id) + "]";
    }
  }
  std::vector<std::string> merges;
  for (const auto& m : tok["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  w->AddString("tokenizer.ggml.model", "gpt2");
  w->AddString("tokenizer.ggml.pre", pre);
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  w->AddI32Array("tokenizer.ggml.token_type", types);
  w->AddStringArray("tokenizer.ggml.merges", merges);
  // Special ids as llama.cpp's SpecialVocab finds them: tokenizer_config.json's strings, else
  // config.json's ids.
  nlohmann::json tc = nlohmann::json::object();
  if (auto t = ReadFileToString(dir + "/tokenizer_config.json", 64u << 20)) {
    tc = nlohmann::json::parse(*t);
  }
  auto id_of = [&](const char* key) -> std::optional<uint32_t> {
    if (!tc.contains(key) || !tc[key].is_string()) return std::nullopt;
    for (size_t id = 0; id < tokens.size(); ++id) {
      if (tokens[id] == tc[key].get<std::string>()) return static_cast<uint32_t>(id);
    }
    return std::nullopt;
  };
  std::optional<uint32_t> bos = id_of("bos_token"), eos = id_of("eos_token");
  if (!bos && config.bos_token_id) bos = static_cast<uint32_t>(*config.bos_token_id);
  if (!eos && !config.eos_token_ids.empty()) eos = static_cast<uint32_t>(config.eos_token_ids[0]);
  if (bos) w->AddU32("tokenizer.ggml.bos_token_id", *bos);
  if (eos) w->AddU32("tokenizer.ggml.eos_token_id", *eos);
  if (auto pad = id_of("pad_token")) w->AddU32("tokenizer.ggml.padding_token_id", *pad);
  w->AddBool("tokenizer.ggml.add_bos_token", tc.value("add_bos_token", false));
  if (chat_template && tc.contains("chat_template") && tc["chat_template"].is_string()) {
    w->AddString("tokenizer.chat_template", tc["chat_template"].get<std::string>());
  }
  return Status::Ok();
}

// The type convert_hf_to_gguf.py --outtype gives a tensor: 1-D tensors (norms, biases) and
// *_norm.weight stay F32 (most of ggml only handles F32 there), every other tensor takes
// `outtype` (F32, F16 or BF16).
inline GgmlType GgufFloatTypeOf(const std::string& gguf_name, size_t n_dims, GgmlType outtype) {
  const std::string norm = "_norm.weight";
  const bool is_norm = gguf_name.size() >= norm.size() &&
                       gguf_name.compare(gguf_name.size() - norm.size(), norm.size(), norm) == 0;
  return n_dims <= 1 || is_norm ? GgmlType::kF32 : outtype;
}

// fp32 values as `type`'s little-endian bytes, rounded to nearest even as the converter's
// numpy astype(float16) and gguf-py's BF16 quantizer round (NaN stays quiet NaN).
inline std::string GgufFloatBytes(const std::vector<float>& v, GgmlType type) {
  if (type == GgmlType::kF32) return F32Bytes(v);
  std::string out(2 * v.size(), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = type == GgmlType::kF16 ? FloatToF16(v[i]) : FloatToBf16(v[i]);
    out[2 * i] = static_cast<char>(h & 0xff);
    out[2 * i + 1] = static_cast<char>(h >> 8);
  }
  return out;
}

// The whole checkpoint in `dir` as a GGUF of `outtype` (F32, F16 or BF16; see
// GgufFloatTypeOf). Without `chat_template` the file has no tokenizer.chat_template (a base
// model's).
inline Status WriteGgufOfCheckpoint(const std::string& dir, const std::string& pre,
                                    const std::string& path, bool chat_template = true,
                                    GgmlType outtype = GgmlType::kF32) {
  if (outtype != GgmlType::kF32 && outtype != GgmlType::kF16 && outtype != GgmlType::kBF16) {
    return InvalidArgument("the GGUF test writer writes F32, F16 or BF16 files");
  }
  auto config_text = ReadFileToString(dir + "/config.json", 16u << 20);
  if (!config_text) return config_text.status();
  auto config = ParseModelConfig(*config_text);
  if (!config) return config.status();
  const ModelConfig& c = *config;
  const std::string arch(ModelFamilyName(c.family));
  GgufWriter w;
  w.AddString("general.architecture", arch);
  w.AddU32(arch + ".block_count", static_cast<uint32_t>(c.num_layers));
  w.AddU32(arch + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.AddU32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.AddU32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.AddU32(arch + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.AddU32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.AddU32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.AddU32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.AddU32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  w.AddF32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w.AddF32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  TS_RETURN_IF_ERROR(AddGgufTokenizer(dir, c, pre, chat_template, &w));
  auto ckpt = CheckpointTensors::Open(dir);
  if (!ckpt) return ckpt.status();
  for (const std::string& name : ckpt->Names()) {
    const TensorInfo& t = *ckpt->Find(name);
    std::vector<float> v(t.num_elements);
    TS_RETURN_IF_ERROR(CopyTensorToF32(t, v));
    const bool is_q = name.find("q_proj") != std::string::npos;
    const bool is_k = name.find("k_proj") != std::string::npos;
    if (c.family == ModelFamily::kLlama && (is_q || is_k)) {
      v = PermuteLlamaRows(v, t.shape[0], is_q ? c.num_heads : c.num_kv_heads);
    }
    const std::string gguf_name = GgufTensorNameOf(name);
    if (gguf_name.empty()) return Unsupported("no GGUF name for " + name);
    const GgmlType type = GgufFloatTypeOf(gguf_name, t.shape.size(), outtype);
    w.AddTensor(gguf_name, type, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()),
                GgufFloatBytes(v, type));
  }
  const std::string bytes = w.Build();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return out ? Status::Ok() : IoError("cannot write " + path);
}

}  // namespace tessera::test
