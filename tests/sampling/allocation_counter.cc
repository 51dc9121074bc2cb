// Kept in its own translation unit: with the replacement operators visible to the inliner,
// g++ pairs an inlined malloc with an inlined free and reports a false new/delete mismatch.
#include "allocation_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int> g_allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, size_t) noexcept {
  std::free(memory);
}

namespace tessera::test {

void StartCountingAllocations() {
  g_allocations = 0;
  g_counting = true;
}

int StopCountingAllocations() {
  g_counting = false;
  return g_allocations.load();
}

}  // namespace tessera::test
