// Conversions between fp32 and the 16-bit float formats found in checkpoints.
//
//   float x = Bf16ToFloat(0x3f80);   // 1.0f
//   uint16_t h = FloatToBf16(1.0f);  // round to nearest even
#pragma once

#include <bit>
#include <cstdint>

namespace tessera {

inline float Bf16ToFloat(uint16_t v) { return std::bit_cast<float>(uint32_t{v} << 16); }

// Round-to-nearest-even; NaN stays NaN (quiet).
inline uint16_t FloatToBf16(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// IEEE 754 binary16 to binary32, exact for every input (subnormals, inf, NaN).
inline float F16ToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

// binary32 to binary16, round to nearest even, overflow to inf.
uint16_t FloatToF16(float f);

}  // namespace tessera
