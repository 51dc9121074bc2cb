#include "backend/reference/reference_backend.h"

#include <cmath>
#include <vector>

#include "backend/kv_block_table.h"
#include "model/kv_cache.h"
#include "model/recurrent_state.h"
#include "model/rope.h"
#include "model/tensor_convert.h"

namespace tessera {
namespace {

// One decoder layer's weights, widened to fp32 with the spec's folds applied (model_tensors.h).
// Empty vectors for what the layer's kind or the family does not have.
struct RefLayer {
  LayerSpec spec;
  int64_t cache_index = 0;        // into the KV cache (attention) or the recurrent state (DeltaNet)
  std::vector<float> input_norm;  // [hidden]
  std::vector<float> q_proj, q_bias;  // [q_proj_rows, hidden], [q_dim]
  std::vector<float> k_proj, k_bias;  // [kv_dim, hidden], [kv_dim]
  std::vector<float> v_proj, v_bias;  // [kv_dim, hidden], [kv_dim]
  std::vector<float> o_proj, o_bias;  // [hidden, q_dim], [hidden]
  std::vector<float> q_norm, k_norm;  // [head_dim]
  std::vector<float> attn_out_norm;   // [hidden]
  std::vector<float> in_proj_qkv;     // [conv_width, hidden]
  std::vector<float> in_proj_z;       // [v_width, hidden]
  std::vector<float> in_proj_b;       // [value_heads, hidden]
  std::vector<float> in_proj_a;       // [value_heads, hidden]
  std::vector<float> conv1d;          // [conv_width][conv_kernel]
  std::vector<float> dt_bias, a_log;  // [value_heads]
  std::vector<float> delta_norm;      // [value_dim]
  std::vector<float> out_proj;        // [hidden, v_width]
  std::vector<float> post_attn_norm;  // [hidden]
  std::vector<float> gate_proj;       // [intermediate, hidden]
  std::vector<float> up_proj;         // [intermediate, hidden]
  std::vector<float> down_proj;       // [hidden, intermediate]
  std::vector<float> mlp_out_norm;    // [hidden]

  std::vector<const std::vector<float>*> all() const {
    return {&input_norm,  &q_proj,      &q_bias,    &k_proj,         &k_bias,    &v_proj,
            &v_bias,      &o_proj,      &o_bias,    &q_norm,         &k_norm,    &attn_out_norm,
            &in_proj_qkv, &in_proj_z,   &in_proj_b, &in_proj_a,      &conv1d,    &dt_bias,
            &a_log,       &delta_norm,  &out_proj,  &post_attn_norm, &gate_proj, &up_proj,
            &down_proj,   &mlp_out_norm};
  }
};

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

// HF RMSNorm: x / sqrt(mean(x^2) + eps) * weight ((1 + w) styles arrive folded).
void RmsNorm(const float* x, const float* weight, int64_t n, double eps, float* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(static_cast<float>(x[i] * inv) * static_cast<double>(weight[i]));
  }
}

double Sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double Silu(double x) {
  return x * Sigmoid(x);
}
// torch's softplus (beta 1, threshold 20).
double Softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}
double GeluTanh(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// The reference reads plain tensors only; a package's packed panels belong to another backend.
Status RefusePacked(const Checkpoint& ckpt) {
  if (!ckpt.tensors.packed) return Status::Ok();
  return Unsupported(ckpt.dir + " is a package of weights packed for the cpu backend (" +
                     ckpt.tensors.packed->format +
                     "); the reference backend needs the source checkpoint, or use placement cpu");
}

// Recurrent snapshots kept per slot (see RecurrentState).
constexpr int kStateSnapshots = 2;

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }

  Status LoadLayers(const Checkpoint& ckpt, LayerRange range, const KvCacheConfig& kv) override {
    TS_RETURN_IF_ERROR(RefusePacked(ckpt));
    const ModelTensors& t = ckpt.tensors;
    spec_ = t.spec;
    if (range.begin < 0 || range.end > spec_.layers || range.begin >= range.end) {
      return InvalidArgument("layer range [" + std::to_string(range.begin) + ", " +
                             std::to_string(range.end) + ") is not inside the model's " +
                             std::to_string(spec_.layers) + " layers");
    }
    range_ = range;
    layers_.assign(static_cast<size_t>(range.size()), RefLayer{});
    int64_t attention_layers = 0, recurrent_layers = 0;
    for (int64_t i = range.begin; i < range.end; ++i) {
      const LayerTensors& src = t.layers[static_cast<size_t>(i)];
      RefLayer& L = layers_[static_cast<size_t>(i - range.begin)];
      L.spec = spec_.layer[static_cast<size_t>(i)];
      L.cache_index = L.spec.is_attention() ? attention_layers++ : recurrent_layers++;
      const std::pair<const TensorRef*, std::vector<float>*> fields[] = {
          {&src.input_norm, &L.input_norm},
          {&src.q_proj, &L.q_proj},
          {&src.q_bias, &L.q_bias},
          {&src.k_proj, &L.k_proj},
          {&src.k_bias, &L.k_bias},
          {&src.v_proj, &L.v_proj},
          {&src.v_bias, &L.v_bias},
          {&src.o_proj, &L.o_proj},
          {&src.o_bias, &L.o_bias},
          {&src.q_norm, &L.q_norm},
          {&src.k_norm, &L.k_norm},
          {&src.attn_out_norm, &L.attn_out_norm},
          {&src.in_proj_qkv, &L.in_proj_qkv},
          {&src.in_proj_z, &L.in_proj_z},
          {&src.in_proj_b, &L.in_proj_b},
          {&src.in_proj_a, &L.in_proj_a},
          {&src.conv1d, &L.conv1d},
          {&src.dt_bias, &L.dt_bias},
          {&src.a_log, &L.a_log},
          {&src.delta_norm, &L.delta_norm},
          {&src.out_proj, &L.out_proj},
          {&src.post_attn_norm, &L.post_attn_norm},
          {&src.gate_proj, &L.gate_proj},
          {&src.up_proj, &L.up_proj},
          {&src.down_proj, &L.down_proj},
          {&src.mlp_out_norm, &L.mlp_out_norm}};
      for (const auto& [ref, out] : fields) TS_RETURN_IF_ERROR(WidenToF32OrClear(*ref, out));
    }
    kv_tables_.Init(kv);
    if (kv.pool_blocks() > INT32_MAX)
      return InvalidArgument("reference backend: too many KV blocks");
    if (attention_layers > 0) {
      // The block pool (backend.h), sliding layers included: [block][layer][position][kv_dim].
      TS_RETURN_IF_ERROR(kv_.Allocate(static_cast<int>(kv.pool_blocks()), attention_layers,
                                      kKvBlockTokens, spec_.kv_dim));
    }
    if (recurrent_layers > 0) {
      const DeltaNetSpec& n = *spec_.deltanet;
      TS_RETURN_IF_ERROR(state_.Allocate(kv.max_slots, recurrent_layers,
                                         n.conv_state_floats() + n.matrix_state_floats(),
                                         kStateSnapshots, kv.kept_states));
      mixed_.resize(static_cast<size_t>(n.conv_width()));
      z_.resize(static_cast<size_t>(n.v_width()));
      ba_.resize(static_cast<size_t>(2 * n.value_heads));
      delta_out_.resize(static_cast<size_t>(n.v_width()));
    }
    ropes_.clear();
    for (const RopeSpec& r : spec_.ropes) ropes_.push_back(RopeTable::Build(r, kv.max_seq));
    max_seq_ = kv.max_seq;
    slots_ = kv.max_slots;
    // Scratch for one token, sized once here.
    xn_.resize(static_cast<size_t>(spec_.hidden));
    q_.resize(static_cast<size_t>(spec_.q_proj_rows()));
    k_.resize(static_cast<size_t>(spec_.kv_dim));
    attn_.resize(static_cast<size_t>(spec_.q_dim));
    proj_.resize(static_cast<size_t>(spec_.hidden));
    gate_.resize(static_cast<size_t>(spec_.intermediate));
    up_.resize(static_cast<size_t>(spec_.intermediate));
    scores_.resize(static_cast<size_t>(kv.max_seq));
    return Status::Ok();
  }

  Status LoadHead(const Checkpoint& ckpt) override {
    TS_RETURN_IF_ERROR(RefusePacked(ckpt));
    spec_ = ckpt.tensors.spec;
    TS_RETURN_IF_ERROR(WidenToF32(ckpt.tensors.final_norm, &final_norm_));
    TS_RETURN_IF_ERROR(WidenToF32(ckpt.tensors.lm_head, &lm_head_));
    head_xn_.resize(static_cast<size_t>(spec_.hidden));
    return Status::Ok();
  }

  Status ForwardLayers(const ForwardBatch& batch, std::span<float> hidden) override {
    if (layers_.empty()) return Internal("reference backend: no layers loaded");
    if (hidden.size() != static_cast<size_t>(batch.total_tokens() * spec_.hidden)) {
      return Internal("reference backend: hidden buffer does not match the batch");
    }
    float* row = hidden.data();
    for (const SequenceChunk& c : batch.chunks) {
      if (c.slot < 0 || c.slot >= slots_) return OutOfRange("KV slot out of range");
      if (c.start_pos < 0 || c.start_pos + c.n_tokens > max_seq_) {
        return OutOfRange("position " + std::to_string(c.start_pos + c.n_tokens) +
                          " is past the KV cache capacity of " + std::to_string(max_seq_));
      }
      TS_ASSIGN_OR_RETURN(blocks_, kv_tables_.For(c));
      TS_RETURN_IF_ERROR(state_.Prepare(c.slot, c.start_pos));
      // Token by token: each token's keys (and recurrent state) are updated before the next
      // token reads them, which is exactly causal attention over the prompt.
      for (int64_t i = 0; i < c.n_tokens; ++i, row += spec_.hidden) {
        for (RefLayer& L : layers_) {
          if (L.spec.is_attention()) {
            AttentionStep(L, c.start_pos + i, row);
          } else {
            DeltaNetStep(L, c.slot, row);
          }
          MlpStep(L, row);
        }
      }
      state_.Finish(c.slot, c.start_pos + c.n_tokens, c.n_tokens > 1);  // snapshot a prompt chunk
    }
    return Status::Ok();
  }

  Status ComputeLogits(std::span<const float> hidden, int64_t n_rows, std::span<float> logits,
                       LogitRows /*kind: every row is computed alike*/) override {
    if (lm_head_.empty()) return Internal("reference backend: LM head not loaded");
    if (hidden.size() != static_cast<size_t>(n_rows * spec_.hidden) ||
        logits.size() != static_cast<size_t>(n_rows * spec_.vocab)) {
      return Internal("reference backend: logits buffers do not match n_rows");
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      RmsNorm(hidden.data() + r * spec_.hidden, final_norm_.data(), spec_.hidden, spec_.eps,
              head_xn_.data());
      MatVec(lm_head_, {}, head_xn_.data(), spec_.vocab, spec_.hidden,
             logits.data() + r * spec_.vocab);
    }
    return Status::Ok();
  }

  Status FinalNorm(std::span<const float> hidden, int64_t n_rows, std::span<float> out) override {
    if (final_norm_.empty()) return Internal("reference backend: final norm not loaded");
    if (n_rows < 0 || hidden.size() != static_cast<size_t>(n_rows * spec_.hidden) ||
        out.size() != hidden.size()) {
      return Internal("reference backend: final-norm buffers do not match n_rows");
    }
    for (int64_t r = 0; r < n_rows; ++r) {
      RmsNorm(hidden.data() + r * spec_.hidden, final_norm_.data(), spec_.hidden, spec_.eps,
              out.data() + r * spec_.hidden);
    }
    return Status::Ok();
  }

  int64_t ResumablePosition(int slot, int64_t wanted) const override {
    return state_.Resumable(slot, wanted);
  }

  Status CopySlotState(int from, int to, int64_t positions, int64_t source_positions) override {
    if (from < 0 || from >= slots_ || to < 0 || to >= slots_ || from == to || positions < 0 ||
        positions > source_positions || source_positions > max_seq_) {
      return InvalidArgument("reference backend: bad sequence copy");
    }
    return state_.CopyTo(from, to, positions);  // every attention position is in the pool
  }

  Status KeepSlotState(int slot, int64_t positions, int entry) override {
    return state_.Keep(slot, positions, entry);
  }
  Status RestoreSlotState(int entry, int slot, int64_t positions) override {
    return state_.Restore(entry, slot, positions);
  }

  Status CopyKvBlock(int32_t from, int32_t to, int64_t positions) override {
    TS_RETURN_IF_ERROR(kv_tables_.CheckBlockCopy(from, to, positions));
    if (kv_.slots() > 0 && from != to) kv_.CopyPositions(from, to, 0, positions);
    return Status::Ok();
  }

  size_t resident_weight_bytes() const override {
    size_t n = final_norm_.size() + lm_head_.size();
    for (const RefLayer& L : layers_) {
      for (const auto* v : L.all()) n += v->size();
    }
    return n * sizeof(float);
  }

 private:
  // rotate_half RoPE on the first rotary_dim dims of one head: pairs (x[i], x[i + half]).
  static void ApplyRope(const RopeTable& rope, float* x, int64_t pos) {
    const int64_t half = rope.half();
    const float* cs = rope.cos_at(pos);
    const float* sn = rope.sin_at(pos);
    for (int64_t i = 0; i < half; ++i) {
      float a = x[i], b = x[i + half];
      x[i] = a * cs[i] - b * sn[i];
      x[i + half] = b * cs[i] + a * sn[i];
    }
  }

  // Adds a branch's output to the residual stream, through its output norm if it has one.
  void AddBranch(const std::vector<float>& out_norm, float* x) {
    if (!out_norm.empty())
      RmsNorm(proj_.data(), out_norm.data(), spec_.hidden, spec_.eps, proj_.data());
    for (int64_t i = 0; i < spec_.hidden; ++i) x[i] += proj_[static_cast<size_t>(i)];
  }

  // One token through one attention layer; x is the residual stream [hidden], updated in place.
  // The cache of `layer` at position t of the current chunk's sequence (blocks_).
  float* Key(int64_t layer, int64_t t) {
    return kv_.Key(blocks_[t >> kKvBlockShift], layer, t & (kKvBlockTokens - 1));
  }
  float* Value(int64_t layer, int64_t t) {
    return kv_.Value(blocks_[t >> kKvBlockShift], layer, t & (kKvBlockTokens - 1));
  }

  void AttentionStep(const RefLayer& L, int64_t pos, float* x) {
    const ModelSpec& d = spec_;
    const RopeTable& rope = ropes_[static_cast<size_t>(L.spec.rope)];
    RmsNorm(x, L.input_norm.data(), d.hidden, d.eps, xn_.data());
    float* k = Key(L.cache_index, pos);
    float* v = Value(L.cache_index, pos);
    MatVec(L.q_proj, L.q_bias, xn_.data(), d.q_proj_rows(), d.hidden, q_.data());
    MatVec(L.k_proj, L.k_bias, xn_.data(), d.kv_dim, d.hidden, k);
    MatVec(L.v_proj, L.v_bias, xn_.data(), d.kv_dim, d.hidden, v);
    // With an output gate, q_proj's rows are [query | gate] per head (and there is no bias).
    const int64_t q_stride = d.output_gate ? 2 * d.head_dim : d.head_dim;
    for (int64_t h = 0; h < d.heads; ++h) {
      float* qh = q_.data() + h * q_stride;
      if (d.qk_norm) RmsNorm(qh, L.q_norm.data(), d.head_dim, d.eps, qh);
      ApplyRope(rope, qh, pos);
    }
    for (int64_t h = 0; h < d.kv_heads; ++h) {
      float* kh = k + h * d.head_dim;
      if (d.qk_norm) RmsNorm(kh, L.k_norm.data(), d.head_dim, d.eps, kh);
      ApplyRope(rope, kh, pos);
    }
    // Grouped-query attention: query head h reads KV head h / (heads / kv_heads).
    const int64_t group = d.heads / d.kv_heads;
    const int64_t first = L.spec.window > 0 ? std::max<int64_t>(0, pos - L.spec.window + 1) : 0;
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* qh = q_.data() + h * q_stride;
      const int64_t kvh = h / group;
      double max_score = -INFINITY;
      for (int64_t t = first; t <= pos; ++t) {
        const float* kt = Key(L.cache_index, t) + kvh * d.head_dim;
        double dot = 0.0;
        for (int64_t i = 0; i < d.head_dim; ++i) dot += static_cast<double>(qh[i]) * kt[i];
        scores_[static_cast<size_t>(t)] = dot * d.attention_scale;
        max_score = std::max(max_score, dot * d.attention_scale);
      }
      double sum = 0.0;
      for (int64_t t = first; t <= pos; ++t) {
        double e = std::exp(scores_[static_cast<size_t>(t)] - max_score);
        scores_[static_cast<size_t>(t)] = e;
        sum += e;
      }
      float* out = attn_.data() + h * d.head_dim;
      for (int64_t i = 0; i < d.head_dim; ++i) {
        double acc = 0.0;
        for (int64_t t = first; t <= pos; ++t) {
          acc += scores_[static_cast<size_t>(t)] * Value(L.cache_index, t)[kvh * d.head_dim + i];
        }
        double o = acc / sum;
        if (d.output_gate) o *= Sigmoid(qh[d.head_dim + i]);
        out[i] = static_cast<float>(o);
      }
    }
    MatVec(L.o_proj, L.o_bias, attn_.data(), d.hidden, d.q_dim, proj_.data());
    AddBranch(L.attn_out_norm, x);
  }

  // One token through one Gated DeltaNet layer (the recurrence as published, per value head:
  // S <- e^g S; S <- S + k (beta (v - S^T k))^T; o = S^T q), updating the slot's state.
  void DeltaNetStep(const RefLayer& L, int slot, float* x) {
    const ModelSpec& d = spec_;
    const DeltaNetSpec& n = *d.deltanet;
    RmsNorm(x, L.input_norm.data(), d.hidden, d.eps, xn_.data());
    MatVec(L.in_proj_qkv, {}, xn_.data(), n.conv_width(), d.hidden, mixed_.data());
    MatVec(L.in_proj_z, {}, xn_.data(), n.v_width(), d.hidden, z_.data());
    MatVec(L.in_proj_b, {}, xn_.data(), n.value_heads, d.hidden, ba_.data());
    MatVec(L.in_proj_a, {}, xn_.data(), n.value_heads, d.hidden, ba_.data() + n.value_heads);
    float* conv_state = state_.Live(slot, L.cache_index);  // [kernel - 1][conv_width]
    float* matrices = conv_state + n.conv_state_floats();  // [value_heads][key_dim][value_dim]
    // Causal depthwise conv over the last kernel inputs (oldest first), then SiLU.
    const int64_t kernel = n.conv_kernel, width = n.conv_width();
    for (int64_t c = 0; c < width; ++c) {
      const float* w = L.conv1d.data() + c * kernel;
      double acc = static_cast<double>(w[kernel - 1]) * mixed_[static_cast<size_t>(c)];
      for (int64_t j = 0; j + 1 < kernel; ++j)
        acc += static_cast<double>(w[j]) * conv_state[j * width + c];
      for (int64_t j = 0; j + 2 < kernel; ++j)
        conv_state[j * width + c] = conv_state[(j + 1) * width + c];
      if (kernel > 1) conv_state[(kernel - 2) * width + c] = mixed_[static_cast<size_t>(c)];
      mixed_[static_cast<size_t>(c)] = static_cast<float>(Silu(acc));
    }
    float* q = mixed_.data();
    float* k = q + n.qk_width();
    const float* v = k + n.qk_width();
    // L2-normalised q and k (rsqrt(sum + 1e-6)), q also scaled by 1/sqrt(key_dim).
    for (int64_t h = 0; h < n.key_heads; ++h) {
      for (float* vec : {q + h * n.key_dim, k + h * n.key_dim}) {
        double ss = 0.0;
        for (int64_t i = 0; i < n.key_dim; ++i) ss += static_cast<double>(vec[i]) * vec[i];
        double inv = 1.0 / std::sqrt(ss + 1e-6);
        if (vec == q + h * n.key_dim) inv /= std::sqrt(static_cast<double>(n.key_dim));
        for (int64_t i = 0; i < n.key_dim; ++i) vec[i] = static_cast<float>(vec[i] * inv);
      }
    }
    const int64_t ratio = n.value_heads / n.key_heads;
    for (int64_t h = 0; h < n.value_heads; ++h) {
      const float* qh = q + (h / ratio) * n.key_dim;
      const float* kh = k + (h / ratio) * n.key_dim;
      const float* vh = v + h * n.value_dim;
      float* S = matrices + h * n.key_dim * n.value_dim;  // [key_dim][value_dim]
      const double beta = Sigmoid(ba_[static_cast<size_t>(h)]);
      const double g = -std::exp(static_cast<double>(L.a_log[static_cast<size_t>(h)])) *
                       Softplus(static_cast<double>(ba_[static_cast<size_t>(n.value_heads + h)]) +
                                L.dt_bias[static_cast<size_t>(h)]);
      const double decay = std::exp(g);
      float* o = delta_out_.data() + h * n.value_dim;
      for (int64_t j = 0; j < n.value_dim; ++j) {
        double mem = 0.0;
        for (int64_t i = 0; i < n.key_dim; ++i) mem += decay * S[i * n.value_dim + j] * kh[i];
        const double delta = (vh[j] - mem) * beta;
        double out = 0.0;
        for (int64_t i = 0; i < n.key_dim; ++i) {
          const double s = decay * S[i * n.value_dim + j] + kh[i] * delta;
          S[i * n.value_dim + j] = static_cast<float>(s);
          out += s * qh[i];
        }
        o[j] = static_cast<float>(out);
      }
      // Plain-weight RMSNorm per head, then the SiLU gate from z.
      RmsNorm(o, L.delta_norm.data(), n.value_dim, d.eps, o);
      for (int64_t j = 0; j < n.value_dim; ++j) {
        o[j] = static_cast<float>(o[j] * Silu(z_[static_cast<size_t>(h * n.value_dim + j)]));
      }
    }
    MatVec(L.out_proj, {}, delta_out_.data(), d.hidden, n.v_width(), proj_.data());
    AddBranch({}, x);
  }

  // Gated MLP: down(act(gate(x)) * up(x)).
  void MlpStep(const RefLayer& L, float* x) {
    const ModelSpec& d = spec_;
    RmsNorm(x, L.post_attn_norm.data(), d.hidden, d.eps, xn_.data());
    MatVec(L.gate_proj, {}, xn_.data(), d.intermediate, d.hidden, gate_.data());
    MatVec(L.up_proj, {}, xn_.data(), d.intermediate, d.hidden, up_.data());
    for (int64_t i = 0; i < d.intermediate; ++i) {
      const double g = gate_[static_cast<size_t>(i)];
      const double a = d.activation == Activation::kGeluTanh ? GeluTanh(g) : Silu(g);
      gate_[static_cast<size_t>(i)] = static_cast<float>(a * up_[static_cast<size_t>(i)]);
    }
    MatVec(L.down_proj, {}, gate_.data(), d.hidden, d.intermediate, proj_.data());
    AddBranch(L.mlp_out_norm, x);
  }

  ModelSpec spec_;
  LayerRange range_;
  int64_t max_seq_ = 0;
  int slots_ = 0;
  std::vector<RefLayer> layers_;
  KvCache kv_;  // attention layers only: the block pool
  KvBlockTables kv_tables_;
  const int32_t* blocks_ = nullptr;  // the block table of the chunk being run
  RecurrentState state_;             // DeltaNet layers only
  std::vector<RopeTable> ropes_;     // one per spec_.ropes entry (model/rope.h)
  std::vector<float> final_norm_;    // [hidden]
  std::vector<float> lm_head_;       // [vocab, hidden]
  // Per-token scratch, sized at load.
  std::vector<float> xn_, q_, k_, attn_, proj_, gate_, up_, head_xn_;
  std::vector<float> mixed_, z_, ba_, delta_out_;
  std::vector<double> scores_;  // [max_seq]
};

}  // namespace

std::unique_ptr<Backend> MakeReferenceBackend() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace tessera
