#include "worker/task_job.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/option_scoring.h"
#include "runtime/task_prompts.h"

namespace tessera::worker {
namespace {

const char* KindNoun(TaskKind kind) {
  switch (kind) {
    case TaskKind::kEmbed:
      return "embedding input";
    case TaskKind::kRerank:
      return "reranked document";
    case TaskKind::kClassify:
      return "classification input";
    default:
      return "moderation input";
  }
}

const std::vector<ChatMessage> kNoMessages;

}  // namespace

TaskRequest TaskRequest::Of(const EmbedPayload& p) {
  return {TaskKind::kEmbed, p.inputs, "", p.prompt_name, p.dimensions, -1, true, true, kNoMessages};
}
TaskRequest TaskRequest::Of(const RerankPayload& p) {
  return {TaskKind::kRerank, p.documents, p.query, p.instruction, 0, -1, true, true, kNoMessages};
}
TaskRequest TaskRequest::Of(const ClassifyPayload& p) {
  return {TaskKind::kClassify,  p.inputs,   "", "", 0, p.truncate_prompt_tokens, p.use_activation,
          p.add_special_tokens, kNoMessages};
}
TaskRequest TaskRequest::Of(const ModeratePayload& p) {
  return {TaskKind::kModerate, p.inputs, "", "", 0, -1, true, true, p.messages};
}

ModelKind TaskModelKind(TaskKind kind) {
  switch (kind) {
    case TaskKind::kEmbed:
      return ModelKind::kEmbed;
    case TaskKind::kRerank:
      return ModelKind::kRerank;
    case TaskKind::kClassify:
      return ModelKind::kClassify;
    case TaskKind::kModerate:
      return ModelKind::kGuard;
  }
  return ModelKind::kGuard;
}

// One input: its prompt, the forced continuations it scores (none for hidden-row tasks and
// the reranker's single next token), and what it has gathered.
struct TaskJob::Unit {
  TaskItem item;
  std::vector<int32_t> prompt;
  std::shared_ptr<OptionScores> scores;  // guard labels: each label's summed log-probability
  std::vector<int32_t> category_ids;     // the guard's categories as generated
  YesNoIds yes_no;
};

TaskJob::~TaskJob() = default;

std::variant<std::unique_ptr<TaskJob>, JobFailure> TaskJob::Start(uint64_t job_id,
                                                                  const TaskRequest& request,
                                                                  LoadedModel& model,
                                                                  const ModelKindInfo& kind,
                                                                  SendFn send, EndFn on_end) {
  auto job = std::unique_ptr<TaskJob>(new TaskJob());
  job->job_id_ = job_id;
  job->kind_ = request.kind;
  job->cache_scope_ = request.cache_scope;
  job->model_ = &model;
  job->send_ = std::move(send);
  job->on_end_ = std::move(on_end);
  job->group_.emplace(model.scheduler());
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  const bool from_ids = !request.inputs.ids.empty();
  const size_t count = from_ids ? request.inputs.ids.size() : request.inputs.texts.size();
  if (count == 0) return invalid("input", "there is nothing to run (an empty list)");

  // Per-kind preparation shared by every input.
  std::string embed_prompt;
  YesNoIds yes_no;
  std::vector<std::vector<int32_t>> guard_labels;
  switch (request.kind) {
    case TaskKind::kEmbed:
      if (request.dimensions > model.checkpoint().config.hidden_size) {
        return invalid("dimensions", "the model's embeddings have " +
                                         std::to_string(model.checkpoint().config.hidden_size) +
                                         " dimensions; ask for at most that many");
      }
      if (!request.instruction.empty()) {
        auto it = kind.prompts.find(request.instruction);
        if (it == kind.prompts.end()) {
          std::string names;
          for (const auto& [name, text] : kind.prompts) names += (names.empty() ? "" : ", ") + name;
          if (request.instruction != "document" && request.instruction != "passage") {
            return invalid("prompt_name", "the model has no prompt named '" + request.instruction +
                                              "'" +
                                              (names.empty() ? "" : " (it has: " + names + ")"));
          }
        } else {
          embed_prompt = it->second;
        }
      }
      break;
    case TaskKind::kClassify:
      if (!model.checkpoint().tensors.score) {
        return invalid("model", "this model has no classification head (score.weight)");
      }
      job->labels_ = kind.labels;
      break;
    case TaskKind::kRerank: {
      auto ids = RerankAnswerIds(model);
      if (!ids) return JobFailure{JobErrorKind::kInternal, ids.status().message()};
      yes_no = *ids;
      break;
    }
    case TaskKind::kModerate: {
      auto ids = GuardLabelIds(model);
      if (!ids) return JobFailure{JobErrorKind::kInternal, ids.status().message()};
      guard_labels = std::move(*ids);
      for (const char* label : kGuardLabels) job->labels_.push_back(label);
      break;
    }
  }

  // Every prompt is built and checked before anything is submitted.
  // Hidden-row tasks run the prompt alone; the others also run what they score after it.
  size_t scored = request.kind == TaskKind::kRerank ? 1 : 0;
  for (const auto& label : guard_labels) scored = std::max(scored, label.size());
  const int64_t room = model.context() - static_cast<int64_t>(scored);
  const int64_t limit =
      request.inputs.max_input_tokens > 0 ? std::min(request.inputs.max_input_tokens, room) : room;
  const bool messages = request.kind == TaskKind::kModerate && !request.messages.empty();
  for (size_t i = 0; i < (messages ? 1 : count); ++i) {
    auto unit = std::make_unique<Unit>();
    unit->item.index = static_cast<int32_t>(i);
    Expected<std::vector<int32_t>> ids = std::vector<int32_t>{};
    const std::string field =
        (request.kind == TaskKind::kRerank ? "documents[" : "input[") + std::to_string(i) + "]";
    switch (request.kind) {
      case TaskKind::kEmbed:
        ids = from_ids ? EmbeddingIdsFromTokens(model, request.inputs.ids[i])
                       : EmbeddingIds(model, request.inputs.texts[i], embed_prompt);
        break;
      case TaskKind::kClassify:
        if (from_ids) {
          ids = request.inputs.ids[i];
          for (int32_t id : *ids) {
            if (id < 0 || id >= model.checkpoint().config.vocab_size) {
              return invalid(field,
                             "token id " + std::to_string(id) + " is outside the vocabulary");
            }
          }
        } else {
          ids = model.EncodeText(request.inputs.texts[i], request.add_special_tokens);
        }
        if (ids && request.truncate_prompt_tokens > 0 &&
            static_cast<int64_t>(ids->size()) > request.truncate_prompt_tokens) {
          ids->erase(ids->begin(), ids->end() - request.truncate_prompt_tokens);  // keep the end
        }
        break;
      case TaskKind::kRerank:
        ids = RerankIds(model, request.query, request.inputs.texts[i], request.instruction);
        unit->yes_no = yes_no;
        break;
      case TaskKind::kModerate: {
        nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
        if (messages) {
          for (const ChatMessage& m : request.messages) {
            conversation.push_back({{"role", m.role}, {"content", m.content}});
          }
        } else {
          conversation.push_back({{"role", "user"}, {"content", request.inputs.texts[i]}});
        }
        ids = GuardPrefixIds(model, conversation);
        unit->scores = std::make_shared<OptionScores>(guard_labels.size());
        break;
      }
      default:
        break;
    }
    if (!ids) return invalid(field, ids.status().message());
    if (ids->empty()) return invalid(field, "the input is empty (no tokens)");
    const int64_t n = static_cast<int64_t>(ids->size());
    if (n > limit) {
      return invalid(field, std::string("the ") + KindNoun(request.kind) + " has " +
                                std::to_string(n) + " tokens, more than the limit of " +
                                std::to_string(limit) + "; shorten it or split it");
    }
    unit->prompt = std::move(*ids);
    unit->item.tokens = n;
    job->units_.push_back(std::move(unit));
  }

  // Submit: one sequence per input; the guard's labels through option scoring.
  TaskJob* self = job.get();
  Scheduler& sched = model.scheduler();
  const int64_t dimensions = request.dimensions;
  const bool normalize = kind.normalize || dimensions > 0;
  const bool activation = request.use_activation;
  auto on_finish = [self](const SequenceResult& r) { self->OnFinish(r); };
  for (auto& owned : job->units_) {
    Unit* unit = owned.get();
    Status submitted;
    if (request.kind == TaskKind::kModerate) {
      OptionScoring scoring = SubmitOptionScoring(sched, unit->prompt, guard_labels, unit->scores,
                                                  on_finish, request.cache_scope);
      for (uint64_t id : scoring.ids) job->group_->Added(id);
      submitted = scoring.status;
    } else {
      SequenceRequest r;
      r.prompt_ids = unit->prompt;
      r.on_finish = on_finish;
      r.cache_scope = request.cache_scope;
      if (request.kind == TaskKind::kEmbed) {
        r.max_new_tokens = 0;
        r.on_final_hidden = [unit, dimensions, normalize](std::span<const float> row) {
          unit->item.values = PoolEmbedding(row, dimensions, normalize);
        };
      } else if (request.kind == TaskKind::kClassify) {
        r.max_new_tokens = 0;
        r.on_final_hidden = [self, unit, activation](std::span<const float> row) {
          auto logits = ScoreHeadLogits(self->model_->checkpoint(), row);
          if (!logits) {
            self->head_error_ = logits.status();
            return;
          }
          const std::vector<double> out = activation ? Softmax(*logits) : *logits;
          unit->item.values.assign(out.begin(), out.end());
          const size_t best = static_cast<size_t>(std::max_element(logits->begin(), logits->end()) -
                                                  logits->begin());
          if (best < self->labels_.size()) unit->item.label = self->labels_[best];
        };
      } else {  // rerank: the next token's row
        r.max_new_tokens = 1;
        r.on_logits = [unit](std::span<const float> logits) {
          unit->item.values = {static_cast<float>(YesProbability(logits, unit->yes_no))};
        };
      }
      auto id = sched.Submit(std::move(r));
      if (id) job->group_->Added(*id);
      submitted = id.status();
    }
    if (!submitted.ok()) {
      // Checked above, so only the pool's size can refuse it now. What was submitted is
      // cancelled, and the job answers with the refusal once those sequences have ended (their
      // callbacks hold it).
      JobFailure refusal{JobErrorKind::kContextLength, submitted.message()};
      if (!job->group_->RefuseAfterStart(refusal)) return refusal;
      return job;
    }
  }
  return job;
}

void TaskJob::Cancel() {
  group_->CancelAll();
  if (categories_) categories_->CancelAll();
}

void TaskJob::OnFinish(const SequenceResult& r) {
  if (!group_->Ended(r)) return;
  if (kind_ == TaskKind::kModerate && !group_->EndFrame(job_id_)) {
    categories_due_ = true;  // AfterStep submits them, outside the scheduler's callback
    return;
  }
  Answer();
  on_end_(job_id_);
}

void TaskJob::AfterStep() {
  if (!categories_due_) return;
  categories_due_ = false;
  Scheduler& sched = model_->scheduler();
  categories_.emplace(sched);
  std::vector<int32_t> stops = model_->stop_ids();
  if (auto newline = model_->EncodeText("\n", false); newline && newline->size() == 1) {
    stops.push_back((*newline)[0]);  // the categories are one line
  }
  for (auto& owned : units_) {
    Unit* unit = owned.get();
    const std::vector<double> p = Softmax(unit->scores->logprob);
    unit->item.values.assign(p.begin(), p.end());
    const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    unit->item.label = labels_[best];
    auto tail = GuardCategoriesPromptTail(*model_, unit->item.label);
    if (!tail) continue;
    SequenceRequest r;
    r.prompt_ids = unit->prompt;
    r.prompt_ids.insert(r.prompt_ids.end(), tail->begin(), tail->end());
    if (static_cast<int64_t>(r.prompt_ids.size()) + kMaxGuardCategoryTokens > model_->context()) {
      continue;  // no room to generate them: none are reported
    }
    r.max_new_tokens = kMaxGuardCategoryTokens;
    r.stop_ids = stops;
    r.cache_scope = cache_scope_;
    r.on_token = [unit](int32_t id) {
      unit->category_ids.push_back(id);
      return true;
    };
    r.on_finish = [this, unit](const SequenceResult& result) {
      if (result.status.ok()) {
        auto text = model_->tokenizer().Decode(unit->category_ids, /*skip_special_tokens=*/true);
        if (text) unit->item.categories = ParseGuardCategories(*text);
      }
      if (!categories_->Ended(result)) return;
      Answer();
      on_end_(job_id_);
    };
    if (auto id = sched.Submit(std::move(r))) categories_->Added(*id);
  }
  if (categories_->pending() == 0) {  // nothing could run: answer with the labels alone
    Answer();
    on_end_(job_id_);
  }
}

void TaskJob::Answer() {
  if (auto frame = group_->EndFrame(job_id_)) return send_(*frame);
  if (!head_error_.ok()) {
    std::fprintf(stderr, "tessera worker: %s\n", head_error_.message().c_str());
    return send_(Encode(JobErrorMessage{job_id_, JobErrorKind::kInternal,
                                        "the model failed while running this request", 0}));
  }
  if (categories_) {
    if (auto frame = categories_->EndFrame(job_id_)) return send_(*frame);
  }
  TaskResultMessage result;
  result.job_id = job_id_;
  result.labels = labels_;
  for (auto& unit : units_) {
    result.prompt_tokens += unit->item.tokens;
    result.items.push_back(std::move(unit->item));
  }
  result.queue_ms = group_->queue_ms();
  result.cached_tokens = std::max<int64_t>(0, result.prompt_tokens - group_->computed_tokens());
  result.run_ms = group_->elapsed_ms();
  send_(Encode(result));
}

}  // namespace tessera::worker
