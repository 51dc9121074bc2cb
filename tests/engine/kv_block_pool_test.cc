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
const CacheScope kShared{};  // one scope for every test but the scoping ones

std::vector<int32_t> Cache(KvBlockPool& pool, const std::vector<int32_t>& tokens,
                           const CacheScope& scope = kShared) {
  std::vector<int32_t> blocks;
  for (size_t i = 0; i < tokens.size(); i += kB) {
    const int32_t b = pool.Allocate();
    EXPECT_GE(b, 0);
    const size_t n = std::min<size_t>(kB, tokens.size() - i);
    pool.Register(b, blocks.empty() ? -1 : blocks.back(),
                  std::span<const int32_t>(tokens).subspan(i, n), scope);
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
  auto m = pool.Lookup(longer, static_cast<int64_t>(longer.size()) - 1, kShared);
  EXPECT_EQ(m.shared, (std::vector<int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(m.partial, blocks[2]);
  EXPECT_EQ(m.partial_tokens, 2);

  // Diverging inside the second block: one block shared, 2 tokens of the next to copy.
  std::vector<int32_t> diverged = Range(100, 6);
  diverged.push_back(-5);
  diverged.push_back(1);
  m = pool.Lookup(diverged, 8, kShared);
  EXPECT_EQ(m.shared, std::vector<int32_t>{blocks[0]});
  EXPECT_EQ(m.partial, blocks[1]);
  EXPECT_EQ(m.partial_tokens, 2);

  // The limit cuts a whole block: copied in part, not shared.
  m = pool.Lookup(text, 7, kShared);
  EXPECT_EQ(m.shared, std::vector<int32_t>{blocks[0]});
  EXPECT_EQ(m.partial, blocks[1]);
  EXPECT_EQ(m.partial_tokens, 3);

  // The same tokens after a different first block are a different prefix.
  std::vector<int32_t> other = Range(500, 4);
  other.insert(other.end(), text.begin() + 4, text.end());
  m = pool.Lookup(other, static_cast<int64_t>(other.size()), kShared);
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
  EXPECT_TRUE(pool.Lookup(Range(10, 5), 5, kShared).shared.empty());
  EXPECT_EQ(pool.Lookup(Range(0, 5), 5, kShared).shared, a);
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
  pool.Register(y, -1, Range(0, 4), kShared);
  const auto m = pool.Lookup(Range(0, 9), 9, kShared);
  EXPECT_EQ(m.shared, std::vector<int32_t>{y});
  EXPECT_EQ(m.partial, -1);
  (void)x;
}

TEST(KvBlockPool, ASecondCopyOfACachedPrefixIsNotRegistered) {
  KvBlockPool pool(4, kB);
  Cache(pool, Range(0, 4));
  const int32_t dup = pool.Allocate();
  pool.Register(dup, -1, Range(0, 4), kShared);
  EXPECT_FALSE(pool.registered(dup));
  pool.Unref(dup);
  EXPECT_EQ(pool.cached(), 1);  // the duplicate went back to the free list
  // A partial block that a cached full block already covers adds nothing either.
  const int32_t part = pool.Allocate();
  pool.Register(part, -1, Range(0, 3), kShared);
  EXPECT_FALSE(pool.registered(part));
  pool.Unref(part);
}

// Prefix-cache isolation: the same tokens cached under one scope are not found under another
// (another key, another salt, or a tenant whose name and salt run together differently), the
// same scope still finds them whole, and each scope's copy is its own.
TEST(KvBlockPool, AScopeFindsOnlyItsOwnBlocks) {
  KvBlockPool pool(16, kB);
  const CacheScope alice{"alice", ""}, bob{"bob", ""};
  const std::vector<int32_t> text = Range(100, 10);
  const auto blocks = Cache(pool, text, alice);
  EXPECT_EQ(pool.scopes(), 1u);
  for (const CacheScope& other : {bob, kShared, CacheScope{"alice", "s1"}, CacheScope{"alic", "e"},
                                  CacheScope{"", "alice"}}) {
    const auto m = pool.Lookup(text, static_cast<int64_t>(text.size()), other);
    EXPECT_TRUE(m.shared.empty()) << other.tenant << "/" << other.salt;
    EXPECT_EQ(m.partial, -1) << other.tenant << "/" << other.salt;
  }
  auto m = pool.Lookup(text, static_cast<int64_t>(text.size()), alice);
  EXPECT_EQ(m.shared, (std::vector<int32_t>{blocks[0], blocks[1]}));
  EXPECT_EQ(m.partial, blocks[2]);
  EXPECT_EQ(m.partial_tokens, 2);

  // Bob computes the same text: registered under his scope (not a duplicate of Alice's).
  const auto bobs = Cache(pool, text, bob);
  EXPECT_EQ(pool.scopes(), 2u);
  EXPECT_EQ(pool.cached(), 6);
  m = pool.Lookup(text, static_cast<int64_t>(text.size()), bob);
  EXPECT_EQ(m.shared, (std::vector<int32_t>{bobs[0], bobs[1]}));
  EXPECT_EQ(m.partial, bobs[2]);
  // Salts split one key's scope the same way.
  const CacheScope salted{"bob", "tenant-7"};
  EXPECT_TRUE(pool.Lookup(text, 10, salted).shared.empty());
  const auto salted_blocks = Cache(pool, Range(100, 4), salted);
  EXPECT_EQ(pool.Lookup(text, 10, salted).shared, salted_blocks);
  EXPECT_EQ(pool.Lookup(text, 10, bob).shared, (std::vector<int32_t>{bobs[0], bobs[1]}));
}

// A scope's root goes with its last cached chain (so clients naming new salts cannot grow the
// pool's bookkeeping past its blocks), and a later scope reusing the freed root id does not see
// blocks of the one before.
TEST(KvBlockPool, AScopeWithNoCachedBlocksIsForgotten) {
  KvBlockPool pool(2, kB);
  Cache(pool, Range(0, 4), CacheScope{"a", "1"});
  Cache(pool, Range(0, 4), CacheScope{"a", "2"});
  EXPECT_EQ(pool.scopes(), 2u);
  for (int i = 3; i < 40; ++i) {  // each new scope evicts the least recently used block
    const CacheScope scope{"a", std::to_string(i)};
    EXPECT_TRUE(pool.Lookup(Range(0, 4), 4, scope).shared.empty()) << i;
    Cache(pool, Range(0, 4), scope);
    EXPECT_EQ(pool.scopes(), 2u) << i;
    EXPECT_EQ(pool.Lookup(Range(0, 4), 4, scope).shared.size(), 1u) << i;
    EXPECT_TRUE(pool.Lookup(Range(0, 4), 4, CacheScope{"a", std::to_string(i - 2)}).shared.empty());
  }
}

}  // namespace
}  // namespace tessera
