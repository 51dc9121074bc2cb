// The server's protections that do not need HTTP: the admission queue (a bounded number of
// running and waiting requests, with a Retry-After from the measured drain rate when full), a
// per-client sliding window rate limit and constant-time key comparison.
//
//   AdmissionQueue queue(/*max_active=*/1, /*max_queued=*/2);
//   AdmissionQueue::Entry e = queue.Enter();
//   if (!e.admitted) reply 429 with Retry-After: e.retry_after_s;
//   if (!queue.WaitTurn(e.ticket, deadline)) reply 504;   // it left the queue
//   ...run the job...
//   queue.Leave(e.ticket, seconds_taken);
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace tessera::server {

class AdmissionQueue {
 public:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    bool admitted = false;
    uint64_t ticket = 0;
    int retry_after_s = 0;  // when not admitted
  };

  AdmissionQueue(int max_active, int max_queued)
      : max_active_(max_active), max_queued_(max_queued) {}

  // Joins the queue, or refuses when max_active + max_queued tickets are already held. A
  // ticket counts from the moment Enter() returns it (waiting until WaitTurn moves it to the
  // running ones), so running + waiting never exceeds the bound at any arrival rate, even
  // while the job threads that will wait for those tickets are still starting.
  Entry Enter();
  // Waits until this ticket may run (first in line and a free slot). On deadline the ticket
  // leaves the queue and false is returned.
  bool WaitTurn(uint64_t ticket, Clock::time_point deadline);
  // The same, but also asks `abandoned` (outside the lock) every `check_every` while it
  // waits; once it says true the ticket leaves the queue (the client went away).
  enum class Turn { kRun, kTimedOut, kAbandoned };
  Turn WaitTurn(uint64_t ticket, Clock::time_point deadline, const std::function<bool()>& abandoned,
                Clock::duration check_every);
  // Frees the slot of a ticket that ran; `seconds` feeds the Retry-After estimate.
  void Leave(uint64_t ticket, double seconds);
  // Takes back a ticket that entered but will not run (its request turned out invalid).
  void Withdraw(uint64_t ticket);
  // Blocks until nothing runs or waits, or the deadline; returns whether idle.
  bool WaitIdle(Clock::time_point deadline);
  int active() const;
  int waiting() const;
  // Both counts read under one lock (active() and waiting() read apart may see a ticket
  // that moved or left between them).
  struct Load {
    int active = 0;
    int waiting = 0;
  };
  Load load() const;
  // Jobs finished per second, measured over the last finishes (0: none recently).
  double drain_per_second() const;

 private:
  static constexpr size_t kDrainWindow = 32;
  int RetryAfterLocked() const;
  double DrainPerSecondLocked() const;

  const int max_active_;
  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<uint64_t> waiting_;
  int active_ = 0;
  uint64_t next_ticket_ = 1;
  double mean_job_seconds_ = 2.0;              // a running average of finished jobs
  std::deque<Clock::time_point> finished_at_;  // the last kDrainWindow finishes
};

// At most `limit` requests per client in any 60-second window (0 or less: no limit).
class RateLimiter {
 public:
  explicit RateLimiter(int limit_per_minute) : limit_(limit_per_minute) {}
  // True if the request may proceed (and counts it); else *retry_after_s says when it could.
  bool Allow(const std::string& client, int* retry_after_s);
  // Set once the server knows where it listens (the default depends on it), before serving.
  void set_limit(int limit_per_minute);
  int limit() const;

 private:
  int limit_;
  mutable std::mutex mu_;
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> seen_;
};

// Equality whose running time depends only on the lengths, not on where the strings differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace tessera::server
