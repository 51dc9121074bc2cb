// KvCache: fp32 keys and values for a contiguous range of decoder layers, one region per
// sequence slot, allocated once at load (never in the token loop).
//
//   KvCache kv;
//   kv.Allocate(/*slots=*/1, /*layers=*/4, /*max_seq=*/512, /*kv_dim=*/64);
//   float* k = kv.Key(slot, layer, pos);  // kv_dim floats
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace tessera {

class KvCache {
 public:
  Status Allocate(int slots, int64_t layers, int64_t max_seq, int64_t kv_dim);

  int slots() const { return slots_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t kv_dim() const { return kv_dim_; }

  // Layout: keys_[slot][layer][pos][kv_dim], the same for values_.
  float* Key(int slot, int64_t layer, int64_t pos) {
    return keys_.data() + Offset(slot, layer, pos);
  }
  float* Value(int slot, int64_t layer, int64_t pos) {
    return values_.data() + Offset(slot, layer, pos);
  }
  size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

  // Copies positions [first, first + n) of every layer from slot `from` to slot `to`.
  void CopyPositions(int from, int to, int64_t first, int64_t n) {
    for (int64_t l = 0; l < layers_; ++l) {
      std::copy_n(Key(from, l, first), n * kv_dim_, Key(to, l, first));
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
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace tessera
