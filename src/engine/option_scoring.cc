#include "engine/option_scoring.h"

#include <algorithm>
#include <limits>

#include "sampling/stages.h"

namespace tessera {

namespace {

// log_softmax(logits)[id] for each id, from one pass over the row (in double).
void AddLogProbs(std::span<const float> logits, std::span<const int32_t> ids,
                 std::span<double> out) {
  const Expected<double> total = LogSumExp(logits);
  for (size_t k = 0; k < ids.size(); ++k) {
    out[k] += total ? static_cast<double>(logits[static_cast<size_t>(ids[k])]) - *total
                    : -std::numeric_limits<double>::infinity();
  }
}

}  // namespace

OptionScoring SubmitOptionScoring(Scheduler& scheduler, std::span<const int32_t> prompt,
                                  const std::vector<std::vector<int32_t>>& options,
                                  std::shared_ptr<OptionScores> scores,
                                  std::function<void(const SequenceResult&)> on_finish,
                                  const CacheScope& scope, std::optional<uint64_t> after) {
  OptionScoring out;
  if (options.empty()) out.status = InvalidArgument("no options to score");
  const int64_t vocab = scheduler.executor().spec().vocab;
  for (const auto& option : options) {
    if (option.empty()) out.status = InvalidArgument("an option has no tokens");
    // Their logits are read directly (the prompt's ids are checked by Submit).
    for (int32_t id : option) {
      if (id < 0 || id >= vocab) {
        out.status =
            InvalidArgument("an option's token id " + std::to_string(id) +
                            " is outside the model's " + std::to_string(vocab) + " logits");
      }
    }
  }
  if (!out.status.ok()) return out;
  const bool single = std::all_of(options.begin(), options.end(),
                                  [](const std::vector<int32_t>& o) { return o.size() == 1; });
  const std::vector<int32_t> prompt_ids(prompt.begin(), prompt.end());
  if (single) {
    // One row scores them all: the prompt's last logits.
    SequenceRequest r;
    r.prompt_ids = prompt_ids;
    r.max_new_tokens = 1;
    std::vector<int32_t> first;
    for (const auto& option : options) first.push_back(option[0]);
    r.on_logits = [scores, first](std::span<const float> logits) {
      AddLogProbs(logits, first, scores->logprob);
    };
    r.on_finish = std::move(on_finish);
    r.cache_scope = scope;
    r.after = after;
    auto id = scheduler.Submit(std::move(r));
    if (id) {
      out.ids.push_back(*id);
    } else {
      out.status = id.status();
    }
    return out;
  }
  for (size_t k = 0; k < options.size(); ++k) {
    SequenceRequest r;
    r.prompt_ids = prompt_ids;
    auto option = std::make_shared<const std::vector<int32_t>>(options[k]);
    r.max_new_tokens = static_cast<int64_t>(option->size());
    auto step = std::make_shared<size_t>(0);
    // The raw row scores the option's next token; the mask then forces that token.
    r.on_logits = [scores, k, option, step](std::span<const float> logits) {
      AddLogProbs(logits, std::span<const int32_t>(&(*option)[*step], 1),
                  std::span<double>(&scores->logprob[k], 1));
    };
    r.constrain = [option, step](std::span<float> logits) {
      const int32_t keep = (*option)[(*step)++];
      const float kept = logits[static_cast<size_t>(keep)];
      std::fill(logits.begin(), logits.end(), -std::numeric_limits<float>::infinity());
      logits[static_cast<size_t>(keep)] = kept;
    };
    r.on_finish = on_finish;
    r.cache_scope = scope;
    if (out.ids.empty()) {
      r.after = after;
    } else {
      r.share_prompt_with = out.ids.front();
    }
    auto id = scheduler.Submit(std::move(r));
    if (!id) {
      for (uint64_t s : out.ids) scheduler.Cancel(s);
      out.status = id.status();
      return out;
    }
    out.ids.push_back(*id);
  }
  return out;
}

}  // namespace tessera
