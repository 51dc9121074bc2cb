#include "sampling/rng.h"

namespace tessera {
namespace {

uint64_t RotateLeft(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

uint64_t SplitMix64Next(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Xoshiro256StarStar::Xoshiro256StarStar(uint64_t seed) {
  uint64_t mixer = seed;
  for (uint64_t& word : state_) word = SplitMix64Next(&mixer);
}

Xoshiro256StarStar Xoshiro256StarStar::FromState(const std::array<uint64_t, 4>& state) {
  Xoshiro256StarStar rng;
  rng.state_ = state;
  return rng;
}

uint64_t Xoshiro256StarStar::NextU64() {
  const uint64_t result = RotateLeft(state_[1] * 5, 7) * 9;
  const uint64_t shifted = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= shifted;
  state_[3] = RotateLeft(state_[3], 45);
  return result;
}

double Xoshiro256StarStar::NextDouble() {
  // 2^-53 written as a hex-float literal so the constant is exact.
  return static_cast<double>(NextU64() >> 11) * 0x1.0p-53;
}

}  // namespace tessera
