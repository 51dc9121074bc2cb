#include "worker/decision_job.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "format/json_util.h"
#include "runtime/task_prompts.h"

namespace tessera::worker {

using ojson = nlohmann::ordered_json;

std::string DecisionInstruction(const std::string& question,
                                const std::vector<std::string>& options,
                                const std::vector<std::string>& descriptions) {
  std::string instruction = question;
  if (!instruction.empty()) instruction += "\n";
  instruction += "Answer with exactly one of these options:";
  for (size_t k = 0; k < options.size(); ++k) {
    instruction += "\n- " + options[k];
    if (k < descriptions.size() && !descriptions[k].empty()) instruction += ": " + descriptions[k];
  }
  return instruction;
}

Expected<std::vector<int32_t>> DecisionPrompt(const LoadedModel& model,
                                              const std::vector<ChatMessage>& messages,
                                              const ResponseFormat& decision) {
  std::vector<std::string> options, descriptions;
  for (const DecisionOption& o : decision.options) {
    options.push_back(o.text);
    descriptions.push_back(o.description);
  }
  const std::string instruction = DecisionInstruction(decision.question, options, descriptions);
  TS_ASSIGN_OR_RETURN(ojson conversation, TemplateMessages(messages));
  if (!conversation.empty() && StringOr(conversation[0], "role") == "system") {
    conversation[0]["content"] = StringOr(conversation[0], "content") + "\n\n" + instruction;
  } else {
    conversation.insert(conversation.begin(), ojson{{"role", "system"}, {"content", instruction}});
  }
  auto prompt = model.RenderChat(conversation, ojson::object());
  if (!prompt) return prompt.status().WithContext("messages");
  return std::move(prompt->ids);
}

DecisionJob::~DecisionJob() = default;

std::variant<std::unique_ptr<DecisionJob>, JobFailure> DecisionJob::Start(
    uint64_t job_id, const ChatPayload& request, const CacheScope& scope, LoadedModel& model,
    size_t max_options, double load_ms, SendFn send, EndFn on_end) {
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  const ResponseFormat& decision = request.options.response_format;
  if (decision.kind != ResponseFormatKind::kDecision) {
    return JobFailure{JobErrorKind::kInternal, "a decision job without a decision"};
  }
  if (request.options.n != 1) return invalid("n", "a decision has one answer; n must be 1");
  if (!request.tools.empty() && request.tool_choice.mode != ToolChoiceMode::kNone) {
    return invalid("tools",
                   "a decision (a response_format choosing among values) cannot call tools");
  }
  const size_t n = decision.options.size();
  if (n < 2 || n > max_options) {
    return invalid("response_format",
                   "a decision needs 2 to " + std::to_string(max_options) + " options, found " +
                       std::to_string(n) +
                       (max_options < kMaxDeclaredDecisionOptions
                            ? " (up to 255 for a model served as --kind NAME=decide)"
                            : ""));
  }
  if (!model.has_chat_template()) {
    return invalid("messages", "the model has no chat template to ask it a question with");
  }
  auto job = std::unique_ptr<DecisionJob>(new DecisionJob());
  job->job_id_ = job_id;
  job->model_ = &model;
  job->decision_ = decision;
  job->logprobs_ = request.options.logprobs;
  job->load_ms_ = load_ms;
  job->send_ = std::move(send);
  job->on_end_ = std::move(on_end);
  job->group_.emplace(model.scheduler());
  std::set<std::string> seen;
  size_t longest = 0;
  for (const DecisionOption& option : decision.options) {
    const std::string& text = option.text;
    if (!seen.insert(text).second) {
      return invalid("response_format", "the option '" + text + "' is listed twice");
    }
    auto ids = model.EncodeText(text, false);
    if (!ids || ids->empty()) {
      return invalid("response_format", "the option '" + text + "' encodes to no tokens");
    }
    longest = std::max(longest, ids->size());
    job->option_texts_.push_back(text);
    job->option_ids_.push_back(std::move(*ids));
  }

  auto prompt = DecisionPrompt(model, request.messages, decision);
  if (!prompt) return Refusal("messages", prompt.status().message());
  const int64_t tokens = static_cast<int64_t>(prompt->size());
  const int64_t limit =
      std::min(kMaxDecisionPromptTokens, model.context() - static_cast<int64_t>(longest));
  if (tokens > limit) {
    return JobFailure{JobErrorKind::kContextLength,
                      "messages: the decision's prompt has " + std::to_string(tokens) +
                          " tokens, more than the limit of " + std::to_string(limit),
                      tokens, "messages"};
  }
  job->prompt_tokens_ = tokens;
  job->scores_ = std::make_shared<OptionScores>(n);
  DecisionJob* self = job.get();
  OptionScoring scoring = SubmitOptionScoring(
      model.scheduler(), *prompt, job->option_ids_, job->scores_,
      [self](const SequenceResult& r) { self->OnFinish(r); }, scope);
  for (uint64_t id : scoring.ids) job->group_->Added(id);
  if (!scoring.status.ok()) {
    JobFailure refusal{JobErrorKind::kContextLength, "messages: " + scoring.status.message(),
                       tokens, "messages"};
    if (!job->group_->RefuseAfterStart(refusal)) return refusal;
    return job;  // answered once the cancelled sequences end
  }
  job->send_(Encode(StartedMessage{job_id, tokens, ResolvedSamplingParams{}}));
  return job;
}

void DecisionJob::Cancel() {
  group_->CancelAll();
}

void DecisionJob::OnFinish(const SequenceResult& r) {
  cached_tokens_ = std::max(cached_tokens_, r.cached_tokens);
  if (!group_->Ended(r)) return;
  Answer();
  on_end_(job_id_);
}

void DecisionJob::Answer() {
  if (auto frame = group_->EndFrame(job_id_)) return send_(*frame);
  DoneMessage done;
  done.job_id = job_id_;
  done.prompt_tokens = prompt_tokens_;
  done.cached_tokens = cached_tokens_;
  done.queue_ms = group_->queue_ms();
  done.load_ms = load_ms_;
  const std::vector<double> p = Softmax(scores_->logprob);
  const size_t best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  const std::string& value = decision_.options[best].value;
  const std::string content = decision_.property.empty()
                                  ? value
                                  : "{" + ojson(decision_.property).dump() + ":" + value + "}";
  DeltaMessage delta;
  delta.job_id = job_id_;
  delta.text = content;
  delta.completion_tokens = static_cast<int64_t>(option_ids_[best].size());
  if (logprobs_) {
    TokenLogprobEntry entry{option_texts_[best], static_cast<float>(std::log(p[best])), {}};
    std::vector<size_t> order(p.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
    for (size_t k : order) {
      entry.top.push_back({option_texts_[k], static_cast<float>(std::log(p[k]))});
    }
    delta.logprobs.push_back(std::move(entry));
  }
  send_(Encode(delta));
  const double ms = group_->elapsed_ms();
  done.finish_reason = FinishReason::kStop;
  done.completion_tokens = delta.completion_tokens;
  done.prefill_ms = ms;
  done.ttft_ms = ms;
  done.prefill_tok_s = ms > 0 ? 1000.0 * static_cast<double>(prompt_tokens_) / ms : 0;
  FillSchedulerState(model_->scheduler(), &done);
  send_(Encode(done));
}

}  // namespace tessera::worker
