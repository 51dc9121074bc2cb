// KvBlockTables: a backend's check and lookup of a chunk's block table (backend.h): its own
// table, or the identity layout of its slot when it has none.
//
//   KvBlockTables tables;
//   tables.Init(kv);                                       // at LoadLayers
//   TS_ASSIGN_OR_RETURN(const int32_t* blocks, tables.For(chunk));
//   int32_t block = blocks[pos >> kKvBlockShift];          // row pos & (kKvBlockTokens - 1)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tessera {

class KvBlockTables {
 public:
  void Init(const KvCacheConfig& kv) {
    pool_ = kv.pool_blocks();
    per_slot_ = KvBlocksFor(kv.max_seq);
    identity_.resize(static_cast<size_t>(kv.max_slots * per_slot_));
    for (size_t i = 0; i < identity_.size(); ++i) {
      identity_[i] = i < static_cast<size_t>(pool_) ? static_cast<int32_t>(i) : -1;
    }
  }
  int64_t pool_blocks() const { return pool_; }

  // Backend::CopyKvBlock's arguments: two blocks of the pool and a count within a block.
  Status CheckBlockCopy(int32_t from, int32_t to, int64_t positions) const {
    if (from < 0 || from >= pool_ || to < 0 || to >= pool_ || positions < 0 ||
        positions > kKvBlockTokens) {
      return InvalidArgument("bad KV block copy: blocks " + std::to_string(from) + " -> " +
                             std::to_string(to) + " of " + std::to_string(pool_) + ", " +
                             std::to_string(positions) + " positions");
    }
    return Status::Ok();
  }

  // The table of `c` (slot and positions already checked), every block it needs checked.
  Expected<const int32_t*> For(const SequenceChunk& c) const {
    const int64_t needed = KvBlocksFor(c.start_pos + c.n_tokens);
    const int32_t* t = c.blocks.data();
    if (c.blocks.empty()) {
      t = identity_.data() + static_cast<int64_t>(c.slot) * per_slot_;
    } else if (static_cast<int64_t>(c.blocks.size()) < needed) {
      return InvalidArgument("a block table of " + std::to_string(c.blocks.size()) +
                             " blocks does not cover position " +
                             std::to_string(c.start_pos + c.n_tokens - 1));
    }
    for (int64_t i = 0; i < needed; ++i) {
      if (t[i] < 0 || t[i] >= pool_) {
        return OutOfRange(c.blocks.empty()
                              ? "slot " + std::to_string(c.slot) +
                                    " has no blocks of its own in a KV pool of " +
                                    std::to_string(pool_) + " blocks (pass a block table)"
                              : "KV block " + std::to_string(t[i]) + " is outside the pool of " +
                                    std::to_string(pool_));
      }
    }
    return t;
  }

 private:
  int64_t pool_ = 0;
  int64_t per_slot_ = 0;
  std::vector<int32_t> identity_;
};

}  // namespace tessera
