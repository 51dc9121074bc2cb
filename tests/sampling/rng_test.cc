// Known-answer tests for splitmix64 and xoshiro256**. The expected words come from outside
// this code: splitmix64(0) = 0xe220a8397b1dcdaf... and xoshiro256** from state {1,2,3,4}
// giving 11520 then 0 are worked by hand from the published algorithms (rotl(2*5, 7)*9 =
// 11520; after one step s[1] = 0). The remaining words were produced by a separate Python
// transcription of the reference C code (arbitrary-precision integers masked to 64 bits).
#include "sampling/rng.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace tessera {
namespace {

TEST(SplitMix64Test, MatchesReferenceStreamFromZero) {
  uint64_t state = 0;
  EXPECT_EQ(SplitMix64Next(&state), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(SplitMix64Next(&state), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(SplitMix64Next(&state), 0x06c45d188009454fULL);
  EXPECT_EQ(SplitMix64Next(&state), 0xf88bb8a8724c81ecULL);
}

TEST(Xoshiro256StarStarTest, MatchesReferenceFromKnownState) {
  auto rng = Xoshiro256StarStar::FromState({1, 2, 3, 4});
  EXPECT_EQ(rng.NextU64(), 11520u);
  EXPECT_EQ(rng.NextU64(), 0u);
  EXPECT_EQ(rng.NextU64(), 1509978240u);
  EXPECT_EQ(rng.NextU64(), 1215971899390074240ULL);
}

TEST(Xoshiro256StarStarTest, SeedExpandsThroughSplitMix64) {
  Xoshiro256StarStar rng(0);
  EXPECT_EQ(rng.state()[0], 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.state()[3], 0xf88bb8a8724c81ecULL);
  EXPECT_EQ(rng.NextU64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(rng.NextU64(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(rng.NextU64(), 0x1a5f849d4933e6e0ULL);

  Xoshiro256StarStar rng42(42);
  EXPECT_EQ(rng42.NextU64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(rng42.NextU64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(rng42.NextU64(), 0xae17533239e499a1ULL);
}

TEST(Xoshiro256StarStarTest, NextDoubleIsTopBitsScaled) {
  Xoshiro256StarStar bits(99);
  Xoshiro256StarStar doubles(99);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t word = bits.NextU64();
    const double u = doubles.NextDouble();
    EXPECT_EQ(u, static_cast<double>(word >> 11) / 9007199254740992.0);  // 2^53
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Xoshiro256StarStarTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Xoshiro256StarStar a(123456789), b(123456789), c(123456790);
  std::set<uint64_t> differences;
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    if (x != c.NextU64()) differences.insert(x);
  }
  EXPECT_EQ(differences.size(), 100u);
}

}  // namespace
}  // namespace tessera
