#include "backend/cpu/cpu_deltanet.h"

#include <algorithm>
#include <cmath>

#include "backend/cpu/kernels_deltanet.h"

namespace tessera {
namespace {

// torch's softplus (beta 1, threshold 20).
float Softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// Conv over the block for channels [c0, c1): conv[r] = sum_j w[j] * seq[r + j], where seq is
// the kernel - 1 inputs before the block (the state) and then the block's inputs. Row by row
// over contiguous channels (the weights are [kernel][conv_width]), so the loops vectorize;
// then the state keeps the block's last kernel - 1 inputs.
void ConvChannels(const DeltaNetBlock& b, int64_t c0, int64_t c1) {
  const DeltaNetSpec& n = *b.spec;
  const int64_t kernel = n.conv_kernel, width = n.conv_width(), tail = kernel - 1;
  const float* wt = b.layer->conv1d.data();
  for (int64_t r = 0; r < b.rows; ++r) {
    float* out = b.conv + r * width;
    for (int64_t c = c0; c < c1; ++c) out[c] = 0.0f;
    for (int64_t j = 0; j < kernel; ++j) {
      const int64_t t = r + j - tail;  // the input row, < 0 inside the state
      const float* in = t >= 0 ? b.proj + t * b.proj_stride : b.state + (tail + t) * width;
      const float* w = wt + j * width;
      for (int64_t c = c0; c < c1; ++c) out[c] += w[c] * in[c];
    }
  }
  for (int64_t i = 0; i < tail; ++i) {
    const int64_t t = b.rows - tail + i;  // ascending i reads old rows above the ones written
    const float* in = t >= 0 ? b.proj + t * b.proj_stride : b.state + (tail + t) * width;
    std::copy(in + c0, in + c1, b.state + i * width + c0);
  }
}

// SiLU of the conv output; q and k L2-normalised (q also by 1/sqrt(key_dim)); b -> beta,
// a -> decay = exp(-exp(A_log) softplus(a + dt_bias)).
void PrepareRow(const KernelTable& k, const DeltaNetBlock& b, int64_t r) {
  const DeltaNetSpec& n = *b.spec;
  float* conv = b.conv + r * n.conv_width();
  k.swiglu(conv, b.ones, n.conv_width(), conv);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(n.key_dim));
  for (int64_t h = 0; h < 2 * n.key_heads; ++h) {
    float* v = conv + h * n.key_dim;
    float ss = 0.0f;
    for (int64_t i = 0; i < n.key_dim; ++i) ss += v[i] * v[i];
    const float inv = (1.0f / std::sqrt(ss + 1e-6f)) * (h < n.key_heads ? q_scale : 1.0f);
    for (int64_t i = 0; i < n.key_dim; ++i) v[i] *= inv;
  }
  float* beta = b.proj + r * b.proj_stride + n.conv_width() + n.v_width();
  float* decay = beta + n.value_heads;
  const CpuLayerWeights& L = *b.layer;
  for (int64_t h = 0; h < n.value_heads; ++h) {
    beta[h] = 1.0f / (1.0f + std::exp(-beta[h]));
    const float g = -std::exp(L.a_log[static_cast<size_t>(h)]) *
                    Softplus(decay[h] + L.dt_bias[static_cast<size_t>(h)]);
    decay[h] = std::exp(g);
  }
}

// Channels in chunks of 64 (whole cache lines), spread over the pool.
constexpr int64_t kConvChunk = 64;
// The recurrence: each (value head, block of value columns) runs through the block's tokens
// in order; columns are independent, and a block of kColumns columns of the head's state
// (key_dim x kColumns floats, 16 KiB for 128 x 32) stays in L1 across the tokens.
constexpr int64_t kColumns = 32;
// Decode rows make one pass per token over each state, so nothing stays in L1 from token to
// token: a task takes a whole head (key_dim x value_dim, contiguous), one sequential stream
// for the prefetchers instead of key_dim strided pieces.
constexpr int64_t kDecodeColumns = 128;

void RecurrenceTask(const KernelTable& k, const DeltaNetBlock& b, int64_t columns, int64_t t) {
  const DeltaNetSpec& n = *b.spec;
  float* matrices = b.state + n.conv_state_floats();
  const int64_t ratio = n.value_heads / n.key_heads;
  const int64_t col_blocks = (n.value_dim + columns - 1) / columns;
  const int64_t h = t / col_blocks, j0 = (t % col_blocks) * columns;
  const int64_t width = std::min(columns, n.value_dim - j0);
  float* S = matrices + h * n.key_dim * n.value_dim + j0;
  for (int64_t r = 0; r < b.rows; ++r) {
    const float* row = b.proj + r * b.proj_stride;
    const float* conv = b.conv + r * n.conv_width();
    const float* q = conv + (h / ratio) * n.key_dim;
    const float* kk = conv + n.qk_width() + (h / ratio) * n.key_dim;
    const float* v = conv + 2 * n.qk_width() + h * n.value_dim + j0;
    const float beta = row[n.conv_width() + n.v_width() + h];
    const float decay = row[n.conv_width() + n.v_width() + n.value_heads + h];
    float* o = b.out + r * b.out_stride + h * n.value_dim + j0;
    k.deltanet_step(S, n.value_dim, q, kk, v, beta, decay, n.key_dim, width, o);
  }
}

// Per head: RMSNorm (plain w) of the output, then the SiLU(z) gate; the padding zeroed.
void NormAndGateRow(const KernelTable& k, const DeltaNetBlock& b, int64_t r) {
  const DeltaNetSpec& n = *b.spec;
  const float* z = b.proj + r * b.proj_stride + n.conv_width();
  float* out = b.out + r * b.out_stride;
  for (int64_t h = 0; h < n.value_heads; ++h) {
    float* o = out + h * n.value_dim;
    k.rms_norm(o, b.layer->delta_norm.data(), n.value_dim, n.value_dim, b.eps, o);
    k.swiglu(z + h * n.value_dim, o, n.value_dim, o);  // silu(z) * o
  }
  for (int64_t i = n.v_width(); i < b.out_stride; ++i) out[i] = 0.0f;
}

}  // namespace

void RunDeltaNetBlock(const KernelTable& k, ThreadPool& pool, const DeltaNetBlock& b) {
  const DeltaNetSpec& n = *b.spec;
  const int64_t chunks = (n.conv_width() + kConvChunk - 1) / kConvChunk;
  pool.ParallelFor(chunks, [&](int64_t b0, int64_t b1, int) {
    ConvChannels(b, b0 * kConvChunk, std::min(b1 * kConvChunk, n.conv_width()));
  });
  pool.ParallelFor(b.rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) PrepareRow(k, b, r);
  });
  const int64_t col_blocks = (n.value_dim + kColumns - 1) / kColumns;
  pool.ParallelFor(n.value_heads * col_blocks, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) RecurrenceTask(k, b, kColumns, t);
  });
  pool.ParallelFor(b.rows, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) NormAndGateRow(k, b, r);
  });
}

void RunDeltaNetDecodeRows(const KernelTable& k, ThreadPool& pool,
                           std::span<const DeltaNetBlock> rows) {
  if (rows.empty()) return;
  const DeltaNetSpec& n = *rows[0].spec;
  const int64_t count = static_cast<int64_t>(rows.size());
  const int64_t chunks = (n.conv_width() + kConvChunk - 1) / kConvChunk;
  pool.ParallelFor(count * chunks, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t % chunks;
      ConvChannels(rows[static_cast<size_t>(t / chunks)], c * kConvChunk,
                   std::min((c + 1) * kConvChunk, n.conv_width()));
    }
  });
  pool.ParallelFor(count, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) PrepareRow(k, rows[static_cast<size_t>(r)], 0);
  });
  const int64_t tasks = n.value_heads * ((n.value_dim + kDecodeColumns - 1) / kDecodeColumns);
  pool.ParallelForBalanced(count * tasks, 1, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      RecurrenceTask(k, rows[static_cast<size_t>(t / tasks)], kDecodeColumns, t % tasks);
  });
  pool.ParallelFor(count, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) NormAndGateRow(k, rows[static_cast<size_t>(r)], 0);
  });
}

}  // namespace tessera
