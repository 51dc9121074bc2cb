// ArgMax (the greedy choice) against a plain first-maximum scan: ties, NaNs, infinities,
// lengths around the 16-lane split, a leading NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/decoding.h"

namespace tessera {
namespace {

int32_t PlainArgMax(const std::vector<float>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

TEST(ArgMax, MatchesAPlainScan) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);
  std::uniform_int_distribution<int> kind(0, 19);
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 31u, 32u, 33u, 100u, 49152u}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<float> v(n);
      for (float& x : v) {
        const int k = kind(rng);
        x = k == 0   ? NAN
            : k == 1 ? -INFINITY
            : k == 2 ? (trial % 7 == 0 ? INFINITY : -0.0f)
                     : static_cast<float>(small(rng));  // many ties
      }
      ASSERT_EQ(ArgMax(v), PlainArgMax(v)) << "n=" << n << " trial " << trial;
    }
  }
  std::vector<float> leading_nan{NAN, 1.0f, 2.0f};
  EXPECT_EQ(ArgMax(leading_nan), PlainArgMax(leading_nan));
  std::vector<float> all_low(40, -INFINITY);
  EXPECT_EQ(ArgMax(all_low), 0);
  EXPECT_EQ(ArgMax(std::vector<float>{}), 0);
}

}  // namespace
}  // namespace tessera
