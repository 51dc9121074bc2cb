#include "model/model_tensors.h"

#include <iterator>
#include <set>

namespace tessera {

ModelDims DimsFromConfig(const ModelConfig& c) {
  ModelDims d;
  d.hidden = c.hidden_size;
  d.intermediate = c.intermediate_size;
  d.layers = c.num_layers;
  d.heads = c.num_heads;
  d.kv_heads = c.num_kv_heads;
  d.head_dim = c.head_dim;
  d.q_dim = c.num_heads * c.head_dim;
  d.kv_dim = c.num_kv_heads * c.head_dim;
  d.vocab = c.vocab_size;
  d.qkv_bias = c.family == ModelFamily::kQwen2 || c.attention_bias;
  d.o_bias = c.family != ModelFamily::kQwen2 && c.attention_bias;
  d.qk_norm = c.qk_norm || c.family == ModelFamily::kQwen3;
  return d;
}

namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Looks up `name`, checks dtype and shape, and records it as used.
class Binder {
 public:
  Binder(const CheckpointTensors& ckpt) : ckpt_(ckpt) {}

  Status Bind(const std::string& name, std::vector<int64_t> shape, const TensorInfo** out) {
    const TensorInfo* t = ckpt_.Find(name);
    if (t == nullptr) {
      return NotFound("checkpoint is missing tensor '" + name + "' (expected shape " +
                      ShapeText(shape) + ")");
    }
    if (!IsFloatWeightDType(t->dtype)) {
      return Unsupported("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                         "; supported weight dtypes: F32, F16, BF16");
    }
    if (t->shape != shape) {
      return Corrupt("tensor '" + name + "' has shape " + ShapeText(t->shape) +
                     " but the config implies " + ShapeText(shape));
    }
    used_.insert(name);
    *out = t;
    return Status::Ok();
  }

  // A packed buffer: 1-D of the given dtype, any length (its owner checks the size).
  Status BindRaw(const std::string& name, DType dtype, bool required, const TensorInfo** out) {
    const TensorInfo* t = ckpt_.Find(name);
    if (t == nullptr) {
      if (!required) return Status::Ok();
      return NotFound("package is missing packed tensor '" + name + "'");
    }
    if (t->dtype != dtype || t->shape.size() != 1) {
      return Corrupt("packed tensor '" + name + "' must be 1-D " + std::string(DTypeName(dtype)));
    }
    used_.insert(name);
    *out = t;
    return Status::Ok();
  }

  const std::set<std::string>& used() const { return used_; }

 private:
  const CheckpointTensors& ckpt_;
  std::set<std::string> used_;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status BindPacked(Binder& b, int64_t layer, std::string_view matrix, PackedMatrixTensors* out) {
  const TensorInfo** fields[] = {&out->data, &out->row_scale, &out->row_offset, &out->block_scale};
  for (size_t i = 0; i < std::size(kPackedParts); ++i) {
    // The panels are always there; scales and offsets only in the formats that have them.
    TS_RETURN_IF_ERROR(b.BindRaw(PackedTensorName(layer, matrix, kPackedParts[i].name),
                                 kPackedParts[i].dtype, i == 0, fields[i]));
  }
  return Status::Ok();
}

}  // namespace

std::string PackedTensorName(int64_t layer, std::string_view matrix, std::string_view part) {
  std::string name = layer < 0 ? "tessera.lm_head" : "tessera.layers." + std::to_string(layer);
  if (layer >= 0) name += "." + std::string(matrix);
  return name + "." + std::string(part);
}

Expected<ModelTensors> BindModelTensors(const ModelConfig& config, const CheckpointTensors& ckpt) {
  ModelTensors m;
  m.dims = DimsFromConfig(config);
  const ModelDims& d = m.dims;
  Binder b(ckpt);
  TS_RETURN_IF_ERROR(b.Bind("model.norm.weight", {d.hidden}, &m.final_norm));
  // Declared, never guessed: only the writer's metadata makes a checkpoint a packed one.
  const auto& metadata = ckpt.first_shard_metadata();
  if (auto layout = metadata.find(kPackedLayoutKey); layout != metadata.end()) {
    auto format = metadata.find(kPackedFormatKey);
    if (format == metadata.end() || ckpt.shard_count() != 1) {
      return Corrupt("packed weights need one tensor file whose metadata names their format");
    }
    m.packed = PackedModelTensors{layout->second, format->second, {}, {}};
    m.packed->layers.resize(static_cast<size_t>(d.layers));
    for (int64_t i = 0; i < d.layers; ++i) {
      PackedLayerTensors& P = m.packed->layers[static_cast<size_t>(i)];
      TS_RETURN_IF_ERROR(BindPacked(b, i, "qkv", &P.qkv));
      TS_RETURN_IF_ERROR(BindPacked(b, i, "o_proj", &P.o_proj));
      TS_RETURN_IF_ERROR(BindPacked(b, i, "gate_up", &P.gate_up));
      TS_RETURN_IF_ERROR(BindPacked(b, i, "down_proj", &P.down_proj));
    }
    TS_RETURN_IF_ERROR(BindPacked(b, -1, "", &m.packed->lm_head));
  }
  const bool packed = m.packed.has_value();
  if (packed && config.tie_word_embeddings) {
    // Stored once, as the packed LM head, whose rows the backend reads for token lookups.
    if (ckpt.Find("model.embed_tokens.weight") != nullptr) {
      return Unsupported(
          "package holds model.embed_tokens.weight beside its tied packed LM head (written by "
          "an older tessera); re-convert it with tessera convert");
    }
  } else {
    TS_RETURN_IF_ERROR(b.Bind("model.embed_tokens.weight", {d.vocab, d.hidden}, &m.embed));
  }
  bool has_lm_head = ckpt.Find("lm_head.weight") != nullptr;
  if (packed) {
    // the head is packed->lm_head
  } else if (config.tie_word_embeddings) {
    m.lm_head = m.embed;
    // transformers ties the head to the embedding even if a copy was saved; so do we.
    if (has_lm_head) m.ignored.push_back("lm_head.weight (tie_word_embeddings is true)");
  } else {
    if (!has_lm_head) {
      return NotFound(
          "checkpoint is missing tensor 'lm_head.weight' and config.json says "
          "tie_word_embeddings is false");
    }
    TS_RETURN_IF_ERROR(b.Bind("lm_head.weight", {d.vocab, d.hidden}, &m.lm_head));
  }
  m.layers.resize(static_cast<size_t>(d.layers));
  for (int64_t i = 0; i < d.layers; ++i) {
    LayerTensors& L = m.layers[static_cast<size_t>(i)];
    std::string p = "model.layers." + std::to_string(i) + ".";
    TS_RETURN_IF_ERROR(b.Bind(p + "input_layernorm.weight", {d.hidden}, &L.input_norm));
    if (!packed) {
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_proj.weight", {d.q_dim, d.hidden}, &L.q_proj));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_proj.weight", {d.kv_dim, d.hidden}, &L.k_proj));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.v_proj.weight", {d.kv_dim, d.hidden}, &L.v_proj));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.o_proj.weight", {d.hidden, d.q_dim}, &L.o_proj));
    }
    if (d.qkv_bias) {
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_proj.bias", {d.q_dim}, &L.q_bias));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_proj.bias", {d.kv_dim}, &L.k_bias));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.v_proj.bias", {d.kv_dim}, &L.v_bias));
    }
    if (d.o_bias) TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.o_proj.bias", {d.hidden}, &L.o_bias));
    if (d.qk_norm) {
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_norm.weight", {d.head_dim}, &L.q_norm));
      TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_norm.weight", {d.head_dim}, &L.k_norm));
    }
    TS_RETURN_IF_ERROR(
        b.Bind(p + "post_attention_layernorm.weight", {d.hidden}, &L.post_attn_norm));
    if (packed) continue;
    TS_RETURN_IF_ERROR(
        b.Bind(p + "mlp.gate_proj.weight", {d.intermediate, d.hidden}, &L.gate_proj));
    TS_RETURN_IF_ERROR(b.Bind(p + "mlp.up_proj.weight", {d.intermediate, d.hidden}, &L.up_proj));
    TS_RETURN_IF_ERROR(
        b.Bind(p + "mlp.down_proj.weight", {d.hidden, d.intermediate}, &L.down_proj));
  }
  // Every other tensor must be one we knowingly ignore.
  for (const std::string& name : ckpt.Names()) {
    if (b.used().count(name) || (!packed && name == "lm_head.weight")) continue;
    if (EndsWith(name, ".self_attn.rotary_emb.inv_freq")) {  // recomputed from rope_theta
      m.ignored.push_back(name);
      continue;
    }
    return Unsupported("checkpoint has tensor '" + name + "' that a " +
                       std::string(ModelFamilyName(config.family)) +
                       " model with this config.json does not use; refusing to run a model "
                       "tessera does not fully understand");
  }
  return m;
}

}  // namespace tessera
