#include "base/thread_pool.h"

#include <chrono>

namespace tessera {
namespace {

// How a thread waits: pause for up to kSpinTime, then sleep on a futex (an idle phase: give
// the core away). Dispatches in the token loop arrive microseconds apart, and between two
// decode steps the caller samples, detokenizes and schedules for tens of microseconds; a
// waiter that fell asleep there costs a futex wake on the next dispatch (an inter-processor
// interrupt; in a VM, an exit to the hypervisor). The spin is bounded by time, not by a count
// of pauses: a pause lasts from about 10 cycles to over 140 depending on the CPU. It yields
// every kPausesPerYield pauses, so that on an oversubscribed machine the thread we wait for
// can have this core.
constexpr auto kSpinTime = std::chrono::microseconds(1000);
constexpr int64_t kPausesPerClockRead = 32;
constexpr int64_t kPausesPerYield = 1024;

class Waiter {
 public:
  // Returns false once the caller should stop spinning and block.
  bool SpinOnce() {
    ++pauses_;
    if (pauses_ % kPausesPerClockRead == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (pauses_ == kPausesPerClockRead) start_ = now;
      if (now - start_ >= kSpinTime) return false;
      if (pauses_ % kPausesPerYield == 0) {
        std::this_thread::yield();
        return true;
      }
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return true;
  }

 private:
  int64_t pauses_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

ThreadPool::ThreadPool(int threads) {
  int n = threads < 1 ? 0 : threads - 1;
  shares_ = std::make_unique<Share[]>(static_cast<size_t>(n + 1));
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { WorkerLoop(i + 1); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::Run(void (*fn)(void*, int, int), void* ctx) {
  const int threads = size();
  if (threads == 1) {
    fn(ctx, 0, 1);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(threads - 1, std::memory_order_relaxed);
  // Release: the job fields above are visible to any worker that sees the new generation.
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  fn(ctx, 0, threads);
  for (Waiter waiter;;) {
    int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (!waiter.SpinOnce()) pending_.wait(left, std::memory_order_acquire);
  }
}

bool ThreadPool::ClaimChunk(int owner, bool front, int64_t* chunk) {
  std::atomic<uint64_t>& range = shares_[static_cast<size_t>(owner)].range;
  uint64_t v = range.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = static_cast<int64_t>(v >> 32);
    const int64_t b = static_cast<int64_t>(v & 0xffffffffu);
    if (f >= b) return false;
    const uint64_t next = front ? PackShare(f + 1, b) : PackShare(f, b - 1);
    // Claims need only atomicity; the dispatch itself orders the chunks' work.
    if (range.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
      *chunk = front ? f : b - 1;
      return true;
    }
  }
}

void ThreadPool::WorkerLoop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (Waiter waiter; gen == seen;) {
      if (!waiter.SpinOnce()) generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    fn_(ctx_, thread, size());
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace tessera
