// The Gated DeltaNet decode update for one value head, written as plain loops over the value
// dimension so that each ISA's translation unit (compiled with its own flags) vectorizes it:
// two passes over the [dk][dv] fp32 state (rows `ld` apart: a caller may hand it a block of
// columns, which are independent), the first reading (decay * S)^T k, the second writing
// decay * S + k delta^T and accumulating S^T q. kernels_scalar.cc keeps a double-
// accumulating version as the reference.
//
// The functions live in an unnamed namespace: each ISA's translation unit must keep its own
// copy. As inline functions of namespace tessera they were one symbol across those units, and
// the linker kept whichever copy came first: the AVX-512 table ran the AVX2 build, and with the
// link order reversed an AVX2-only CPU would have run AVX-512 instructions
// (tests/backend/isa_symbols_test.sh guards every ISA unit against this).
#pragma once

#include <cstdint>

namespace tessera {

inline constexpr int64_t kMaxDeltaNetValueDim = 512;

namespace {

// kWidth > 0: a block of exactly that many columns, whose accumulators live in registers and
// whose column loops unroll completely; 0: any dv up to kMaxDeltaNetValueDim.
template <int kWidth>
inline void DeltaNetStepColumns(float* state, int64_t ld, const float* q, const float* k,
                                const float* v, float beta, float decay, int64_t dk, int64_t dv,
                                float* out) {
  constexpr int64_t kCap = kWidth > 0 ? kWidth : kMaxDeltaNetValueDim;
  const int64_t w = kWidth > 0 ? kWidth : dv;
  float mem[kCap] = {}, acc[kCap] = {}, delta[kCap];
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = state + i * ld;
    const float ki = k[i] * decay;
    for (int64_t j = 0; j < w; ++j) mem[j] += row[j] * ki;
  }
  for (int64_t j = 0; j < w; ++j) delta[j] = (v[j] - mem[j]) * beta;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = state + i * ld;
    const float ki = k[i], qi = q[i];
    for (int64_t j = 0; j < w; ++j) {
      const float s = row[j] * decay + ki * delta[j];
      row[j] = s;
      acc[j] += s * qi;
    }
  }
  for (int64_t j = 0; j < w; ++j) out[j] = acc[j];
}

// The table entry: blocks of 32 columns (what the cpu backend hands it) take the unrolled path.
inline void DeltaNetStepPlain(float* state, int64_t ld, const float* q, const float* k,
                              const float* v, float beta, float decay, int64_t dk, int64_t dv,
                              float* out) {
  if (dv == 32) return DeltaNetStepColumns<32>(state, ld, q, k, v, beta, decay, dk, dv, out);
  if (dv == 128) return DeltaNetStepColumns<128>(state, ld, q, k, v, beta, decay, dk, dv, out);
  DeltaNetStepColumns<0>(state, ld, q, k, v, beta, decay, dk, dv, out);
}

}  // namespace

}  // namespace tessera
