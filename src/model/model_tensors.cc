#include "model/model_tensors.h"

#include <iterator>
#include <set>

#include "base/half.h"

namespace tessera {

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

  Status Bind(const std::string& name, std::vector<int64_t> shape, TensorRef* out,
              float offset = 0.0f, float scale = 1.0f) {
    const TensorInfo* t = ckpt_.Find(name);
    if (t == nullptr) {
      return NotFound("checkpoint is missing tensor '" + name + "' (expected shape " +
                      ShapeText(shape) + ")");
    }
    if (!IsFloatWeightDType(t->dtype) && t->dtype != DType::kGgmlBlocks) {
      return Unsupported("tensor '" + name + "' has dtype " + std::string(DTypeName(t->dtype)) +
                         "; supported weight dtypes: F32, F16, BF16 (and GGUF's block types)");
    }
    if (t->shape != shape) {
      return Corrupt("tensor '" + name + "' has shape " + ShapeText(t->shape) +
                     " but the config implies " + ShapeText(shape));
    }
    used_.insert(name);
    *out = TensorRef{t, offset, scale};
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

namespace {

// The bf16 or f16 value nearest x, as gemma3 multiplies its embedding by a scale held in the
// weights' dtype.
float RoundToDType(double x, DType dtype) {
  const float f = static_cast<float>(x);
  if (dtype == DType::kBF16) return Bf16ToFloat(FloatToBf16(f));
  if (dtype == DType::kF16) return F16ToFloat(FloatToF16(f));
  return f;
}

Status BindAttention(Binder& b, const ModelSpec& d, const std::string& p, bool packed, float norm,
                     float residual, LayerTensors& L) {
  if (!packed) {
    TS_RETURN_IF_ERROR(
        b.Bind(p + "self_attn.q_proj.weight", {d.q_proj_rows(), d.hidden}, &L.q_proj));
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_proj.weight", {d.kv_dim, d.hidden}, &L.k_proj));
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.v_proj.weight", {d.kv_dim, d.hidden}, &L.v_proj));
    TS_RETURN_IF_ERROR(
        b.Bind(p + "self_attn.o_proj.weight", {d.hidden, d.q_dim}, &L.o_proj, 0.0f, residual));
  }
  if (d.qkv_bias) {
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_proj.bias", {d.q_dim}, &L.q_bias));
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_proj.bias", {d.kv_dim}, &L.k_bias));
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.v_proj.bias", {d.kv_dim}, &L.v_bias));
  }
  if (d.o_bias) {
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.o_proj.bias", {d.hidden}, &L.o_bias, 0.0f, residual));
  }
  if (d.qk_norm) {
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.q_norm.weight", {d.head_dim}, &L.q_norm, norm));
    TS_RETURN_IF_ERROR(b.Bind(p + "self_attn.k_norm.weight", {d.head_dim}, &L.k_norm, norm));
  }
  return Status::Ok();
}

Status BindDeltaNet(Binder& b, const ModelSpec& d, const std::string& p, bool packed,
                    LayerTensors& L) {
  const DeltaNetSpec& n = *d.deltanet;
  const std::string a = p + "linear_attn.";
  if (!packed) {
    TS_RETURN_IF_ERROR(
        b.Bind(a + "in_proj_qkv.weight", {n.conv_width(), d.hidden}, &L.in_proj_qkv));
    TS_RETURN_IF_ERROR(b.Bind(a + "in_proj_z.weight", {n.v_width(), d.hidden}, &L.in_proj_z));
    TS_RETURN_IF_ERROR(b.Bind(a + "in_proj_b.weight", {n.value_heads, d.hidden}, &L.in_proj_b));
    TS_RETURN_IF_ERROR(b.Bind(a + "in_proj_a.weight", {n.value_heads, d.hidden}, &L.in_proj_a));
    TS_RETURN_IF_ERROR(b.Bind(a + "out_proj.weight", {d.hidden, n.v_width()}, &L.out_proj));
  }
  TS_RETURN_IF_ERROR(b.Bind(a + "conv1d.weight", {n.conv_width(), 1, n.conv_kernel}, &L.conv1d));
  TS_RETURN_IF_ERROR(b.Bind(a + "dt_bias", {n.value_heads}, &L.dt_bias));
  TS_RETURN_IF_ERROR(b.Bind(a + "A_log", {n.value_heads}, &L.a_log));
  return b.Bind(a + "norm.weight", {n.value_dim}, &L.delta_norm);  // plain w, not (1 + w)
}

}  // namespace

Expected<ModelTensors> BindModelTensors(const ModelConfig& config, const CheckpointTensors& ckpt) {
  ModelTensors m;
  TS_ASSIGN_OR_RETURN(m.spec, BuildModelSpec(config));
  const ModelSpec& d = m.spec;
  const std::string& root = config.tensor_prefix;
  // Folds: (1 + w) norms, MiniCPM's residual scale on each branch's output projection and its
  // logit scale on the final norm (exact: the head is linear), the embedding scale on lookup.
  const float norm = d.norm_style == NormStyle::kOnePlusWeight ? 1.0f : 0.0f;
  const auto residual = static_cast<float>(d.residual_scale);
  Binder b(ckpt);
  TS_RETURN_IF_ERROR(b.Bind(root + "norm.weight", {d.hidden}, &m.final_norm, norm,
                            static_cast<float>(d.logit_scale)));
  if (config.num_labels > 0) {
    TS_RETURN_IF_ERROR(b.Bind("score.weight", {config.num_labels, d.hidden}, &m.score));
  }
  // gemma3 multiplies by sqrt(hidden) held in the weights' dtype (the norm's is the source's,
  // in a package too).
  m.embed_lookup_scale = config.embed_scale_rounded_to_weight_dtype
                             ? RoundToDType(d.embed_scale, m.final_norm->dtype)
                             : static_cast<float>(d.embed_scale);
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
  const std::string& head_name = config.lm_head_name;
  const std::string embed_name = root + "embed_tokens.weight";
  if (packed && config.tie_word_embeddings) {
    // Stored once, as the packed LM head, whose rows the backend reads for token lookups.
    if (ckpt.Find(embed_name) != nullptr) {
      return Unsupported("package holds " + embed_name +
                         " beside its tied packed LM head (written by an older tessera); "
                         "re-convert it with tessera convert");
    }
  } else {
    TS_RETURN_IF_ERROR(b.Bind(embed_name, {d.vocab, d.hidden}, &m.embed));
    m.embed.scale = m.embed_lookup_scale;
  }
  bool has_lm_head = ckpt.Find(head_name) != nullptr;
  if (packed) {
    // the head is packed->lm_head
  } else if (config.tie_word_embeddings) {
    m.lm_head = TensorRef{m.embed.info};
    // transformers ties the head to the embedding even if a copy was saved; so do we.
    if (has_lm_head) m.ignored.push_back(head_name + " (tie_word_embeddings is true)");
  } else if (config.num_labels > 0 && !has_lm_head) {
    // A classifier has no LM head (its score rows are the head); the embedding stands in so the
    // backends load as for any model, and its logits are never asked for.
    m.lm_head = TensorRef{m.embed.info};
  } else {
    if (!has_lm_head) {
      return NotFound("checkpoint is missing tensor '" + head_name +
                      "' and config.json says tie_word_embeddings is false");
    }
    TS_RETURN_IF_ERROR(b.Bind(head_name, {d.vocab, d.hidden}, &m.lm_head));
  }
  m.layers.resize(static_cast<size_t>(d.layers));
  for (int64_t i = 0; i < d.layers; ++i) {
    LayerTensors& L = m.layers[static_cast<size_t>(i)];
    const std::string p = root + "layers." + std::to_string(i) + ".";
    TS_RETURN_IF_ERROR(b.Bind(p + "input_layernorm.weight", {d.hidden}, &L.input_norm, norm));
    if (d.layer[static_cast<size_t>(i)].is_attention()) {
      TS_RETURN_IF_ERROR(BindAttention(b, d, p, packed, norm, residual, L));
    } else {
      TS_RETURN_IF_ERROR(BindDeltaNet(b, d, p, packed, L));
    }
    if (d.sandwich_norms) {
      TS_RETURN_IF_ERROR(
          b.Bind(p + "post_attention_layernorm.weight", {d.hidden}, &L.attn_out_norm, norm));
      TS_RETURN_IF_ERROR(
          b.Bind(p + "pre_feedforward_layernorm.weight", {d.hidden}, &L.post_attn_norm, norm));
      TS_RETURN_IF_ERROR(
          b.Bind(p + "post_feedforward_layernorm.weight", {d.hidden}, &L.mlp_out_norm, norm));
    } else {
      TS_RETURN_IF_ERROR(
          b.Bind(p + "post_attention_layernorm.weight", {d.hidden}, &L.post_attn_norm, norm));
    }
    if (packed) continue;
    TS_RETURN_IF_ERROR(
        b.Bind(p + "mlp.gate_proj.weight", {d.intermediate, d.hidden}, &L.gate_proj));
    TS_RETURN_IF_ERROR(b.Bind(p + "mlp.up_proj.weight", {d.intermediate, d.hidden}, &L.up_proj));
    TS_RETURN_IF_ERROR(b.Bind(p + "mlp.down_proj.weight", {d.hidden, d.intermediate}, &L.down_proj,
                              0.0f, residual));
  }
  // Every other tensor must be one we knowingly ignore.
  for (const std::string& name : ckpt.Names()) {
    if (b.used().count(name) || (!packed && name == head_name)) continue;
    if (EndsWith(name, ".self_attn.rotary_emb.inv_freq")) {  // recomputed from rope_theta
      m.ignored.push_back(name);
      continue;
    }
    bool prefixed = false;
    for (const std::string& prefix : config.ignored_prefixes) prefixed |= name.starts_with(prefix);
    if (prefixed) continue;
    return Unsupported("checkpoint has tensor '" + name + "' that a " +
                       std::string(ModelFamilyName(config.family)) +
                       " model with this config.json does not use; refusing to run a model "
                       "tessera does not fully understand");
  }
  for (const std::string& prefix : config.ignored_prefixes) {
    size_t n = 0;
    for (const std::string& name : ckpt.Names()) n += name.starts_with(prefix) ? 1 : 0;
    if (n > 0) {
      m.ignored.push_back(std::to_string(n) + " tensors under " + prefix +
                          " (not part of the text model)");
    }
  }
  return m;
}

}  // namespace tessera
