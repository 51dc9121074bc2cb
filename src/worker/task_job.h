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
#include "runtime/task_prompts.h"
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
  double load_ms = 0;  // the model load this job waited for (TaskResultMessage::load_ms)
  static TaskRequest Of(const EmbedPayload& p);
  static TaskRequest Of(const RerankPayload& p);
  static TaskRequest Of(const ClassifyPayload& p);
  static TaskRequest Of(const ModeratePayload& p);
};

// Inputs a task job tokenizes and checks per worker loop turn (the first block in Start), so a
// request of thousands of documents neither stalls other models while it is read nor runs
// before all of it has been checked.
// Four take about as long as a decode step of a small model (~0.2 ms for 400-character texts).
inline constexpr size_t kTaskInputsPerTurn = 4;

class TaskJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  // Checks the request and builds the first block of prompts (refusing the job, before
  // anything runs, when one is invalid or over its limit); AfterStep builds the rest a block
  // per turn, then submits them. A refusal's message reads "field: what is wrong" (e.g.
  // "input[3]: ..."), so the HTTP side can name the field; one found after Start is sent as
  // the job's JobError, still before anything ran.
  static std::variant<std::unique_ptr<TaskJob>, JobFailure> Start(uint64_t job_id,
                                                                  const TaskRequest& request,
                                                                  LoadedModel& model,
                                                                  const ModelKindInfo& kind,
                                                                  SendFn send, EndFn on_end);
  ~TaskJob() override;
  // No sequence is submitted after it; those in the scheduler end at its next step.
  void Cancel() override;
  // Builds the next block of prompts, or submits prepared sequences while the job has fewer
  // than InFlight() in its scheduler (so a job of thousands of inputs holds at most that many
  // places in the FCFS queue, and another job's sequence finds a free slot).
  // Moderation's second stage is submitted the same way: once the labels are scored, the
  // guard's categories are generated after "Safety: <label>\nCategories:".
  void AfterStep() override;
  bool HasPendingWork() const override;

 private:
  struct Unit;
  TaskJob() = default;
  // Builds the prompts of inputs [units_.size(), units_.size() + most); a failure names the input.
  std::optional<JobFailure> Prepare(size_t most);
  // Submits prepared units (or categories) while fewer than the slots are in the scheduler;
  // a refusal there cancels what runs and ends the job with it.
  void SubmitMore();
  size_t InFlight() const;  // the most sequences the job keeps in the scheduler: slots - 1
  Status SubmitUnit(Unit& unit);
  void SubmitCategories();
  void OnFinish(const SequenceResult& r);
  void Answer();
  void End();  // Answer once, then on_end

  uint64_t job_id_ = 0;
  double load_ms_ = 0;
  TaskKind kind_ = TaskKind::kEmbed;
  CacheScope cache_scope_{};  // of every sequence it submits
  LoadedModel* model_ = nullptr;
  // The request, kept: its inputs are read a block per turn.
  TaskInputs inputs_;
  std::vector<ChatMessage> messages_;
  std::string query_, instruction_;
  int32_t truncate_prompt_tokens_ = -1;
  bool use_activation_ = true;
  bool add_special_tokens_ = true;
  int64_t dimensions_ = 0;
  bool normalize_ = false;
  size_t count_ = 0;                                // units to build
  int64_t limit_ = 0;                               // tokens an input may have
  std::string embed_prompt_;                        // embed: the prompt's text
  YesNoIds yes_no_;                                 // rerank
  std::vector<std::vector<int32_t>> guard_labels_;  // moderate
  std::vector<std::unique_ptr<Unit>> units_;        // one per input, built so far
  size_t submitted_ = 0;                            // units whose sequences were submitted
  std::vector<std::string> labels_;
  std::optional<SequenceGroup> group_;
  Status head_error_;  // the score head could not be read
  bool cancelled_ = false;
  bool ended_ = false;
  bool categories_due_ = false;              // labels scored; their categories come next
  size_t categories_submitted_ = 0;          // units whose category generation was submitted
  std::optional<SequenceGroup> categories_;  // the category generations
  SendFn send_;
  EndFn on_end_;
};

}  // namespace tessera::worker
