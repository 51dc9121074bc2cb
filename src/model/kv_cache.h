// KvCache: keys and values for a contiguous range of decoder layers, one region per sequence
// slot, allocated once at load (never in the token loop). Elements are fp32 (KvCache) or bf16
// bits (KvCacheBf16, the cpu backend's default cache: half the memory and the bytes read per
// step; a value is rounded to nearest-even when written).
//
//   KvCache kv;
//   kv.Allocate(/*slots=*/1, /*layers=*/4, /*max_seq=*/512, /*kv_dim=*/64);
//   float* k = kv.Key(slot, layer, pos);  // kv_dim floats
#pragma once

#include <algorithm>
#include <cstdint>

#include "base/large_buffer.h"
#include "base/status.h"

namespace tessera {

template <typename T>
class BasicKvCache {
 public:
  // `with_keys` false: values only (a backend that keeps its keys in a layout of its own);
  // Key() is then null.
  Status Allocate(int slots, int64_t layers, int64_t max_seq, int64_t kv_dim,
                  bool with_keys = true);
  bool has_keys() const { return keys_.data() != nullptr; }

  int slots() const { return slots_; }
  int64_t layers() const { return layers_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t kv_dim() const { return kv_dim_; }

  // Layout: keys_[slot][layer][pos][kv_dim], the same for values_.
  T* Key(int slot, int64_t layer, int64_t pos) {
    return has_keys() ? reinterpret_cast<T*>(keys_.data()) + Offset(slot, layer, pos) : nullptr;
  }
  T* Value(int slot, int64_t layer, int64_t pos) {
    return reinterpret_cast<T*>(values_.data()) + Offset(slot, layer, pos);
  }
  size_t bytes() const { return keys_.size() + values_.size(); }

  // Copies positions [first, first + n) of every layer from slot `from` to slot `to`.
  void CopyPositions(int from, int to, int64_t first, int64_t n) {
    for (int64_t l = 0; l < layers_; ++l) {
      if (has_keys()) std::copy_n(Key(from, l, first), n * kv_dim_, Key(to, l, first));
      std::copy_n(Value(from, l, first), n * kv_dim_, Value(to, l, first));
    }
  }

 private:
  size_t Offset(int slot, int64_t layer, int64_t pos) const {
    return ((static_cast<size_t>(slot) * static_cast<size_t>(layers_) +
             static_cast<size_t>(layer)) *
                static_cast<size_t>(max_seq_) +
            static_cast<size_t>(pos)) *
           static_cast<size_t>(kv_dim_);
  }
  int slots_ = 0;
  int64_t layers_ = 0;
  int64_t max_seq_ = 0;
  int64_t kv_dim_ = 0;
  // Zeroed, on transparent huge pages where large (decode reads small blocks all over them).
  LargeBuffer keys_;
  LargeBuffer values_;
};

using KvCache = BasicKvCache<float>;
using KvCacheBf16 = BasicKvCache<uint16_t>;

extern template class BasicKvCache<float>;
extern template class BasicKvCache<uint16_t>;

}  // namespace tessera
