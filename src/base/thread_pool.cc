#include "base/thread_pool.h"

namespace tessera {
namespace {

// How a thread waits: a few thousand pause iterations (dispatches in the token loop arrive
// microseconds apart), then yields (when the machine is oversubscribed the thread we wait
// for may need this core), then sleeps on a futex (an idle phase: give the core away).
constexpr int kPauseIterations = 2000;
constexpr int kYieldIterations = 200;

// Returns false once the caller should stop spinning and block.
inline bool SpinOnce(int iteration) {
  if (iteration < kPauseIterations) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    return true;
  }
  if (iteration < kPauseIterations + kYieldIterations) {
    std::this_thread::yield();
    return true;
  }
  return false;
}

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
  for (int spin = 0;; ++spin) {
    int left = pending_.load(std::memory_order_acquire);
    if (left == 0) break;
    if (!SpinOnce(spin)) pending_.wait(left, std::memory_order_acquire);
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
    for (int spin = 0; gen == seen; ++spin) {
      if (!SpinOnce(spin)) generation_.wait(seen, std::memory_order_acquire);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    fn_(ctx_, thread, size());
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace tessera
