#include "backend/cpu/cpu_deltanet.h"

#include <cmath>

#include "backend/cpu/kernels_deltanet.h"

namespace tessera {
namespace {

// torch's softplus (beta 1, threshold 20).
float Softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// Conv over the block for channels [c0, c1): out[r] = sum_j w[j] * seq[r + j], where seq is
// the kernel - 1 inputs before the block (the state) and then the block's inputs.
void ConvChannels(const DeltaNetBlock& b, int64_t c0, int64_t c1) {
  const DeltaNetSpec& n = *b.spec;
  const int64_t kernel = n.conv_kernel, width = n.conv_width();
  float window[64];  // the last kernel - 1 raw inputs, oldest first (kernel <= 64, config.cc)
  for (int64_t c = c0; c < c1; ++c) {
    const float* w = b.layer->conv1d.data() + c * kernel;
    for (int64_t j = 0; j + 1 < kernel; ++j) window[j] = b.state[j * width + c];
    for (int64_t r = 0; r < b.rows; ++r) {
      float* x = b.proj + r * b.proj_stride + c;
      const float raw = *x;
      float acc = w[kernel - 1] * raw;
      for (int64_t j = 0; j + 1 < kernel; ++j) acc += w[j] * window[j];
      for (int64_t j = 0; j + 2 < kernel; ++j) window[j] = window[j + 1];
      if (kernel > 1) window[kernel - 2] = raw;
      *x = acc;
    }
    for (int64_t j = 0; j + 1 < kernel; ++j) b.state[j * width + c] = window[j];
  }
}

// SiLU of the conv output; q and k L2-normalised (q also by 1/sqrt(key_dim)); b -> beta,
// a -> decay = exp(-exp(A_log) softplus(a + dt_bias)).
void PrepareRow(const KernelTable& k, const DeltaNetBlock& b, int64_t r) {
  const DeltaNetSpec& n = *b.spec;
  float* row = b.proj + r * b.proj_stride;
  k.swiglu(row, b.ones, n.conv_width(), row);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(n.key_dim));
  for (int64_t h = 0; h < 2 * n.key_heads; ++h) {
    float* v = row + h * n.key_dim;
    float ss = 0.0f;
    for (int64_t i = 0; i < n.key_dim; ++i) ss += v[i] * v[i];
    const float inv = (1.0f / std::sqrt(ss + 1e-6f)) * (h < n.key_heads ? q_scale : 1.0f);
    for (int64_t i = 0; i < n.key_dim; ++i) v[i] *= inv;
  }
  float* beta = row + n.conv_width() + n.v_width();
  float* decay = beta + n.value_heads;
  const CpuLayerWeights& L = *b.layer;
  for (int64_t h = 0; h < n.value_heads; ++h) {
    beta[h] = 1.0f / (1.0f + std::exp(-beta[h]));
    const float g = -std::exp(L.a_log[static_cast<size_t>(h)]) *
                    Softplus(decay[h] + L.dt_bias[static_cast<size_t>(h)]);
    decay[h] = std::exp(g);
  }
}

}  // namespace

void RunDeltaNetBlock(const KernelTable& k, ThreadPool& pool, const DeltaNetBlock& b) {
  const DeltaNetSpec& n = *b.spec;
  pool.ParallelFor(n.conv_width(), [&](int64_t c0, int64_t c1, int) { ConvChannels(b, c0, c1); });
  pool.ParallelFor(b.rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) PrepareRow(k, b, r);
  });
  // The recurrence: each value head runs through the block's tokens in order.
  float* matrices = b.state + n.conv_state_floats();
  const int64_t ratio = n.value_heads / n.key_heads;
  pool.ParallelFor(n.value_heads, [&](int64_t h0, int64_t h1, int) {
    for (int64_t h = h0; h < h1; ++h) {
      float* S = matrices + h * n.key_dim * n.value_dim;
      for (int64_t r = 0; r < b.rows; ++r) {
        const float* row = b.proj + r * b.proj_stride;
        const float* q = row + (h / ratio) * n.key_dim;
        const float* kk = row + n.qk_width() + (h / ratio) * n.key_dim;
        const float* v = row + 2 * n.qk_width() + h * n.value_dim;
        const float* z = row + n.conv_width() + h * n.value_dim;
        const float beta = row[n.conv_width() + n.v_width() + h];
        const float decay = row[n.conv_width() + n.v_width() + n.value_heads + h];
        float* o = b.out + r * b.out_stride + h * n.value_dim;
        k.deltanet_step(S, q, kk, v, beta, decay, n.key_dim, n.value_dim, o);
        k.rms_norm(o, b.layer->delta_norm.data(), n.value_dim, n.value_dim, b.eps, o);
        k.swiglu(z, o, n.value_dim, o);  // silu(z) * o
      }
    }
  });
  for (int64_t r = 0; r < b.rows; ++r) {
    float* o = b.out + r * b.out_stride;
    for (int64_t i = n.v_width(); i < b.out_stride; ++i) o[i] = 0.0f;
  }
}

}  // namespace tessera
