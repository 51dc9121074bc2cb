// KvStore: the CPU backend's key/value caches of some layers, in one precision (fp32 or bf16,
// BackendOptions::kv_cache) and one layout, for the sliding-window rings (slots x positions)
// and for the paged block pool (one slot whose positions are all the pool's blocks in turn).
//
//   KvStore pool;
//   pool.Allocate(/*use_bf16=*/true, KvStore::Layout::kHeadMajor, /*slots=*/1, layers,
//                 blocks * kKvBlockTokens, kv_dim, head_dim);
//   pool.Write(0, layer, block * kKvBlockTokens + row, k, v, kernels.to_bf16);
//   const uint16_t* k_g = pool.Keys<uint16_t>(0, layer) + pool.At(pos, g);
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/status.h"
#include "model/kv_cache.h"

namespace tessera {

// Slot caches of some layers in the precision BackendOptions::kv_cache chose (one of the two
// is allocated); bf16 values are rounded to nearest-even as they are written.
// Layouts of one (slot, layer) region of max_seq positions:
//   kInterleaved: [max_seq][kv_dim], a position's kv heads side by side (the sliding rings).
//   kHeadMajor:   [kv_heads][max_seq][head_dim], each kv head's positions contiguous (the KV
//                 block pool, where max_seq spans every block: [layer][kv head][block][row]).
//                 A decode attention task reads one kv head, so a sequence whose blocks were
//                 taken in order reads its keys and values as one run per layer, which the
//                 hardware prefetchers follow. Measured in the model (smollm2-135m INT8, 1024
//                 positions, 8 streams): attention 10.2-10.3 -> 8.0-8.2 ms per step
//                 against the interleaved per-slot layout (many_users.md, session 21).
struct KvStore {
  enum class Layout : uint8_t { kInterleaved, kHeadMajor };
  bool bf16 = false;
  Layout layout = Layout::kInterleaved;
  int64_t head_dim = 0;
  KvCache f32;
  KvCacheBf16 b16;

  // `with_keys` false: values only, Keys() null (the blocked attention kernel reads the keys
  // from a transposed copy the backend keeps).
  Status Allocate(bool use_bf16, Layout l, int slots, int64_t layers, int64_t max_seq,
                  int64_t kv_dim, int64_t head, bool with_keys = true) {
    bf16 = use_bf16;
    layout = l;
    head_dim = head;
    return bf16 ? b16.Allocate(slots, layers, max_seq, kv_dim, with_keys)
                : f32.Allocate(slots, layers, max_seq, kv_dim, with_keys);
  }
  bool has_keys() const { return bf16 ? b16.has_keys() : f32.has_keys(); }
  int slots() const { return bf16 ? b16.slots() : f32.slots(); }
  int64_t max_seq() const { return bf16 ? b16.max_seq() : f32.max_seq(); }
  int64_t kv_dim() const { return bf16 ? b16.kv_dim() : f32.kv_dim(); }
  // Elements from one position to the next, and from one kv head to the next.
  int64_t position_stride() const { return layout == Layout::kHeadMajor ? head_dim : kv_dim(); }
  int64_t head_stride() const {
    return layout == Layout::kHeadMajor ? max_seq() * head_dim : head_dim;
  }
  // Offset of (pos, kv head g) from the start of a (slot, layer) region.
  int64_t At(int64_t pos, int64_t g) const { return pos * position_stride() + g * head_stride(); }
  // Where (slot, layer)'s keys or values start; element (pos, g, i) is At(pos, g) + i past it.
  template <typename T>
  T* Start(bool values, int slot, int64_t layer) {
    if constexpr (std::is_same_v<T, uint16_t>) {
      return values ? b16.Value(slot, layer, 0) : b16.Key(slot, layer, 0);
    } else {
      return values ? f32.Value(slot, layer, 0) : f32.Key(slot, layer, 0);
    }
  }
  template <typename T>
  T* Keys(int slot, int64_t layer) {
    return Start<T>(false, slot, layer);
  }
  template <typename T>
  T* Values(int slot, int64_t layer) {
    return Start<T>(true, slot, layer);
  }
  // `to_bf16`: the kernel table's rounding (the bits of FloatToBf16 on every ISA).
  void Write(int slot, int64_t layer, int64_t pos, const float* k, const float* v,
             void (*to_bf16)(const float*, int64_t, uint16_t*)) {
    const int64_t heads = layout == Layout::kHeadMajor ? kv_dim() / head_dim : 1;
    const int64_t n = layout == Layout::kHeadMajor ? head_dim : kv_dim();
    for (int64_t g = 0; g < heads; ++g) {
      const int64_t at = At(pos, g);
      if (bf16) {
        if (has_keys()) to_bf16(k + g * n, n, Keys<uint16_t>(slot, layer) + at);
        to_bf16(v + g * n, n, Values<uint16_t>(slot, layer) + at);
      } else {
        if (has_keys()) std::copy_n(k + g * n, n, Keys<float>(slot, layer) + at);
        std::copy_n(v + g * n, n, Values<float>(slot, layer) + at);
      }
    }
  }
  // Copies positions [first, first + n) of every layer from slot `from` to slot `to`.
  void CopyPositions(int from, int to, int64_t first, int64_t n) {
    CopyPositions(from, first, to, first, n);
  }
  // Copies positions [from_pos, from_pos + n) of slot `from` to [to_pos, to_pos + n) of slot
  // `to`, every layer.
  void CopyPositions(int from, int64_t from_pos, int to, int64_t to_pos, int64_t n) {
    const int64_t layers = bf16 ? b16.layers() : f32.layers();
    const int64_t heads = layout == Layout::kHeadMajor ? kv_dim() / head_dim : 1;
    const int64_t run = n * (layout == Layout::kHeadMajor ? head_dim : kv_dim());
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t g = 0; g < heads; ++g) {
        const int64_t a = At(from_pos, g), b = At(to_pos, g);
        if (bf16) {
          if (has_keys()) std::copy_n(Keys<uint16_t>(from, l) + a, run, Keys<uint16_t>(to, l) + b);
          std::copy_n(Values<uint16_t>(from, l) + a, run, Values<uint16_t>(to, l) + b);
        } else {
          if (has_keys()) std::copy_n(Keys<float>(from, l) + a, run, Keys<float>(to, l) + b);
          std::copy_n(Values<float>(from, l) + a, run, Values<float>(to, l) + b);
        }
      }
    }
  }
};

}  // namespace tessera
