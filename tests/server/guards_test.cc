#include "server/guards.h"

#include <condition_variable>
#include <mutex>

#include "server/api_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace tessera::server {
namespace {

TEST(AdmissionQueue, OneActiveTwoQueuedThenFull) {
  AdmissionQueue q(1, 2);
  auto deadline = AdmissionQueue::Clock::now() + std::chrono::seconds(5);
  auto a = q.Enter();
  ASSERT_TRUE(a.admitted);
  ASSERT_TRUE(q.WaitTurn(a.ticket, deadline));
  auto b = q.Enter();
  auto c = q.Enter();
  EXPECT_TRUE(b.admitted);
  EXPECT_TRUE(c.admitted);
  auto d = q.Enter();
  EXPECT_FALSE(d.admitted);
  EXPECT_GE(d.retry_after_s, 1);
  // b cannot run while a holds the slot.
  EXPECT_FALSE(q.WaitTurn(b.ticket, AdmissionQueue::Clock::now() + std::chrono::milliseconds(20)));
  EXPECT_EQ(q.waiting(), 1);  // b left the queue on its deadline; c is still waiting
  q.Leave(a.ticket, 0.1);
  EXPECT_TRUE(q.WaitTurn(c.ticket, deadline));
  q.Leave(c.ticket, 0.1);
  EXPECT_TRUE(q.WaitIdle(deadline));
}

// A ticket counts from Enter(): tickets that have not reached WaitTurn yet (their job threads
// are still starting) fill the bound as running ones do.
TEST(AdmissionQueue, EveryTicketCountsFromEnter) {
  AdmissionQueue q(/*max_active=*/4, /*max_queued=*/4);
  std::vector<AdmissionQueue::Entry> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(q.Enter());
    ASSERT_TRUE(held.back().admitted) << i;
  }
  EXPECT_EQ(q.active(), 0);  // none has started; all eight wait
  EXPECT_EQ(q.waiting(), 8);
  const AdmissionQueue::Entry ninth = q.Enter();
  EXPECT_FALSE(ninth.admitted);
  EXPECT_GE(ninth.retry_after_s, 1);
  // Some start: the total stays the bound.
  const auto deadline = AdmissionQueue::Clock::now() + std::chrono::seconds(10);
  ASSERT_TRUE(q.WaitTurn(held[0].ticket, deadline));
  ASSERT_TRUE(q.WaitTurn(held[1].ticket, deadline));
  EXPECT_EQ(q.load().active, 2);
  EXPECT_EQ(q.load().waiting, 6);
  EXPECT_FALSE(q.Enter().admitted);
  // A place given back (withdrawn or finished) is one place for one newcomer.
  q.Withdraw(held[7].ticket);
  held.pop_back();
  const AdmissionQueue::Entry again = q.Enter();
  EXPECT_TRUE(again.admitted);
  EXPECT_FALSE(q.Enter().admitted);
  q.Leave(held[0].ticket, 0.1);
  EXPECT_TRUE(q.Enter().admitted);
  EXPECT_FALSE(q.Enter().admitted);
}

// Many threads arriving at once: exactly max_active + max_queued get in while nobody leaves,
// and under churn (enter, run or withdraw, leave) the held tickets never pass the bound.
TEST(AdmissionQueue, ConcurrentArrivalsNeverPassTheBound) {
  constexpr int kActive = 4, kQueued = 4, kThreads = 32;
  AdmissionQueue q(kActive, kQueued);
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  bool go = false;
  std::atomic<int> admitted{0}, refused{0};
  std::vector<uint64_t> tickets(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock(mu);
        ++arrived;
        cv.notify_all();
        cv.wait(lock, [&] { return go; });
      }
      const AdmissionQueue::Entry e = q.Enter();
      if (e.admitted) {
        tickets[static_cast<size_t>(i)] = e.ticket;
        ++admitted;
      } else {
        ++refused;
      }
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return arrived == kThreads; });
    go = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(admitted.load(), kActive + kQueued);
  EXPECT_EQ(refused.load(), kThreads - kActive - kQueued);
  EXPECT_EQ(q.waiting(), kActive + kQueued);
  for (uint64_t t : tickets)
    if (t != 0) q.Withdraw(t);
  ASSERT_EQ(q.waiting(), 0);

  // Churn. `held` is raised after Enter() admits and lowered before the ticket is given back,
  // so it never counts more tickets than the queue holds: it may never pass the bound.
  std::atomic<int> held{0}, most{0}, over{0}, ran{0};
  const auto deadline = AdmissionQueue::Clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int round = 0; round < 200; ++round) {
        const AdmissionQueue::Entry e = q.Enter();
        if (!e.admitted) continue;
        const int now_held = ++held;
        int seen = most.load();
        while (now_held > seen && !most.compare_exchange_weak(seen, now_held)) {
        }
        const AdmissionQueue::Load load = q.load();
        if (now_held > kActive + kQueued || load.active + load.waiting > kActive + kQueued ||
            load.active > kActive) {
          ++over;
        }
        if ((i + round) % 3 == 0) {
          --held;
          q.Withdraw(e.ticket);
        } else if (q.WaitTurn(e.ticket, deadline)) {
          ++ran;
          --held;
          q.Leave(e.ticket, 0);
        } else {
          --held;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(over.load(), 0);
  EXPECT_LE(most.load(), kActive + kQueued);
  EXPECT_GT(ran.load(), 0);
  EXPECT_TRUE(q.WaitIdle(AdmissionQueue::Clock::now() + std::chrono::seconds(10)));
}

TEST(AdmissionQueue, WaitersRunInArrivalOrder) {
  AdmissionQueue q(1, 8);
  auto deadline = AdmissionQueue::Clock::now() + std::chrono::seconds(10);
  auto first = q.Enter();
  ASSERT_TRUE(q.WaitTurn(first.ticket, deadline));
  std::vector<int> order;
  std::mutex mu;
  std::vector<std::thread> threads;
  std::vector<AdmissionQueue::Entry> entries;
  for (int i = 0; i < 3; ++i) entries.push_back(q.Enter());
  for (int i = 2; i >= 0; --i) {
    threads.emplace_back([&, i] {
      if (q.WaitTurn(entries[i].ticket, deadline)) {
        {
          std::lock_guard<std::mutex> lock(mu);
          order.push_back(i);
        }
        q.Leave(entries[i].ticket, 0);
      }
    });
  }
  q.Leave(first.ticket, 0);
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
}

TEST(AdmissionQueue, AnAbandonedWaiterLeavesTheQueueAndTheNextMovesUp) {
  AdmissionQueue q(1, 2);
  const auto far = AdmissionQueue::Clock::now() + std::chrono::seconds(60);
  auto running = q.Enter();
  ASSERT_TRUE(q.WaitTurn(running.ticket, far));
  auto gone = q.Enter();
  auto next = q.Enter();
  std::atomic<bool> client_left{false};
  std::atomic<int> asked{0};
  AdmissionQueue::Turn turn = AdmissionQueue::Turn::kRun;
  std::thread waiter([&] {
    turn = q.WaitTurn(
        gone.ticket, far,
        [&] {
          ++asked;
          return client_left.load();
        },
        std::chrono::milliseconds(5));
  });
  client_left = true;
  waiter.join();  // returns within a check interval of the flag, long before `far`
  EXPECT_EQ(turn, AdmissionQueue::Turn::kAbandoned);
  EXPECT_GE(asked.load(), 1);
  EXPECT_EQ(q.waiting(), 1);  // only `next` is left in line
  q.Leave(running.ticket, 0);
  EXPECT_EQ(q.WaitTurn(
                next.ticket, far, [] { return false; }, std::chrono::milliseconds(5)),
            AdmissionQueue::Turn::kRun);
  EXPECT_EQ(q.active(), 1);
  q.Leave(next.ticket, 0);
}

TEST(AdmissionQueue, AWatchedWaiterStillTimesOut) {
  AdmissionQueue q(1, 1);
  const auto now = AdmissionQueue::Clock::now();
  auto running = q.Enter();
  ASSERT_TRUE(q.WaitTurn(running.ticket, now + std::chrono::seconds(60)));
  auto waiting = q.Enter();
  EXPECT_EQ(q.WaitTurn(
                waiting.ticket, now + std::chrono::milliseconds(30), [] { return false; },
                std::chrono::milliseconds(5)),
            AdmissionQueue::Turn::kTimedOut);
  EXPECT_EQ(q.waiting(), 0);
  q.Leave(running.ticket, 0);
}

TEST(RateLimiter, CountsPerClient) {
  RateLimiter r(3);
  int retry = 0;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(r.Allow("a", &retry));
  EXPECT_FALSE(r.Allow("a", &retry));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 60);
  EXPECT_TRUE(r.Allow("b", &retry));
}

TEST(RateLimiter, ZeroIsNoLimitAndTheLimitCanBeSetBeforeServing) {
  RateLimiter r(0);
  int retry = 0;
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(r.Allow("a", &retry));
  r.set_limit(2);  // the server listens on other addresses than loopback
  EXPECT_EQ(r.limit(), 2);
  EXPECT_TRUE(r.Allow("b", &retry));
  EXPECT_TRUE(r.Allow("b", &retry));
  EXPECT_FALSE(r.Allow("b", &retry));
}

TEST(ConstantTimeEquals, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

}  // namespace
}  // namespace tessera::server

// ---- JobThreads (api_service.h): bounded, started on demand, every task runs.
TEST(JobThreads, RunsEveryTaskWithAtMostTheBoundAtOnce) {
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, most = 0, done = 0;
  bool release = false;
  {
    tessera::server::JobThreads jobs(2);
    for (int i = 0; i < 5; ++i) {
      jobs.Post([&] {
        std::unique_lock<std::mutex> lock(mu);
        most = std::max(most, ++running);
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(10), [&] { return release; });
        --running;
        ++done;
        cv.notify_all();
      });
    }
    std::unique_lock<std::mutex> lock(mu);
    // Two start (the bound); the other three wait for a free thread.
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return running == 2; }));
    release = true;
    cv.notify_all();
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done == 5; }));
  }
  EXPECT_EQ(most, 2);
  EXPECT_EQ(done, 5);
}

TEST(AdmissionQueue, AWithdrawnTicketGivesUpItsPlace) {
  tessera::server::AdmissionQueue queue(1, 2);
  auto a = queue.Enter();
  auto b = queue.Enter();
  ASSERT_TRUE(a.admitted && b.admitted);
  EXPECT_EQ(queue.waiting(), 2);
  queue.Withdraw(a.ticket);  // its request was invalid: it never runs
  EXPECT_EQ(queue.waiting(), 1);
  EXPECT_TRUE(
      queue.WaitTurn(b.ticket, std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_EQ(queue.active(), 1);
  queue.Leave(b.ticket, 0.1);
  EXPECT_TRUE(queue.WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
}

namespace tessera::server {
namespace {

TEST(AdmissionQueueDrain, RetryAfterFollowsTheMeasuredDrainRate) {
  AdmissionQueue q(/*max_active=*/1, /*max_queued=*/0);
  EXPECT_EQ(q.drain_per_second(), 0);  // nothing finished yet
  for (int i = 0; i < 4; ++i) {
    AdmissionQueue::Entry e = q.Enter();
    ASSERT_TRUE(e.admitted);
    ASSERT_TRUE(q.WaitTurn(e.ticket, AdmissionQueue::Clock::now() + std::chrono::seconds(5)));
    q.Leave(e.ticket, 100.0);  // a long mean job time, which the drain rate overrides
  }
  EXPECT_GT(q.drain_per_second(), 0);
  AdmissionQueue::Entry running = q.Enter();
  ASSERT_TRUE(q.WaitTurn(running.ticket, AdmissionQueue::Clock::now() + std::chrono::seconds(5)));
  AdmissionQueue::Entry refused = q.Enter();
  EXPECT_FALSE(refused.admitted);
  // Jobs just finished back to back: a place opens in well under a second, so the floor of 1.
  EXPECT_EQ(refused.retry_after_s, 1);
  q.Leave(running.ticket, 0);
}

}  // namespace
}  // namespace tessera::server
