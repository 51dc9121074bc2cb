#include "server/job_routes.h"

namespace tessera::server {

bool EndsJob(worker::MessageType type) {
  switch (type) {
    case worker::MessageType::kDone:
    case worker::MessageType::kJobError:
    case worker::MessageType::kTokens:
    case worker::MessageType::kText:
    case worker::MessageType::kTaskResult:
      return true;
    default:
      return false;
  }
}

void JobChannel::Push(WorkerEvent event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

std::optional<WorkerEvent> JobChannel::Wait(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return std::nullopt;
  WorkerEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void JobRoutes::Add(uint64_t job_id, std::shared_ptr<JobChannel> channel) {
  jobs_[job_id] = Route{std::move(channel), std::nullopt};
}

void JobRoutes::Deliver(std::string frame) {
  const auto type = worker::PeekMessageType(frame);
  // Every job message starts with the u64 job id right after the type byte.
  if (!type || frame.size() < 9) return;
  uint64_t job_id = 0;
  for (int i = 0; i < 8; ++i)
    job_id |= static_cast<uint64_t>(static_cast<uint8_t>(frame[1 + i])) << (8 * i);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  std::shared_ptr<JobChannel> channel = it->second.channel;
  if (EndsJob(*type)) jobs_.erase(it);
  if (channel) channel->Push({false, WorkerLoss::kBystander, std::move(frame)});
}

bool JobRoutes::Cancel(uint64_t job_id, Clock::time_point now) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.cancel_overdue) return false;
  it->second.cancel_overdue = now + hang_timeout_;
  return true;
}

void JobRoutes::Release(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  if (it->second.cancel_overdue) {
    it->second.channel.reset();
  } else {
    // Not cancelled: its request saw its end (or the job was never run); nothing to time.
    jobs_.erase(it);
  }
}

std::optional<uint64_t> JobRoutes::Overdue(Clock::time_point now) const {
  for (const auto& [id, route] : jobs_) {
    if (route.cancel_overdue && *route.cancel_overdue <= now) return id;
  }
  return std::nullopt;
}

std::optional<Clock::time_point> JobRoutes::NextCancelBound() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, route] : jobs_) {
    if (route.cancel_overdue && (!next || *route.cancel_overdue < *next))
      next = route.cancel_overdue;
  }
  return next;
}

void JobRoutes::WorkerGone(bool server_stopping, std::optional<uint64_t> hung_job) {
  const bool alone = jobs_.size() == 1;
  for (auto& [id, route] : jobs_) {
    if (!route.channel) continue;
    WorkerLoss loss = WorkerLoss::kBystander;
    if (server_stopping) {
      loss = WorkerLoss::kServerStopping;
    } else if (hung_job ? *hung_job == id : alone) {
      loss = WorkerLoss::kCause;
    }
    route.channel->Push({true, loss, ""});
  }
  jobs_.clear();
}

}  // namespace tessera::server
