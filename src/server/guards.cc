#include "server/guards.h"

#include <algorithm>
#include <cmath>

namespace tessera::server {

AdmissionQueue::Entry AdmissionQueue::Enter() {
  std::lock_guard<std::mutex> lock(mu_);
  Entry e;
  const int held = active_ + static_cast<int>(waiting_.size());
  if (held >= max_active_ + max_queued_) {
    e.retry_after_s = RetryAfterLocked();
    return e;
  }
  e.admitted = true;
  e.ticket = next_ticket_++;
  waiting_.push_back(e.ticket);
  return e;
}

bool AdmissionQueue::WaitTurn(uint64_t ticket, Clock::time_point deadline) {
  return WaitTurn(ticket, deadline, nullptr, deadline - Clock::now()) == Turn::kRun;
}

AdmissionQueue::Turn AdmissionQueue::WaitTurn(uint64_t ticket, Clock::time_point deadline,
                                              const std::function<bool()>& abandoned,
                                              Clock::duration check_every) {
  std::unique_lock<std::mutex> lock(mu_);
  auto my_turn = [&] {
    return !waiting_.empty() && waiting_.front() == ticket && active_ < max_active_;
  };
  Turn outcome = Turn::kTimedOut;
  while (true) {
    const auto now = Clock::now();
    const auto until = abandoned ? std::min(deadline, now + check_every) : deadline;
    if (cv_.wait_until(lock, until, my_turn)) {
      outcome = Turn::kRun;
      break;
    }
    if (Clock::now() >= deadline) break;
    if (abandoned) {
      lock.unlock();
      const bool gone = abandoned();
      lock.lock();
      if (gone) {
        outcome = Turn::kAbandoned;
        break;
      }
    }
  }
  if (outcome != Turn::kRun) {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), ticket), waiting_.end());
    cv_.notify_all();
    return outcome;
  }
  waiting_.pop_front();
  ++active_;
  cv_.notify_all();
  return Turn::kRun;
}

void AdmissionQueue::Leave(uint64_t, double seconds) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
    if (seconds >= 0 && std::isfinite(seconds))
      mean_job_seconds_ = 0.8 * mean_job_seconds_ + 0.2 * seconds;
    finished_at_.push_back(Clock::now());
    if (finished_at_.size() > kDrainWindow) finished_at_.pop_front();
  }
  cv_.notify_all();
}

void AdmissionQueue::Withdraw(uint64_t ticket) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), ticket), waiting_.end());
  }
  cv_.notify_all();
}

bool AdmissionQueue::WaitIdle(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return active_ == 0 && waiting_.empty(); });
}

int AdmissionQueue::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}

int AdmissionQueue::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiting_.size());
}

AdmissionQueue::Load AdmissionQueue::load() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {active_, static_cast<int>(waiting_.size())};
}

double AdmissionQueue::DrainPerSecondLocked() const {
  // Jobs finished per second over the recent finishes, while they are recent (a rate measured
  // minutes ago says nothing about now).
  if (finished_at_.size() < 2) return 0;
  const double span =
      std::chrono::duration<double>(finished_at_.back() - finished_at_.front()).count();
  const double age = std::chrono::duration<double>(Clock::now() - finished_at_.back()).count();
  if (span <= 0 || age > 4 * span + 10) return 0;
  return static_cast<double>(finished_at_.size() - 1) / span;
}

int AdmissionQueue::RetryAfterLocked() const {
  // A place opens when one job ahead finishes: at the measured drain rate, else (no recent
  // finishes) everyone ahead at the mean job time, max_active at a time.
  const double rate = DrainPerSecondLocked();
  double seconds = 0;
  if (rate > 0) {
    seconds = 1.0 / rate;
  } else {
    const double ahead = static_cast<double>(active_) + static_cast<double>(waiting_.size());
    seconds = ahead * mean_job_seconds_ / std::max(1, max_active_);
  }
  return std::clamp(static_cast<int>(std::ceil(seconds)), 1, 3600);
}

double AdmissionQueue::drain_per_second() const {
  std::lock_guard<std::mutex> lock(mu_);
  return DrainPerSecondLocked();
}

void RateLimiter::set_limit(int limit_per_minute) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = limit_per_minute;
}

int RateLimiter::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

bool RateLimiter::Allow(const std::string& client, int* retry_after_s) {
  using namespace std::chrono;
  const auto now = steady_clock::now();
  const auto window = minutes(1);
  std::lock_guard<std::mutex> lock(mu_);
  if (limit_ <= 0) return true;
  // Forget idle clients now and then so the map cannot grow without bound.
  if (seen_.size() > 4096) {
    for (auto it = seen_.begin(); it != seen_.end();) {
      if (it->second.empty() || now - it->second.back() >= window) {
        it = seen_.erase(it);
      } else {
        ++it;
      }
    }
  }
  auto& times = seen_[client];
  while (!times.empty() && now - times.front() >= window) times.pop_front();
  if (static_cast<int>(times.size()) >= limit_) {
    auto wait = duration_cast<seconds>(times.front() + window - now).count() + 1;
    *retry_after_s = static_cast<int>(std::clamp<int64_t>(wait, 1, 60));
    return false;
  }
  times.push_back(now);
  return true;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

}  // namespace tessera::server
