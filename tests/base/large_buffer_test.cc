#include "base/large_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera {
namespace {

bool AllZero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

// Whether this kernel offers transparent huge pages at all ("never" selected, or no THP).
bool ThpOffered() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  if (!f) return false;
  std::stringstream s;
  s << f.rdbuf();
  return s.str().find("[never]") == std::string::npos;
}

TEST(LargeBuffer, EmptyUntilAllocatedAndAfterZeroBytes) {
  LargeBuffer b;
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
  ASSERT_TRUE(b.Allocate(0));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

TEST(LargeBuffer, SmallIsZeroedAnd64ByteAlignedWithoutHugePages) {
  LargeBuffer b;
  ASSERT_TRUE(b.Allocate(1000));
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  EXPECT_FALSE(b.huge_pages_requested());
}

TEST(LargeBuffer, LargeIsZeroedAndHugePageAligned) {
  LargeBuffer b;
  const size_t bytes = (size_t{5} << 20) + 123;  // not a whole number of huge pages
  ASSERT_TRUE(b.Allocate(bytes));
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t{2} << 20), 0u);
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  if (ThpOffered()) {
    EXPECT_TRUE(b.huge_pages_requested());
  }
  std::memset(b.data(), 0x5a, b.size());  // every byte is ours to write
}

TEST(LargeBuffer, ReallocatingStartsZeroedAgain) {
  LargeBuffer b;
  ASSERT_TRUE(b.Allocate(4096));
  std::memset(b.data(), 0xff, b.size());
  ASSERT_TRUE(b.Allocate(4096));
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  b.Reset();
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

TEST(LargeBuffer, ImpossibleSizeFailsAndLeavesItEmpty) {
  LargeBuffer b;
  ASSERT_TRUE(b.Allocate(64));
  EXPECT_FALSE(b.Allocate(SIZE_MAX));
  EXPECT_FALSE(b.Allocate(SIZE_MAX - 100));
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace tessera
