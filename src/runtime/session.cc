#include "runtime/session.h"

#include <algorithm>

#include "engine/decoding.h"
#include "runtime/text_stream.h"

namespace tessera {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken:
    case FinishReason::kStopString:
    case FinishReason::kConstraintDone:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kContext:
      return "context";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

struct Session::Core {
  Scheduler* scheduler = nullptr;
  SessionSink sink;
  std::unique_ptr<TextStream> stream;
  SessionResult result;
  uint64_t sequence = 0;
  std::optional<int64_t> max_tokens;  // as the request gave it
  int64_t room = 0;                   // positions left in the context after the prompt
  std::shared_ptr<TokenConstraint> constraint;
  std::vector<float> step_logits;  // the current step's raw row, for logprobs
  int64_t generated = 0;
  bool stopped_by_string = false;
  bool constraint_done = false;
  bool cancelled = false;
  bool detached = false;  // the Session was dropped: no more events
  bool done = false;

  void Emit(const SessionEvent& event) {
    if (!detached && sink) sink(event);
  }

  bool OnToken(int32_t id) {
    if (cancelled || detached) return false;  // this token is not shown
    ++generated;
    const bool more = !constraint || constraint->Accept(id);
    TokenDelta d = stream->Push(id, step_logits);
    result.text += d.text;
    // Every token is reported, also one whose text is held back (a possible stop string).
    Emit(TextDelta{id, std::move(d.text), std::move(d.logprob), generated});
    stopped_by_string = d.stopped;
    constraint_done = !more && !d.stopped;
    return !d.stopped && more;
  }

  FinishReason ReasonFor(const SequenceResult& r) const {
    if (stopped_by_string) return FinishReason::kStopString;
    if (constraint_done) return FinishReason::kConstraintDone;
    if (!r.status.ok()) return FinishReason::kError;
    switch (r.stop_reason) {
      case StopReason::kStopToken:
        return FinishReason::kStopToken;
      case StopReason::kContext:
        return FinishReason::kContext;
      case StopReason::kCancelled:
        return FinishReason::kCancelled;
      case StopReason::kLength:
        break;
    }
    // The context filled up before the request's max_tokens (or with none given).
    const bool filled = static_cast<int64_t>(r.generated_ids.size()) >= room;
    return filled && (!max_tokens || *max_tokens > room) ? FinishReason::kContext
                                                         : FinishReason::kLength;
  }

  void OnFinish(const SequenceResult& r) {
    result.status = r.status;
    result.generated_ids = r.generated_ids;
    result.cached_tokens = r.cached_tokens;
    result.queue_ms = r.queue_ms;
    result.timings = r.timings;
    result.finish = ReasonFor(r);
    if (result.finish == FinishReason::kStopString) result.stop_string = stream->matched_stop();
    if (result.finish != FinishReason::kStopString && result.finish != FinishReason::kCancelled &&
        result.finish != FinishReason::kError) {
      std::string tail = stream->Finish();
      result.text += tail;
      Emit(TextDelta{-1, std::move(tail), std::nullopt, generated});
    }
    done = true;
    Emit(SessionFinished{&result});
  }
};

Expected<std::unique_ptr<Session>> Session::Start(LoadedModel& model, Request request,
                                                  SessionSink sink) {
  auto core = std::make_shared<Core>();
  core->scheduler = &model.scheduler();
  core->sink = std::move(sink);
  SessionResult& result = core->result;
  if (auto* text = std::get_if<std::string>(&request.prompt)) {
    TS_ASSIGN_OR_RETURN(result.prompt_ids, model.EncodeText(*text, /*add_special=*/true));
  } else {
    result.prompt_ids = std::get<std::vector<int32_t>>(request.prompt);
  }
  if (result.prompt_ids.empty()) return InvalidArgument("the prompt is empty");
  const int64_t prompt = static_cast<int64_t>(result.prompt_ids.size());
  core->room = model.context() - prompt;
  if (core->room < 1) {
    return InvalidArgument("the prompt has " + std::to_string(prompt) +
                           " tokens, which leaves no room in the context of " +
                           std::to_string(model.context()) + " positions");
  }
  if (request.max_tokens && *request.max_tokens < 1) {
    return InvalidArgument("max_tokens must be at least 1, not " +
                           std::to_string(*request.max_tokens));
  }
  if (request.top_logits < 0) return InvalidArgument("top_logits must be >= 0");
  const int64_t vocab = model.checkpoint().config.vocab_size;
  for (const auto& [id, bias] : request.logit_bias) {
    if (id < 0 || id >= vocab) {
      return InvalidArgument("logit_bias: token id " + std::to_string(id) +
                             " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    }
  }
  // The model's own defaults (Ollama's params layer) where the request leaves a field unset.
  const RequestDefaults& defaults = model.request_defaults();
  if (request.stop.empty()) request.stop = defaults.stop;
  if (!request.max_tokens) request.max_tokens = defaults.max_tokens;
  if (!request.sampling.seed) request.sampling.seed = defaults.seed;
  TS_ASSIGN_OR_RETURN(result.sampling,
                      ResolveSamplingParams(request.sampling, model.sampling_defaults()));
  core->max_tokens = request.max_tokens;
  core->constraint = std::move(request.constraint);
  core->stream =
      std::make_unique<TextStream>(model.tokenizer(), result.prompt_ids,
                                   TextStreamOptions{.stop = std::move(request.stop),
                                                     .logprobs = request.logprobs,
                                                     .top_logprobs = request.top_logprobs},
                                   model.stop_ids());

  SequenceRequest seq;
  seq.prompt_ids = result.prompt_ids;
  seq.max_new_tokens = std::min(request.max_tokens.value_or(core->room), core->room);
  seq.stop_ids = model.stop_ids();
  if (result.sampling.mode == SamplingMode::kSample) seq.sampling = result.sampling;
  seq.keep_state_at = request.keep_state_at;
  seq.cache_scope = std::move(request.cache_scope);
  seq.share_prompt_with = request.share_prompt_with;
  const int k = request.top_logits;
  if (k > 0 || request.logprobs) {
    seq.on_logits = [core, k, logprobs = request.logprobs](std::span<const float> logits) {
      if (k > 0) core->result.top_logits.push_back(TopK(logits, k));
      if (logprobs) core->step_logits.assign(logits.begin(), logits.end());
    };
  }
  if (!request.logit_bias.empty() || core->constraint) {
    seq.constrain = [core, bias = std::move(request.logit_bias)](std::span<float> logits) {
      for (const auto& [id, b] : bias) logits[static_cast<size_t>(id)] += b;
      if (core->constraint) core->constraint->Mask(logits);
    };
  }
  seq.on_token = [core](int32_t id) { return core->OnToken(id); };
  seq.on_finish = [core](const SequenceResult& r) { core->OnFinish(r); };
  TS_ASSIGN_OR_RETURN(core->sequence, model.scheduler().Submit(std::move(seq)));
  return std::unique_ptr<Session>(new Session(std::move(core)));
}

Session::~Session() {
  if (core_->done) return;
  core_->detached = true;
  core_->scheduler->Cancel(core_->sequence);
}

void Session::Cancel() {
  core_->cancelled = true;
  core_->scheduler->Cancel(core_->sequence);  // also while its prompt is still being computed
}

bool Session::done() const {
  return core_->done;
}

const SessionResult& Session::result() const {
  return core_->result;
}

uint64_t Session::sequence() const {
  return core_->sequence;
}

Status RunUntilDone(Scheduler& scheduler, Session& session,
                    const std::function<bool()>& keep_going) {
  while (!session.done()) {
    if (keep_going && !keep_going()) session.Cancel();
    if (!scheduler.HasWork()) return Internal("the scheduler ran out of work before the session");
    TS_RETURN_IF_ERROR(scheduler.Step());
  }
  return Status::Ok();
}

}  // namespace tessera
