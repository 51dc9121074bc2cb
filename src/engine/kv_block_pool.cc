#include "engine/kv_block_pool.h"

#include <algorithm>

namespace tessera {

KvBlockPool::KvBlockPool(int64_t blocks, int64_t block_tokens)
    : block_tokens_(block_tokens), blocks_(static_cast<size_t>(std::max<int64_t>(blocks, 0))) {
  free_.reserve(blocks_.size());
  // Handed out lowest first.
  for (int64_t b = blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

KvBlockPool::Match KvBlockPool::Lookup(std::span<const int32_t> tokens, int64_t limit,
                                       const CacheScope& scope) const {
  Match m;
  const auto root = roots_.find(scope);  // the scope's name compared exactly, not hashed
  if (root == roots_.end()) return m;
  limit = std::clamp<int64_t>(limit, 0, static_cast<int64_t>(tokens.size()));
  int32_t parent = -1;
  int64_t pos = 0;
  while (pos < limit) {
    auto it = children_.find(parent < 0 ? Key(-1, root->second) : ChildrenKey(parent));
    if (it == children_.end()) break;
    int32_t best = -1;
    int64_t best_common = 0;
    for (int32_t c : it->second) {
      const std::vector<int32_t>& held = blocks_[static_cast<size_t>(c)].tokens;
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(held.size()), limit - pos);
      int64_t common = 0;
      while (common < n &&
             held[static_cast<size_t>(common)] == tokens[static_cast<size_t>(pos + common)])
        ++common;
      // A full block wins ties: it can be shared rather than copied.
      if (common > best_common ||
          (common == best_common && common > 0 &&
           held.size() > blocks_[static_cast<size_t>(best)].tokens.size())) {
        best = c;
        best_common = common;
      }
    }
    if (best < 0) break;
    if (best_common == block_tokens_) {
      m.shared.push_back(best);
      parent = best;
      pos += block_tokens_;
      continue;
    }
    m.partial = best;
    m.partial_tokens = best_common;
    break;
  }
  return m;
}

int32_t KvBlockPool::Allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();
    lru_.pop_front();
    Forget(b);
  } else {
    return -1;
  }
  Block& block = blocks_[static_cast<size_t>(b)];
  ++block.generation;
  block.refs = 1;
  return b;
}

void KvBlockPool::Ref(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs++ == 0 && block.registered) lru_.erase(block.lru);
}

void KvBlockPool::Unref(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.refs <= 0 || --block.refs > 0) return;
  if (block.registered) {
    block.lru = lru_.insert(lru_.end(), b);
  } else {
    free_.push_back(b);
  }
}

uint32_t KvBlockPool::RootOf(const CacheScope& scope) {
  auto [it, added] = roots_.try_emplace(scope, 0);
  if (!added) return it->second;
  if (free_roots_.empty()) {
    free_roots_.push_back(static_cast<uint32_t>(root_scope_.size()));
    root_scope_.push_back(roots_.end());
  }
  it->second = free_roots_.back();
  free_roots_.pop_back();
  root_scope_[it->second] = it;
  return it->second;
}

void KvBlockPool::Register(int32_t b, int32_t parent, std::span<const int32_t> tokens,
                           const CacheScope& scope) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (block.registered || tokens.empty() || static_cast<int64_t>(tokens.size()) > block_tokens_)
    return;
  if (parent >= 0 && !blocks_[static_cast<size_t>(parent)].registered) return;  // unreachable
  // A scope's root exists only while blocks hang from it, so a new one starts with no siblings.
  const uint32_t parent_generation =
      parent < 0 ? RootOf(scope) : blocks_[static_cast<size_t>(parent)].generation;
  std::vector<int32_t>& siblings = children_[Key(parent, parent_generation)];
  for (int32_t s : siblings) {
    const std::vector<int32_t>& held = blocks_[static_cast<size_t>(s)].tokens;
    if (held.size() >= tokens.size() && std::equal(tokens.begin(), tokens.end(), held.begin()))
      return;  // cached already (this one adds nothing)
  }
  block.registered = true;
  block.parent = parent;
  block.parent_generation = parent_generation;
  block.tokens.assign(tokens.begin(), tokens.end());
  siblings.push_back(b);
}

void KvBlockPool::Forget(int32_t b) {
  Block& block = blocks_[static_cast<size_t>(b)];
  if (!block.registered) return;
  block.registered = false;
  auto it = children_.find(Key(block.parent, block.parent_generation));
  if (it != children_.end()) {
    std::erase(it->second, b);
    if (it->second.empty()) {
      children_.erase(it);
      if (block.parent < 0) {  // the scope's last first block: its root goes
        roots_.erase(root_scope_[block.parent_generation]);
        free_roots_.push_back(block.parent_generation);
      }
    }
  }
  block.tokens.clear();
}

}  // namespace tessera
