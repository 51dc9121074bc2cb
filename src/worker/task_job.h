// One task job inside the worker (embeddings, rerank, classification, moderation): each input
// becomes one or more scheduler sequences, batched with whatever else the model runs, and the
// job answers once, with one TaskResultMessage, when the last of them ends. What a sequence
// yields is read where the engine produces it: the final-normed hidden row of the prompt's last
// token (embeddings, score heads), or the log-probabilities of forced tokens after a shared
// prefix (reranker yes/no, guard labels), so every answer is the model's own arithmetic. A
// guard's categories are then generated, greedily, after its most probable label.
//
//   auto job = TaskJob::Start(request, model, kind_info, send, on_end);
//   if (auto* failure = std::get_if<JobFailure>(&job)) reply with it;
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

class TaskJob final : public WorkerJob {
 public:
  using SendFn = std::function<void(const std::string& frame)>;
  using EndFn = std::function<void(uint64_t job_id)>;

  // Builds every input's prompt (refusing the job, before anything runs, when one is invalid
  // or over its limit) and submits the sequences. A refusal's message reads "field: what is
  // wrong" (e.g. "input[3]: ..."), so the HTTP side can name the field.
  static std::variant<std::unique_ptr<TaskJob>, JobFailure> Start(const JobRequest& request,
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
  JobKind kind_ = JobKind::kEmbed;
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
