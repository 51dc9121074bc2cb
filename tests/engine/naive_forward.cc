#include "naive_forward.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "base/half.h"
#include "format/safetensors.h"

namespace tessera::test {
namespace {

// Everything here is written from the published model code (transformers' modeling files and
// MiniCPM's), reading raw tensors by their checkpoint names: it does not use the runtime's
// ModelSpec, its folded TensorRefs, its RoPE tables or any backend code.

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

constexpr double kPi = 3.14159265358979323846;

class Weights {
 public:
  Weights(const Checkpoint& ckpt) : ckpt_(ckpt) {}
  const TensorInfo* Find(const std::string& name) const { return ckpt_.files.Find(name); }
  Vec Load(const std::string& name) const {
    const TensorInfo* t = Find(name);
    if (t == nullptr) throw std::runtime_error("naive forward: no tensor " + name);
    std::vector<float> f(t->num_elements);
    if (!CopyTensorToF32(*t, f).ok()) throw std::runtime_error("cannot read " + name);
    return Vec(f.begin(), f.end());
  }
  // x[n][in] * W[out][in]^T (+ b) -> [n][out]
  Mat Linear(const Mat& x, const std::string& w_name, const std::string& b_name = "") const {
    const TensorInfo* wt = Find(w_name);
    if (wt == nullptr) throw std::runtime_error("naive forward: no tensor " + w_name);
    Vec w = Load(w_name);
    Vec b = !b_name.empty() && Find(b_name) ? Load(b_name) : Vec{};
    size_t out = static_cast<size_t>(wt->shape[0]), in = static_cast<size_t>(wt->shape[1]);
    Mat y(x.size(), Vec(out, 0.0));
    for (size_t t = 0; t < x.size(); ++t) {
      for (size_t o = 0; o < out; ++o) {
        double acc = b.empty() ? 0.0 : b[o];
        for (size_t i = 0; i < in; ++i) acc += w[o * in + i] * x[t][i];
        y[t][o] = acc;
      }
    }
    return y;
  }

 private:
  const Checkpoint& ckpt_;
};

// RMSNorm; `one_plus` for the zero-centred (1 + w) form of Qwen3.5 and Gemma 3.
Vec Norm(const Vec& x, const Vec& w, double eps, bool one_plus) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * (one_plus ? 1.0 + w[i] : w[i]);
  return y;
}

double Sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double Silu(double x) {
  return x * Sigmoid(x);
}

// The rotation frequency of pair i of a rotary width `rd`, with Llama 3's band scaling
// (transformers' _compute_llama3_parameters), linear scaling, or LongRoPE's short factors.
double Frequency(const ModelConfig& c, double theta, bool local, size_t i, size_t rd) {
  double base = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rd));
  if (local) return base;
  if (c.rope_longrope) base /= c.rope_longrope->short_factor[i];
  base /= c.rope_linear_factor;
  if (!c.rope_llama3) return base;
  const Llama3RopeScaling& s = *c.rope_llama3;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double wavelen = 2.0 * kPi / base;
  const double scaled = wavelen > old_context / s.low_freq_factor ? base / s.factor : base;
  const double smooth =
      (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const double smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  const bool medium =
      !(wavelen < old_context / s.high_freq_factor) && !(wavelen > old_context / s.low_freq_factor);
  return medium ? smoothed : scaled;
}

// rotate_half RoPE on the first rd dims of the head slice [off, off + hd) at position pos.
void Rope(Vec& v, size_t off, size_t rd, size_t pos, const ModelConfig& c, bool local) {
  const double theta = local ? c.rope_local_theta : c.rope_theta;
  double mscale = 1.0;
  if (c.rope_longrope && !local) {
    const double orig = static_cast<double>(c.rope_longrope->original_max_position_embeddings);
    const double scale = static_cast<double>(c.max_position_embeddings) / orig;
    if (scale > 1.0) mscale = std::sqrt(1.0 + std::log(scale) / std::log(orig));
  }
  const size_t half = rd / 2;
  for (size_t i = 0; i < half; ++i) {
    const double f = Frequency(c, theta, local, i, rd);
    const double cs = std::cos(pos * f) * mscale, sn = std::sin(pos * f) * mscale;
    const double a = v[off + i], b = v[off + i + half];
    v[off + i] = a * cs - b * sn;
    v[off + i + half] = b * cs + a * sn;
  }
}

// Softmax attention (grouped, causal, optionally windowed and output-gated) of one layer.
Mat Attention(const Weights& W, const ModelConfig& c, const std::string& p, const Mat& h,
              bool sliding, bool one_plus) {
  const size_t n = h.size(), hd = static_cast<size_t>(c.head_dim);
  const size_t nh = static_cast<size_t>(c.num_heads), nkv = static_cast<size_t>(c.num_kv_heads);
  const bool gated = c.attn_output_gate;
  Mat qg = W.Linear(h, p + "self_attn.q_proj.weight", p + "self_attn.q_proj.bias");
  Mat k = W.Linear(h, p + "self_attn.k_proj.weight", p + "self_attn.k_proj.bias");
  Mat v = W.Linear(h, p + "self_attn.v_proj.weight", p + "self_attn.v_proj.bias");
  Mat q(n, Vec(nh * hd)), gate(n, Vec(nh * hd, 0.0));
  for (size_t t = 0; t < n; ++t) {
    for (size_t hh = 0; hh < nh; ++hh) {
      for (size_t i = 0; i < hd; ++i) {
        q[t][hh * hd + i] = gated ? qg[t][hh * 2 * hd + i] : qg[t][hh * hd + i];
        if (gated) gate[t][hh * hd + i] = qg[t][hh * 2 * hd + hd + i];
      }
    }
  }
  const bool qk_norm = W.Find(p + "self_attn.q_norm.weight") != nullptr;
  Vec qn = qk_norm ? W.Load(p + "self_attn.q_norm.weight") : Vec{};
  Vec kn = qk_norm ? W.Load(p + "self_attn.k_norm.weight") : Vec{};
  const size_t rd = static_cast<size_t>(static_cast<double>(hd) * c.partial_rotary_factor);
  auto head_norm = [&](Vec& row, size_t hh, const Vec& w) {
    Vec head(row.begin() + hh * hd, row.begin() + (hh + 1) * hd);
    head = Norm(head, w, c.rms_norm_eps, one_plus);
    std::copy(head.begin(), head.end(), row.begin() + hh * hd);
  };
  for (size_t t = 0; t < n; ++t) {
    for (size_t hh = 0; hh < nh; ++hh) {
      if (qk_norm) head_norm(q[t], hh, qn);
      Rope(q[t], hh * hd, rd, t, c, sliding);
    }
    for (size_t hh = 0; hh < nkv; ++hh) {
      if (qk_norm) head_norm(k[t], hh, kn);
      Rope(k[t], hh * hd, rd, t, c, sliding);
    }
  }
  const double scale =
      1.0 / std::sqrt(c.query_pre_attn_scalar ? *c.query_pre_attn_scalar : static_cast<double>(hd));
  const size_t window = sliding ? static_cast<size_t>(c.sliding_window) : 0;
  Mat attn(n, Vec(nh * hd, 0.0));
  for (size_t t = 0; t < n; ++t) {
    const size_t first = window > 0 && t + 1 > window ? t + 1 - window : 0;
    for (size_t hh = 0; hh < nh; ++hh) {
      size_t g = hh / (nh / nkv);
      Vec pr(t + 1, 0.0);
      double mx = -1e300;
      for (size_t s = first; s <= t; ++s) {
        double d = 0;
        for (size_t i = 0; i < hd; ++i) d += q[t][hh * hd + i] * k[s][g * hd + i];
        pr[s] = d * scale;
        mx = std::max(mx, pr[s]);
      }
      double z = 0;
      for (size_t s = first; s <= t; ++s) z += (pr[s] = std::exp(pr[s] - mx));
      for (size_t s = first; s <= t; ++s) {
        for (size_t i = 0; i < hd; ++i) attn[t][hh * hd + i] += pr[s] / z * v[s][g * hd + i];
      }
      if (gated) {
        for (size_t i = 0; i < hd; ++i) attn[t][hh * hd + i] *= Sigmoid(gate[t][hh * hd + i]);
      }
    }
  }
  return W.Linear(attn, p + "self_attn.o_proj.weight", p + "self_attn.o_proj.bias");
}

// Gated DeltaNet over the whole sequence, the recurrence token by token in double.
Mat DeltaNet(const Weights& W, const ModelConfig& c, const std::string& p, const Mat& h) {
  const LinearAttentionConfig& la = *c.linear_attention;
  const size_t n = h.size(), nk = static_cast<size_t>(la.num_key_heads);
  const size_t nv = static_cast<size_t>(la.num_value_heads),
               dk = static_cast<size_t>(la.key_head_dim);
  const size_t dv = static_cast<size_t>(la.value_head_dim), K = static_cast<size_t>(la.conv_kernel);
  const std::string a = p + "linear_attn.";
  Mat mixed = W.Linear(h, a + "in_proj_qkv.weight");
  Mat z = W.Linear(h, a + "in_proj_z.weight");
  Mat b = W.Linear(h, a + "in_proj_b.weight");
  Mat alpha = W.Linear(h, a + "in_proj_a.weight");
  Vec conv = W.Load(a + "conv1d.weight");  // [channels][1][K]
  Vec a_log = W.Load(a + "A_log"), dt_bias = W.Load(a + "dt_bias"), nw = W.Load(a + "norm.weight");
  const size_t channels = mixed.empty() ? 0 : mixed[0].size();
  Mat act(n, Vec(channels));
  for (size_t t = 0; t < n; ++t) {
    for (size_t ch = 0; ch < channels; ++ch) {
      double acc = 0;  // causal: input t - (K - 1) + j, zero before the sequence
      for (size_t j = 0; j < K; ++j) {
        if (t + j + 1 >= K) acc += conv[ch * K + j] * mixed[t + j + 1 - K][ch];
      }
      act[t][ch] = Silu(acc);
    }
  }
  std::vector<Mat> S(nv, Mat(dk, Vec(dv, 0.0)));
  Mat out(n, Vec(nv * dv));
  for (size_t t = 0; t < n; ++t) {
    Vec q(act[t].begin(), act[t].begin() + nk * dk);
    Vec k(act[t].begin() + nk * dk, act[t].begin() + 2 * nk * dk);
    Vec v(act[t].begin() + 2 * nk * dk, act[t].end());
    for (size_t hh = 0; hh < nk; ++hh) {
      for (Vec* vec : {&q, &k}) {
        double ss = 0;
        for (size_t i = 0; i < dk; ++i) ss += (*vec)[hh * dk + i] * (*vec)[hh * dk + i];
        for (size_t i = 0; i < dk; ++i) (*vec)[hh * dk + i] /= std::sqrt(ss + 1e-6);
      }
      for (size_t i = 0; i < dk; ++i) q[hh * dk + i] /= std::sqrt(static_cast<double>(dk));
    }
    for (size_t hh = 0; hh < nv; ++hh) {
      const size_t kh = hh / (nv / nk);
      const double beta = Sigmoid(b[t][hh]);
      const double x = alpha[t][hh] + dt_bias[hh];
      const double g = -std::exp(a_log[hh]) * (x > 20 ? x : std::log1p(std::exp(x)));
      Mat& s = S[hh];
      for (auto& row : s) {
        for (double& e : row) e *= std::exp(g);
      }
      Vec o(dv, 0.0);
      for (size_t j = 0; j < dv; ++j) {
        double mem = 0;
        for (size_t i = 0; i < dk; ++i) mem += s[i][j] * k[kh * dk + i];
        const double delta = (v[hh * dv + j] - mem) * beta;
        for (size_t i = 0; i < dk; ++i) s[i][j] += k[kh * dk + i] * delta;
        for (size_t i = 0; i < dk; ++i) o[j] += s[i][j] * q[kh * dk + i];
      }
      o = Norm(o, nw, c.rms_norm_eps, false);
      for (size_t j = 0; j < dv; ++j) out[t][hh * dv + j] = o[j] * Silu(z[t][hh * dv + j]);
    }
  }
  return W.Linear(out, a + "out_proj.weight");
}

}  // namespace

std::vector<std::vector<double>> NaiveFinalHidden(const Checkpoint& ckpt,
                                                  const std::vector<int32_t>& tokens) {
  const ModelConfig& c = ckpt.config;
  const Weights W(ckpt);
  const size_t n = tokens.size(), H = static_cast<size_t>(c.hidden_size);
  const double eps = c.rms_norm_eps;
  const bool gemma = c.family == ModelFamily::kGemma3;
  const bool one_plus = gemma || c.family == ModelFamily::kQwen3_5;
  const std::string root = c.tensor_prefix;
  // Embedding scale: MiniCPM's scale_emb; Gemma's sqrt(hidden) in the weights' dtype.
  double embed_scale = c.family == ModelFamily::kMiniCpm ? c.embed_scale : 1.0;
  if (gemma) {
    const float s = static_cast<float>(std::sqrt(static_cast<double>(H)));
    const DType dt = W.Find(root + "embed_tokens.weight")->dtype;
    embed_scale = dt == DType::kBF16  ? Bf16ToFloat(FloatToBf16(s))
                  : dt == DType::kF16 ? F16ToFloat(FloatToF16(s))
                                      : s;
  }
  Vec emb = W.Load(root + "embed_tokens.weight");
  Mat x(n, Vec(H));
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < H; ++i)
      x[t][i] = emb[static_cast<size_t>(tokens[t]) * H + i] * embed_scale;
  }
  const double branch_scale = c.family == ModelFamily::kMiniCpm ? c.residual_scale : 1.0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const std::string p = root + "layers." + std::to_string(layer) + ".";
    const LayerType type = c.layer_types[static_cast<size_t>(layer)];
    auto add_branch = [&](Mat out, const char* out_norm) {
      Vec w = out_norm ? W.Load(p + out_norm) : Vec{};
      for (size_t t = 0; t < n; ++t) {
        if (out_norm) out[t] = Norm(out[t], w, eps, one_plus);
        for (size_t i = 0; i < H; ++i) x[t][i] += out[t][i] * branch_scale;
      }
    };
    Vec w_in = W.Load(p + "input_layernorm.weight");
    Mat h(n);
    for (size_t t = 0; t < n; ++t) h[t] = Norm(x[t], w_in, eps, one_plus);
    if (type == LayerType::kLinearAttention) {
      add_branch(DeltaNet(W, c, p, h), nullptr);
    } else {
      add_branch(Attention(W, c, p, h, type == LayerType::kSlidingAttention, one_plus),
                 gemma ? "post_attention_layernorm.weight" : nullptr);
    }
    Vec w_mlp = W.Load(
        p + (gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"));
    for (size_t t = 0; t < n; ++t) h[t] = Norm(x[t], w_mlp, eps, one_plus);
    Mat gate = W.Linear(h, p + "mlp.gate_proj.weight"), up = W.Linear(h, p + "mlp.up_proj.weight");
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < gate[t].size(); ++i) {
        const double g = gate[t][i];
        const double act =
            gemma ? 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (g + 0.044715 * g * g * g)))
                  : Silu(g);
        gate[t][i] = act * up[t][i];
      }
    }
    add_branch(W.Linear(gate, p + "mlp.down_proj.weight"),
               gemma ? "post_feedforward_layernorm.weight" : nullptr);
  }
  Vec w_final = W.Load(root + "norm.weight");
  Mat xn(n);
  for (size_t t = 0; t < n; ++t) xn[t] = Norm(x[t], w_final, eps, one_plus);
  return xn;
}

std::vector<std::vector<double>> NaiveForward(const Checkpoint& ckpt,
                                              const std::vector<int32_t>& tokens) {
  const ModelConfig& c = ckpt.config;
  const Weights W(ckpt);
  const Mat xn = NaiveFinalHidden(ckpt, tokens);
  Mat logits = W.Linear(
      xn, c.tie_word_embeddings ? c.tensor_prefix + "embed_tokens.weight" : c.lm_head_name);
  if (c.family == ModelFamily::kMiniCpm) {
    for (auto& row : logits) {
      for (double& v : row) v *= c.logit_scale;
    }
  }
  return logits;
}

}  // namespace tessera::test
