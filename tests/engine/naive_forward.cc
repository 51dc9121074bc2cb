#include "naive_forward.h"

#include <cmath>
#include <stdexcept>

#include "format/safetensors.h"

namespace tessera::test {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // rows

Vec Load(const TensorInfo* t) {
  if (t == nullptr) return {};
  std::vector<float> f(t->num_elements);
  if (!CopyTensorToF32(*t, f).ok()) throw std::runtime_error("cannot read " + t->name);
  return Vec(f.begin(), f.end());
}

// x[n][in] * W[out][in]^T (+ b) -> [n][out]
Mat Linear(const Mat& x, const TensorInfo* w_t, const TensorInfo* b_t) {
  Vec w = Load(w_t), b = Load(b_t);
  size_t out = static_cast<size_t>(w_t->shape[0]), in = static_cast<size_t>(w_t->shape[1]);
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

Vec Norm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// The rotation frequency of pair i, written here from the published formulas, not shared with
// the runtime: plain theta^(-2i/hd), and for rope_type "llama3" transformers'
// _compute_llama3_parameters (smooth factor computed everywhere, bands chosen by wavelength).
double Frequency(const ModelConfig& c, size_t i, size_t hd) {
  const double base =
      1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(hd));
  if (!c.rope_llama3) return base;
  const Llama3RopeScaling& s = *c.rope_llama3;
  const double old_context = static_cast<double>(s.original_max_position_embeddings);
  const double wavelen = 2.0 * 3.14159265358979323846 / base;
  const double scaled = wavelen > old_context / s.low_freq_factor ? base / s.factor : base;
  const double smooth =
      (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const double smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  const bool medium =
      !(wavelen < old_context / s.high_freq_factor) && !(wavelen > old_context / s.low_freq_factor);
  return medium ? smoothed : scaled;
}

// rotate_half RoPE of one head slice [off, off + hd) at position pos.
void Rope(Vec& v, size_t off, size_t hd, size_t pos, const ModelConfig& c) {
  size_t half = hd / 2;
  for (size_t i = 0; i < half; ++i) {
    double freq = Frequency(c, i, hd);
    double c = std::cos(pos * freq), s = std::sin(pos * freq);
    double a = v[off + i], b = v[off + i + half];
    v[off + i] = a * c - b * s;
    v[off + i + half] = b * c + a * s;
  }
}

}  // namespace

std::vector<std::vector<double>> NaiveForward(const Checkpoint& ckpt,
                                              const std::vector<int32_t>& tokens) {
  const ModelConfig& c = ckpt.config;
  const ModelTensors& T = ckpt.tensors;
  const size_t n = tokens.size(), H = static_cast<size_t>(c.hidden_size);
  const size_t hd = static_cast<size_t>(c.head_dim), nh = static_cast<size_t>(c.num_heads);
  const size_t nkv = static_cast<size_t>(c.num_kv_heads);
  const double eps = c.rms_norm_eps;
  Vec emb = Load(T.embed);
  Mat x(n, Vec(H));
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < H; ++i) x[t][i] = emb[static_cast<size_t>(tokens[t]) * H + i];
  }
  for (const LayerTensors& L : T.layers) {
    Vec w_in = Load(L.input_norm);
    Mat xn(n);
    for (size_t t = 0; t < n; ++t) xn[t] = Norm(x[t], w_in, eps);
    Mat q = Linear(xn, L.q_proj, L.q_bias), k = Linear(xn, L.k_proj, L.k_bias),
        v = Linear(xn, L.v_proj, L.v_bias);
    Vec qn = Load(L.q_norm), kn = Load(L.k_norm);
    for (size_t t = 0; t < n; ++t) {
      for (size_t h = 0; h < nh; ++h) {
        if (!qn.empty()) {
          Vec head(q[t].begin() + h * hd, q[t].begin() + (h + 1) * hd);
          head = Norm(head, qn, eps);
          std::copy(head.begin(), head.end(), q[t].begin() + h * hd);
        }
        Rope(q[t], h * hd, hd, t, c);
      }
      for (size_t h = 0; h < nkv; ++h) {
        if (!kn.empty()) {
          Vec head(k[t].begin() + h * hd, k[t].begin() + (h + 1) * hd);
          head = Norm(head, kn, eps);
          std::copy(head.begin(), head.end(), k[t].begin() + h * hd);
        }
        Rope(k[t], h * hd, hd, t, c);
      }
    }
    Mat attn(n, Vec(nh * hd, 0.0));
    for (size_t t = 0; t < n; ++t) {
      for (size_t h = 0; h < nh; ++h) {
        size_t g = h / (nh / nkv);
        Vec p(t + 1);
        double mx = -1e300;
        for (size_t s = 0; s <= t; ++s) {
          double d = 0;
          for (size_t i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[s][g * hd + i];
          p[s] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, p[s]);
        }
        double z = 0;
        for (double& e : p) z += (e = std::exp(e - mx));
        for (size_t s = 0; s <= t; ++s) {
          for (size_t i = 0; i < hd; ++i) attn[t][h * hd + i] += p[s] / z * v[s][g * hd + i];
        }
      }
    }
    Mat o = Linear(attn, L.o_proj, L.o_bias);
    Vec w_post = Load(L.post_attn_norm);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < H; ++i) x[t][i] += o[t][i];
      xn[t] = Norm(x[t], w_post, eps);
    }
    Mat gate = Linear(xn, L.gate_proj, nullptr), up = Linear(xn, L.up_proj, nullptr);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < gate[t].size(); ++i) {
        gate[t][i] = gate[t][i] / (1.0 + std::exp(-gate[t][i])) * up[t][i];
      }
    }
    Mat down = Linear(gate, L.down_proj, nullptr);
    for (size_t t = 0; t < n; ++t) {
      for (size_t i = 0; i < H; ++i) x[t][i] += down[t][i];
    }
  }
  Vec w_final = Load(T.final_norm);
  Mat xn(n);
  for (size_t t = 0; t < n; ++t) xn[t] = Norm(x[t], w_final, eps);
  return Linear(xn, T.lm_head, nullptr);
}

}  // namespace tessera::test
