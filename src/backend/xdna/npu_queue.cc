#include "backend/xdna/npu_queue.h"

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
    return ResourceExhausted("NPU queue full: " + std::to_string(waiting_) +
                             " passes already wait for the NPU (--npu-queue " +
                             std::to_string(capacity_) + ")");
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
                             " ms for the NPU without getting it (--npu-queue-timeout-ms)");
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

Expected<NpuQueue*> ProcessNpuQueue(const NpuOptions& options) {
  static std::mutex mu;
  static std::unique_ptr<NpuQueue> queue;
  std::lock_guard lock(mu);
  if (queue) return queue.get();
  if (options.queue < 1 || options.queue > (1 << 20)) {
    return InvalidArgument("--npu-queue " + std::to_string(options.queue) +
                           ": expected 1 to 1048576 waiting passes");
  }
  if (options.queue_timeout_ms < 1 || options.queue_timeout_ms > int64_t{24} * 3600 * 1000) {
    return InvalidArgument("--npu-queue-timeout-ms " + std::to_string(options.queue_timeout_ms) +
                           ": expected 1 to 86400000");
  }
  queue = std::make_unique<NpuQueue>(options.queue,
                                     std::chrono::milliseconds(options.queue_timeout_ms));
  return queue.get();
}

}  // namespace tessera
