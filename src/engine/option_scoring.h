// Scoring a fixed set of continuations ("options") of one prompt: the log-probability the
// model gives each option's tokens after the prompt, summed over the option (decisions, guard
// labels). The prompt runs once: when every option is one token, one sequence reads them all
// from the prompt's last logits row; otherwise one sequence per option is forced along its
// tokens, the first computing the prompt and the others sharing it (Scheduler
// share_prompt_with), and each token's log-probability is read from the raw row before the
// token is forced. The sequences batch with whatever else the scheduler runs.
//
//   auto scores = std::make_shared<OptionScores>(options.size());
//   OptionScoring s = SubmitOptionScoring(sched, prompt, options, scores, on_finish, scope);
//   ... on_finish runs once per s.ids entry; then scores->logprob[k] is option k's sum
//   (when s.status is not ok those sequences were cancelled and the scores mean nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/scheduler.h"

namespace tessera {

struct OptionScores {
  explicit OptionScores(size_t n) : logprob(n, 0.0) {}
  std::vector<double> logprob;  // natural log, summed over each option's tokens
};

struct OptionScoring {
  std::vector<uint64_t> ids;  // submitted; on_finish runs once for each
  Status status;              // not ok: nothing more was submitted and `ids` were cancelled
};

// Submits the sequences. Every option must be non-empty and inside the model's vocabulary
// (checked here, before anything is submitted: option ids index the logits), and the prompt
// must fit with the longest option. `scope`: SequenceRequest::cache_scope of every sequence.
OptionScoring SubmitOptionScoring(
    Scheduler& scheduler, std::span<const int32_t> prompt,
    const std::vector<std::vector<int32_t>>& options, std::shared_ptr<OptionScores> scores,
    std::function<void(const SequenceResult&)> on_finish, const CacheScope& scope,
    std::optional<uint64_t> after = std::nullopt);  // SequenceRequest::after for the prompt

}  // namespace tessera
