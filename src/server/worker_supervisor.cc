#include "server/worker_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace tessera::server {

void WorkerSupervisor::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  monitor_ = std::thread([this] { Monitor(); });
  watchdog_ = std::thread([this] { Watchdog(); });
}

void WorkerSupervisor::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
    stopping_ = true;
    ready_ = false;
    if (pid_ > 0) ::kill(pid_, SIGKILL);
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

bool WorkerSupervisor::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

std::string_view WorkerStateName(WorkerState s) {
  switch (s) {
    case WorkerState::kStarting:
      return "starting";
    case WorkerState::kReady:
      return "ready";
    case WorkerState::kRestarting:
      return "restarting";
    case WorkerState::kStopped:
      return "stopped";
    case WorkerState::kFailed:
      return "failed";
  }
  return "starting";
}

WorkerState WorkerSupervisor::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return WorkerState::kStopped;
  if (failed_) return WorkerState::kFailed;
  if (ready_) return WorkerState::kReady;
  return ever_ready_ ? WorkerState::kRestarting : WorkerState::kStarting;
}

bool WorkerSupervisor::WaitReady(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_until(lock, deadline, [&] { return ready_ || stopping_ || failed_; }) && ready_;
}

int WorkerSupervisor::restarts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return restarts_;
}

int WorkerSupervisor::hang_kills() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hang_kills_;
}

pid_t WorkerSupervisor::worker_pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

Status WorkerSupervisor::Submit(const worker::JobRequest& job,
                                std::shared_ptr<JobChannel> channel) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ready_ || fd_ < 0) return Cancelled("the inference worker is not ready");
    routes_.Add(job.job_id, std::move(channel));
    fd = fd_;
  }
  std::lock_guard<std::mutex> write_lock(write_mu_);
  {
    // The worker may have died since: its descriptor is closed (the number maybe reused by the
    // next worker's) and the job was told. A route still held on the same descriptor means
    // the same worker, as routes are cleared before a new worker starts.
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ != fd || !routes_.Holds(job.job_id)) {
      return Cancelled("the inference worker stopped before the job was sent");
    }
  }
  Status st = worker::WriteFrame(fd, worker::Encode(job));
  if (!st.ok()) Release(job.job_id);
  return st;
}

void WorkerSupervisor::Cancel(uint64_t job_id) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A job that already ended, or whose worker is gone, needs no cancel.
    if (fd_ < 0 || !routes_.Cancel(job_id, Clock::now())) return;
    fd = fd_;
  }
  cv_.notify_all();  // the watchdog has a new bound
  std::lock_guard<std::mutex> write_lock(write_mu_);
  // A failed write means the worker is dying: its death ends the job.
  (void)worker::WriteFrame(fd, worker::Encode(worker::CancelRequest{job_id}));
}

void WorkerSupervisor::AddModel(const worker::AddModelMessage& model) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mu_);
    added_models_.push_back(model);
    // No worker yet: the one being started is told by Monitor when its arguments lack it.
    if (fd_ < 0) return;
    fd = fd_;
  }
  std::lock_guard<std::mutex> write_lock(write_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ != fd) return;  // that worker died; its successor's arguments name the model
  }
  // A failed write means the worker is dying; the next one is started with the model.
  (void)worker::WriteFrame(fd, worker::Encode(model));
}

void WorkerSupervisor::Release(uint64_t job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.Release(job_id);
}

// Kills the worker when a cancelled job outlives its hang bound: one step has run longer than
// --hang-timeout, and a step cannot be interrupted any other way. The monitor restarts it.
void WorkerSupervisor::Watchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (const std::optional<uint64_t> hung = routes_.Overdue(Clock::now());
        hung && pid_ > 0 && !hung_job_) {
      const double bound_s = std::chrono::duration<double>(options_.hang_timeout).count();
      std::fprintf(stderr,
                   "tessera serve: the inference worker did not stop job %llu within "
                   "--hang-timeout %.3g s of its cancel: a step is hung; killing the worker "
                   "(its other jobs run again on the new one where nothing was sent yet)\n",
                   static_cast<unsigned long long>(*hung), bound_s);
      hung_job_ = *hung;
      ++hang_kills_;
      ready_ = false;
      ::kill(pid_, SIGKILL);
    }
    // Wake at the next bound, or when a cancel or the worker's death changes them. A worker
    // already killed (or dead and not yet reaped) has nothing to time until its death clears
    // the routes.
    const bool awaiting_death = hung_job_ || pid_ <= 0;
    const std::optional<Clock::time_point> next =
        awaiting_death ? std::nullopt : routes_.NextCancelBound();
    if (next) {
      cv_.wait_until(lock, *next);
    } else {
      cv_.wait(lock);
    }
  }
}

bool WorkerSupervisor::Spawn(int* fd, pid_t* pid) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  // Everything the child needs is built before fork: between fork and exec a multi-threaded
  // process may only make async-signal-safe calls.
  std::vector<std::string> args = {options_.executable, "worker", "--fd", "3"};
  args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const worker::AddModelMessage& m : added_models_) {
      args.insert(args.end(), {"--model", m.name + "=" + m.dir, "--kind",
                               m.name + "=" + std::string(ModelKindName(m.kind))});
    }
    spawned_with_ = added_models_.size();
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  sigset_t all_unblocked;
  sigemptyset(&all_unblocked);
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof default_action);
  default_action.sa_handler = SIG_DFL;

  pid_t child = ::fork();
  if (child < 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    return false;
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the server
    ::sigaction(SIGPIPE, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &all_unblocked, nullptr);
    if (sv[1] == 3) {
      ::fcntl(3, F_SETFD, 0);
    } else if (::dup2(sv[1], 3) < 0) {
      ::_exit(127);
    }
    // Client connections and the listening socket must not stay open in the worker.
    ::close_range(4, ~0U, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  *fd = sv[0];
  *pid = child;
  return true;
}

void WorkerSupervisor::Dispatch(std::string frame) {
  auto type = worker::PeekMessageType(frame);
  if (!type) return;
  if (*type == worker::MessageType::kReady) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = !stopping_;
      ever_ready_ = true;
    }
    cv_.notify_all();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    routes_.Deliver(std::move(frame));
  }
  cv_.notify_all();  // a job's end may have cleared the watchdog's next bound
}

void WorkerSupervisor::Monitor() {
  auto backoff = std::chrono::milliseconds(100);
  for (bool first = true;; first = false) {
    int fd = -1;
    pid_t pid = -1;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!first) {
        // A pause before restarting so a worker that dies at once does not spin the CPU;
        // Stop() cuts it short.
        cv_.wait_for(lock, backoff, [&] { return stopping_; });
        backoff = std::min(backoff * 2, std::chrono::milliseconds(5000));
      }
      if (stopping_) return;
    }
    if (!Spawn(&fd, &pid)) {
      std::fprintf(stderr, "tessera serve: could not start the inference worker: %s\n",
                   std::strerror(errno));
      continue;
    }
    std::vector<worker::AddModelMessage> missed;  // added while it was being started
    {
      std::lock_guard<std::mutex> lock(mu_);
      fd_ = fd;
      pid_ = pid;
      if (!first) ++restarts_;
      if (stopping_) ::kill(pid, SIGKILL);
      missed.assign(added_models_.begin() + static_cast<std::ptrdiff_t>(spawned_with_),
                    added_models_.end());
    }
    if (!missed.empty()) {
      std::lock_guard<std::mutex> write_lock(write_mu_);
      for (const worker::AddModelMessage& m : missed) {
        (void)worker::WriteFrame(fd, worker::Encode(m));
      }
    }
    while (true) {
      auto frame = worker::ReadFrame(fd);
      if (!frame) break;
      if (auto type = worker::PeekMessageType(*frame);
          type && *type == worker::MessageType::kReady) {
        backoff = std::chrono::milliseconds(100);
      }
      Dispatch(std::move(*frame));
    }
    // The worker is gone (or broke the protocol, which is treated the same way).
    {
      std::lock_guard<std::mutex> lock(mu_);
      ready_ = false;
      ::kill(pid, SIGKILL);
      fd_ = -1;
      pid_ = -1;
    }
    {
      // Wait for the write lock so no Submit is writing to the descriptor being closed.
      std::lock_guard<std::mutex> write_lock(write_mu_);
      ::close(fd);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping = stopping_;
    }
    const bool load_failed =
        WIFEXITED(status) && WEXITSTATUS(status) == worker::kWorkerExitModelLoadFailed;
    if (!stopping && load_failed) {
      // Its default model cannot be loaded with these flags: starting it again would fail the
      // same way, so the server stays up, not ready, and says so.
      std::fprintf(stderr,
                   "tessera serve: the inference worker could not load its default model (the "
                   "reason is above); not restarting it. /ready answers 503 \"failed\"; fix the "
                   "model or the flags and start tessera serve again\n");
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
        routes_.WorkerGone(false, std::nullopt);
      }
      cv_.notify_all();
      return;
    }
    if (!stopping) {
      if (WIFSIGNALED(status)) {
        std::fprintf(stderr, "tessera serve: inference worker killed by signal %d; restarting\n",
                     WTERMSIG(status));
      } else {
        std::fprintf(stderr, "tessera serve: inference worker exited with status %d; restarting\n",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      routes_.WorkerGone(stopping, hung_job_);
      hung_job_.reset();
    }
    cv_.notify_all();
  }
}

}  // namespace tessera::server
