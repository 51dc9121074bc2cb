#include "engine/run_sequence.h"

#include <optional>

namespace tessera {

Expected<SequenceRun> RunToEnd(Scheduler& sched, SequenceRequest req, int top_logits_k) {
  std::optional<SequenceResult> finished;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;
  if (top_logits_k > 0) {
    // Recorded before the caller's own on_logits, from the same raw row.
    req.on_logits = [&top_logits, top_logits_k,
                     theirs = std::move(req.on_logits)](std::span<const float> logits) {
      top_logits.push_back(TopK(logits, top_logits_k));
      if (theirs) theirs(logits);
    };
  }
  req.on_finish = [&finished, theirs = std::move(req.on_finish)](const SequenceResult& r) {
    finished = r;
    if (theirs) theirs(r);
  };
  TS_RETURN_IF_ERROR(sched.Submit(std::move(req)).status());
  while (!finished) {
    // A submitted sequence always finishes (Step() ends it on an error); an idle scheduler
    // here would be a scheduler bug, not a reason to loop forever.
    if (!sched.HasWork()) return Internal("the scheduler went idle before the sequence ended");
    TS_RETURN_IF_ERROR(sched.Step());
  }
  TS_RETURN_IF_ERROR(finished->status);
  SequenceRun run;
  static_cast<SequenceResult&>(run) = std::move(*finished);
  run.top_logits = std::move(top_logits);
  return run;
}

Expected<std::vector<SequenceResult>> RunAllToEnd(Scheduler& sched,
                                                  std::vector<SequenceRequest> reqs) {
  std::vector<std::optional<SequenceResult>> finished(reqs.size());
  size_t pending = reqs.size();
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].on_finish = [&finished, &pending, i,
                         theirs = std::move(reqs[i].on_finish)](const SequenceResult& r) {
      finished[i] = r;
      --pending;
      if (theirs) theirs(r);
    };
    TS_RETURN_IF_ERROR(sched.Submit(std::move(reqs[i])).status());
  }
  while (pending > 0) {
    if (!sched.HasWork()) return Internal("the scheduler went idle before the sequences ended");
    TS_RETURN_IF_ERROR(sched.Step());
  }
  std::vector<SequenceResult> out;
  for (auto& r : finished) {
    TS_RETURN_IF_ERROR(r->status);
    out.push_back(std::move(*r));
  }
  return out;
}

Expected<SequenceRun> RunOneSequence(ModelExecutor& exec, SequenceRequest req, int top_logits_k,
                                     Scheduler::Options options) {
  Scheduler sched(exec, options);
  return RunToEnd(sched, std::move(req), top_logits_k);
}

}  // namespace tessera
