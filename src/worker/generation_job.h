// One chat or completion job inside the worker: its prompt (rendered with tools when given,
// plus the forced opening of a required tool call), its n choices as runtime Sessions (the
// one request path the CLI also runs), and what each choice streams back: text from its
// Session, tool calls through the template's ToolCallParser, and the response_format or
// forced call enforced by a GrammarMatcher as the Session's TokenConstraint. The worker owns jobs
// and routes Cancel to them; a job reports through `send` (encoded worker messages) and tells the
// worker when it ends.
//
//   auto job = GenerationJob::Start(request, model, vocabulary, load_ms, send, on_end);
//   if (!job) reply with job.status();    // the failure kind travels as JobFailure
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/status.h"
#include "grammar/grammar.h"
#include "runtime/loaded_model.h"
#include "runtime/session.h"
#include "worker/protocol.h"

namespace tessera::worker {

// OpenAI-shaped messages for the chat template (tool_calls parsed back from their JSON text).
Expected<nlohmann::ordered_json> TemplateMessages(const std::vector<ChatMessage>& messages);

// The model's scheduler as a Done message reports it (slots, waiting sequences, KV blocks).
void FillSchedulerState(const Scheduler& sched, DoneMessage* done);

// What the worker holds of a running job of any kind: it can be cancelled (the job still
// answers, with a cancelled Done), and it is deleted after it has sent its end.
class WorkerJob {
 public:
  virtual ~WorkerJob() = default;
  virtual void Cancel() = 0;
  // Called by the worker after each scheduler step, outside the scheduler's callbacks: where
  // a job submits its next stage (a sequence must not be submitted from inside on_finish).
  virtual void AfterStep() {}
  // Work the job does outside its scheduler (e.g. a task job still building prompts): the
  // worker keeps turning its loop, and calling AfterStep, while any job has some.
  virtual bool HasPendingWork() const { return false; }
};

// A job-level failure: the kind decides the HTTP status, the message is shown to the client.
struct JobFailure {
  JobErrorKind kind;
  std::string message;
  int64_t prompt_tokens = 0;  // for kContextLength
  std::string field{};        // the request field it is about (the error's param), or empty
};

// A refusal about one request field: the message reads "field: detail" (just "detail"
// without a field) and `field` travels beside it, so nobody reads it back out of the text.
inline JobFailure InvalidRequest(std::string field, std::string detail) {
  std::string message = field.empty() ? std::move(detail) : field + ": " + detail;
  return JobFailure{JobErrorKind::kInvalidRequest, std::move(message), 0, std::move(field)};
}
// A refusal whose message already names what is wrong (a grammar or template status such as
// "tools[0].function: ..."); `field` is the top-level request field it is about.
inline JobFailure Refusal(std::string field, std::string message) {
  return JobFailure{JobErrorKind::kInvalidRequest, std::move(message), 0, std::move(field)};
}

// The ids of the prompt a chat job would run (its template, tools, forced call opening and
// thinking switch), without running it: what a chat-tokenize job answers.
std::variant<std::vector<int32_t>, JobFailure> ChatPromptIds(const ChatPayload& chat,
                                                             const std::string& model_name,
                                                             LoadedModel& model);

class GenerationJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  // Renders and validates the request and submits its choices to the model's scheduler.
  // `vocabulary` (the model's tokens as bytes, for constrained decoding) is asked for only when
  // the job needs it. The job ends (on_end) after its Done or JobError frame.
  static std::variant<std::unique_ptr<GenerationJob>, JobFailure> Start(
      const JobRequest& request, LoadedModel& model,
      const std::function<Expected<std::shared_ptr<const TokenVocabulary>>()>& vocabulary,
      double load_ms, SendFn send, EndFn on_end);

  ~GenerationJob() override;
  void Cancel() override;
  uint64_t job_id() const { return job_id_; }

 private:
  struct Choice;
  GenerationJob() = default;
  void OnEvent(Choice& c, const SessionEvent& event);
  void OnFinish(Choice& c, const SessionResult& r);
  void SendEvents(Choice& c, std::string text, std::vector<TokenLogprobEntry> logprobs,
                  bool at_end);

  uint64_t job_id_ = 0;
  LoadedModel* model_ = nullptr;
  std::vector<std::unique_ptr<Choice>> choices_;
  int64_t prompt_tokens_ = 0;
  double load_ms_ = 0;
  int finished_ = 0;
  bool failed_ = false;
  std::string forced_closing_;  // text that closes a forced tool call, fed to the parser at end
  SendFn send_;
  EndFn on_end_;
};

}  // namespace tessera::worker
