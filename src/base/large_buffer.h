// LargeBuffer: a zero-filled byte buffer sized once, for the big arrays the token loop reads
// at scattered places (the KV block pool, the transposed key cache). From 2 MiB up it is
// 2 MiB-aligned and asks the kernel for transparent huge pages (madvise, before the first
// touch) so that a decode step's reads of many small blocks do not each walk the page tables
// after the weights' streaming has emptied the TLB; where the kernel declines, it is ordinary
// memory with the same contents.
//
//   LargeBuffer b;
//   if (!b.Allocate(bytes)) return ResourceExhausted("...");
//   auto* keys = reinterpret_cast<uint16_t*>(b.data());  // bytes zeroed bytes
#pragma once

#include <cstddef>
#include <memory>

namespace tessera {

class LargeBuffer {
 public:
  // Frees what was held, then holds `bytes` zeroed bytes (none for 0). False when the memory
  // cannot be had (the buffer is then empty).
  bool Allocate(size_t bytes);
  void Reset() { Allocate(0); }
  std::byte* data() { return ptr_.get(); }
  const std::byte* data() const { return ptr_.get(); }
  size_t size() const { return size_; }
  // Whether the huge-page request was made and accepted (for tests).
  bool huge_pages_requested() const { return huge_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> ptr_;
  size_t size_ = 0;
  bool huge_ = false;
};

}  // namespace tessera
