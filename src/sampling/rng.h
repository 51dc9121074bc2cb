// The random number generator behind every sampled token: xoshiro256** (Blackman & Vigna,
// 2018) with its 256-bit state filled from the 64-bit seed by splitmix64. Both algorithms are
// implemented here, so a seed yields the same stream on every compiler and platform, which
// std::mt19937 + std::uniform_real_distribution does not promise.
//
//   Xoshiro256StarStar rng(/*seed=*/42);
//   uint64_t bits = rng.NextU64();
//   double u = rng.NextDouble();  // in [0, 1), a multiple of 2^-53
#pragma once

#include <array>
#include <cstdint>

namespace tessera {

// One step of splitmix64: advances *state by the golden-ratio increment and returns the
// mixed value. Used only to expand a seed into xoshiro's state.
uint64_t SplitMix64Next(uint64_t* state);

class Xoshiro256StarStar {
 public:
  // state[i] = the i-th output of splitmix64 started at `seed`, i = 0..3. splitmix64 is a
  // bijection over a full-period counter, so these four words are never all zero.
  explicit Xoshiro256StarStar(uint64_t seed);

  // A generator in an exact state, for checking against the reference implementation's
  // published outputs. The state must not be all zero (the one fixed point).
  static Xoshiro256StarStar FromState(const std::array<uint64_t, 4>& state);

  uint64_t NextU64();

  // The top 53 bits of NextU64() scaled by 2^-53: uniform over {0, 2^-53, ..., 1 - 2^-53}.
  // Every value is exactly representable, so no rounding mode can change it.
  double NextDouble();

  const std::array<uint64_t, 4>& state() const { return state_; }

 private:
  Xoshiro256StarStar() = default;

  std::array<uint64_t, 4> state_{};
};

}  // namespace tessera
