// ThreadPool: a fixed set of persistent worker threads for fork-join loops in the token loop.
// A dispatch publishes one job, the caller runs its own share, then waits for the others.
// Workers spin briefly before sleeping on a futex (std::atomic::wait), so back-to-back
// dispatches (one per matmul) cost a cache-line handoff, not a syscall. Nothing allocates
// per dispatch: the job is a function pointer plus a context pointer.
//
//   ThreadPool pool(2);  // the caller plus one worker
//   pool.ParallelFor(rows, [&](int64_t begin, int64_t end, int thread) {
//     for (int64_t r = begin; r < end; ++r) y[r] = Dot(w + r * k, x, k);
//   });
//   pool.ParallelForBalanced(rows, /*grain=*/64, same_fn);  // when thread speeds vary
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

namespace tessera {

class ThreadPool {
 public:
  // `threads` counts the calling thread; values < 1 mean 1 (no workers, everything inline).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Splits [0, n) into chunks of `grain` indices (the last may be shorter) and calls
  // fn(begin, end, thread) once per chunk. Each thread first walks its own contiguous share of
  // the chunks front to back (the same shares ParallelFor would give, so a memory-bound loop
  // keeps one sequential stream per thread); a thread that runs out takes chunks from the
  // back of the other threads' shares. On a shared machine two threads streaming equal
  // shares routinely finish 10-20 % apart; this ends a dispatch at most one chunk apart.
  template <typename Fn>
  void ParallelForBalanced(int64_t n, int64_t grain, Fn&& fn) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    const int64_t chunks = (n + grain - 1) / grain;
    if (workers_.empty() || chunks == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    if (chunks > kMaxBalancedChunks) {  // keep chunk indices in 32 bits, chunks whole grains
      const int64_t grains = (chunks + kMaxBalancedChunks - 1) / kMaxBalancedChunks;
      ParallelForBalanced(n, grain * grains, fn);
      return;
    }
    const int threads = size();
    for (int t = 0; t < threads; ++t) {
      shares_[static_cast<size_t>(t)].range.store(
          PackShare(chunks * t / threads, chunks * (t + 1) / threads), std::memory_order_relaxed);
    }
    struct Ctx {
      std::remove_reference_t<Fn>* fn;
      int64_t n, grain;
      ThreadPool* pool;
    } ctx{&fn, n, grain, this};
    Run(
        [](void* p, int thread, int threads) {
          auto* c = static_cast<Ctx*>(p);
          auto call = [c, thread](int64_t chunk) {
            const int64_t begin = chunk * c->grain;
            (*c->fn)(begin, std::min(c->n, begin + c->grain), thread);
          };
          int64_t chunk;
          while (c->pool->ClaimChunk(thread, /*front=*/true, &chunk)) call(chunk);
          for (int i = 1; i < threads; ++i) {
            const int victim = (thread + i) % threads;
            while (c->pool->ClaimChunk(victim, /*front=*/false, &chunk)) call(chunk);
          }
        },
        &ctx);
  }

  // Calls fn(ctx, thread, size()) once on every thread (thread 0 is the caller) and returns
  // when all calls have returned. Not reentrant: one dispatch at a time, from one thread.
  // fn must not throw (workers would still be using ctx while the caller unwound); the
  // ParallelFor variants pass the same rule on to their callables.
  void Run(void (*fn)(void* ctx, int thread, int threads), void* ctx);

  // Splits [0, n) into size() contiguous ranges of near-equal length and calls
  // fn(begin, end, thread) for each non-empty one.
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn) {
    if (n <= 0) return;
    if (workers_.empty() || n == 1) {
      fn(int64_t{0}, n, 0);
      return;
    }
    struct Ctx {
      std::remove_reference_t<Fn>* fn;  // Fn is a reference type for lvalue callables
      int64_t n;
    } ctx{&fn, n};
    Run(
        [](void* p, int thread, int threads) {
          auto* c = static_cast<Ctx*>(p);
          int64_t begin = c->n * thread / threads;
          int64_t end = c->n * (thread + 1) / threads;
          if (begin < end) (*c->fn)(begin, end, thread);
        },
        &ctx);
  }

 private:
  void WorkerLoop(int thread);

  static constexpr int64_t kMaxBalancedChunks = int64_t{1} << 30;
  // One thread's unclaimed chunks [front, back) of a balanced dispatch, packed in one word so
  // that the owner (taking the front) and thieves (taking the back) claim with one CAS.
  struct alignas(64) Share {
    std::atomic<uint64_t> range{0};
  };
  static uint64_t PackShare(int64_t front, int64_t back) {
    return (static_cast<uint64_t>(front) << 32) | static_cast<uint64_t>(back);
  }
  bool ClaimChunk(int owner, bool front, int64_t* chunk);

  std::unique_ptr<Share[]> shares_;  // [size()]

  std::vector<std::thread> workers_;
  // Bumped once per dispatch; workers run the job when it moves past what they last saw.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current job
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace tessera
