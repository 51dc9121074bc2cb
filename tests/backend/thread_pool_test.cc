#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
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

TEST(ThreadPool, BalancedCoversEveryIndexOnceInGrainAlignedChunks) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1001}) {
      for (int64_t grain : {0, 1, 3, 4, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        const int64_t g = std::max<int64_t>(grain, 1);
        pool.ParallelForBalanced(n, grain, [&](int64_t b, int64_t e, int thread) {
          EXPECT_GE(thread, 0);
          EXPECT_LT(thread, threads);
          EXPECT_EQ(b % g, 0) << "chunk does not start on a grain boundary";
          EXPECT_TRUE(e - b == g || e == n) << "only the last chunk may be short";
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (int64_t i = 0; i < n; ++i)
          EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1)
              << "threads " << threads << " n " << n << " grain " << grain << " index " << i;
      }
    }
  }
}

// Each thread walks its own share front to back (one sequential stream), and takes other
// shares' chunks only from their back.
TEST(ThreadPool, BalancedWalksOwnShareForwardAndStealsFromTheBack) {
  const int threads = 3;
  ThreadPool pool(threads);
  const int64_t chunks = 30;
  for (int round = 0; round < 50; ++round) {
    std::mutex mu;
    std::vector<std::vector<int64_t>> order(threads);
    pool.ParallelForBalanced(chunks, 1, [&](int64_t b, int64_t, int thread) {
      std::lock_guard<std::mutex> lock(mu);
      order[static_cast<size_t>(thread)].push_back(b);
    });
    for (int t = 0; t < threads; ++t) {
      int64_t next_own = chunks * t / threads;
      std::vector<int64_t> last_stolen(threads, chunks);
      for (int64_t c : order[static_cast<size_t>(t)]) {
        int owner = 0;
        while (c >= chunks * (owner + 1) / threads) ++owner;
        if (owner == t) {
          EXPECT_EQ(c, next_own) << "own share out of order";
          ++next_own;
        } else {
          EXPECT_LT(c, last_stolen[static_cast<size_t>(owner)]) << "stolen front to back";
          last_stolen[static_cast<size_t>(owner)] = c;
        }
      }
    }
  }
}

// A thread held up inside its first chunk does not hold up the rest of its share: another
// thread takes it. Fails (after a bounded wait) if nothing is ever stolen.
TEST(ThreadPool, BalancedIdleThreadTakesAStalledThreadsChunks) {
  ThreadPool pool(2);
  std::atomic<bool> stolen{false};
  std::atomic<bool> gave_up{false};
  pool.ParallelForBalanced(8, 1, [&](int64_t b, int64_t, int thread) {
    if (thread == 1 && b < 4) stolen = true;  // a chunk of thread 0's share [0, 4)
    if (thread == 0 && b == 0) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!stolen.load()) {
        if (std::chrono::steady_clock::now() > deadline) {
          gave_up = true;
          break;
        }
        std::this_thread::yield();
      }
    }
  });
  EXPECT_TRUE(stolen.load());
  EXPECT_FALSE(gave_up.load());
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
