// A Hugging Face checkpoint folder (llama, qwen2, qwen3, gemma3, minicpm, qwen3_5; any float
// dtype) written as an F32 GGUF file the way llama.cpp's convert_hf_to_gguf.py writes one: the
// architecture's metadata keys, tensors renamed with their dims reversed, and the converter's
// transforms: llama's and minicpm's q/k rows interleaved per head (minicpm: weights only),
// gemma3's norm weights + 1 and embedding rows past a byte-level tokenizer dropped, minicpm's
// muP scales as embedding/residual/logit_scale and its LongRoPE factors as tensors, Qwen3.5's
// tensors as its converter writes them (support/hf_to_gguf_qwen35.h). The
// tokenizer as tokenizer.ggml.* keys: byte-level BPE (every vocabulary id's token, the
// "[PAD<id>]" UNUSED fillers up to the model's vocabulary, added special tokens as CONTROL and
// the others USER_DEFINED, the merges, the special ids from tokenizer_config.json and
// config.json, add_bos_token, tokenizer.chat_template), or for minicpm and a gemma3 whose
// tokenizer.json is SentencePiece-style the SentencePiece vocabulary (hf_tokenizer_to_gguf.h).
//
//   TS_RETURN_IF_ERROR(test::WriteGgufOfCheckpoint(dir, "qwen2", "/tmp/m.gguf"));  // pre: the
//   // tokenizer.ggml.pre name the caller knows the tokenizer to be
//   TS_RETURN_IF_ERROR(test::WriteGgufOfCheckpoint(dir, "qwen2", "/tmp/m.f16.gguf", true,
//                                                  GgmlType::kF16));  // as --outtype f16
#pragma once

#include <algorithm>
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
#include "support/hf_to_gguf_qwen35.h"
#include "support/hf_tokenizer_to_gguf.h"
#include "tokenizer/gguf_tokenizer.h"

namespace tessera::test {

// Hugging Face name -> GGUF name, as llama.cpp's tensor map has them for `family` ("" when
// unknown): gemma3's sandwich norms have names of their own.
inline std::string GgufTensorNameOf(const std::string& hf,
                                    ModelFamily family = ModelFamily::kLlama) {
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
  static const std::map<std::string, std::string> kGemma3Layer = {
      {"post_attention_layernorm.weight", "post_attention_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"}};
  if (auto it = kGlobal.find(hf); it != kGlobal.end()) return it->second;
  const std::string prefix = "model.layers.";
  if (hf.rfind(prefix, 0) != 0) return "";
  const size_t dot = hf.find('.', prefix.size());
  if (dot == std::string::npos) return "";
  const std::string index = hf.substr(prefix.size(), dot - prefix.size());
  const std::string suffix = hf.substr(dot + 1);
  if (family == ModelFamily::kGemma3) {
    if (auto it = kGemma3Layer.find(suffix); it != kGemma3Layer.end()) {
      return "blk." + index + "." + it->second;
    }
  }
  auto it = kLayer.find(suffix);
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

// The architecture's metadata keys (general.architecture, ARCH.block_count, ...) of `c`, as the
// converter writes the shared ones: gemma3 and minicpm write their own head sizes and rope
// keys (AddConverterFamilyKeys), qwen35 its ssm.* keys and partial rotary (hf_to_gguf_qwen35.h);
// `mtp_layers`: Qwen3.5's MTP blocks, counted in block_count.
inline Status AddGgufArchitecture(const ModelConfig& c, GgufWriter* w, int64_t mtp_layers = 0) {
  const bool qwen35 = c.family == ModelFamily::kQwen3_5;
  const bool own_keys = c.family == ModelFamily::kGemma3 || c.family == ModelFamily::kMiniCpm;
  const std::string arch = qwen35 ? "qwen35" : std::string(ModelFamilyName(c.family));
  w->AddString("general.architecture", arch);
  w->AddU32(arch + ".block_count", static_cast<uint32_t>(c.num_layers + mtp_layers));
  w->AddU32(arch + ".context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w->AddU32(arch + ".embedding_length", static_cast<uint32_t>(c.hidden_size));
  w->AddU32(arch + ".feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w->AddU32(arch + ".attention.head_count", static_cast<uint32_t>(c.num_heads));
  w->AddU32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  if (!own_keys) {
    w->AddU32(arch + ".attention.key_length", static_cast<uint32_t>(c.head_dim));
    w->AddU32(arch + ".attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  if (qwen35) {
    TS_RETURN_IF_ERROR(AddQwen35GgufKeys(c, mtp_layers, w));
  } else if (!own_keys) {
    w->AddU32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  }
  w->AddF32(arch + ".rope.freq_base", static_cast<float>(c.rope_theta));
  w->AddF32(arch + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  return Status::Ok();
}

// The heads whose rows convert_hf_to_gguf.py interleaves in the tensor `hf_name`
// (PermuteLlamaRows): llama's q and k projections (weights and biases) and minicpm's (weights
// only: MiniCPMModel.modify_tensors), or 0 when it keeps the rows as they are.
inline int64_t GgufPermutedHeads(const std::string& hf_name, const ModelConfig& c) {
  const bool permuted = c.family == ModelFamily::kLlama ||
                        (c.family == ModelFamily::kMiniCpm && hf_name.ends_with(".weight"));
  if (!permuted) return 0;
  if (hf_name.find("q_proj") != std::string::npos) return c.num_heads;
  if (hf_name.find("k_proj") != std::string::npos) return c.num_kv_heads;
  return 0;
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

// The keys only gemma3 and minicpm files have (Gemma3Model / MiniCPMModel
// set_gguf_parameters); refuses what their GGUF metadata cannot express.
inline Status AddConverterFamilyKeys(const ModelConfig& c, const nlohmann::json& text_config,
                                     GgufWriter* w) {
  const std::string p = std::string(ModelFamilyName(c.family)) + ".";
  if (c.family == ModelFamily::kGemma3) {
    w->AddU32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w->AddU32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    w->AddF32(p + "rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
    // llama.cpp knows sliding layers only as "all but every 6th", and the query scale only as
    // 1/sqrt(head_dim) (1/sqrt(hidden / heads) at 62 layers).
    if (c.sliding_window > 0) {
      for (size_t i = 0; i < c.layer_types.size(); ++i) {
        if ((c.layer_types[i] == LayerType::kSlidingAttention) != (i % 6 < 5)) {
          return Unsupported("gemma3 layer_types other than five sliding layers per full one");
        }
      }
      w->AddU32(p + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
    }
    const int64_t scalar = c.num_layers == 62 ? c.hidden_size / c.num_heads : c.head_dim;
    if (c.query_pre_attn_scalar != static_cast<double>(scalar)) {
      return Unsupported("gemma3 query_pre_attn_scalar other than llama.cpp's");
    }
    if (c.rope_linear_factor != 1.0) {
      w->AddString(p + "rope.scaling.type", "linear");
      w->AddF32(p + "rope.scaling.factor", static_cast<float>(c.rope_linear_factor));
    }
  } else if (c.family == ModelFamily::kMiniCpm) {
    if (text_config.contains("head_dim")) {
      w->AddU32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
      w->AddU32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
    }
    w->AddF32(p + "embedding_scale", static_cast<float>(c.embed_scale));
    w->AddF32(p + "residual_scale", static_cast<float>(c.residual_scale));
    // hidden / dim_model_base; llama.cpp divides the logits by it.
    w->AddF32(p + "logit_scale", static_cast<float>(1.0 / c.logit_scale));
    if (c.rope_longrope) {
      if (c.rope_longrope->original_max_position_embeddings != c.max_position_embeddings) {
        return Unsupported("minicpm LongRoPE whose original context is not the context length");
      }
      w->AddString(p + "rope.scaling.type", "longrope");
    }
  }
  return Status::Ok();
}

// The tokenizer keys the converter writes for the folder; *embed_rows becomes the rows of the
// embedding it keeps (Gemma3Model drops rows past a byte-level tokenizer's tokens).
inline Status AddConverterTokenizer(const std::string& dir, const ModelConfig& c,
                                    const std::string& pre, bool chat_template, GgufWriter* w,
                                    int64_t* embed_rows) {
  auto text = ReadFileToString(dir + "/tokenizer.json", 64u << 20);
  if (!text) return text.status();
  const nlohmann::json tok = nlohmann::json::parse(*text);
  // A SentencePiece-style tokenizer.json stands for the tokenizer.model such a folder ships.
  const bool sentencepiece = tok["model"].value("byte_fallback", false);
  if (c.family == ModelFamily::kMiniCpm && !sentencepiece) {
    return Unsupported(dir + ": MiniCPMModel converts a SentencePiece vocabulary only");
  }
  if (sentencepiece && (c.family == ModelFamily::kMiniCpm || c.family == ModelFamily::kGemma3)) {
    auto vocab = SentencePieceVocab(dir, static_cast<size_t>(c.vocab_size));
    if (!vocab) return vocab.status();
    GgufTokenizerData& g = *vocab;
    if (c.family == ModelFamily::kGemma3) g.add_space_prefix = false;
    if (!chat_template) g.chat_template.reset();
    AddGgufTokenizerKeys(g, w);
    return Status::Ok();
  }
  if (c.family == ModelFamily::kGemma3) {
    *embed_rows = std::min<int64_t>(
        c.vocab_size,
        static_cast<int64_t>(tok["model"]["vocab"].size() + tok["added_tokens"].size()));
  }
  return AddGgufTokenizer(dir, c, pre, chat_template, w);
}

// The whole checkpoint in `dir` as a GGUF of `outtype` (F32, F16 or BF16; see
// GgufFloatTypeOf and the top of this file), built in a writer the caller may still change.
// Without `chat_template` the file has no tokenizer.chat_template (a base model's); without a
// tokenizer.json it has no tokenizer keys (weights only).
inline Status BuildGgufOfCheckpoint(const std::string& dir, const std::string& pre,
                                    bool chat_template, GgufWriter* out_writer,
                                    GgmlType outtype = GgmlType::kF32) {
  if (outtype != GgmlType::kF32 && outtype != GgmlType::kF16 && outtype != GgmlType::kBF16) {
    return InvalidArgument("the GGUF test writer writes F32, F16 or BF16 files");
  }
  auto config_text = ReadFileToString(dir + "/config.json", 16u << 20);
  if (!config_text) return config_text.status();
  auto config = ParseModelConfig(*config_text);
  if (!config) return config.status();
  const ModelConfig& c = *config;
  const bool qwen35 = c.family == ModelFamily::kQwen3_5;
  // Qwen3.5's text model sits under model.language_model. (the converter drops that part).
  if (!qwen35 && c.tensor_prefix != "model.") {
    return Unsupported("a multimodal checkpoint's text model");
  }
  const nlohmann::json raw = nlohmann::json::parse(*config_text);
  const int64_t mtp_layers = qwen35 ? Qwen35MtpLayers(*config_text) : 0;
  GgufWriter w;
  TS_RETURN_IF_ERROR(AddGgufArchitecture(c, &w, mtp_layers));
  TS_RETURN_IF_ERROR(AddConverterFamilyKeys(c, raw, &w));
  int64_t embed_rows = c.vocab_size;
  if (FileExists(dir + "/tokenizer.json")) {
    TS_RETURN_IF_ERROR(AddConverterTokenizer(dir, c, pre, chat_template, &w, &embed_rows));
  }
  if (c.family == ModelFamily::kMiniCpm && c.rope_longrope) {
    // MiniCPMModel.generate_extra_tensors, written before the checkpoint's tensors.
    const uint64_t pairs = static_cast<uint64_t>(c.head_dim / 2);
    for (auto [name, factors] :
         {std::pair{"rope_factors_long.weight", &c.rope_longrope->long_factor},
          std::pair{"rope_factors_short.weight", &c.rope_longrope->short_factor}}) {
      const std::vector<float> v(factors->begin(), factors->end());
      w.AddTensor(name, GgmlType::kF32, {pairs}, F32Bytes(v));
    }
  }
  auto ckpt = CheckpointTensors::Open(dir);
  if (!ckpt) return ckpt.status();
  for (const std::string& name : ckpt->Names()) {
    const TensorInfo& t = *ckpt->Find(name);
    std::vector<float> v(t.num_elements);
    TS_RETURN_IF_ERROR(CopyTensorToF32(t, v));
    std::vector<int64_t> shape = t.shape;
    if (const int64_t heads = GgufPermutedHeads(name, c)) {
      v = PermuteLlamaRows(v, t.shape[0], heads);
    }
    if (c.family == ModelFamily::kGemma3) {
      // Gemma3Model.modify_tensors: out-of-vocabulary embedding rows dropped, and 1 added to
      // every norm weight (llama.cpp's RMSNorm multiplies by the weight as stored).
      if (name.ends_with("embed_tokens.weight") && shape[0] > embed_rows) {
        v.resize(static_cast<size_t>(embed_rows * shape[1]));
        shape[0] = embed_rows;
      }
      if (name.ends_with("norm.weight")) {
        for (float& x : v) x += 1.0f;
      }
    }
    std::vector<ConvertedTensor> converted;
    if (qwen35) {
      // The converter's filter_tensors drops "language_model."; then its modify_tensors.
      std::string hf = name;
      if (const size_t at = hf.find("language_model."); at != std::string::npos) hf.erase(at, 15);
      auto out = Qwen35ConvertTensor(hf, c, mtp_layers, std::move(v), shape);
      if (!out) return out.status();
      converted = std::move(*out);
    } else {
      converted.push_back({name, std::move(v), shape});
    }
    for (const ConvertedTensor& ct : converted) {
      std::string gguf_name = qwen35 ? Qwen35GgufTensorNameOf(ct.hf_name) : "";
      if (gguf_name.empty()) gguf_name = GgufTensorNameOf(ct.hf_name, c.family);
      if (gguf_name.empty()) return Unsupported("no GGUF name for " + name);
      const GgmlType type = GgufFloatTypeOf(gguf_name, ct.shape.size(), outtype);
      w.AddTensor(gguf_name, type, std::vector<uint64_t>(ct.shape.rbegin(), ct.shape.rend()),
                  GgufFloatBytes(ct.values, type));
    }
  }
  *out_writer = std::move(w);
  return Status::Ok();
}

// As BuildGgufOfCheckpoint, written to `path`.
inline Status WriteGgufOfCheckpoint(const std::string& dir, const std::string& pre,
                                    const std::string& path, bool chat_template = true,
                                    GgmlType outtype = GgmlType::kF32) {
  GgufWriter w;
  TS_RETURN_IF_ERROR(BuildGgufOfCheckpoint(dir, pre, chat_template, &w, outtype));
  const std::string bytes = w.Build();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  return out ? Status::Ok() : IoError("cannot write " + path);
}

}  // namespace tessera::test
