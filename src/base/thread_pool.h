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
#pragma once

#include <atomic>
#include <cstdint>
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

  // Calls fn(ctx, thread, size()) once on every thread (thread 0 is the caller) and returns
  // when all calls have returned. Not reentrant: one dispatch at a time, from one thread.
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

  std::vector<std::thread> workers_;
  // Bumped once per dispatch; workers run the job when it moves past what they last saw.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current job
  std::atomic<bool> stop_{false};
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
};

}  // namespace tessera
