// Decisions on /v1/chat/completions: a response_format json_schema whose schema is a choice
// among a few values (recognised in the HTTP process: server/decision_format.h, a
// ResponseFormat of kind kDecision) is answered by scoring every option, not
// by sampling: one pass over the prompt, then each option's tokens (engine/option_scoring.h),
// and the probabilities are the softmax over the options' summed token log-probabilities.
// The answer is the most probable option in the schema's shape; with logprobs, the one
// logprobs entry's top_logprobs carries every option (log of its probability). Sampling fields
// are accepted and ignored: a decision is exact and repeatable.
//
//   if (chat.options.response_format.kind == ResponseFormatKind::kDecision)  //
//   server/decision_format.h
//     auto job = DecisionJob::Start(job_id, chat, scope, model, max_options, load_ms, send, end);
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

// "<question>\nAnswer with exactly one of these options:\n- a: description\n- b": how the
// question and its options are put to the model (decisions and System One).
std::string DecisionInstruction(const std::string& question,
                                const std::vector<std::string>& options,
                                const std::vector<std::string>& descriptions);

// The prompt a decision scores its options after: the conversation with the question and the
// options (with their descriptions) as a system message, appended to the conversation's own
// system message when it has one, through the chat template with the generation prompt.
Expected<std::vector<int32_t>> DecisionPrompt(const LoadedModel& model,
                                              const std::vector<ChatMessage>& messages,
                                              const ResponseFormat& decision);

inline constexpr size_t kMaxDecisionOptions = 10;           // any chat model
inline constexpr size_t kMaxDeclaredDecisionOptions = 255;  // a model served as kind decide
inline constexpr int64_t kMaxDecisionPromptTokens = 8192;

class DecisionJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  static std::variant<std::unique_ptr<DecisionJob>, JobFailure> Start(
      uint64_t job_id, const ChatPayload& request, const CacheScope& scope, LoadedModel& model,
      size_t max_options, double load_ms, SendFn send, EndFn on_end);
  ~DecisionJob() override;
  void Cancel() override;

 private:
  DecisionJob() = default;
  void OnFinish(const SequenceResult& r);
  void Answer();

  uint64_t job_id_ = 0;
  LoadedModel* model_ = nullptr;
  ResponseFormat decision_;  // kDecision
  std::vector<std::string> option_texts_;
  std::vector<std::vector<int32_t>> option_ids_;
  std::shared_ptr<OptionScores> scores_;
  std::optional<SequenceGroup> group_;
  int64_t prompt_tokens_ = 0;
  int64_t cached_tokens_ = 0;
  bool logprobs_ = false;
  double load_ms_ = 0;
  SendFn send_;
  EndFn on_end_;
};

}  // namespace tessera::worker
