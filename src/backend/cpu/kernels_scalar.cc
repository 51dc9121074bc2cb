// Scalar reference kernels: plain loops over logical indices, reading packed weights through
// the element accessors, accumulating in double (fp formats) or exact integers (quantized).
// They are the truth the SIMD kernels are tested against and never get "optimised".
#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels.h"
#include "base/half.h"

namespace tessera {
namespace {

void Store(const MatmulArgs& a, int64_t m, int64_t n, double value) {
  if (a.bias) value += a.bias[n];
  float* y = a.y + m * a.ldy + n;
  *y = a.accumulate ? static_cast<float>(*y + value) : static_cast<float>(value);
}

int64_t RowEnd(const MatmulArgs& a, int64_t panel_end) {
  return std::min(a.w->rows, panel_end * kPanelRows);
}

void MatmulFloatScalar(const MatmulArgs& a, int64_t pb, int64_t pe) {
  const PackedMatrix& w = *a.w;
  for (int64_t m = 0; m < a.x->rows; ++m) {
    const float* x = a.x->f32 + m * a.x->stride;
    for (int64_t n = pb * kPanelRows; n < RowEnd(a, pe); ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < w.cols; ++k)
        acc += static_cast<double>(PackedValueF32(w, n, k)) * x[k];
      Store(a, m, n, acc);
    }
  }
}

void MatmulInt8Scalar(const MatmulArgs& a, int64_t pb, int64_t pe) {
  const PackedMatrix& w = *a.w;
  for (int64_t m = 0; m < a.x->rows; ++m) {
    const int8_t* q = a.x->q8.data() + m * a.x->stride;
    const float sx = a.x->q_scale[static_cast<size_t>(m)];
    for (int64_t n = pb * kPanelRows; n < RowEnd(a, pe); ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < w.cols; ++k) acc += int64_t{PackedQuantValue(w, n, k)} * q[k];
      float scale = sx * w.row_scale[static_cast<size_t>(n)];
      Store(a, m, n, static_cast<double>(static_cast<float>(acc) * scale));
    }
  }
}

void MatmulInt4Scalar(const MatmulArgs& a, int64_t pb, int64_t pe) {
  const PackedMatrix& w = *a.w;
  const int64_t blocks = w.padded_cols / kInt4Block;
  for (int64_t m = 0; m < a.x->rows; ++m) {
    const int8_t* q = a.x->q8.data() + m * a.x->stride;
    const float sx = a.x->q_scale[static_cast<size_t>(m)];
    for (int64_t n = pb * kPanelRows; n < RowEnd(a, pe); ++n) {
      double acc = 0.0;
      for (int64_t b = 0; b < blocks; ++b) {
        int64_t block_dot = 0;
        for (int64_t k = b * kInt4Block; k < std::min(w.cols, (b + 1) * kInt4Block); ++k) {
          block_dot += int64_t{PackedQuantValue(w, n, k)} * q[k];
        }
        acc += static_cast<double>(block_dot) * Int4BlockScale(w, n, b);
      }
      Store(a, m, n, acc * sx);
    }
  }
}

void ToBf16Scalar(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(x[i]);
}

void QuantizeRowScalar(const float* x, int64_t n, int8_t* q, float* scale, int32_t* block_sums) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  // Multiplying by 127/absmax (not dividing by the scale) is what the SIMD paths do too, so
  // every ISA produces the same integers.
  float inv = absmax > 0.0f ? 127.0f / absmax : 0.0f;
  *scale = absmax > 0.0f ? absmax / 127.0f : 1.0f;
  for (int64_t b = 0; b < n / kInt4Block; ++b) {
    int32_t sum = 0;
    for (int64_t i = b * kInt4Block; i < (b + 1) * kInt4Block; ++i) {
      float v = std::nearbyint(x[i] * inv);
      q[i] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
      sum += q[i];
    }
    block_sums[b] = sum;
  }
}

void RmsNormScalar(const float* x, const float* w, int64_t n, int64_t n_padded, float eps,
                   float* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(static_cast<float>(x[i] * inv) * static_cast<double>(w[i]));
  }
  for (int64_t i = n; i < n_padded; ++i) y[i] = 0.0f;
}

void RopeScalar(float* x, int64_t heads, int64_t head_stride, int64_t rotary_dim, const float* cs,
                const float* sn) {
  const int64_t half = rotary_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_stride;
    for (int64_t i = 0; i < half; ++i) {
      float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

void SwigluScalar(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

// gelu_tanh(g) = g * sigmoid(2 sqrt(2/pi) (g + 0.044715 g^3)), the tanh form rewritten.
void GegluScalar(const float* gate, const float* up, int64_t n, float* out) {
  const double c = 2.0 * std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    double g = gate[i];
    double u = c * (g + 0.044715 * g * g * g);
    out[i] = static_cast<float>(g / (1.0 + std::exp(-u)) * up[i]);
  }
}

// The reference DeltaNet step: the recurrence as written, accumulating in double.
void DeltaNetStepScalar(float* state, int64_t ld, const float* q, const float* k, const float* v,
                        float beta, float decay, int64_t dk, int64_t dv, float* out) {
  for (int64_t j = 0; j < dv; ++j) {
    double mem = 0.0;
    for (int64_t i = 0; i < dk; ++i) mem += static_cast<double>(decay) * state[i * ld + j] * k[i];
    const double delta = (v[j] - mem) * beta;
    double acc = 0.0;
    for (int64_t i = 0; i < dk; ++i) {
      const double s = static_cast<double>(decay) * state[i * ld + j] + k[i] * delta;
      state[i * ld + j] = static_cast<float>(s);
      acc += s * q[i];
    }
    out[j] = static_cast<float>(acc);
  }
}

template <typename KV>
void AttentionScalarKv(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  const KvView<KV> kv(a);
  const int64_t group = a.heads / a.kv_heads;
  for (int64_t task = tb; task < te; ++task) {
    int64_t m = 0, h = 0;
    AttentionTask(a, task, &m, &h);
    const float* q = a.q + m * a.q_stride + h * a.head_dim;
    const int64_t g = h / group;  // the kv head
    const int64_t last = a.start_pos + m;
    double max_score = -INFINITY;
    for (int64_t t = 0; t <= last; ++t) {
      const KV* k = kv.Key(t, g);
      double dot = 0.0;
      for (int64_t i = 0; i < a.head_dim; ++i) dot += static_cast<double>(q[i]) * KvToFloat(k[i]);
      scores[t] = static_cast<float>(dot * a.scale);
      max_score = std::max(max_score, static_cast<double>(scores[t]));
    }
    double sum = 0.0;
    for (int64_t t = 0; t <= last; ++t) {
      double e = std::exp(scores[t] - max_score);
      scores[t] = static_cast<float>(e);
      sum += e;
    }
    float* out = a.out + m * a.out_stride + h * a.head_dim;
    for (int64_t i = 0; i < a.head_dim; ++i) {
      double acc = 0.0;
      for (int64_t t = 0; t <= last; ++t)
        acc += static_cast<double>(scores[t]) * KvToFloat(kv.Value(t, g)[i]);
      out[i] = static_cast<float>(acc / sum);
    }
  }
}

void AttentionScalar(const AttentionArgs& a, int64_t tb, int64_t te, float* scores) {
  if (a.kv_bf16) return AttentionScalarKv<uint16_t>(a, tb, te, scores);
  AttentionScalarKv<float>(a, tb, te, scores);
}

// The definition: std::round per element (half away from zero), then the clamp.
void QuantizeWeightsScalar(const float* x, int64_t n, float d, float lo, float hi, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] / d;
    q[i] = std::isnan(v) ? 0 : static_cast<int8_t>(std::clamp(std::round(v), lo, hi));
  }
}

}  // namespace

const KernelTable& ScalarKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    t.isa = CpuIsa::kScalar;
    t.matmul_f32 = MatmulFloatScalar;
    t.matmul_bf16 = MatmulFloatScalar;
    t.matmul_int8 = MatmulInt8Scalar;
    t.matmul_int4 = MatmulInt4Scalar;
    t.attention = AttentionScalar;
    t.to_bf16 = ToBf16Scalar;
    t.quantize_row = QuantizeRowScalar;
    t.quantize_weights = QuantizeWeightsScalar;
    t.rms_norm = RmsNormScalar;
    t.rope = RopeScalar;
    t.swiglu = SwigluScalar;
    t.geglu = GegluScalar;
    t.deltanet_step = DeltaNetStepScalar;
    return t;
  }();
  return table;
}

}  // namespace tessera
