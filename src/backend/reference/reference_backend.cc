#include "backend/reference/reference_backend.h"

#include <cmath>
#include <vector>

#include "model/kv_cache.h"
#include "model/rope.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

// One decoder layer's weights, widened to fp32. Empty vectors for absent optional tensors.
struct RefLayer {
  std::vector<float> input_norm;      // [hidden]
  std::vector<float> q_proj, q_bias;  // [q_dim, hidden], [q_dim]
  std::vector<float> k_proj, k_bias;  // [kv_dim, hidden], [kv_dim]
  std::vector<float> v_proj, v_bias;  // [kv_dim, hidden], [kv_dim]
  std::vector<float> o_proj, o_bias;  // [hidden, q_dim], [hidden]
  std::vector<float> q_norm, k_norm;  // [head_dim]
  std::vector<float> post_attn_norm;  // [hidden]
  std::vector<float> gate_proj;       // [intermediate, hidden]
  std::vector<float> up_proj;         // [intermediate, hidden]
  std::vector<float> down_proj;       // [hidden, intermediate]
};

Status WidenOptional(const TensorInfo* t, std::vector<float>* out) {
  if (t == nullptr) {
    out->clear();
    return Status::Ok();
  }
  return WidenToF32(*t, out);
}

// y[rows] = W[rows, cols] x[cols] (+ b)
void MatVec(const std::vector<float>& w, const std::vector<float>& bias, const float* x,
            int64_t rows, int64_t cols, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w.data() + r * cols;
    double acc = 0.0;
    for (int64_t c = 0; c < cols; ++c) acc += static_cast<double>(row[c]) * x[c];
    if (!bias.empty()) acc += bias[static_cast<size_t>(r)];
    y[r] = static_cast<float>(acc);
  }
}

// HF RMSNorm: x / sqrt(mean(x^2) + eps) * weight.
void RmsNorm(const float* x, const std::vector<float>& weight, int64_t n, double eps, float* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(static_cast<float>(x[i] * inv) * static_cast<double>(weight[i]));
  }
}

// The reference reads plain tensors only; a package's packed panels belong to another backend.
Status RefusePacked(const Checkpoint& ckpt) {
  if (!ckpt.tensors.packed) return Status::Ok();
  return Unsupported(ckpt.dir + " is a package of weights packed for the cpu backend (" +
                     ckpt.tensors.packed->format +
                     "); the reference backend needs the source checkpoint, or use placement cpu");
}

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }

  Status LoadLayers(const Checkpoint& ckpt, LayerRange range, const KvCacheConfig& kv) override {
    TS_RETURN_IF_ERROR(RefusePacked(ckpt));
    const ModelTensors& t = ckpt.tensors;
    dims_ = t.dims;
    eps_ = ckpt.config.rms_norm_eps;
    if (range.begin < 0 || range.end > dims_.layers || range.begin >= range.end) {
      return InvalidArgument("layer range [" + std::to_string(range.begin) + ", " +
                             std::to_string(range.end) + ") is not inside the model's " +
                             std::to_string(dims_.layers) + " layers");
    }
    range_ = range;
    layers_.assign(static_cast<size_t>(range.size()), RefLayer{});
    for (int64_t i = range.begin; i < range.end; ++i) {
      const LayerTensors& src = t.layers[static_cast<size_t>(i)];
      RefLayer& L = layers_[static_cast<size_t>(i - range.begin)];
      TS_RETURN_IF_ERROR(WidenToF32(*src.input_norm, &L.input_norm));
      TS_RETURN_IF_ERROR(WidenToF32(*src.q_proj, &L.q_proj));
      TS_RETURN_IF_ERROR(WidenOptional(src.q_bias, &L.q_bias));
      TS_RETURN_IF_ERROR(WidenToF32(*src.k_proj, &L.k_proj));
      TS_RETURN_IF_ERROR(WidenOptional(src.k_bias, &L.k_bias));
      TS_RETURN_IF_ERROR(WidenToF32(*src.v_proj, &L.v_proj));
      TS_RETURN_IF_ERROR(WidenOptional(src.v_bias, &L.v_bias));
      TS_RETURN_IF_ERROR(WidenToF32(*src.o_proj, &L.o_proj));
      TS_RETURN_IF_ERROR(WidenOptional(src.o_bias, &L.o_bias));
      TS_RETURN_IF_ERROR(WidenOptional(src.q_norm, &L.q_norm));
      TS_RETURN_IF_ERROR(WidenOptional(src.k_norm, &L.k_norm));
      TS_RETURN_IF_ERROR(WidenToF32(*src.post_attn_norm, &L.post_attn_norm));
      TS_RETURN_IF_ERROR(WidenToF32(*src.gate_proj, &L.gate_proj));
      TS_RETURN_IF_ERROR(WidenToF32(*src.up_proj, &L.up_proj));
      TS_RETURN_IF_ERROR(WidenToF32(*src.down_proj, &L.down_proj));
    }
    TS_RETURN_IF_ERROR(kv_.Allocate(kv.max_slots, range.size(), kv.max_seq, dims_.kv_dim));
    rope_ = RopeTable::Build(ckpt.config, dims_.head_dim, kv.max_seq);
    // Scratch for one token, sized once here.
    xn_.resize(static_cast<size_t>(dims_.hidden));
    q_.resize(static_cast<size_t>(dims_.q_dim));
    attn_.resize(static_cast<size_t>(dims_.q_dim));
    proj_.resize(static_cast<size_t>(dims_.hidden));
    gate_.resize(static_cast<size_t>(dims_.intermediate));
    up_.resize(static_cast<size_t>(dims_.intermediate));
    scores_.resize(static_cast<size_t>(kv.max_seq));
    return Status::Ok();
  }

  Status LoadHead(const Checkpoint& ckpt) override {
    TS_RETURN_IF_ERROR(RefusePacked(ckpt));
    dims_ = ckpt.tensors.dims;
    eps_ = ckpt.config.rms_norm_eps;
    TS_RETURN_IF_ERROR(WidenToF32(*ckpt.tensors.final_norm, &final_norm_));
    TS_RETURN_IF_ERROR(WidenToF32(*ckpt.tensors.lm_head, &lm_head_));
    head_xn_.resize(static_cast<size_t>(dims_.hidden));
    return Status::Ok();
  }

  Status ForwardLayers(const ForwardBatch& batch, std::span<float> hidden) override {
    if (layers_.empty()) return Internal("reference backend: no layers loaded");
    if (hidden.size() != static_cast<size_t>(batch.total_tokens() * dims_.hidden)) {
      return Internal("reference backend: hidden buffer does not match the batch");
    }
    float* row = hidden.data();
    for (const SequenceChunk& c : batch.chunks) {
      if (c.slot < 0 || c.slot >= kv_.slots()) return OutOfRange("KV slot out of range");
      if (c.start_pos < 0 || c.start_pos + c.n_tokens > kv_.max_seq()) {
        return OutOfRange("position " + std::to_string(c.start_pos + c.n_tokens) +
                          " is past the KV cache capacity of " + std::to_string(kv_.max_seq()));
      }
      // Token by token: each token's keys are cached before the next token attends, which is
      // exactly causal attention over the prompt.
      for (int64_t i = 0; i < c.n_tokens; ++i, row += dims_.hidden) {
        for (int64_t l = 0; l < range_.size(); ++l) {
          LayerStep(layers_[static_cast<size_t>(l)], l, c.slot, c.start_pos + i, row);
        }
      }
    }
    return Status::Ok();
  }

  Status ComputeLogits(std::span<const float> hidden, int64_t n_rows,
                       std::span<float> logits) override {
    if (lm_head_.empty()) return Internal("reference backend: LM head not loaded");
    if (hidden.size() != static_cast<size_t>(n_rows * dims_.hidden) ||
        logits.size() != static_cast<size_t>(n_rows * dims_.vocab)) {
      return Internal("reference backend: logits buffers do not match n_rows");
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      RmsNorm(hidden.data() + r * dims_.hidden, final_norm_, dims_.hidden, eps_, head_xn_.data());
      MatVec(lm_head_, {}, head_xn_.data(), dims_.vocab, dims_.hidden,
             logits.data() + r * dims_.vocab);
    }
    return Status::Ok();
  }

  size_t resident_weight_bytes() const override {
    size_t n = final_norm_.size() + lm_head_.size();
    for (const RefLayer& L : layers_) {
      for (const auto* v : {&L.input_norm, &L.q_proj, &L.q_bias, &L.k_proj, &L.k_bias, &L.v_proj,
                            &L.v_bias, &L.o_proj, &L.o_bias, &L.q_norm, &L.k_norm,
                            &L.post_attn_norm, &L.gate_proj, &L.up_proj, &L.down_proj}) {
        n += v->size();
      }
    }
    return n * sizeof(float);
  }

 private:
  // rotate_half RoPE on one head vector: pairs (x[i], x[i + half]).
  void ApplyRope(float* x, int64_t pos) const {
    const int64_t half = rope_.half();
    const float* cs = rope_.cos_at(pos);
    const float* sn = rope_.sin_at(pos);
    for (int64_t i = 0; i < half; ++i) {
      float a = x[i], b = x[i + half];
      x[i] = a * cs[i] - b * sn[i];
      x[i + half] = b * cs[i] + a * sn[i];
    }
  }

  // One token through one layer; x is the residual stream [hidden], updated in place.
  void LayerStep(const RefLayer& L, int64_t layer, int slot, int64_t pos, float* x) {
    const ModelDims& d = dims_;
    RmsNorm(x, L.input_norm, d.hidden, eps_, xn_.data());
    float* k = kv_.Key(slot, layer, pos);
    float* v = kv_.Value(slot, layer, pos);
    MatVec(L.q_proj, L.q_bias, xn_.data(), d.q_dim, d.hidden, q_.data());
    MatVec(L.k_proj, L.k_bias, xn_.data(), d.kv_dim, d.hidden, k);
    MatVec(L.v_proj, L.v_bias, xn_.data(), d.kv_dim, d.hidden, v);
    for (int64_t h = 0; h < d.heads; ++h) {
      float* qh = q_.data() + h * d.head_dim;
      if (d.qk_norm) RmsNorm(qh, L.q_norm, d.head_dim, eps_, qh);
      ApplyRope(qh, pos);
    }
    for (int64_t h = 0; h < d.kv_heads; ++h) {
      float* kh = k + h * d.head_dim;
      if (d.qk_norm) RmsNorm(kh, L.k_norm, d.head_dim, eps_, kh);
      ApplyRope(kh, pos);
    }
    // Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
    const int64_t group = d.heads / d.kv_heads;
    const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* qh = q_.data() + h * d.head_dim;
      const int64_t kvh = h / group;
      double max_score = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        const float* kt = kv_.Key(slot, layer, t) + kvh * d.head_dim;
        double dot = 0.0;
        for (int64_t i = 0; i < d.head_dim; ++i) dot += static_cast<double>(qh[i]) * kt[i];
        scores_[static_cast<size_t>(t)] = dot * scale;
        if (dot * scale > max_score) max_score = dot * scale;
      }
      double sum = 0.0;
      for (int64_t t = 0; t <= pos; ++t) {
        double e = std::exp(scores_[static_cast<size_t>(t)] - max_score);
        scores_[static_cast<size_t>(t)] = e;
        sum += e;
      }
      float* out = attn_.data() + h * d.head_dim;
      for (int64_t i = 0; i < d.head_dim; ++i) {
        double acc = 0.0;
        for (int64_t t = 0; t <= pos; ++t) {
          acc += scores_[static_cast<size_t>(t)] * kv_.Value(slot, layer, t)[kvh * d.head_dim + i];
        }
        out[i] = static_cast<float>(acc / sum);
      }
    }
    MatVec(L.o_proj, L.o_bias, attn_.data(), d.hidden, d.q_dim, proj_.data());
    for (int64_t i = 0; i < d.hidden; ++i) x[i] += proj_[static_cast<size_t>(i)];

    // SwiGLU MLP: down(silu(gate(x)) * up(x)).
    RmsNorm(x, L.post_attn_norm, d.hidden, eps_, xn_.data());
    MatVec(L.gate_proj, {}, xn_.data(), d.intermediate, d.hidden, gate_.data());
    MatVec(L.up_proj, {}, xn_.data(), d.intermediate, d.hidden, up_.data());
    for (int64_t i = 0; i < d.intermediate; ++i) {
      double g = gate_[static_cast<size_t>(i)];
      gate_[static_cast<size_t>(i)] =
          static_cast<float>(g / (1.0 + std::exp(-g)) * up_[static_cast<size_t>(i)]);
    }
    MatVec(L.down_proj, {}, gate_.data(), d.hidden, d.intermediate, proj_.data());
    for (int64_t i = 0; i < d.hidden; ++i) x[i] += proj_[static_cast<size_t>(i)];
  }

  ModelDims dims_;
  double eps_ = 1e-6;
  LayerRange range_;
  std::vector<RefLayer> layers_;
  KvCache kv_;
  RopeTable rope_;                 // shared with every backend (model/rope.h)
  std::vector<float> final_norm_;  // [hidden]
  std::vector<float> lm_head_;     // [vocab, hidden]
  // Per-token scratch, sized at load.
  std::vector<float> xn_, q_, attn_, proj_, gate_, up_, head_xn_;
  std::vector<double> scores_;  // [max_seq]
};

}  // namespace

std::unique_ptr<Backend> MakeReferenceBackend() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace tessera
