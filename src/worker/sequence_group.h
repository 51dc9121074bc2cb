// The scheduler sequences one worker job submitted (task, decision and System One jobs),
// followed to their end: how many still run, the first engine error, whether one was
// cancelled, and a refusal decided after some were already submitted. When the last one ends
// the job answers once: with its result, or with the frame EndFrame() gives instead.
//
//   SequenceGroup group(model.scheduler());
//   group.Added(id);                                  // for each submitted sequence
//   ... in each sequence's on_finish: if (group.Ended(r)) { answer; on_end(job_id); }
//   if (auto frame = group.EndFrame(job_id)) send(*frame); else send(the result);
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"

namespace tessera::worker {

class SequenceGroup {
 public:
  explicit SequenceGroup(Scheduler& scheduler)
      : scheduler_(&scheduler), created_(std::chrono::steady_clock::now()) {}

  void Added(uint64_t id) {
    ids_.push_back(id);
    ++pending_;
  }
  size_t pending() const { return pending_; }

  // More sequences will be added after some have ended (a job submitting in blocks): until
  // Close(), the group does not end when nothing is pending.
  void Open() { open_ = true; }
  bool open() const { return open_; }
  // No more will be added; true when nothing is pending (the job answers now).
  bool Close() {
    open_ = false;
    if (ended_ || pending_ > 0) return false;
    ended_ = true;
    return true;
  }

  // One of the sequences ended; true when it was the last (the job answers now). Ignores
  // anything after that.
  bool Ended(const SequenceResult& r) {
    if (ended_) return false;
    if (!r.status.ok() && error_.ok()) error_ = r.status;
    if (r.stop_reason == StopReason::kCancelled && r.status.ok()) cancelled_ = true;
    queue_ms_ = std::max(queue_ms_, r.queue_ms);
    computed_tokens_ += r.timings.prefill_tokens;
    if (--pending_ > 0 || open_) return false;
    ended_ = true;
    return true;
  }
  // A sequence failed or was cancelled, or a refusal is decided: the job submits no more.
  bool failed() const { return cancelled_ || refused_.has_value() || !error_.ok(); }

  void CancelAll() {
    cancelled_ = true;
    for (uint64_t id : ids_) scheduler_->Cancel(id);
  }

  // Some sequences could not be submitted after others were: those are cancelled and the job
  // answers `refusal` once they have ended. False when none was submitted (refuse at once).
  bool RefuseAfterStart(JobFailure refusal) {
    if (pending_ == 0 && !open_) return false;
    refused_ = std::move(refusal);
    for (uint64_t id : ids_) scheduler_->Cancel(id);
    return true;
  }

  // The frame that ends the job instead of its result: the refusal, an engine error (its
  // detail stays in the worker), or a cancelled Done (nobody waits for an answer).
  std::optional<std::string> EndFrame(uint64_t job_id) const {
    if (refused_) {
      return Encode(JobErrorMessage{job_id, refused_->kind, refused_->message,
                                    refused_->prompt_tokens, refused_->field});
    }
    if (!error_.ok()) {
      return Encode(JobErrorMessage{job_id, EngineFailureKind(error_.code()),
                                    EngineFailureMessage(error_.message(), error_.code()), 0});
    }
    if (cancelled_) {
      DoneMessage done;
      done.job_id = job_id;
      done.finish_reason = FinishReason::kCancelled;
      return Encode(done);
    }
    return std::nullopt;
  }

  // Since the group was made (when the job started).
  double elapsed_ms() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - created_)
        .count();
  }
  double queue_ms() const { return queue_ms_; }                 // the longest wait for a slot
  int64_t computed_tokens() const { return computed_tokens_; }  // prompt tokens actually run

 private:
  Scheduler* scheduler_;
  std::chrono::steady_clock::time_point created_;
  std::vector<uint64_t> ids_;
  size_t pending_ = 0;
  bool ended_ = false;
  bool open_ = false;
  bool cancelled_ = false;
  Status error_;
  std::optional<JobFailure> refused_;
  double queue_ms_ = 0;
  int64_t computed_tokens_ = 0;
};

}  // namespace tessera::worker
