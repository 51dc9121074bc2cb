#include "worker/generation_job.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "chat/tool_calls.h"
#include "format/ordered_json.h"
#include "worker/tool_constraint.h"

namespace tessera::worker {

using ojson = nlohmann::ordered_json;

// OpenAI-shaped messages for the template (chat/chat_template.h turns them into what
// templates expect).
Expected<ojson> TemplateMessages(const std::vector<ChatMessage>& messages) {
  ojson out = ojson::array();
  for (const ChatMessage& msg : messages) {
    ojson m = {{"role", msg.role}, {"content", msg.content}};
    if (!msg.tool_calls.empty()) {
      auto calls = ParseOrderedJson(msg.tool_calls, {}, "messages: tool_calls");
      if (!calls) return InvalidArgument(calls.status().message());
      m["tool_calls"] = std::move(*calls);
    }
    if (!msg.tool_call_id.empty()) m["tool_call_id"] = msg.tool_call_id;
    if (!msg.name.empty()) m["name"] = msg.name;
    out.push_back(std::move(m));
  }
  return out;
}

void FillSchedulerState(const Scheduler& sched, DoneMessage* done) {
  done->slots = sched.slots();
  done->slots_in_use = sched.running();
  done->sequences_waiting = sched.waiting();
  done->kv_blocks = sched.kv_pool().blocks();
  done->kv_blocks_free = sched.kv_pool().available();
  done->kv_blocks_cached = sched.kv_pool().cached();
}

namespace {

// A choice's grammar as the Session's constraint: a response_format's document, or a tool
// call's (forced from the first token, or lazily from the token that opens a call).
class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                    std::shared_ptr<const TokenVocabulary> vocab, int32_t lazy_trigger,
                    std::shared_ptr<const std::vector<uint64_t>> text_openers)
      : matcher_(std::in_place, std::move(grammar), vocab),
        mask_(vocab->mask_words(), 0),
        size_(vocab->size()),
        lazy_trigger_(lazy_trigger),
        bare_call_opening_(text_openers != nullptr),
        active_(lazy_trigger < 0),
        text_openers_(std::move(text_openers)) {}

  void Mask(std::span<float> logits) override {
    if (!matcher_ || !active_) return;
    matcher_->FillMask(mask_);
    if (bare_call_opening_) {
      for (size_t w = 0; w < mask_.size(); ++w) mask_[w] |= (*text_openers_)[w];
    }
    const float off = -std::numeric_limits<float>::infinity();
    for (size_t id = 0; id < logits.size(); ++id) {
      const bool allowed =
          static_cast<int64_t>(id) < size_ && ((mask_[id / 64] >> (id % 64)) & 1) != 0;
      if (!allowed) logits[id] = off;
    }
  }

  bool Accept(int32_t id) override {
    if (!matcher_) return true;
    if (bare_call_opening_) {
      // The first token of a reply that may be a bare JSON call: one the grammar takes opens
      // the call; any other begins text, in which no call is parsed.
      bare_call_opening_ = false;
      if (matcher_->Accept(id).ok()) {
        done_ = matcher_->IsComplete() && !matcher_->CanContinue();
      } else {
        matcher_.reset();
        became_text_ = true;
        return true;
      }
    } else if (!active_) {
      active_ = id == lazy_trigger_;  // a lazy grammar starts after the token opening a call
    } else {
      if (!matcher_->Accept(id).ok()) done_ = true;  // cannot happen under the mask
      done_ = done_ || (matcher_->IsComplete() && !matcher_->CanContinue());
      if (done_ && lazy_trigger_ >= 0) close_call_ = true;
    }
    return !done_;
  }

  bool became_text() const { return became_text_; }  // the reply is text, not a call
  bool close_call() const { return close_call_; }    // a lazy call ended: close it

 private:
  std::optional<GrammarMatcher> matcher_;
  std::vector<uint64_t> mask_;
  int64_t size_;
  // Strict tools under tool_choice auto: the grammar waits for the model to open a call
  // (lazy_trigger_, the one token of "<tool_call>"), then constrains that call's object.
  int32_t lazy_trigger_;
  // Strict tools under auto, for a call written as a bare JSON object at the start of the
  // reply (Llama 3, Gemma): the first token may open the call (the grammar's first mask) or
  // begin text (MarkTextOpeners); a call is then constrained to the end, text is text.
  bool bare_call_opening_;
  bool active_;
  std::shared_ptr<const std::vector<uint64_t>> text_openers_;
  bool done_ = false;
  bool became_text_ = false;
  bool close_call_ = false;
};

}  // namespace

struct GenerationJob::Choice {
  int index = 0;
  std::unique_ptr<Session> session;
  std::optional<ToolCallParser> parser;
  std::shared_ptr<GrammarConstraint> grammar;  // null: unconstrained
  bool forced_call = false;                    // the reply opened as a call: close it at the end
  int64_t generated = 0;
  bool tool_calls = false;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kStop;
};

namespace {

// The job's prompt: a chat rendered through the template (with its tools, and the forced
// opening of a required call appended), or a completion's text encoded.
struct RenderedPrompt {
  std::vector<int32_t> ids;
  int64_t shared_beginning = 0;  // SequenceRequest::keep_state_at
  ToolCallPlan tools;
};

// A chat through its template, with its tools (and the forced opening of a required call)
// and its thinking switch.
std::variant<RenderedPrompt, JobFailure> RenderChatPrompt(const ChatPayload& chat,
                                                          const std::string& model_name,
                                                          LoadedModel& model) {
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  if (!model.has_chat_template()) {
    return invalid("", "the model '" + model_name +
                           "' has no chat template; use /v1/completions with a prompt");
  }
  RenderedPrompt out;
  auto messages = TemplateMessages(chat.messages);
  if (!messages) return Refusal("messages", messages.status().message());
  auto plan = PlanToolCalls(chat, model_name, model);
  if (auto* refused = std::get_if<JobFailure>(&plan)) return std::move(*refused);
  out.tools = std::move(std::get<ToolCallPlan>(plan));
  ojson kwargs = ojson::object();
  if (out.tools.syntax != ToolCallSyntax::kNone) kwargs["tools"] = out.tools.tools;
  if (chat.enable_thinking) kwargs["enable_thinking"] = *chat.enable_thinking;
  auto prompt = model.RenderChat(*messages, kwargs);
  if (!prompt) return invalid("messages", prompt.status().message());
  out.ids = std::move(prompt->ids);
  out.shared_beginning = model.SharedChatBeginning(*messages, kwargs, out.ids);
  if (!out.tools.forced_opening.empty()) {
    auto opening = model.EncodeText(out.tools.forced_opening, /*add_special=*/false);
    if (!opening) return invalid("tools", opening.status().message());
    out.ids.insert(out.ids.end(), opening->begin(), opening->end());
  }
  return out;
}

std::variant<RenderedPrompt, JobFailure> RenderPrompt(const JobRequest& job, LoadedModel& model) {
  if (const auto* chat = std::get_if<ChatPayload>(&job.payload)) {
    return RenderChatPrompt(*chat, job.model, model);
  }
  RenderedPrompt out;
  const auto& completion = std::get<CompletionPayload>(job.payload);
  auto ids = model.EncodeText(completion.prompt, /*add_special=*/true);
  if (!ids) return InvalidRequest("prompt", ids.status().message());
  out.ids = std::move(*ids);
  return out;
}

}  // namespace

std::variant<std::vector<int32_t>, JobFailure> ChatPromptIds(const ChatPayload& chat,
                                                             const std::string& model_name,
                                                             LoadedModel& model) {
  auto rendered = RenderChatPrompt(chat, model_name, model);
  if (auto* refused = std::get_if<JobFailure>(&rendered)) return std::move(*refused);
  return std::move(std::get<RenderedPrompt>(rendered).ids);
}

GenerationJob::~GenerationJob() = default;

std::variant<std::unique_ptr<GenerationJob>, JobFailure> GenerationJob::Start(
    const JobRequest& job, LoadedModel& model,
    const std::function<Expected<std::shared_ptr<const TokenVocabulary>>()>& vocabulary,
    double load_ms, SendFn send, EndFn on_end) {
  auto invalid = [](std::string field, std::string message) {
    return InvalidRequest(std::move(field), std::move(message));
  };
  const ChatPayload* chat = std::get_if<ChatPayload>(&job.payload);
  const CompletionPayload* completion = std::get_if<CompletionPayload>(&job.payload);
  if (chat == nullptr && completion == nullptr) {
    return JobFailure{JobErrorKind::kInternal, "not a generation job"};
  }
  const GenerationOptions& o = chat != nullptr ? chat->options : completion->options;
  auto rendered = RenderPrompt(job, model);
  if (auto* refused = std::get_if<JobFailure>(&rendered)) return std::move(*refused);
  std::vector<int32_t> prompt_ids = std::move(std::get<RenderedPrompt>(rendered).ids);
  const int64_t shared_beginning = std::get<RenderedPrompt>(rendered).shared_beginning;
  const ToolCallPlan& tools = std::get<RenderedPrompt>(rendered).tools;
  std::shared_ptr<const Grammar> grammar = tools.grammar;
  const ToolCallSyntax syntax = tools.syntax;
  const int32_t lazy_trigger = tools.lazy_trigger;
  const bool bare_call_opening = tools.bare_call_opening;
  const std::string& forced_opening = tools.forced_opening;
  switch (o.response_format.kind) {
    case ResponseFormatKind::kText:
      break;
    case ResponseFormatKind::kJsonObject:
      grammar = JsonObjectGrammar();
      break;
    case ResponseFormatKind::kJsonSchema: {
      auto schema = ParseOrderedJson(o.response_format.schema, {}, "the schema");
      if (!schema) return invalid("response_format", schema.status().message());
      auto compiled = CompileJsonSchema(*schema);
      if (!compiled) return invalid("response_format", compiled.status().message());
      grammar = *compiled;
      break;
    }
    case ResponseFormatKind::kDecision:
      return JobFailure{JobErrorKind::kInternal, "a decision reached a generation job"};
  }
  if (prompt_ids.empty()) return invalid("prompt", "the prompt is empty");
  const int64_t context = model.context();
  const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len >= context) {
    return JobFailure{JobErrorKind::kContextLength,
                      "the prompt is " + std::to_string(prompt_len) + " tokens but the model '" +
                          job.model + "' has a context of " + std::to_string(context) +
                          " tokens, which must also hold the reply; shorten the prompt",
                      prompt_len};
  }
  // logit_bias, checked against this model's vocabulary.
  std::vector<std::pair<int32_t, float>> bias;
  for (const auto& [id, b] : o.logit_bias) {
    if (id >= model.checkpoint().config.vocab_size) {
      return invalid("logit_bias", "token id " + std::to_string(id) +
                                       " is outside the vocabulary of '" + job.model + "' (0.." +
                                       std::to_string(model.checkpoint().config.vocab_size - 1) +
                                       ")");
    }
    bias.emplace_back(id, static_cast<float>(b));
  }
  std::shared_ptr<const TokenVocabulary> vocab;
  if (grammar) {
    auto v = vocabulary();
    if (!v) return JobFailure{JobErrorKind::kInternal, "structured output is unavailable"};
    vocab = *v;
  }

  // The first step of a reply that may open a bare JSON call also allows the tokens that
  // begin text: found once per job (a pass over the vocabulary), shared by its choices.
  std::shared_ptr<const std::vector<uint64_t>> text_openers;
  if (bare_call_opening && grammar) {
    auto words = std::make_shared<std::vector<uint64_t>>(vocab->mask_words(), 0);
    vocab->MarkTextOpeners('{', *words);
    text_openers = std::move(words);
  }

  std::unique_ptr<GenerationJob> self(new GenerationJob());
  GenerationJob* g = self.get();
  g->job_id_ = job.job_id;
  g->model_ = &model;
  g->prompt_tokens_ = prompt_len;
  g->load_ms_ = load_ms;
  g->forced_closing_ = tools.forced_closing;
  g->send_ = std::move(send);
  g->on_end_ = std::move(on_end);
  // Qwen3.5's XML calls write parameters as text: their declared types decide how it reads.
  ToolParameterTypes xml_types;
  if (syntax == ToolCallSyntax::kQwen3Xml) xml_types = ParameterTypesOfToolArray(tools.tools);
  std::optional<ResolvedSamplingParams> first_sampling;
  for (int i = 0; i < o.n; ++i) {
    // Choices differ by seed: a given seed s makes choice i use s + i.
    SamplingParams params = o.sampling;
    if (params.seed && i > 0) {
      params.seed = *params.seed + i <= kMaxSamplingSeed ? *params.seed + i : i;
    }
    auto c = std::make_unique<Choice>();
    Choice* cp = c.get();
    c->index = i;
    c->forced_call = !forced_opening.empty();

    Request r;
    r.prompt = prompt_ids;
    r.sampling = params;
    if (o.max_tokens >= 0) r.max_tokens = o.max_tokens;
    r.stop = o.stop;
    r.logprobs = o.logprobs;
    r.top_logprobs = o.top_logprobs;
    r.logit_bias = bias;
    if (grammar) {
      c->grammar = std::make_shared<GrammarConstraint>(grammar, vocab, lazy_trigger,
                                                       bare_call_opening ? text_openers : nullptr);
      r.constraint = c->grammar;
    }
    r.keep_state_at = shared_beginning;
    r.cache_scope = job.cache_scope;
    // The other choices share choice 0's prompt: it runs once (Scheduler's share_prompt_with).
    if (i > 0) r.share_prompt_with = g->choices_.front()->session->sequence();
    g->choices_.push_back(std::move(c));
    auto session =
        Session::Start(model, std::move(r), [g, cp](const SessionEvent& e) { g->OnEvent(*cp, e); });
    if (!session) {
      g->choices_.pop_back();
      if (i == 0) return Refusal("", session.status().message());
      // Later choices are validated like the first, so this does not happen; if it did, the
      // job fails and lives until the choices already running have ended.
      g->failed_ = true;
      g->send_(Encode(
          JobErrorMessage{job.job_id, JobErrorKind::kInternal, session.status().message(), 0}));
      g->Cancel();
      return self;
    }
    cp->session = std::move(*session);
    // What the session resolved (the model's defaults, a drawn seed) is what is reported.
    const ResolvedSamplingParams& sampling = cp->session->result().sampling;
    if (!first_sampling) first_sampling = sampling;
    if (syntax != ToolCallSyntax::kNone) {
      ToolCallParserOptions parser_options;
      parser_options.seed = sampling.seed * 31 + static_cast<uint64_t>(i);
      if (syntax == ToolCallSyntax::kQwen3Xml) parser_options.xml_parameter_types = xml_types;
      cp->parser.emplace(syntax, parser_options);
      if (!forced_opening.empty()) (void)cp->parser->Feed(forced_opening);
    }
  }
  g->send_(Encode(StartedMessage{job.job_id, prompt_len, *first_sampling}));
  return self;
}

void GenerationJob::Cancel() {
  for (const auto& c : choices_) {
    if (!c->finished && c->session) c->session->Cancel();
  }
}

// Text (and tool calls, through the parser) of one choice as Delta frames; `at_end` flushes
// what the parser held back.
void GenerationJob::SendEvents(Choice& c, std::string text, std::vector<TokenLogprobEntry> logprobs,
                               bool at_end) {
  DeltaMessage delta;
  delta.job_id = job_id_;
  delta.choice = c.index;
  delta.logprobs = std::move(logprobs);
  int64_t total = 0;
  for (const auto& other : choices_) total += other->generated;
  delta.completion_tokens = total;
  if (!c.parser) {
    delta.text = std::move(text);
  } else {
    ToolCallEvents events = c.parser->Feed(text);
    if (at_end) {
      const bool close = c.forced_call || (c.grammar && c.grammar->close_call());
      ToolCallEvents tail = c.parser->Feed(close ? forced_closing_ : std::string());
      events.insert(events.end(), tail.begin(), tail.end());
      tail = c.parser->Finish();
      events.insert(events.end(), tail.begin(), tail.end());
    }
    for (ToolCallEvent& e : events) {
      if (e.kind == ToolCallEvent::Kind::kContent) {
        delta.text += e.content;
      } else {
        c.tool_calls = true;
        delta.tool_calls.push_back({static_cast<int32_t>(e.call.index), std::move(e.call.id),
                                    std::move(e.call.name), std::move(e.call.arguments)});
      }
    }
  }
  send_(Encode(delta));
}

void GenerationJob::OnEvent(Choice& c, const SessionEvent& event) {
  if (const auto* d = std::get_if<TextDelta>(&event)) {
    c.generated = d->generated;
    // A reply that began as text where a bare JSON call could have opened holds no call.
    if (c.grammar && c.grammar->became_text() && c.parser &&
        c.parser->syntax() != ToolCallSyntax::kNone) {
      c.parser.emplace(ToolCallSyntax::kNone, ToolCallParserOptions{});
    }
    std::vector<TokenLogprobEntry> logprobs;
    if (d->logprob) {
      TokenLogprobEntry entry;
      entry.token = d->logprob->token;
      entry.logprob = d->logprob->logprob;
      for (const auto& [text, lp] : d->logprob->top) entry.top.push_back({text, lp});
      logprobs.push_back(std::move(entry));
    }
    // Sent for every token, also one whose text is held back (a possible stop string): the
    // count lets an error after it still report the usage so far. The last (id -1) is the
    // text held back at the end.
    if (!failed_) SendEvents(c, d->text, std::move(logprobs), /*at_end=*/d->id < 0);
    return;
  }
  OnFinish(c, *std::get<SessionFinished>(event).result);
}

void GenerationJob::OnFinish(Choice& c, const SessionResult& r) {
  c.finished = true;
  ++finished_;
  if (!r.status.ok() && !failed_) {
    failed_ = true;
    std::fprintf(stderr, "tessera worker: generation failed: %s\n", r.status.message().c_str());
    send_(Encode(JobErrorMessage{job_id_, EngineFailureKind(r.status.code()),
                                 r.status.code() == ErrorCode::kResourceExhausted
                                     ? EngineFailureMessage(r.status.message(), r.status.code())
                                     : "generation failed inside the engine",
                                 0}));
    Cancel();
  }
  switch (r.finish) {
    case tessera::FinishReason::kCancelled:
    case tessera::FinishReason::kError:
      c.finish_reason = FinishReason::kCancelled;
      break;
    case tessera::FinishReason::kStopToken:
    case tessera::FinishReason::kStopString:
    case tessera::FinishReason::kConstraintDone:
      c.finish_reason = c.tool_calls ? FinishReason::kToolCalls : FinishReason::kStop;
      break;
    case tessera::FinishReason::kLength:
    case tessera::FinishReason::kContext:
      c.finish_reason = c.tool_calls ? FinishReason::kToolCalls : FinishReason::kLength;
      break;
  }
  if (finished_ < static_cast<int>(choices_.size())) return;
  if (!failed_) {
    const SessionResult& first = choices_.front()->session->result();
    DoneMessage done;
    done.job_id = job_id_;
    done.finish_reason = choices_.front()->finish_reason;
    done.stop_sequence = first.stop_string;
    done.prompt_tokens = prompt_tokens_;
    for (const auto& ch : choices_) {
      done.completion_tokens += static_cast<int64_t>(ch->session->result().generated_ids.size());
      if (choices_.size() > 1) done.choice_finish_reasons.push_back(ch->finish_reason);
    }
    done.cached_tokens = first.cached_tokens;
    done.queue_ms = first.queue_ms;
    done.load_ms = load_ms_;
    const GenerateTimings& t = first.timings;
    done.prefill_ms = t.prefill_ms;
    done.ttft_ms = t.ttft_ms;
    done.decode_ms = t.decode_ms;
    done.prefill_tok_s = t.prefill_tok_s;
    done.decode_tok_s = t.decode_tok_s;
    FillSchedulerState(model_->scheduler(), &done);
    send_(Encode(done));
  }
  on_end_(job_id_);  // the worker deletes this job: nothing may touch it after
}

}  // namespace tessera::worker
