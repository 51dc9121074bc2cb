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
  job->load_ms_ = request.load_ms;
  job->model_ = &model;
  job->send_ = std::move(send);
  job->on_end_ = std::move(on_end);
  job->group_.emplace(model.scheduler());
  job->group_->Open();  // its sequences are submitted a block at a time
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  const bool from_ids = !request.inputs.ids.empty();
  const size_t count = from_ids ? request.inputs.ids.size() : request.inputs.texts.size();
  if (count == 0) return invalid("input", "there is nothing to run (an empty list)");

  // Per-kind preparation shared by every input.
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
          job->embed_prompt_ = it->second;
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
      job->yes_no_ = *ids;
      break;
    }
    case TaskKind::kModerate: {
      auto ids = GuardLabelIds(model);
      if (!ids) return JobFailure{JobErrorKind::kInternal, ids.status().message()};
      job->guard_labels_ = std::move(*ids);
      for (const char* label : kGuardLabels) job->labels_.push_back(label);
      break;
    }
  }

  // Hidden-row tasks run the prompt alone; the others also run what they score after it.
  size_t scored = request.kind == TaskKind::kRerank ? 1 : 0;
  for (const auto& label : job->guard_labels_) scored = std::max(scored, label.size());
  const int64_t room = model.context() - static_cast<int64_t>(scored);
  job->limit_ =
      request.inputs.max_input_tokens > 0 ? std::min(request.inputs.max_input_tokens, room) : room;
  const bool messages = request.kind == TaskKind::kModerate && !request.messages.empty();
  job->count_ = messages ? 1 : count;
  job->inputs_ = request.inputs;
  job->messages_ = request.messages;
  job->query_ = request.query;
  job->instruction_ = request.instruction;
  job->truncate_prompt_tokens_ = request.truncate_prompt_tokens;
  job->use_activation_ = request.use_activation;
  job->add_special_tokens_ = request.add_special_tokens;
  job->dimensions_ = request.dimensions;
  job->normalize_ = kind.normalize || request.dimensions > 0;
  // The first block now, so a small request is refused (or not) before Start returns; the
  // rest a block per turn (AfterStep). Nothing is submitted before every prompt is built.
  if (auto failure = job->Prepare(kTaskInputsPerTurn)) return *failure;
  return job;
}

std::optional<JobFailure> TaskJob::Prepare(size_t most) {
  const LoadedModel& model = *model_;
  const bool from_ids = !inputs_.ids.empty();
  const bool messages = kind_ == TaskKind::kModerate && !messages_.empty();
  for (size_t n = 0; n < most && units_.size() < count_; ++n) {
    const size_t i = units_.size();
    auto unit = std::make_unique<Unit>();
    unit->item.index = static_cast<int32_t>(i);
    Expected<std::vector<int32_t>> ids = std::vector<int32_t>{};
    const std::string field =
        (kind_ == TaskKind::kRerank ? "documents[" : "input[") + std::to_string(i) + "]";
    switch (kind_) {
      case TaskKind::kEmbed:
        ids = from_ids ? EmbeddingIdsFromTokens(model, inputs_.ids[i])
                       : EmbeddingIds(model, inputs_.texts[i], embed_prompt_);
        break;
      case TaskKind::kClassify:
        if (from_ids) {
          ids = inputs_.ids[i];
          for (int32_t id : *ids) {
            if (id < 0 || id >= model.checkpoint().config.vocab_size) {
              return InvalidRequest(
                  field, "token id " + std::to_string(id) + " is outside the vocabulary");
            }
          }
        } else {
          ids = model.EncodeText(inputs_.texts[i], add_special_tokens_);
        }
        if (ids && truncate_prompt_tokens_ > 0 &&
            static_cast<int64_t>(ids->size()) > truncate_prompt_tokens_) {
          ids->erase(ids->begin(), ids->end() - truncate_prompt_tokens_);  // keep the end
        }
        break;
      case TaskKind::kRerank:
        ids = RerankIds(model, query_, inputs_.texts[i], instruction_);
        unit->yes_no = yes_no_;
        break;
      case TaskKind::kModerate: {
        nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
        if (messages) {
          for (const ChatMessage& m : messages_) {
            conversation.push_back({{"role", m.role}, {"content", m.content}});
          }
        } else {
          conversation.push_back({{"role", "user"}, {"content", inputs_.texts[i]}});
        }
        ids = GuardPrefixIds(model, conversation);
        unit->scores = std::make_shared<OptionScores>(guard_labels_.size());
        break;
      }
      default:
        break;
    }
    if (!ids) return InvalidRequest(field, ids.status().message());
    if (ids->empty()) return InvalidRequest(field, "the input is empty (no tokens)");
    const int64_t tokens = static_cast<int64_t>(ids->size());
    if (tokens > limit_) {
      return InvalidRequest(field, std::string("the ") + KindNoun(kind_) + " has " +
                                       std::to_string(tokens) + " tokens, more than the limit of " +
                                       std::to_string(limit_) + "; shorten it or split it");
    }
    unit->prompt = std::move(*ids);
    unit->item.tokens = tokens;
    units_.push_back(std::move(unit));
  }
  return std::nullopt;
}

size_t TaskJob::InFlight() const {
  // One slot stays free for other jobs (a chat's prompt starts at the next step), unless the
  // model has only one.
  return static_cast<size_t>(std::max(1, model_->slots() - 1));
}

bool TaskJob::HasPendingWork() const {
  if (ended_) return false;
  if (cancelled_ || group_->failed()) return group_->open();  // AfterStep closes the group
  if (units_.size() < count_) return true;                    // prompts to build
  const size_t room = InFlight();
  if (categories_due_) return true;
  if (categories_ && categories_->open()) {
    return categories_submitted_ < units_.size() && categories_->pending() < room;
  }
  return submitted_ < units_.size() && group_->pending() < room;
}

void TaskJob::Cancel() {
  cancelled_ = true;
  group_->CancelAll();
  if (categories_) categories_->CancelAll();
}

void TaskJob::AfterStep() {
  if (ended_) return;
  if (!cancelled_ && units_.size() < count_) {
    if (auto failure = Prepare(kTaskInputsPerTurn)) {
      // Nothing was submitted yet: the refusal is the job's answer.
      send_(Encode(JobErrorMessage{job_id_, failure->kind, failure->message, failure->prompt_tokens,
                                   failure->field}));
      ended_ = true;
      on_end_(job_id_);
      return;
    }
    if (units_.size() < count_) return;
  }
  if (categories_due_) {
    categories_due_ = false;
    categories_.emplace(model_->scheduler());
    categories_->Open();
  }
  SubmitMore();
}

void TaskJob::SubmitMore() {
  SequenceGroup& group = categories_ ? *categories_ : *group_;
  const size_t room = InFlight();
  while (!cancelled_ && !group.failed() && group.pending() < room) {
    if (categories_) {
      if (categories_submitted_ >= units_.size()) break;
      SubmitCategories();
      continue;
    }
    if (submitted_ >= units_.size()) break;
    Unit& unit = *units_[submitted_++];
    if (Status st = SubmitUnit(unit); !st.ok()) {
      // Checked when built, so only the pool's size can refuse it now. What was submitted is
      // cancelled, and the job answers with the refusal once those sequences have ended.
      group.RefuseAfterStart({JobErrorKind::kContextLength, st.message()});
    }
  }
  const bool all_in =
      categories_ ? categories_submitted_ >= units_.size() : submitted_ >= units_.size();
  if (group.open() && (all_in || cancelled_ || group.failed()) && group.Close()) {
    if (!categories_ && kind_ == TaskKind::kModerate && !group_->EndFrame(job_id_)) {
      categories_due_ = true;  // every label scored (the last ended before this turn)
      return;
    }
    End();
  }
}

Status TaskJob::SubmitUnit(Unit& unit_ref) {
  Unit* unit = &unit_ref;
  TaskJob* self = this;
  Scheduler& sched = model_->scheduler();
  auto on_finish = [self](const SequenceResult& r) { self->OnFinish(r); };
  if (kind_ == TaskKind::kModerate) {
    OptionScoring scoring = SubmitOptionScoring(sched, unit->prompt, guard_labels_, unit->scores,
                                                on_finish, cache_scope_);
    for (uint64_t id : scoring.ids) group_->Added(id);
    return scoring.status;
  }
  SequenceRequest r;
  r.prompt_ids = unit->prompt;
  r.on_finish = on_finish;
  r.cache_scope = cache_scope_;
  if (kind_ == TaskKind::kEmbed) {
    r.max_new_tokens = 0;
    r.on_final_hidden = [unit, dimensions = dimensions_,
                         normalize = normalize_](std::span<const float> row) {
      unit->item.values = PoolEmbedding(row, dimensions, normalize);
    };
  } else if (kind_ == TaskKind::kClassify) {
    r.max_new_tokens = 0;
    r.on_final_hidden = [self, unit](std::span<const float> row) {
      auto logits = ScoreHeadLogits(self->model_->checkpoint(), row);
      if (!logits) {
        self->head_error_ = logits.status();
        return;
      }
      const std::vector<double> out = self->use_activation_ ? Softmax(*logits) : *logits;
      unit->item.values.assign(out.begin(), out.end());
      const size_t best =
          static_cast<size_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
      if (best < self->labels_.size()) unit->item.label = self->labels_[best];
    };
  } else {  // rerank: the next token's row
    r.max_new_tokens = 1;
    r.on_logits = [unit](std::span<const float> logits) {
      unit->item.values = {static_cast<float>(YesProbability(logits, unit->yes_no))};
    };
  }
  auto id = sched.Submit(std::move(r));
  if (id) group_->Added(*id);
  return id.status();
}

void TaskJob::OnFinish(const SequenceResult& r) {
  if (!group_->Ended(r)) return;
  if (kind_ == TaskKind::kModerate && !group_->EndFrame(job_id_)) {
    categories_due_ = true;  // AfterStep submits them, outside the scheduler's callback
    return;
  }
  End();
}

void TaskJob::SubmitCategories() {
  Unit* unit = units_[categories_submitted_++].get();
  const std::vector<double> p = Softmax(unit->scores->logprob);
  unit->item.values.assign(p.begin(), p.end());
  const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  unit->item.label = labels_[best];
  auto tail = GuardCategoriesPromptTail(*model_, unit->item.label);
  if (!tail) return;
  SequenceRequest r;
  r.prompt_ids = unit->prompt;
  r.prompt_ids.insert(r.prompt_ids.end(), tail->begin(), tail->end());
  if (static_cast<int64_t>(r.prompt_ids.size()) + kMaxGuardCategoryTokens > model_->context()) {
    return;  // no room to generate them: none are reported
  }
  r.max_new_tokens = kMaxGuardCategoryTokens;
  r.cache_scope = cache_scope_;
  r.stop_ids = model_->stop_ids();
  if (auto newline = model_->EncodeText("\n", false); newline && newline->size() == 1) {
    r.stop_ids.push_back((*newline)[0]);  // the categories are one line
  }
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
    End();
  };
  if (auto id = model_->scheduler().Submit(std::move(r))) categories_->Added(*id);
}

void TaskJob::End() {
  if (ended_) return;
  ended_ = true;
  Answer();
  on_end_(job_id_);
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
  result.load_ms = load_ms_;
  send_(Encode(result));
}

}  // namespace tessera::worker
