#include "backend/xdna/npu_queue.h"

#include <charconv>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace tessera {

NpuQueue::NpuQueue(int capacity, std::chrono::milliseconds timeout)
    : capacity_(capacity), timeout_(timeout) {}

NpuQueue::Turn::~Turn() {
  if (queue_ != nullptr) queue_->Release();
}

Expected<NpuQueue::Turn> NpuQueue::Wait() {
  std::unique_lock lock(mu_);
  // The pass being served does not count against the capacity; those waiting behind it do.
  const bool busy = serving_ != next_ticket_;
  if (busy && waiting_ >= capacity_) {
    ++refused_;
    return ResourceExhausted(
        "NPU queue full: " + std::to_string(waiting_) +
        " passes already wait for the NPU (TESSERA_NPU_QUEUE=" + std::to_string(capacity_) + ")");
  }
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  const bool served = cv_.wait_for(lock, timeout_, [&] { return serving_ == ticket; });
  --waiting_;
  if (!served) {
    // Give the ticket up: the pass before it hands its turn on to the next one in line.
    ++refused_;
    abandoned_.push_back(ticket);
    cv_.notify_all();
    return ResourceExhausted("NPU queue: the pass waited " + std::to_string(timeout_.count()) +
                             " ms for the NPU without getting it (TESSERA_NPU_QUEUE_TIMEOUT_MS)");
  }
  return Turn(this);
}

void NpuQueue::Release() {
  std::lock_guard lock(mu_);
  ++serving_;
  // Tickets whose passes gave up are skipped.
  for (bool skipped = true; skipped;) {
    skipped = false;
    for (auto it = abandoned_.begin(); it != abandoned_.end(); ++it) {
      if (*it == serving_) {
        abandoned_.erase(it);
        ++serving_;
        skipped = true;
        break;
      }
    }
  }
  cv_.notify_all();
}

int NpuQueue::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

int64_t NpuQueue::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

namespace {

Expected<int64_t> EnvInt(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  int64_t n = 0;
  const std::string_view s(v);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || p != s.data() + s.size() || n < lo || n > hi) {
    return InvalidArgument(std::string(name) + "='" + v + "': expected an integer from " +
                           std::to_string(lo) + " to " + std::to_string(hi));
  }
  return n;
}

}  // namespace

Expected<NpuQueue*> ProcessNpuQueue() {
  static const Expected<std::unique_ptr<NpuQueue>> queue =
      []() -> Expected<std::unique_ptr<NpuQueue>> {
    TS_ASSIGN_OR_RETURN(int64_t capacity, EnvInt("TESSERA_NPU_QUEUE", 64, 1, 1 << 20));
    TS_ASSIGN_OR_RETURN(int64_t timeout, EnvInt("TESSERA_NPU_QUEUE_TIMEOUT_MS", 30000, 1,
                                                int64_t{24} * 3600 * 1000));
    return std::make_unique<NpuQueue>(static_cast<int>(capacity),
                                      std::chrono::milliseconds(timeout));
  }();
  if (!queue) return queue.status();
  return queue->get();
}

}  // namespace tessera
