// KvBlockPool: the bookkeeping of the KV block pool and its prefix cache. Blocks are shared
// only for an exact token match of their whole prefix chain, partial matches are reported for
// copying, cached blocks are evicted least recently used first, and an evicted block's
// descendants can no longer be found (their prefix is gone).
#include "engine/kv_block_pool.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace tessera {
namespace {

constexpr int64_t kB = 4;  // tokens per block in these tests

std::vector<int32_t> Range(int32_t first, int n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// Allocates blocks for `tokens` and registers every block (the last one possibly partial),
// then releases them: the prefix is cached.
std::vector<int32_t> Cache(KvBlockPool& pool, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> blocks;
  for (size_t i = 0; i < tokens.size(); i += kB) {
    const int32_t b = pool.Allocate();
    EXPECT_GE(b, 0);
    const size_t n = std::min<size_t>(kB, tokens.size() - i);
    pool.Register(b, blocks.empty() ? -1 : blocks.back(),
                  std::span<const int32_t>(tokens).subspan(i, n));
    blocks.push_back(b);
  }
  for (int32_t b : blocks) pool.Unref(b);
  return blocks;
}

TEST(KvBlockPool, SharesWholeBlocksAndReportsAPartialOneToCopy) {
  KvBlockPool pool(8, kB);
  const std::vector<int32_t> text = Range(100, 10);  // blocks of 4, 4, 2
  const auto blocks = Cache(pool, text);
  EXPECT_EQ(pool.cached(), 3);
  EXPECT_EQ(pool.available(), 8);

  // The same text and more: two whole blocks, then the 2-token block copied.
  std::vector<int32_t> longer = text;
  longer.push_back(7);
  auto m = pool.Lookup(longer, static_cast<int64_t>(longer.size()) - 1);
  EXPECT_EQ(m.shared, (std::vector<int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(m.partial, blocks[2]);
  EXPECT_EQ(m.partial_tokens, 2);

  // Diverging inside the second block: one block shared, 2 tokens of the next to copy.
  std::vector<int32_t> diverged = Range(100, 6);
  diverged.push_back(-5);
  diverged.push_back(1);
  m = pool.Lookup(diverged, 8);
  EXPECT_EQ(m.shared, std::vector<int32_t>{blocks[0]});
  EXPECT_EQ(m.partial, blocks[1]);
  EXPECT_EQ(m.partial_tokens, 2);

  // The limit cuts a whole block: copied in part, not shared.
  m = pool.Lookup(text, 7);
  EXPECT_EQ(m.shared, std::vector<int32_t>{blocks[0]});
  EXPECT_EQ(m.partial, blocks[1]);
  EXPECT_EQ(m.partial_tokens, 3);

  // The same tokens after a different first block are a different prefix.
  std::vector<int32_t> other = Range(500, 4);
  other.insert(other.end(), text.begin() + 4, text.end());
  m = pool.Lookup(other, static_cast<int64_t>(other.size()));
  EXPECT_TRUE(m.shared.empty());
  EXPECT_EQ(m.partial, -1);
}

TEST(KvBlockPool, ReferencesKeepBlocksFromEvictionAndLruGoesFirst) {
  KvBlockPool pool(4, kB);
  const auto a = Cache(pool, Range(0, 4));
  const auto b = Cache(pool, Range(10, 4));
  const auto c = Cache(pool, Range(20, 4));
  EXPECT_EQ(pool.cached(), 3);
  // Using `a` again makes `b` the least recently used.
  pool.Ref(a[0]);
  pool.Unref(a[0]);
  const int32_t fresh1 = pool.Allocate();  // the free block
  const int32_t fresh2 = pool.Allocate();  // evicts b
  EXPECT_NE(fresh1, -1);
  EXPECT_EQ(fresh2, b[0]);
  EXPECT_TRUE(pool.Lookup(Range(10, 5), 5).shared.empty());
  EXPECT_EQ(pool.Lookup(Range(0, 5), 5).shared, a);
  // A referenced cached block is not evictable: with c and a referenced, nothing is left.
  pool.Ref(a[0]);
  pool.Ref(c[0]);
  EXPECT_EQ(pool.available(), 0);
  EXPECT_EQ(pool.Allocate(), -1);
  pool.Unref(fresh1);  // never registered: free again
  EXPECT_EQ(pool.available(), 1);
  EXPECT_EQ(pool.in_use(), 3);
}

TEST(KvBlockPool, AnEvictedBlocksDescendantsAreNotFound) {
  KvBlockPool pool(3, kB);
  const auto chain = Cache(pool, Range(0, 8));  // two blocks, the second a child of the first
  pool.Ref(chain[1]);                           // keep the child; the parent is evictable
  const int32_t x = pool.Allocate();            // the free block
  const int32_t y = pool.Allocate();            // evicts the parent
  EXPECT_EQ(y, chain[0]);
  // The parent's block now holds other tokens; registering the same first tokens again must
  // not bring back the old child.
  pool.Register(y, -1, Range(0, 4));
  const auto m = pool.Lookup(Range(0, 9), 9);
  EXPECT_EQ(m.shared, std::vector<int32_t>{y});
  EXPECT_EQ(m.partial, -1);
  (void)x;
}

TEST(KvBlockPool, ASecondCopyOfACachedPrefixIsNotRegistered) {
  KvBlockPool pool(4, kB);
  Cache(pool, Range(0, 4));
  const int32_t dup = pool.Allocate();
  pool.Register(dup, -1, Range(0, 4));
  EXPECT_FALSE(pool.registered(dup));
  pool.Unref(dup);
  EXPECT_EQ(pool.cached(), 1);  // the duplicate went back to the free list
  // A partial block that a cached full block already covers adds nothing either.
  const int32_t part = pool.Allocate();
  pool.Register(part, -1, Range(0, 3));
  EXPECT_FALSE(pool.registered(part));
  pool.Unref(part);
}

}  // namespace
}  // namespace tessera
