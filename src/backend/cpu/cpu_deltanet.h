// The CPU backend's Gated DeltaNet layer body for a block of consecutive tokens of one
// sequence: causal depthwise conv + SiLU over the projected q|k|v, L2 norms, beta and decay,
// the recurrence (one task per value head, every token of the block in order, so a head's
// [key_dim][value_dim] state stays in cache), then the per-head norm and SiLU(z) gate. The
// input projection before it and out_proj after it are ordinary matmuls of the backend.
//
//   DeltaNetBlock b{.spec = &n, .layer = &L, .eps = eps, .proj = in_proj_out, ...};
//   RunDeltaNetBlock(kernels, pool, b);   // b.out: [rows][out_stride], zero padded
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/cpu_weights.h"
#include "backend/cpu/kernels.h"
#include "base/thread_pool.h"
#include "model/model_spec.h"

namespace tessera {

struct DeltaNetBlock {
  const DeltaNetSpec* spec = nullptr;
  const CpuLayerWeights* layer = nullptr;
  float eps = 1e-6f;
  // [rows][proj_stride]: q | k | v (conv_width) | z (v_width) | b, a (value_heads each), as
  // the input projection wrote them; b and a are overwritten with beta and decay.
  float* proj = nullptr;
  int64_t proj_stride = 0;
  float* conv = nullptr;  // [rows][conv_width] scratch: q | k | v after the conv and SiLU
  int64_t rows = 0;
  float* state = nullptr;       // the layer's recurrent state (conv history, then matrices)
  const float* ones = nullptr;  // conv_width ones (SiLU through the swiglu kernel)
  float* out = nullptr;         // [rows][out_stride]: gated, normed output, v_width used
  int64_t out_stride = 0;
};

void RunDeltaNetBlock(const KernelTable& k, ThreadPool& pool, const DeltaNetBlock& b);

// One decode row each of several sequences (rows == 1, each with its own state): the same
// arithmetic as RunDeltaNetBlock on each alone, in four pool dispatches for all of them (conv,
// preparation, recurrence, norm and gate) instead of four per sequence.
void RunDeltaNetDecodeRows(const KernelTable& k, ThreadPool& pool,
                           std::span<const DeltaNetBlock> rows);

}  // namespace tessera
