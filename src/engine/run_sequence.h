// One sequence driven through the Scheduler to its end, for callers that have a ModelExecutor
// and one prompt (tests of a model's tokens, `tessera bench`'s single-stream figures): the
// same prefill, decode, sampling and stopping the product runs, with no second loop.
//
//   SequenceRequest req{.prompt_ids = ids, .max_new_tokens = 16, .stop_ids = {2}};
//   TS_ASSIGN_OR_RETURN(SequenceRun r, RunOneSequence(*exec, req, /*top_logits_k=*/5));
//   use(r.generated_ids, r.stop_reason, r.top_logits, r.timings);
//
//   Scheduler sched(*exec, {});  // one scheduler for several turns: its prefix cache stays
//   TS_ASSIGN_OR_RETURN(SequenceRun first, RunToEnd(sched, turn1));
//   TS_ASSIGN_OR_RETURN(SequenceRun second, RunToEnd(sched, turn2));  // turn1's KV reused
//   TS_ASSIGN_OR_RETURN(auto results, RunAllToEnd(sched, {a, b, c}));     // three at once
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/model_executor.h"
#include "engine/scheduler.h"

namespace tessera {

struct SequenceRun : SequenceResult {
  // The K highest [id, raw logit] of each generated step (when asked for).
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;
};

// Submits `req` to `sched` and steps it until that sequence has ended (anything else already
// submitted runs alongside). An engine error, or the sequence ending with one, is returned.
Expected<SequenceRun> RunToEnd(Scheduler& sched, SequenceRequest req, int top_logits_k = 0);

// Several sequences submitted at once and stepped together until all have ended (batched as
// the server batches them: `tessera bench --concurrency`). Results in submission order.
Expected<std::vector<SequenceResult>> RunAllToEnd(Scheduler& sched,
                                                  std::vector<SequenceRequest> reqs);

// The same over a scheduler of its own on `exec`: nothing an earlier run left in the executor
// is reused (a new Scheduler knows no cached prefix).
Expected<SequenceRun> RunOneSequence(ModelExecutor& exec, SequenceRequest req, int top_logits_k = 0,
                                     Scheduler::Options options = {});

}  // namespace tessera
