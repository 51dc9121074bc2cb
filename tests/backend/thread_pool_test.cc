#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace tessera {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t b, int64_t e, int thread) {
        EXPECT_GE(thread, 0);
        EXPECT_LT(thread, threads);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i)
        EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << i;
    }
  }
}

TEST(ThreadPool, ManyBackToBackDispatchesAllComplete) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 3000; ++round) {
    pool.ParallelFor(6, [&](int64_t b, int64_t e, int) { total += e - b; });
  }
  EXPECT_EQ(total.load(), 3000 * 6);
}

TEST(ThreadPool, RunCallsEveryThreadOnceWithItsIndex) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  struct Ctx {
    std::vector<std::atomic<int>>* seen;
  } ctx{&seen};
  pool.Run(
      [](void* p, int thread, int threads) {
        EXPECT_EQ(threads, 4);
        (*static_cast<Ctx*>(p)->seen)[static_cast<size_t>(thread)]++;
      },
      &ctx);
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, IdleWorkersWakeUpAfterSleeping) {
  ThreadPool pool(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin phase
  std::atomic<int> count{0};
  pool.ParallelFor(2, [&](int64_t b, int64_t e, int) { count += static_cast<int>(e - b); });
  EXPECT_EQ(count.load(), 2);
}

}  // namespace
}  // namespace tessera
