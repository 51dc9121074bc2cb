// The Gated DeltaNet decode update for one value head, written as plain loops over the value
// dimension so that each ISA's translation unit (compiled with its own flags) vectorizes it:
// two passes over the [dk][dv] fp32 state, the first reading (decay * S)^T k, the second
// writing decay * S + k delta^T and accumulating S^T q. kernels_scalar.cc keeps a double-
// accumulating version as the reference.
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int64_t kMaxDeltaNetValueDim = 512;

inline void DeltaNetStepPlain(float* state, const float* q, const float* k, const float* v,
                              float beta, float decay, int64_t dk, int64_t dv, float* out) {
  float delta[kMaxDeltaNetValueDim];
  for (int64_t j = 0; j < dv; ++j) out[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = state + i * dv;
    const float ki = k[i] * decay;
    for (int64_t j = 0; j < dv; ++j) out[j] += row[j] * ki;
  }
  for (int64_t j = 0; j < dv; ++j) {
    delta[j] = (v[j] - out[j]) * beta;
    out[j] = 0.0f;
  }
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * dv;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < dv; ++j) {
      const float s = row[j] * decay + ki * delta[j];
      row[j] = s;
      out[j] += s * qi;
    }
  }
}

}  // namespace tessera
