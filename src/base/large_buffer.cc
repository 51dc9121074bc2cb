#include "base/large_buffer.h"

#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tessera {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

void LargeBuffer::Free::operator()(std::byte* p) const {
  std::free(p);
}

bool LargeBuffer::Allocate(size_t bytes) {
  ptr_.reset();
  size_ = 0;
  huge_ = false;
  if (bytes == 0) return true;
  const bool large = bytes >= kHugePage;
  const size_t align = large ? kHugePage : 64;
  if (bytes > SIZE_MAX - align) return false;
  const size_t rounded = (bytes + align - 1) / align * align;
  ptr_.reset(static_cast<std::byte*>(std::aligned_alloc(align, rounded)));
  if (!ptr_) return false;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Before the memset below first touches the pages, so they are faulted in huge.
  if (large) huge_ = madvise(ptr_.get(), rounded, MADV_HUGEPAGE) == 0;
#endif
  std::memset(ptr_.get(), 0, rounded);
  size_ = bytes;
  return true;
}

}  // namespace tessera
