// One task job inside the worker (embeddings, rerank, classification, moderation): each input
// becomes one or more scheduler sequences, batched with whatever else the model runs, and the
// job answers once, with one TaskResultMessage, when the last of them ends. What a sequence
// yields is read where the engine produces it: the final-normed hidden row of the prompt's last
// token (embeddings, score heads), or the log-probabilities of forced tokens after a shared
// prefix (reranker yes/no, guard labels), so every answer is the model's own arithmetic. A
// guard's categories are then generated, greedily, after its most probable label.
//
//   auto job = TaskJob::Start(job_id, TaskRequest::Of(embed_payload), model, kind_info, send,
//   on_end); if (auto* failure = std::get_if<JobFailure>(&job)) reply with it;
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "format/model_kind.h"
#include "runtime/loaded_model.h"
#include "worker/generation_job.h"
#include "worker/protocol.h"
#include "worker/sequence_group.h"

namespace tessera::worker {

enum class TaskKind { kEmbed, kRerank, kClassify, kModerate };
ModelKind TaskModelKind(TaskKind kind);  // the model kind each task needs

// What a task job reads of its payload, the same for every task kind (a view: the payload
// outlives Start).
struct TaskRequest {
  TaskKind kind;
  const TaskInputs& inputs;                  // rerank: the documents
  std::string query;                         // rerank
  std::string instruction;                   // rerank: the task instruction; embed: the prompt name
  int32_t dimensions;                        // embed
  int32_t truncate_prompt_tokens;            // classify
  bool use_activation;                       // classify
  bool add_special_tokens;                   // classify
  const std::vector<ChatMessage>& messages;  // moderate
  CacheScope cache_scope{};                  // the job's (JobRequest::cache_scope)
  static TaskRequest Of(const EmbedPayload& p);
  static TaskRequest Of(const RerankPayload& p);
  static TaskRequest Of(const ClassifyPayload& p);
  static TaskRequest Of(const ModeratePayload& p);
};

class TaskJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  // Builds every input's prompt (refusing the job, before anything runs, when one is invalid
  // or over its limit) and submits the sequences. A refusal's message reads "field: what is
  // wrong" (e.g. "input[3]: ..."), so the HTTP side can name the field.
  static std::variant<std::unique_ptr<TaskJob>, JobFailure> Start(uint64_t job_id,
                                                                  const TaskRequest& request,
                                                                  LoadedModel& model,
                                                                  const ModelKindInfo& kind,
                                                                  SendFn send, EndFn on_end);
  ~TaskJob() override;
  void Cancel() override;
  // Moderation's second stage: once the labels are scored, the guard's categories are
  // generated after "Safety: <label>\nCategories:".
  void AfterStep() override;

 private:
  struct Unit;
  TaskJob() = default;
  void OnFinish(const SequenceResult& r);
  void Answer();

  uint64_t job_id_ = 0;
  TaskKind kind_ = TaskKind::kEmbed;
  CacheScope cache_scope_{};  // also of the categories' sequences
  LoadedModel* model_ = nullptr;
  std::vector<std::unique_ptr<Unit>> units_;  // one per input
  std::vector<std::string> labels_;
  std::optional<SequenceGroup> group_;
  Status head_error_;                        // the score head could not be read
  bool categories_due_ = false;              // labels scored; their categories come next
  std::optional<SequenceGroup> categories_;  // the category generations
  SendFn send_;
  EndFn on_end_;
};

}  // namespace tessera::worker
