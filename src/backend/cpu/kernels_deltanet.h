// The Gated DeltaNet decode update for one value head, written as plain loops over the value
// dimension so that each ISA's translation unit (compiled with its own flags) vectorizes it:
// two passes over the [dk][dv] fp32 state (rows `ld` apart: a caller may hand it a block of
// columns, which are independent), the first reading (decay * S)^T k, the second writing
// decay * S + k delta^T and accumulating S^T q. kernels_scalar.cc keeps a double-
// accumulating version as the reference.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int64_t kMaxDeltaNetValueDim = 512;

// A block of exactly W columns: the accumulators live in registers and the column loops
// unroll completely.
template <int W>
inline void DeltaNetStepColumns(float* state, int64_t ld, const float* q, const float* k,
                                const float* v, float beta, float decay, int64_t dk, float* out) {
  float mem[W] = {}, acc[W] = {}, delta[W];
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = state + i * ld;
    const float ki = k[i] * decay;
    for (int j = 0; j < W; ++j) mem[j] += row[j] * ki;
  }
  for (int j = 0; j < W; ++j) delta[j] = (v[j] - mem[j]) * beta;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * ld;
    const float ki = k[i], qi = q[i];
    for (int j = 0; j < W; ++j) {
      const float s = row[j] * decay + ki * delta[j];
      row[j] = s;
      acc[j] += s * qi;
    }
  }
  for (int j = 0; j < W; ++j) out[j] = acc[j];
}

inline void DeltaNetStepAnyWidth(float* state, int64_t ld, const float* q, const float* k,
                                 const float* v, float beta, float decay, int64_t dk, int64_t dv,
                                 float* out) {
  float delta[kMaxDeltaNetValueDim];
  for (int64_t j = 0; j < dv; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = state + i * ld;
    const float ki = k[i] * decay;
    for (int64_t j = 0; j < dv; ++j) out[j] += row[j] * ki;
  }
  for (int64_t j = 0; j < dv; ++j) {
    delta[j] = (v[j] - out[j]) * beta;
    out[j] = 0.0f;
  }
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * ld;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < dv; ++j) {
      const float s = row[j] * decay + ki * delta[j];
      row[j] = s;
      out[j] += s * qi;
    }
  }
}

// The table entry: blocks of 32 columns (what the cpu backend hands it) take the unrolled path.
inline void DeltaNetStepPlain(float* state, int64_t ld, const float* q, const float* k,
                              const float* v, float beta, float decay, int64_t dk, int64_t dv,
                              float* out) {
  if (dv == 32) return DeltaNetStepColumns<32>(state, ld, q, k, v, beta, decay, dk, out);
  DeltaNetStepAnyWidth(state, ld, q, k, v, beta, decay, dk, dv, out);
}

}  // namespace tessera
