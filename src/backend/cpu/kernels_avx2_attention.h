// The AVX2 family's blocked and decode-split attention kernels (kernels_avx2_attention.cc,
// built with the AVX2 / FMA flags); see kernels.h for their contracts. Set in Avx2Kernels()
// (and so in Avx2VnniKernels(), which copies it):
//
//   t.attention_blocked = avx2::AttentionBlocked;
//   t.attention_decode_split = avx2::AttentionDecodeSplit;
#pragma once

#include <cstdint>

#include "backend/cpu/kernels.h"

namespace tessera::avx2 {

void AttentionBlocked(const AttentionArgs& a, int64_t tb, int64_t te, float* scores);
void AttentionDecodeSplit(const AttentionArgs& a, int64_t splits, int64_t tb, int64_t te,
                          float* scores, float* partials);

}  // namespace tessera::avx2
