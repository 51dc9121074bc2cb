// KvBlockPool: the bookkeeping of the KV block pool (backend/backend.h) and the block-hashed
// prefix cache, for one model. The backends hold the blocks' contents; this class decides
// which block holds what. A block is free, owned (referenced by the block tables of running
// sequences; a full block may be shared by several), or cached: it holds the positions of a
// known token prefix (registered) and nobody references it. Cached blocks are found again by
// the prefix they complete (chained: a block is keyed by its parent block and its own tokens,
// compared exactly, so a hash collision can never hand out the wrong cache), and are evicted
// least recently used first when a fresh block is needed. Every chain starts at the root of
// its CacheScope (cache_scope.h): a lookup under one scope never finds a block registered
// under another, even for the same tokens.
//
//   KvBlockPool pool(exec.kv_blocks());
//   KvBlockPool::Match m = pool.Lookup(prompt, prompt.size() - 1, scope);  // reusable prefix
//   for (int32_t b : m.shared) pool.Ref(b);                                // now in a table
//   int32_t fresh = pool.Allocate();                                       // -1: none left
//   pool.Register(fresh, m.shared.back(), block_tokens, scope);  // once full (or done)
//   pool.Unref(fresh);                                           // cached from here on
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/cache_scope.h"

namespace tessera {

class KvBlockPool {
 public:
  explicit KvBlockPool(int64_t blocks, int64_t block_tokens);

  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t block_tokens() const { return block_tokens_; }
  // Blocks a sequence can get now: free ones and cached ones nobody references (evictable).
  int64_t available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  int64_t cached() const { return static_cast<int64_t>(lru_.size()); }
  int64_t in_use() const { return blocks() - available(); }

  // The longest prefix of tokens[0, limit) cached under `scope`: whole blocks to share, then
  // possibly a block holding the next partial_tokens positions (a partial block, or a full one
  // that matches only in part or runs past `limit`) to copy. Takes no reference.
  struct Match {
    std::vector<int32_t> shared;
    int32_t partial = -1;
    int64_t partial_tokens = 0;
  };
  Match Lookup(std::span<const int32_t> tokens, int64_t limit, const CacheScope& scope) const;

  // A fresh block (free, else the least recently used cached one, forgotten), referenced
  // once; -1 when every block is referenced.
  int32_t Allocate();
  void Ref(int32_t block);
  // The last reference gone: a registered block becomes cached (most recently used), any
  // other free.
  void Unref(int32_t block);

  // Records that `block` (referenced) holds the positions of `tokens` (1..block_tokens of
  // them) following the prefix that ends with `parent` (-1: the start of a sequence under
  // `scope`; a later block belongs to its parent's scope), which must itself be registered.
  // Its contents must not change from here on. A block whose prefix is cached already (another
  // sequence computed the same) is left unregistered.
  void Register(int32_t block, int32_t parent, std::span<const int32_t> tokens,
                const CacheScope& scope);
  // Scopes that have a cached chain (bounded by the blocks: a scope goes with its last chain).
  size_t scopes() const { return roots_.size(); }
  bool registered(int32_t block) const { return blocks_[static_cast<size_t>(block)].registered; }
  // Changes whenever the block is handed out again: a record made of it (a kept recurrent
  // state) is valid while the generation it saw stands.
  uint32_t generation(int32_t block) const {
    return blocks_[static_cast<size_t>(block)].generation;
  }

 private:
  struct Block {
    int32_t refs = 0;
    bool registered = false;
    int32_t parent = -1;
    uint32_t parent_generation = 0;  // of a chain's first block (parent -1): its root's id
    uint32_t generation = 0;         // bumped when the block is reused: its old children go stale
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru;  // valid while cached
  };
  // A block's children are keyed by (block, its generation); a scope's first blocks by
  // (-1, the scope's root id).
  static uint64_t Key(int32_t parent, uint32_t generation) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(parent + 1)) << 32) | generation;
  }
  uint64_t ChildrenKey(int32_t parent) const {
    return Key(parent, blocks_[static_cast<size_t>(parent)].generation);
  }
  uint32_t RootOf(const CacheScope& scope);  // creates the scope's root when it has none
  void Forget(int32_t block);                // unregisters

  int64_t block_tokens_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;
  std::list<int32_t> lru_;  // cached blocks, least recently used first
  // Registered blocks by (parent, parent generation).
  std::unordered_map<uint64_t, std::vector<int32_t>> children_;
  // Each scope with a cached chain has a root id, freed with the scope's last first block, so
  // ids are unique among live scopes and their number is bounded by the blocks.
  std::map<CacheScope, uint32_t> roots_;
  std::vector<std::map<CacheScope, uint32_t>::iterator> root_scope_;  // by root id
  std::vector<uint32_t> free_roots_;
};

}  // namespace tessera
