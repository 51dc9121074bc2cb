#include "worker/systemone_job.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "runtime/task_prompts.h"
#include "worker/decision_job.h"

namespace tessera::worker {
namespace {

using ojson = nlohmann::ordered_json;

ojson StateMessages(const std::string& state) {
  return ojson::array({{{"role", "system"}, {"content", kSystemOneInstruction}},
                       {{"role", "user"}, {"content", "State:\n" + state}}});
}

}  // namespace

Expected<std::vector<int32_t>> SystemOneStatePrefix(const LoadedModel& model,
                                                    const std::string& state) {
  auto prompt = model.RenderChat(StateMessages(state), ojson::object(), false);
  if (!prompt) return prompt.status().WithContext("state");
  return std::move(prompt->ids);
}

Expected<std::vector<int32_t>> SystemOnePrompt(const LoadedModel& model, const std::string& state,
                                               const Question& question) {
  ojson messages = StateMessages(state);
  messages.push_back({{"role", "user"},
                      {"content", DecisionInstruction(question.instructions, question.options,
                                                      question.descriptions)}});
  auto prompt = model.RenderChat(messages, ojson::object());
  if (!prompt) return prompt.status().WithContext("questions");
  return std::move(prompt->ids);
}

SystemOneJob::~SystemOneJob() = default;

std::variant<std::unique_ptr<SystemOneJob>, JobFailure> SystemOneJob::Start(
    uint64_t job_id, const SystemOnePayload& request, const CacheScope& scope, LoadedModel& model,
    const SystemOneOptions& options, SendFn send, EndFn on_end) {
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  if (request.questions.empty()) return invalid("questions", "there are no questions");
  if (!model.has_chat_template()) {
    return invalid("model", "the model has no chat template to ask it a question with");
  }
  auto job = std::unique_ptr<SystemOneJob>(new SystemOneJob());
  job->job_id_ = job_id;
  job->model_ = &model;
  job->questions_ = request.questions;
  job->send_ = std::move(send);
  job->on_end_ = std::move(on_end);
  job->group_.emplace(model.scheduler());

  // Every prompt and option is built and checked before anything runs.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<std::vector<int32_t>>> option_ids;
  for (size_t q = 0; q < request.questions.size(); ++q) {
    const Question& question = request.questions[q];
    const std::string at = "questions[" + std::to_string(q) + "]";
    if (question.options.size() < 2) return invalid(at, "a question needs 2 or more options");
    std::vector<std::vector<int32_t>> ids;
    size_t longest = 0;
    for (const std::string& option : question.options) {
      auto encoded = model.EncodeText(option, false);
      if (!encoded || encoded->empty()) {
        return invalid(at + ".criteria", "the option '" + option + "' encodes to no tokens");
      }
      longest = std::max(longest, encoded->size());
      ids.push_back(std::move(*encoded));
    }
    auto prompt = SystemOnePrompt(model, request.state, question);
    if (!prompt) return Refusal(at, prompt.status().message());
    const int64_t limit =
        std::min(kMaxSystemOnePromptTokens, model.context() - static_cast<int64_t>(longest));
    if (static_cast<int64_t>(prompt->size()) > limit) {
      return JobFailure{JobErrorKind::kContextLength,
                        "state: the state with " + at + " makes a prompt of " +
                            std::to_string(prompt->size()) + " tokens, more than the limit of " +
                            std::to_string(limit) + "; shorten the state",
                        static_cast<int64_t>(prompt->size()), "state"};
    }
    job->prompt_tokens_.push_back(static_cast<int64_t>(prompt->size()));
    prompts.push_back(std::move(*prompt));
    option_ids.push_back(std::move(ids));
  }

  SystemOneJob* self = job.get();
  Scheduler& sched = model.scheduler();
  auto on_finish = [self](const SequenceResult& r) { self->OnFinish(r); };
  auto refuse = [&](const Status& st) -> std::variant<std::unique_ptr<SystemOneJob>, JobFailure> {
    JobFailure refusal{JobErrorKind::kContextLength, "state: " + st.message(), 0, "state"};
    if (!job->group_->RefuseAfterStart(refusal)) return refusal;
    return std::move(job);  // answered once what was submitted has ended
  };
  // Resume: the state's prefix runs first, once; the questions wait for it.
  std::optional<uint64_t> state_sequence;
  if (options.resume >= 1) {
    auto prefix = SystemOneStatePrefix(model, request.state);
    const bool shared =
        prefix && std::all_of(prompts.begin(), prompts.end(), [&](const std::vector<int32_t>& p) {
          return p.size() > prefix->size() && std::equal(prefix->begin(), prefix->end(), p.begin());
        });
    if (shared) {
      SequenceRequest r;
      r.prompt_ids = *prefix;
      r.max_new_tokens = 0;
      r.on_final_hidden = [](std::span<const float>) {};  // runs the prompt, generates nothing
      r.cache_scope = scope;
      const bool pin = options.resume >= 2;
      const size_t entries = options.entries;
      auto pinned = std::make_shared<std::vector<int32_t>>(std::move(*prefix));
      r.on_finish = [self, pin, entries, pinned, scope](const SequenceResult& result) {
        if (pin && result.status.ok() && result.stop_reason == StopReason::kLength) {
          self->model_->scheduler().PinPrefix(*pinned, scope, entries);
        }
        self->OnFinish(result);
      };
      auto id = sched.Submit(std::move(r));
      if (!id) return refuse(id.status());
      state_sequence = *id;
      job->group_->Added(*id);
    }
  }
  for (size_t q = 0; q < prompts.size(); ++q) {
    job->scores_.push_back(std::make_shared<OptionScores>(option_ids[q].size()));
    OptionScoring scoring = SubmitOptionScoring(
        sched, prompts[q], option_ids[q], job->scores_.back(), on_finish, scope, state_sequence);
    for (uint64_t id : scoring.ids) job->group_->Added(id);
    if (!scoring.status.ok()) return refuse(scoring.status);
  }
  return job;
}

void SystemOneJob::Cancel() {
  group_->CancelAll();
}

void SystemOneJob::OnFinish(const SequenceResult& r) {
  if (!group_->Ended(r)) return;
  Answer();
  on_end_(job_id_);
}

void SystemOneJob::Answer() {
  if (auto frame = group_->EndFrame(job_id_)) return send_(*frame);
  TaskResultMessage result;
  result.job_id = job_id_;
  for (size_t q = 0; q < questions_.size(); ++q) {
    const std::vector<double> p = Softmax(scores_[q]->logprob);
    const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    TaskItem item;
    item.index = static_cast<int32_t>(q);
    item.values.assign(p.begin(), p.end());
    item.label = questions_[q].options[best];
    item.tokens = prompt_tokens_[q];
    result.prompt_tokens += item.tokens;
    result.items.push_back(std::move(item));
  }
  result.queue_ms = group_->queue_ms();
  result.cached_tokens = std::max<int64_t>(0, result.prompt_tokens - group_->computed_tokens());
  result.run_ms = group_->elapsed_ms();
  send_(Encode(result));
}

}  // namespace tessera::worker
