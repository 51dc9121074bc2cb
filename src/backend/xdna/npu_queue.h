// NpuQueue: one NPU, many models. The NPU runs one pass at a time for every model placed on
// it; passes wait here in arrival order, at most `capacity` of them (--npu-queue, default
// 64), each at most `timeout` (--npu-queue-timeout-ms, default 30000; NpuOptions). A pass
// that finds the queue full, or waits past the timeout, is refused (ResourceExhausted with
// "NPU queue" in the message), which the server answers with 503 engine_busy + Retry-After.
//
//   TS_ASSIGN_OR_RETURN(NpuQueue* q, ProcessNpuQueue(options.npu));
//   TS_ASSIGN_OR_RETURN(NpuQueue::Turn turn, q->Wait());   // the NPU is ours until `turn` ends
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace tessera {

class NpuQueue {
 public:
  NpuQueue(int capacity, std::chrono::milliseconds timeout);

  // Holds the NPU while alive.
  class Turn {
   public:
    Turn(Turn&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Turn& operator=(Turn&&) = delete;
    ~Turn();

   private:
    friend class NpuQueue;
    explicit Turn(NpuQueue* q) : queue_(q) {}
    NpuQueue* queue_;
  };
  Expected<Turn> Wait();

  int capacity() const { return capacity_; }
  int waiting() const;
  int64_t refused() const;

 private:
  void Release();

  const int capacity_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // FIFO: turns are served in ticket order
  uint64_t serving_ = 0;
  int waiting_ = 0;
  int64_t refused_ = 0;
  std::vector<uint64_t> abandoned_;  // tickets whose passes gave up waiting
};

// The process's queue, made from the first caller's options (a bad value is an error); later
// callers share it whatever their options say.
Expected<NpuQueue*> ProcessNpuQueue(const NpuOptions& options);

}  // namespace tessera
