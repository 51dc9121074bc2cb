#include "model/synthetic_checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "format/safetensors.h"
#include "model/synthetic_tokenizer.h"

namespace tessera {
namespace {

// splitmix64: a tiny, fully specified generator so the same seed gives the same weights
// on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float Symmetric() { return static_cast<float>((Next() >> 40) * 0x1.0p-23 - 1.0); }

 private:
  uint64_t state_;
};

std::vector<float> Uniform(SplitMix64& rng, size_t n, float scale, float offset = 0.0f) {
  std::vector<float> v(n);
  for (float& x : v) x = offset + scale * rng.Symmetric();
  return v;
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return IoError("cannot write " + path);
  f << text;
  f.close();
  if (!f) return IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace

namespace {

const char* ArchitectureName(ModelFamily f) {
  switch (f) {
    case ModelFamily::kLlama:
      return "LlamaForCausalLM";
    case ModelFamily::kQwen2:
      return "Qwen2ForCausalLM";
    case ModelFamily::kQwen3:
      return "Qwen3ForCausalLM";
    case ModelFamily::kQwen3_5:
      return "Qwen3_5ForConditionalGeneration";
    case ModelFamily::kMiniCpm:
      return "MiniCPMForCausalLM";
    case ModelFamily::kGemma3:
      return "Gemma3ForCausalLM";
  }
  return "";
}

bool IsLinearLayer(const SyntheticModelSpec& s, int64_t i) {
  return s.family == ModelFamily::kQwen3_5 && (i + 1) % s.full_attention_interval != 0;
}
bool IsSlidingLayer(const SyntheticModelSpec& s, int64_t i) {
  return s.family == ModelFamily::kGemma3 && s.sliding_window > 0 &&
         (i + 1) % s.sliding_window_pattern != 0;
}
bool Nested(const SyntheticModelSpec& s) {
  return s.nested_config && (s.family == ModelFamily::kQwen3_5 || s.family == ModelFamily::kGemma3);
}

// The text model's config.json fields.
nlohmann::ordered_json TextConfig(const SyntheticModelSpec& s) {
  const bool qk_norm = s.family == ModelFamily::kQwen3 || s.family == ModelFamily::kQwen3_5 ||
                       s.family == ModelFamily::kGemma3;
  nlohmann::ordered_json cfg;
  cfg["architectures"] = {ArchitectureName(s.family)};
  // qwen3_5 and gemma3 text models say so, nested in a multimodal config or not.
  std::string type(ModelFamilyName(s.family));
  if (s.family == ModelFamily::kQwen3_5 || s.family == ModelFamily::kGemma3) type += "_text";
  cfg["model_type"] = type;
  cfg["hidden_size"] = s.hidden;
  cfg["intermediate_size"] = s.intermediate;
  cfg["num_hidden_layers"] = s.layers;
  cfg["num_attention_heads"] = s.heads;
  cfg["num_key_value_heads"] = s.kv_heads;
  if (qk_norm || s.head_dim * s.heads != s.hidden) cfg["head_dim"] = s.head_dim;
  cfg["vocab_size"] = s.vocab;
  cfg["max_position_embeddings"] = s.max_position;
  cfg["rms_norm_eps"] = s.rms_norm_eps;
  if (s.family == ModelFamily::kQwen3_5) {
    // Qwen3.5's own layout (transformers' rope_parameters): its multimodal RoPE splits the
    // rotary pairs in three interleaved sections (11/11/10 of 32 at head_dim 256), which text
    // positions make plain RoPE; llama.cpp's converter copies the sections into the GGUF.
    const int64_t pairs =
        static_cast<int64_t>(static_cast<double>(s.head_dim) * s.partial_rotary_factor) / 2;
    const int64_t third = (pairs + 2) / 3;
    cfg["rope_parameters"] = {{"mrope_interleaved", true},
                              {"mrope_section", {third, third, pairs - 2 * third}},
                              {"rope_type", "default"},
                              {"rope_theta", s.rope_theta},
                              {"partial_rotary_factor", s.partial_rotary_factor}};
  } else {
    cfg["rope_theta"] = s.rope_theta;
    if (s.partial_rotary_factor != 1.0) cfg["partial_rotary_factor"] = s.partial_rotary_factor;
    if (s.rope_llama3) {
      cfg["rope_scaling"] = {
          {"factor", s.rope_llama3->factor},
          {"high_freq_factor", s.rope_llama3->high_freq_factor},
          {"low_freq_factor", s.rope_llama3->low_freq_factor},
          {"original_max_position_embeddings", s.rope_llama3->original_max_position_embeddings},
          {"rope_type", "llama3"}};
    } else if (s.rope_longrope) {
      cfg["rope_scaling"] = {
          {"rope_type", "longrope"},
          {"short_factor", s.rope_longrope->short_factor},
          {"long_factor", s.rope_longrope->long_factor},
          {"original_max_position_embeddings", s.rope_longrope->original_max_position_embeddings}};
    } else {
      cfg["rope_scaling"] = nullptr;
    }
  }
  if (s.family == ModelFamily::kGemma3) {
    cfg["hidden_activation"] = "gelu_pytorch_tanh";
  } else {
    cfg["hidden_act"] = "silu";
  }
  cfg["tie_word_embeddings"] = s.tied;
  if (s.family != ModelFamily::kQwen2) cfg["attention_bias"] = s.attention_bias;
  if (s.family == ModelFamily::kQwen3_5) {
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int64_t i = 0; i < s.layers; ++i) {
      types.push_back(IsLinearLayer(s, i) ? "linear_attention" : "full_attention");
    }
    cfg["layer_types"] = types;
    cfg["full_attention_interval"] = s.full_attention_interval;
    cfg["linear_num_key_heads"] = s.linear_key_heads;
    cfg["linear_num_value_heads"] = s.linear_value_heads;
    cfg["linear_key_head_dim"] = s.linear_key_dim;
    cfg["linear_value_head_dim"] = s.linear_value_dim;
    cfg["linear_conv_kernel_dim"] = s.linear_conv_kernel;
    cfg["attn_output_gate"] = true;
  }
  if (s.family == ModelFamily::kGemma3) {
    nlohmann::ordered_json types = nlohmann::ordered_json::array();
    for (int64_t i = 0; i < s.layers; ++i) {
      types.push_back(IsSlidingLayer(s, i) ? "sliding_attention" : "full_attention");
    }
    cfg["layer_types"] = types;
    cfg["sliding_window"] = s.sliding_window > 0 ? s.sliding_window : s.max_position;
    cfg["rope_local_base_freq"] = s.rope_local_theta;
    cfg["query_pre_attn_scalar"] =
        s.query_pre_attn_scalar > 0 ? s.query_pre_attn_scalar : static_cast<double>(s.head_dim);
    cfg["final_logit_softcapping"] = nullptr;
    cfg["attn_logit_softcapping"] = nullptr;
  }
  if (s.family == ModelFamily::kMiniCpm) {
    cfg["scale_emb"] = s.scale_emb;
    cfg["scale_depth"] = s.scale_depth;
    cfg["dim_model_base"] = s.dim_model_base;
  }
  cfg["bos_token_id"] = s.bos_token_id;
  cfg["eos_token_id"] = s.eos_token_id;
  cfg["torch_dtype"] = s.dtype == DType::kBF16  ? "bfloat16"
                       : s.dtype == DType::kF16 ? "float16"
                                                : "float32";
  return cfg;
}

// The files sentence-transformers reads beside the weights (Qwen3-Embedding's layout).
Status WriteSentenceTransformersFiles(const std::string& dir, const SyntheticModelSpec& s) {
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  const char* types[] = {"Transformer", "Pooling", "Normalize"};
  const char* paths[] = {"", "1_Pooling", "2_Normalize"};
  for (int i = 0; i < 3; ++i) {
    modules.push_back({{"idx", i},
                       {"name", std::to_string(i)},
                       {"path", paths[i]},
                       {"type", std::string("sentence_transformers.models.") + types[i]}});
    if (i > 0 && ::mkdir((dir + "/" + paths[i]).c_str(), 0755) != 0 && errno != EEXIST) {
      return IoError("cannot create " + dir + "/" + paths[i] + ": " + std::strerror(errno));
    }
  }
  TS_RETURN_IF_ERROR(WriteText(dir + "/modules.json", modules.dump(2) + "\n"));
  nlohmann::ordered_json pooling;
  pooling["word_embedding_dimension"] = s.hidden;
  for (const char* mode :
       {"pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
        "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"}) {
    pooling[mode] = false;
  }
  pooling["pooling_mode_lasttoken"] = true;
  pooling["include_prompt"] = true;
  TS_RETURN_IF_ERROR(WriteText(dir + "/1_Pooling/config.json", pooling.dump(2) + "\n"));
  nlohmann::ordered_json st;
  st["prompts"] = {
      {"query",
       "Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
       "Query:"},
      {"document", ""}};
  st["default_prompt_name"] = nullptr;
  st["similarity_fn_name"] = "cosine";
  return WriteText(dir + "/config_sentence_transformers.json", st.dump(2) + "\n");
}

}  // namespace

Status WriteSyntheticCheckpoint(const std::string& dir, const SyntheticModelSpec& s,
                                const ProgressCallback& progress) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return IoError("cannot create " + dir + ": " + std::strerror(errno));
  }
  if (s.shards < 1) return InvalidArgument("shards must be >= 1");
  if (s.family == ModelFamily::kQwen3_5 &&
      (s.full_attention_interval < 1 || s.linear_key_heads < 1 ||
       s.linear_value_heads % s.linear_key_heads != 0)) {
    return InvalidArgument("qwen3_5 synth: value heads must be a multiple of key heads");
  }
  const bool qwen35 = s.family == ModelFamily::kQwen3_5, gemma = s.family == ModelFamily::kGemma3;
  const bool qkv_bias = s.family == ModelFamily::kQwen2 || s.attention_bias;
  const bool o_bias = s.family != ModelFamily::kQwen2 && s.attention_bias;
  const bool qk_norm = s.family == ModelFamily::kQwen3 || qwen35 || gemma;
  const int64_t q_dim = s.heads * s.head_dim, kv_dim = s.kv_heads * s.head_dim;
  // Zero-centred (1 + w) norms get weights near 0, plain ones near 1: both scale by ~1 +- 0.1.
  const float norm_offset = qwen35 || gemma ? 0.0f : 1.0f;

  nlohmann::ordered_json cfg = TextConfig(s);
  if (Nested(s)) {
    nlohmann::ordered_json outer;
    outer["architectures"] = {qwen35 ? "Qwen3_5ForConditionalGeneration"
                                     : "Gemma3ForConditionalGeneration"};
    outer["model_type"] = qwen35 ? "qwen3_5" : "gemma3";
    outer["tie_word_embeddings"] = s.tied;
    outer["text_config"] = cfg;
    outer["vision_config"] = {{"hidden_size", 16}};
    cfg = outer;
  }
  if (!s.class_labels.empty()) {
    if (Nested(s)) return InvalidArgument("synth: a classifier's config cannot be nested");
    cfg["architectures"] = {std::string(ArchitectureName(s.family))
                                .substr(0, std::string(ArchitectureName(s.family)).rfind("For")) +
                            "ForSequenceClassification"};
    nlohmann::ordered_json id2label, label2id;
    for (size_t i = 0; i < s.class_labels.size(); ++i) {
      id2label[std::to_string(i)] = s.class_labels[i];
      label2id[s.class_labels[i]] = i;
    }
    cfg["id2label"] = id2label;
    cfg["label2id"] = label2id;
  }
  TS_RETURN_IF_ERROR(WriteText(dir + "/config.json", cfg.dump(2) + "\n"));
  nlohmann::ordered_json gen;
  gen["bos_token_id"] = s.bos_token_id;
  gen["eos_token_id"] = s.eos_token_id;
  gen["do_sample"] = false;
  TS_RETURN_IF_ERROR(WriteText(dir + "/generation_config.json", gen.dump(2) + "\n"));
  if (s.sentence_transformers) TS_RETURN_IF_ERROR(WriteSentenceTransformersFiles(dir, s));

  // Weights: projections ~ U(-1,1)/sqrt(fan_in) keep activations O(1); norms near 1.
  SplitMix64 rng(s.seed);
  std::vector<TensorToWrite> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale,
                 float offset = 0.0f) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v = Uniform(rng, n, scale, offset);
    tensors.push_back(MakeTensor(name, s.dtype, std::move(shape), v));
  };
  auto inv_sqrt = [](int64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  const std::string root = !Nested(s) ? "model."
                           : qwen35   ? "model.language_model."
                                      : "language_model.model.";
  constexpr char kGenerating[] = "generating weights";
  auto generated = [&](int64_t layers, bool finished) {
    ReportProgress(progress, {.phase = kGenerating,
                              .done = static_cast<uint64_t>(layers),
                              .total = static_cast<uint64_t>(s.layers),
                              .unit = ProgressUnit::kLayers,
                              .finished = finished});
  };
  generated(0, false);
  add(root + "embed_tokens.weight", {s.vocab, s.hidden}, 1.0f);
  for (int64_t i = 0; i < s.layers; ++i) {
    if (i > 0) generated(i, false);
    std::string p = root + "layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {s.hidden}, 0.1f, norm_offset);
    if (IsLinearLayer(s, i)) {
      const int64_t qk = s.linear_key_heads * s.linear_key_dim;
      const int64_t v = s.linear_value_heads * s.linear_value_dim;
      const std::string a = p + "linear_attn.";
      add(a + "in_proj_qkv.weight", {2 * qk + v, s.hidden}, inv_sqrt(s.hidden));
      add(a + "in_proj_z.weight", {v, s.hidden}, inv_sqrt(s.hidden));
      add(a + "in_proj_b.weight", {s.linear_value_heads, s.hidden}, inv_sqrt(s.hidden));
      add(a + "in_proj_a.weight", {s.linear_value_heads, s.hidden}, inv_sqrt(s.hidden));
      add(a + "conv1d.weight", {2 * qk + v, 1, s.linear_conv_kernel}, 0.5f);
      add(a + "dt_bias", {s.linear_value_heads}, 0.5f, 0.5f);
      add(a + "A_log", {s.linear_value_heads}, 1.0f, 0.5f);  // A = e^x in [0.6, 4.5]
      add(a + "norm.weight", {s.linear_value_dim}, 0.1f, 1.0f);
      add(a + "out_proj.weight", {s.hidden, v}, inv_sqrt(v));
    } else {
      const int64_t q_rows = qwen35 ? 2 * q_dim : q_dim;  // qwen3_5: per head [query | gate]
      add(p + "self_attn.q_proj.weight", {q_rows, s.hidden}, inv_sqrt(s.hidden));
      add(p + "self_attn.k_proj.weight", {kv_dim, s.hidden}, inv_sqrt(s.hidden));
      add(p + "self_attn.v_proj.weight", {kv_dim, s.hidden}, inv_sqrt(s.hidden));
      add(p + "self_attn.o_proj.weight", {s.hidden, q_dim}, inv_sqrt(q_dim));
      if (qkv_bias) {
        add(p + "self_attn.q_proj.bias", {q_dim}, 0.2f);
        add(p + "self_attn.k_proj.bias", {kv_dim}, 0.2f);
        add(p + "self_attn.v_proj.bias", {kv_dim}, 0.2f);
      }
      if (o_bias) add(p + "self_attn.o_proj.bias", {s.hidden}, 0.2f);
      if (qk_norm) {
        add(p + "self_attn.q_norm.weight", {s.head_dim}, 0.1f, norm_offset);
        add(p + "self_attn.k_norm.weight", {s.head_dim}, 0.1f, norm_offset);
      }
    }
    add(p + "post_attention_layernorm.weight", {s.hidden}, 0.1f, norm_offset);
    if (gemma) {
      add(p + "pre_feedforward_layernorm.weight", {s.hidden}, 0.1f, norm_offset);
      add(p + "post_feedforward_layernorm.weight", {s.hidden}, 0.1f, norm_offset);
    }
    add(p + "mlp.gate_proj.weight", {s.intermediate, s.hidden}, inv_sqrt(s.hidden));
    add(p + "mlp.up_proj.weight", {s.intermediate, s.hidden}, inv_sqrt(s.hidden));
    add(p + "mlp.down_proj.weight", {s.hidden, s.intermediate}, inv_sqrt(s.intermediate));
  }
  add(root + "norm.weight", {s.hidden}, 0.1f, norm_offset);
  const std::string head = Nested(s) && gemma ? "language_model.lm_head.weight" : "lm_head.weight";
  if (!s.class_labels.empty()) {
    add("score.weight", {static_cast<int64_t>(s.class_labels.size()), s.hidden},
        inv_sqrt(s.hidden));
  } else if (!s.tied) {
    add(head, {s.vocab, s.hidden}, inv_sqrt(s.hidden));
  }
  if (Nested(s)) {
    // What a multimodal checkpoint carries beside the text model (unused, listed as ignored).
    add(qwen35 ? "model.visual.patch_embed.proj.weight" : "vision_tower.patch_embed.weight",
        {16, 12}, 0.1f);
    if (!qwen35) add("multi_modal_projector.mm_input_projection_weight", {16, s.hidden}, 0.1f);
  }
  if (qwen35) add("mtp.fc.weight", {s.hidden, 2 * s.hidden}, 0.1f);
  generated(s.layers, true);

  constexpr char kWriting[] = "writing tensors";
  uint64_t total_bytes = 0, written_bytes = 0;
  for (const TensorToWrite& t : tensors) total_bytes += t.bytes.size();
  auto writing = [&](bool finished) {
    ReportProgress(progress, {.phase = kWriting,
                              .done = written_bytes,
                              .total = total_bytes,
                              .unit = ProgressUnit::kBytes,
                              .finished = finished});
  };
  writing(false);
  if (s.shards == 1) {
    TS_RETURN_IF_ERROR(WriteSafetensors(dir + "/model.safetensors", tensors));
    written_bytes = total_bytes;
    writing(true);
    return Status::Ok();
  }

  // Split tensors round-robin into contiguous groups, one file each, plus the index.
  nlohmann::ordered_json index;
  index["metadata"] = nlohmann::ordered_json::object();
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  size_t per_shard = (tensors.size() + static_cast<size_t>(s.shards) - 1) / s.shards;
  for (int shard = 0; shard < s.shards; ++shard) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", shard + 1, s.shards);
    std::vector<TensorToWrite> part;
    for (size_t i = shard * per_shard; i < std::min(tensors.size(), (shard + 1) * per_shard); ++i) {
      weight_map[tensors[i].name] = name;
      part.push_back(std::move(tensors[i]));
    }
    TS_RETURN_IF_ERROR(WriteSafetensors(dir + "/" + name, part));
    for (const TensorToWrite& t : part) written_bytes += t.bytes.size();
    writing(false);
  }
  writing(true);
  index["weight_map"] = weight_map;
  return WriteText(dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

namespace {

struct PresetRow {
  const char* name;
  ModelFamily family;
  int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, max_position;
  bool tied;
  double theta, eps;
  bool llama3_rope = false;  // Llama 3.2's rope_scaling: factor 32, low 1, high 4, original 8192
  bool sentence_transformers = false;  // SyntheticModelSpec::sentence_transformers
  bool classifier = false;             // three classes: negative, neutral, positive
};

// Shapes from the published config.json files of each model.
constexpr PresetRow kPresets[] = {
    {"smollm2-135m", ModelFamily::kLlama, 576, 1536, 30, 9, 3, 64, 49152, 8192, true, 1e5, 1e-5},
    {"smollm2-360m", ModelFamily::kLlama, 960, 2560, 32, 15, 5, 64, 49152, 8192, true, 1e5, 1e-5},
    {"qwen2.5-0.5b", ModelFamily::kQwen2, 896, 4864, 24, 14, 2, 64, 151936, 32768, true, 1e6, 1e-6},
    {"qwen2.5-1.5b", ModelFamily::kQwen2, 1536, 8960, 28, 12, 2, 128, 151936, 32768, true, 1e6,
     1e-6},
    {"qwen3-0.6b", ModelFamily::kQwen3, 1024, 3072, 28, 16, 8, 128, 151936, 40960, true, 1e6, 1e-6},
    {"qwen3-1.7b", ModelFamily::kQwen3, 2048, 6144, 28, 16, 8, 128, 151936, 40960, true, 1e6, 1e-6},
    {"llama3.2-1b", ModelFamily::kLlama, 2048, 8192, 16, 32, 8, 64, 128256, 131072, true, 5e5, 1e-5,
     true},
    // The 2026 families; their own fields are set in FamilyPresetFields.
    {"qwen3.5-0.8b", ModelFamily::kQwen3_5, 1024, 3584, 24, 8, 2, 256, 248320, 262144, true, 1e7,
     1e-6},
    {"qwen3.5-2b", ModelFamily::kQwen3_5, 2048, 6144, 24, 8, 2, 256, 248320, 262144, true, 1e7,
     1e-6},
    {"minicpm4-0.5b", ModelFamily::kMiniCpm, 1024, 4096, 24, 16, 2, 64, 73448, 32768, true, 1e4,
     1e-6},
    {"minicpm5-2b", ModelFamily::kMiniCpm, 2048, 6144, 42, 16, 2, 128, 73448, 32768, true, 1e4,
     1e-6},
    {"gemma3-270m", ModelFamily::kGemma3, 640, 2048, 18, 4, 1, 256, 262144, 32768, true, 1e6, 1e-6},
    {"gemma3-1b", ModelFamily::kGemma3, 1152, 6912, 26, 4, 1, 256, 262144, 32768, true, 1e6, 1e-6},
    // Task models at their published shapes (Qwen3-Embedding's vocabulary is 151669).
    {"qwen3-embedding-0.6b", ModelFamily::kQwen3, 1024, 3072, 28, 16, 8, 128, 151669, 32768, true,
     1e6, 1e-6, false, true},
    {"qwen3-reranker-0.6b", ModelFamily::kQwen3, 1024, 3072, 28, 16, 8, 128, 151669, 40960, true,
     1e6, 1e-6},
    {"qwen3guard-gen-0.6b", ModelFamily::kQwen3, 1024, 3072, 28, 16, 8, 128, 151936, 32768, true,
     1e6, 1e-6},
    {"decider-0.8b", ModelFamily::kQwen3_5, 1024, 3584, 24, 8, 2, 256, 248320, 262144, true, 1e7,
     1e-6},
    {"qwen3-0.6b-seqcls", ModelFamily::kQwen3, 1024, 3072, 28, 16, 8, 128, 151936, 40960, true, 1e6,
     1e-6, false, false, true},
};

// Published values of the fields only these families have: Qwen3.5's DeltaNet (16 key and 16
// value heads of 128, kernel 4, three linear layers per full one, a quarter of each head
// rotated), MiniCPM's muP scales, Gemma 3's 512-position windows (five local layers per
// global one, local theta 1e4, query scale 1/sqrt(256)).
void FamilyPresetFields(SyntheticModelSpec& s) {
  switch (s.family) {
    case ModelFamily::kQwen3_5:
      s.linear_key_heads = 16;
      s.linear_value_heads = 16;
      s.linear_key_dim = 128;
      s.linear_value_dim = 128;
      s.linear_conv_kernel = 4;
      s.full_attention_interval = 4;
      s.partial_rotary_factor = 0.25;
      s.nested_config = true;
      break;
    case ModelFamily::kMiniCpm:
      s.scale_emb = 12.0;
      s.scale_depth = 1.4;
      s.dim_model_base = 256.0;
      break;
    case ModelFamily::kGemma3:
      s.sliding_window = 512;
      s.sliding_window_pattern = 6;
      s.rope_local_theta = 10000.0;
      s.query_pre_attn_scalar = 256.0;
      s.nested_config = false;
      break;
    default:
      break;
  }
}

}  // namespace

std::vector<std::string> SyntheticPresetNames() {
  std::vector<std::string> names;
  for (const PresetRow& p : kPresets) names.push_back(p.name);
  return names;
}

Expected<SyntheticModelSpec> SyntheticPreset(std::string_view name) {
  for (const PresetRow& p : kPresets) {
    if (name != p.name) continue;
    SyntheticModelSpec s;
    s.family = p.family;
    s.hidden = p.hidden;
    s.intermediate = p.intermediate;
    s.layers = p.layers;
    s.heads = p.heads;
    s.kv_heads = p.kv_heads;
    s.head_dim = p.head_dim;
    s.vocab = p.vocab;
    s.max_position = p.max_position;
    s.tied = p.tied;
    s.rope_theta = p.theta;
    s.rms_norm_eps = p.eps;
    if (p.llama3_rope) s.rope_llama3 = Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
    s.sentence_transformers = p.sentence_transformers;
    if (p.classifier) s.class_labels = {"negative", "neutral", "positive"};
    FamilyPresetFields(s);
    s.dtype = DType::kBF16;
    return s;
  }
  std::string known;
  for (const PresetRow& p : kPresets) known += std::string(known.empty() ? "" : ", ") + p.name;
  return InvalidArgument("unknown preset '" + std::string(name) + "'; presets: " + known);
}

Status WriteSyntheticModel(const std::string& dir, SyntheticModelSpec spec,
                           const ProgressCallback& progress) {
  TS_ASSIGN_OR_RETURN(SyntheticTokenizerFiles tok, MakeSyntheticTokenizer(4000));
  if (tok.vocab_size > spec.vocab) {
    return InvalidArgument("the synthetic tokenizer needs " + std::to_string(tok.vocab_size) +
                           " ids but the model vocabulary has " + std::to_string(spec.vocab));
  }
  spec.bos_token_id = tok.endoftext_id;
  spec.eos_token_id = tok.im_end_id;
  TS_RETURN_IF_ERROR(WriteSyntheticCheckpoint(dir, spec, progress));
  TS_RETURN_IF_ERROR(WriteText(dir + "/tokenizer.json", tok.tokenizer_json));
  return WriteText(dir + "/tokenizer_config.json", tok.tokenizer_config_json);
}

}  // namespace tessera
