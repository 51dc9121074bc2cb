// Starts the inference worker (`tessera worker`, fork + exec over a socketpair), reads what it
// sends, routes each message to the waiting request by job id, and restarts the worker when
// it dies, with a growing pause between attempts. A request whose worker dies gets a
// `worker_died` event, so it can end cleanly. ready() is true only between the worker's Ready
// message and its death.
//
//   WorkerSupervisor sup({"/proc/self/exe path", {"--model", "stories=/m/stories260k"}});
//   sup.Start();
//   auto channel = std::make_shared<JobChannel>();
//   TS_RETURN_IF_ERROR(sup.Submit(job, channel));
//   while (auto ev = channel->Wait(deadline)) { ...decode ev->frame...; }
//   sup.Release(job.job_id);
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "worker/protocol.h"

namespace tessera::server {

using Clock = std::chrono::steady_clock;

struct WorkerEvent {
  bool worker_died = false;  // the worker exited or was killed; nothing more will come
  std::string frame;         // otherwise one message from the worker
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

// The worker's life as /ready reports it (WorkerStateName gives the text).
enum class WorkerState : uint8_t {
  kStarting,    // never ready yet
  kReady,       // jobs accepted
  kRestarting,  // it died and is being started again
  kStopped,     // the server is shutting down
  kFailed,      // the default model cannot load; not restarted (kWorkerExitModelLoadFailed)
};
std::string_view WorkerStateName(WorkerState s);

class WorkerSupervisor {
 public:
  struct Options {
    std::string executable;                // the tessera binary
    std::vector<std::string> worker_args;  // after `tessera worker --fd N`
  };

  explicit WorkerSupervisor(Options options) : options_(std::move(options)) {}
  ~WorkerSupervisor() { Stop(); }

  void Start();
  // Stops restarting, kills the worker and joins the monitor thread. Idempotent.
  void Stop();

  bool ready() const;
  WorkerState state() const;
  // Blocks until ready() or the deadline; returns ready().
  bool WaitReady(Clock::time_point deadline);
  int restarts() const;
  pid_t worker_pid() const;  // -1 while no worker runs

  // Sends a job and routes its messages to `channel` until Release(job_id).
  Status Submit(const worker::JobRequest& job, std::shared_ptr<JobChannel> channel);
  void Cancel(uint64_t job_id);
  void Release(uint64_t job_id);
  // SIGKILLs the worker (a request deadline passed); the monitor restarts it.
  void KillWorker();

 private:
  void Monitor();
  bool Spawn(int* fd, pid_t* pid);
  void Dispatch(const std::string& frame);

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mutex write_mu_;  // one frame at a time on the socket
  std::thread monitor_;
  bool started_ = false;
  bool stopping_ = false;
  bool ready_ = false;
  bool ever_ready_ = false;
  bool failed_ = false;  // the worker could not load its default model at start: not restarted
  int fd_ = -1;
  pid_t pid_ = -1;
  int restarts_ = 0;
  std::map<uint64_t, std::shared_ptr<JobChannel>> channels_;
};

}  // namespace tessera::server
