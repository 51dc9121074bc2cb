// Starts the inference worker (`tessera worker`, fork + exec over a socketpair), reads what it
// sends, routes each message to the waiting request by job id, and restarts the worker when
// it dies, with a growing pause between attempts. A request whose worker dies gets a
// `worker_died` event saying how the loss concerns it (WorkerLoss), so it can end cleanly or
// run again. ready() is true only between the worker's Ready message and its death.
// A watchdog kills the worker when a cancelled job is not let go of within `hang_timeout`
// (a step is hung: JobRoutes); nothing else kills it while the server runs.
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
#include "server/job_routes.h"
#include "worker/protocol.h"

namespace tessera::server {

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
    // How long a cancelled job may take to stop before the worker counts as hung (--hang-timeout).
    Clock::duration hang_timeout = std::chrono::seconds(30);
  };

  explicit WorkerSupervisor(Options options)
      : options_(std::move(options)), routes_(options_.hang_timeout) {}
  ~WorkerSupervisor() { Stop(); }

  void Start();
  // Stops restarting, kills the worker and joins the monitor and watchdog threads; waiting
  // jobs get WorkerLoss::kServerStopping. Idempotent.
  void Stop();

  bool ready() const;
  WorkerState state() const;
  // Blocks until ready() or the deadline; returns ready().
  bool WaitReady(Clock::time_point deadline);
  int restarts() const;
  int hang_kills() const;    // workers killed because a cancelled job did not stop in time
  pid_t worker_pid() const;  // -1 while no worker runs

  // Sends a job and routes its messages to `channel` until Release(job_id).
  Status Submit(const worker::JobRequest& job, std::shared_ptr<JobChannel> channel);
  // Asks the worker to stop the job (once; later calls do nothing) and starts its hang clock.
  void Cancel(uint64_t job_id);
  void Release(uint64_t job_id);
  // Serves `model` from now on: the running worker is told (AddModelMessage) and every worker
  // started later gets it on its command line (--model NAME=DIR --kind NAME=KIND). A job for
  // it submitted after this returns reaches a worker that knows it.
  void AddModel(const worker::AddModelMessage& model);

 private:
  void Monitor();
  bool Spawn(int* fd, pid_t* pid);
  void Dispatch(std::string frame);
  void Watchdog();

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mutex write_mu_;  // one frame at a time on the socket; taken before mu_, never after
  std::thread monitor_;
  std::thread watchdog_;
  bool started_ = false;
  bool stopping_ = false;
  bool ready_ = false;
  bool ever_ready_ = false;
  bool failed_ = false;  // the worker could not load its default model at start: not restarted
  int fd_ = -1;
  pid_t pid_ = -1;
  int restarts_ = 0;
  int hang_kills_ = 0;
  std::optional<uint64_t> hung_job_;  // the job the watchdog killed the current worker over
  std::vector<worker::AddModelMessage> added_models_;  // AddModel, in order
  size_t spawned_with_ = 0;  // of added_models_, how many the current worker's arguments had
  JobRoutes routes_;
};

}  // namespace tessera::server
