// System One inside the worker: questions about one state, each answered by scoring its
// options (engine/option_scoring.h) after a prompt that reads the state first and the question
// last, so every question of a request shares the state as a token prefix:
//   system: kSystemOneInstruction | user: "State:\n<state>" | user: <question and options>
// How that prefix is reused (serve --systemone-reuse none|shared|pinned):
//   0: every question runs its whole prompt (only the server-wide prefix cache applies);
//   1: the state runs once, first, and the questions wait for it and continue from its cache;
//   2: as 1, and the state's cached blocks stay pinned (an LRU of --systemone-pinned-states,
//      default 6), so a later request whose state extends this one continues from it too.
// Answers are the same in every mode: reuse changes what is computed, not the arithmetic.
//
//   auto job = SystemOneJob::Start(job_id, payload, scope, model, {.resume = 1}, send, on_end);
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "engine/option_scoring.h"
#include "runtime/loaded_model.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"
#include "worker/sequence_group.h"

namespace tessera::worker {

inline constexpr const char* kSystemOneInstruction =
    "You read a state and answer one question about it with exactly one of the options given.";
inline constexpr int64_t kMaxSystemOnePromptTokens = 8192;

struct SystemOneOptions {
  int resume = 0;      // --systemone-reuse: 0 none, 1 shared, 2 pinned
  size_t entries = 6;  // --systemone-pinned-states: states kept pinned in mode 2
};

// The state's part of every question's prompt (no generation prompt), and one question's
// whole prompt; the first is a token prefix of the second for templates that render each turn
// on its own (the job checks, and runs without the shared prefix when it is not).
Expected<std::vector<int32_t>> SystemOneStatePrefix(const LoadedModel& model,
                                                    const std::string& state);
Expected<std::vector<int32_t>> SystemOnePrompt(const LoadedModel& model, const std::string& state,
                                               const Question& question);

class SystemOneJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  static std::variant<std::unique_ptr<SystemOneJob>, JobFailure> Start(
      uint64_t job_id, const SystemOnePayload& request, const CacheScope& scope, LoadedModel& model,
      const SystemOneOptions& options, SendFn send, EndFn on_end);
  ~SystemOneJob() override;
  void Cancel() override;

 private:
  SystemOneJob() = default;
  void OnFinish(const SequenceResult& r);
  void Answer();

  uint64_t job_id_ = 0;
  LoadedModel* model_ = nullptr;
  std::vector<Question> questions_;
  std::vector<std::shared_ptr<OptionScores>> scores_;
  std::vector<int64_t> prompt_tokens_;
  std::optional<SequenceGroup> group_;
  SendFn send_;
  EndFn on_end_;
};

}  // namespace tessera::worker
