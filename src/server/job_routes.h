// Which jobs the inference worker holds, where each one's messages go, and how long a
// cancelled job may take to stop. WorkerSupervisor keeps one JobRoutes under its lock.
//
// The hang rule: a job runs in steps and the worker reads its socket between steps, so a
// Cancel is acknowledged (Done "cancelled", or the job's last message) within one step. A job
// whose cancel is not acknowledged within `hang_timeout` means a single step has overrun:
// the worker is hung, and only killing it stops it (Overdue() names that job). Nothing here
// reads message text: a message ends its job by its type alone.
//
//   JobRoutes routes(std::chrono::seconds(30));
//   routes.Add(7, channel);
//   if (routes.Cancel(7, Clock::now())) ...write the Cancel frame...
//   routes.Deliver(7, frame);                       // a Done: 7 leaves the worker
//   if (auto hung = routes.Overdue(Clock::now())) ...kill the worker...
//   routes.WorkerGone(/*server_stopping=*/false, hung);
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "worker/protocol.h"

namespace tessera::server {

using Clock = std::chrono::steady_clock;

// The messages after which the worker sends nothing more about a job (Done, JobError, Tokens,
// Text, TaskResult).
bool EndsJob(worker::MessageType type);

// Why the worker went away, as one job that waited on it sees it.
enum class WorkerLoss : uint8_t {
  kBystander,       // it crashed or was killed over another job: this one may run again
  kCause,           // this job hung it (its cancel went unacknowledged), or was the only job
                    // in it when it crashed
  kServerStopping,  // the server is stopping (a second SIGTERM): the worker is not restarted
};

struct WorkerEvent {
  bool worker_died = false;  // the worker exited or was killed; nothing more will come
  WorkerLoss loss = WorkerLoss::kBystander;  // when worker_died: how it concerns this job
  std::string frame{};                       // otherwise one message from the worker
};

// Where the supervisor delivers one job's messages.
class JobChannel {
 public:
  void Push(WorkerEvent event);
  // The next event, or nullopt once `deadline` passes with none.
  std::optional<WorkerEvent> Wait(Clock::time_point deadline);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkerEvent> events_;
};

class JobRoutes {
 public:
  explicit JobRoutes(Clock::duration hang_timeout) : hang_timeout_(hang_timeout) {}

  // A job sent to the worker; its messages go to `channel` until Release or its last message.
  void Add(uint64_t job_id, std::shared_ptr<JobChannel> channel);
  // One message about `frame`'s job (the job id follows the type byte): passed to its channel
  // while one waits; a message that ends the job (Done, JobError, Tokens, Text, TaskResult)
  // also removes the job, which acknowledges its cancel.
  void Deliver(std::string frame);
  // Starts the clock on a job's cancel. True when a Cancel must be written: the job is still
  // in the worker and was not cancelled before.
  bool Cancel(uint64_t job_id, Clock::time_point now);
  // The request stopped waiting. A cancelled job the worker has not let go of stays counted
  // (and timed) until it ends or the worker goes.
  void Release(uint64_t job_id);
  // A job whose cancel was not acknowledged within the hang timeout by `now`.
  std::optional<uint64_t> Overdue(Clock::time_point now) const;
  // When the next unacknowledged cancel becomes overdue, if any is pending.
  std::optional<Clock::time_point> NextCancelBound() const;
  // The worker is gone: every waiting channel gets a worker_died event saying how the loss
  // concerns it, and every job is forgotten. `hung_job`: the job whose overdue cancel got the
  // worker killed; with none, a crash with one job in the worker is that job's doing.
  void WorkerGone(bool server_stopping, std::optional<uint64_t> hung_job);

  size_t jobs_in_worker() const { return jobs_.size(); }
  bool Holds(uint64_t job_id) const { return jobs_.count(job_id) != 0; }

 private:
  struct Route {
    std::shared_ptr<JobChannel> channel;              // null once released
    std::optional<Clock::time_point> cancel_overdue;  // set by Cancel
  };
  Clock::duration hang_timeout_;
  std::map<uint64_t, Route> jobs_;
};

}  // namespace tessera::server
