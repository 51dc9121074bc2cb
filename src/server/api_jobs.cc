// ApiService's generation and tokenizer jobs: validated and admitted on the event loop, then
// run on a job thread that waits for the worker and answers through the exchange.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "server/api_service.h"
#include "server/api_service_internal.h"

namespace tessera::server {

using namespace api_internal;  // NOLINT: this service's own helpers

// ---- on the event loop: join the queue (a full queue is a 429 at once and costs no thread);
// the body is parsed on the job thread, so a large one never stalls the event loop.

std::optional<uint64_t> ApiService::EnterQueue(Call& call) {
  AdmissionQueue::Entry entry = admission_.Enter();
  if (!entry.admitted) {
    SendError(call, QueueFull(entry.retry_after_s), 0,
              {{"Retry-After", std::to_string(entry.retry_after_s)}});
    return std::nullopt;
  }
  return entry.ticket;
}

// A request body parsed as JSON, then by `parse`, or the error to answer.
template <class Request, class Parse>
std::variant<Request, ApiError> ParseBody(const std::string& body, Parse parse) {
  auto doc = ParseJsonBody(body);
  if (auto* e = std::get_if<ApiError>(&doc)) return *e;
  return parse(std::get<nlohmann::ordered_json>(doc));
}

std::optional<ApiError> ApiService::GenerationModelError(const std::string& model,
                                                         bool chat) const {
  if (!KnownModel(model)) return ModelNotFound(model);
  const std::optional<ModelKind> kind = KindOf(model);
  if (kind == ModelKind::kEmbed || kind == ModelKind::kClassify) {
    return InvalidField("model", "'" + model + "' is " + AModelOfKind(*kind) +
                                     ", which does not generate text; use " +
                                     (*kind == ModelKind::kEmbed ? "/v1/embeddings" : "/classify"));
  }
  if (chat && kind == ModelKind::kCompletion) {
    return InvalidField("model", "'" + model +
                                     "' is a completion model: it has no chat template to "
                                     "put messages in; use /v1/completions with a prompt");
  }
  return std::nullopt;
}

void ApiService::Generation(std::shared_ptr<ApiCall> call, GenerationParser parse) {
  const std::optional<uint64_t> ticket = EnterQueue(*call);
  if (!ticket) return;
  jobs_.Post([this, call, ticket = *ticket, parse = std::move(parse)] {
    const GenerationDefaults defaults{default_chat_model_, default_completion_model_};
    auto parsed = ParseBody<ParsedGeneration>(
        call->request.body,
        [&](const nlohmann::ordered_json& doc) { return parse(doc, defaults); });
    if (auto* p = std::get_if<ParsedGeneration>(&parsed)) {
      const bool chat = std::holds_alternative<worker::ChatPayload>(p->request.job.payload);
      if (auto e = GenerationModelError(p->request.job.model, chat)) parsed = *e;
    }
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      admission_.Withdraw(ticket);
      return SendError(*call, *e);
    }
    auto* p = std::get_if<ParsedGeneration>(&parsed);
    call->exchange->Note([&](AccessRecord& r) { r.model = p->request.job.model; });
    RunGeneration(*call, std::move(*p), ticket);
  });
}

void ApiService::ChatTokenCount(std::shared_ptr<ApiCall> call, ChatTokenCountParser parse,
                                std::function<json(size_t count)> answer) {
  const std::optional<uint64_t> ticket = EnterQueue(*call);
  if (!ticket) return;
  jobs_.Post([this, call, ticket = *ticket, parse = std::move(parse), answer = std::move(answer)] {
    const GenerationDefaults defaults{default_chat_model_, default_completion_model_};
    auto parsed = ParseBody<worker::JobRequest>(
        call->request.body,
        [&](const nlohmann::ordered_json& doc) { return parse(doc, defaults); });
    if (auto* job = std::get_if<worker::JobRequest>(&parsed)) {
      if (auto e = GenerationModelError(job->model, /*chat=*/true)) parsed = *e;
    }
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      admission_.Withdraw(ticket);
      return SendError(*call, *e);
    }
    worker::JobRequest& job = std::get<worker::JobRequest>(parsed);
    call->exchange->Note([&](AccessRecord& r) { r.model = job.model; });
    double queue_ms = 0;
    std::vector<HttpHeader> extra;
    auto reply = AwaitAnswer(*call, job, ticket, &extra, &queue_ms);
    if (auto* e = std::get_if<ApiError>(&reply)) return SendError(*call, *e, queue_ms, extra);
    const JobAnswer& a = std::get<JobAnswer>(reply);
    auto m = worker::Decode<worker::TokensMessage>(a.frame);  // checks the message type
    if (!m) return SendError(*call, ServerError(500, "internal_error", "internal error"));
    const size_t n = m->ids.size();
    call->exchange->Note([&](AccessRecord& r) { r.prompt_tokens = static_cast<int64_t>(n); });
    SendJson(*call, 200, answer(n), queue_ms);
  });
}

void ApiService::TokenJob(std::shared_ptr<Call> call, bool tokenize) {
  const std::optional<uint64_t> ticket = EnterQueue(*call);
  if (!ticket) return;
  jobs_.Post([this, call, ticket = *ticket, tokenize] {
    std::string first_model;
    {
      std::lock_guard<std::mutex> lock(models_mu_);
      first_model = model_names_.front();
    }
    auto parsed =
        ParseBody<worker::JobRequest>(call->request.body, [&](const nlohmann::ordered_json& doc) {
          return tokenize ? ParseTokenizeRequest(doc, first_model)
                          : ParseDetokenizeRequest(doc, first_model);
        });
    auto* request = std::get_if<worker::JobRequest>(&parsed);
    if (request && !KnownModel(request->model)) parsed = ModelNotFound(request->model);
    if (auto* e = std::get_if<ApiError>(&parsed)) {
      admission_.Withdraw(ticket);
      return SendError(*call, *e);
    }
    call->exchange->Note([&](AccessRecord& r) { r.model = request->model; });
    RunTokenJob(*call, std::move(*request), ticket);
  });
}

// ---- on a job thread

// Waits for the ticket's turn and a ready worker, then submits. On failure fills `error` and
// returns null; a client that leaves meanwhile gives up its place (ClientGone).
std::unique_ptr<ApiService::ActiveJob> ApiService::Admit(Call& call, worker::JobRequest& job,
                                                         uint64_t ticket, double* queue_ms,
                                                         ApiError* error,
                                                         std::vector<HttpHeader>* extra) {
  const auto deadline = call.arrived + std::chrono::seconds(options_.request_timeout_s);
  HttpExchange& exchange = *call.exchange;
  const AdmissionQueue::Turn turn = admission_.WaitTurn(
      ticket, deadline, [&exchange] { return exchange.client_gone(); }, kClientCheckInterval);
  *queue_ms = MsBetween(call.arrived, Clock::now());
  if (turn != AdmissionQueue::Turn::kRun) {
    *error = turn == AdmissionQueue::Turn::kAbandoned ? ClientGone() : DeadlinePassed();
    return nullptr;
  }
  auto active = std::make_unique<ActiveJob>();
  active->service = this;
  active->ticket = ticket;
  active->admitted_at = Clock::now();
  active->deadline = deadline;
  active->exchange = call.exchange;
  // The prefix cache's scope: the key's name (with the request's cache_salt), unless every key
  // shares one cache (--shared-prefix-cache). A job run again keeps it.
  job.cache_scope.tenant = options_.shared_prefix_cache ? "" : call.request.api_key_name;
  if (!SubmitToWorker(*active, job, error, extra)) return nullptr;
  return active;
}

// Waits (until the job's deadline) for a ready worker and sends it the job under a new id.
bool ApiService::SubmitToWorker(ActiveJob& active, worker::JobRequest& job, ApiError* error,
                                std::vector<HttpHeader>* extra) {
  while (!supervisor_.WaitReady(std::min(active.deadline, Clock::now() + kClientCheckInterval))) {
    const WorkerState state = supervisor_.state();
    if (state == WorkerState::kFailed) {
      *error = ServerError(503, "model_load_failed",
                           "the server could not load its default model; the operator must fix "
                           "the model or the flags (the reason is in the server log)");
      return false;
    }
    if (state == WorkerState::kStopped) {
      *error = WorkerLost(WorkerLoss::kServerStopping);
      return false;
    }
    if (Clock::now() >= active.deadline) {
      *error = WorkerUnavailable();
      extra->push_back({"Retry-After", "2"});
      return false;
    }
    if (active.exchange->client_gone()) {
      *error = ClientGone();
      return false;
    }
  }
  job.job_id = ++job_counter_;
  active.job_id = job.job_id;
  active.submitted_at = Clock::now();
  if (!supervisor_.Submit(job, active.channel).ok()) {
    *error = WorkerUnavailable();
    extra->push_back({"Retry-After", "2"});
    return false;
  }
  active.submitted = true;
  return true;
}

// A job whose worker was lost under it runs again, once, on the restarted worker, when it was
// a bystander of the loss (not the job that hung or crashed it, not a server stop) and its
// client has been sent nothing yet (the caller's to know). On false `error` keeps what to
// answer, or says why the second run could not start.
bool ApiService::RunAgain(ActiveJob& active, worker::JobRequest& job, ApiError* error) {
  if (active.worker_lost != WorkerLoss::kBystander || active.retries > 0 ||
      Clock::now() >= active.deadline) {
    return false;
  }
  ++active.retries;
  supervisor_.Release(active.job_id);
  active.channel = std::make_shared<JobChannel>();
  active.submitted = false;
  active.finished = false;
  active.worker_lost.reset();
  std::fprintf(stderr,
               "tessera serve: request %s: the inference worker was lost while it waited "
               "(nothing was sent to its client yet); running it again on the restarted worker\n",
               active.exchange->request_id().c_str());
  std::vector<HttpHeader> unused;  // the first answer's headers are not sent on this path
  return SubmitToWorker(active, job, error, &unused);
}

// The job's next message. Null when the deadline passed or the client left; either way
// ~ActiveJob cancels the job (only its job: the worker is killed only if the cancel goes
// unacknowledged past --hang-timeout). `error` says which.
std::optional<WorkerEvent> ApiService::WaitEvent(ActiveJob& job, ApiError* error) {
  while (true) {
    if (job.exchange->client_gone()) {
      job.client_gone = true;
      *error = ClientGone();
      return std::nullopt;
    }
    const auto until = std::min(job.deadline, Clock::now() + kClientCheckInterval);
    if (auto ev = job.channel->Wait(until)) return ev;
    if (Clock::now() >= job.deadline) {
      *error = DeadlinePassed();
      return std::nullopt;
    }
  }
}

// Reads one event into `outcome`: kFailed (with `error`) when the job failed, the deadline
// passed or the client left; kDone once Done arrived.
ApiService::Step ApiService::NextEvent(ActiveJob& job, JobOutcome& outcome, ApiError* error,
                                       worker::DeltaMessage* delta) {
  auto ev = WaitEvent(job, error);
  outcome.elapsed_ms_seen = MsBetween(job.submitted_at, Clock::now());
  if (!ev) return Step::kFailed;
  if (ev->worker_died) {
    job.finished = true;
    job.worker_lost = ev->loss;
    *error = WorkerLost(ev->loss);
    return Step::kFailed;
  }
  auto type = worker::PeekMessageType(ev->frame);
  if (!type) return Step::kProgress;
  switch (*type) {
    case worker::MessageType::kStarted:
      if (auto m = worker::Decode<worker::StartedMessage>(ev->frame)) outcome.started = *m;
      return Step::kProgress;
    case worker::MessageType::kDelta:
      if (auto m = worker::Decode<worker::DeltaMessage>(ev->frame)) {
        if (outcome.ttft_ms_seen < 0) outcome.ttft_ms_seen = outcome.elapsed_ms_seen;
        outcome.completion_tokens_so_far =
            std::max(outcome.completion_tokens_so_far, m->completion_tokens);
        if (static_cast<size_t>(m->choice) >= outcome.choices.size()) {
          outcome.choices.resize(static_cast<size_t>(m->choice) + 1);
        }
        outcome.choices[static_cast<size_t>(m->choice)].Add(*m);
        if (delta != nullptr) *delta = std::move(*m);
      }
      return Step::kProgress;
    case worker::MessageType::kDone:
      job.finished = true;
      if (auto m = worker::Decode<worker::DoneMessage>(ev->frame)) outcome.done = *m;
      return Step::kDone;
    case worker::MessageType::kJobError:
      job.finished = true;
      if (auto m = worker::Decode<worker::JobErrorMessage>(ev->frame)) {
        *error = FromJobError(*m, job.input);
        outcome.refused_prompt_tokens = m->prompt_tokens;
      } else {
        *error = ServerError(500, "internal_error", "internal error");
      }
      return Step::kFailed;
    default:
      return Step::kProgress;
  }
}

// Pins a generation job's sampling seed to `seed` (the one its first run drew).
static void KeepSeed(worker::JobRequest& job, uint64_t seed) {
  std::visit(
      [&](auto& payload) {
        if constexpr (requires { payload.options.sampling.seed; }) {
          payload.options.sampling.seed = static_cast<int64_t>(seed);
        }
      },
      job.payload);
}

void ApiService::RunGeneration(Call& call, ParsedGeneration parsed, uint64_t ticket) {
  GenerationRequest& request = parsed.request;
  GenerationWire& wire = *parsed.wire;
  ResponseMeta meta;
  meta.id = wire.id_prefix() + call.exchange->request_id();
  meta.model = request.job.model;
  meta.created = UnixNow();
  meta.logprobs = request.options().logprobs;
  meta.choices = request.options().n;
  ApiError error;
  std::vector<HttpHeader> extra;
  std::unique_ptr<ActiveJob> job = Admit(call, request.job, ticket, &meta.queue_ms, &error, &extra);
  if (!job) return SendError(call, error, meta.queue_ms, std::move(extra));
  job->input = InputFieldOf(request.job.payload, request.input_field);
  JobOutcome outcome;
  // Nothing reaches the client before Started (a stream's headers wait for it) nor, without
  // stream, before the whole answer: until then a job whose worker was lost under it may run
  // again (RunAgain). A second run keeps the seed the first one drew, so its answer is the
  // one the first would have given.
  bool seed_kept = false;  // the second run's seed is the one the first drew, not the client's
  for (bool first_run = true;; first_run = false) {
    if (!first_run && outcome.started && outcome.started->sampling.seed_was_generated) {
      KeepSeed(request.job, outcome.started->sampling.seed);
      seed_kept = true;
    }
    outcome = JobOutcome{};
    outcome.choices.resize(static_cast<size_t>(request.options().n));
    // Wait for Started (or an error) first, so a request the worker refuses (a prompt longer
    // than the context) still gets its 4xx status rather than a 200 stream.
    Step step = Step::kProgress;
    while (!outcome.started && step == Step::kProgress)
      step = NextEvent(*job, outcome, &error, nullptr);
    while (!request.stream && !outcome.done && step == Step::kProgress) {
      step = NextEvent(*job, outcome, &error, nullptr);
    }
    if (step != Step::kFailed) break;
    if (!RunAgain(*job, request.job, &error))
      return SendJobError(call, wire, error, outcome, meta.queue_ms);
  }
  if (seed_kept && outcome.started) outcome.started->sampling.seed_was_generated = true;
  if (!request.stream) {
    call.exchange->Note([&](AccessRecord& r) { FillRecord(r, outcome, meta.queue_ms); });
    json stats = FullStats(outcome, meta.queue_ms);
    AddPlacementStats(stats, meta.model);
    return SendJson(call, 200, wire.Body(meta, outcome, std::move(stats)), meta.queue_ms);
  }
  StreamEvents(call, *job, outcome, meta, wire);
}

// Writes the whole stream. A failure after the headers travels as the wire's error frame.
void ApiService::StreamEvents(Call& call, ActiveJob& job, JobOutcome& outcome,
                              const ResponseMeta& meta, GenerationWire& wire) {
  HttpExchange& ex = *call.exchange;
  std::vector<HttpHeader> headers = call.cors;
  headers.push_back({"Cache-Control", "no-cache"});
  ex.BeginStream(200, std::move(headers), wire.stream_content_type());
  auto send = [&](const std::string& frames) { return frames.empty() || ex.StreamWrite(frames); };
  bool open = send(wire.StreamBegin(meta, outcome));
  ApiError error;
  Step step = outcome.done ? Step::kDone : Step::kProgress;
  while (open && step == Step::kProgress) {
    worker::DeltaMessage delta;
    step = NextEvent(job, outcome, &error, &delta);
    if (step != Step::kProgress ||
        (delta.text.empty() && delta.logprobs.empty() && delta.tool_calls.empty())) {
      continue;
    }
    open = send(wire.StreamDelta(meta, delta));
  }
  auto note_finish = [&](const std::string& finish) {
    ex.Note([&](AccessRecord& r) {
      FillRecord(r, outcome, meta.queue_ms);
      r.finish = finish;
    });
  };
  if (!open || job.client_gone || ex.client_gone()) {
    // ~ActiveJob cancels the generation. A client cut for not reading is told apart.
    note_finish(ex.client_stalled() ? "client_stalled" : "client_disconnected");
    ex.EndStream();
    return;
  }
  if (step == Step::kFailed) {
    note_finish(error.code);
    send(
        wire.StreamError(JobErrorBody(wire, call.dialect, error, outcome, meta.queue_ms), outcome));
    ex.EndStream();
    return;
  }
  json stats = FullStats(outcome, meta.queue_ms);
  AddPlacementStats(stats, meta.model);
  send(wire.StreamEnd(meta, outcome, stats));
  note_finish(outcome.done ? std::string(worker::FinishReasonName(outcome.done->finish_reason))
                           : "");
  ex.EndStream();
}

// Tokenizer endpoints report the ids they took or produced as prompt tokens.
static json TokenUsage(size_t n) {
  return {{"prompt_tokens", n}, {"completion_tokens", 0}, {"total_tokens", n}};
}

std::variant<ApiService::JobAnswer, ApiError> ApiService::AwaitAnswer(
    Call& call, worker::JobRequest& request, uint64_t ticket, std::vector<HttpHeader>* extra,
    double* queue_ms, std::string_view input_field) {
  ApiError error;
  std::unique_ptr<ActiveJob> job = Admit(call, request, ticket, queue_ms, &error, extra);
  if (!job) return error;
  job->input = InputFieldOf(request.payload, input_field);
  while (true) {
    auto ev = WaitEvent(*job, &error);
    if (!ev) return error;
    job->finished = ev->worker_died;
    if (ev->worker_died) {
      // An answer comes whole: until it does, the client has seen nothing.
      job->worker_lost = ev->loss;
      error = WorkerLost(ev->loss);
      if (RunAgain(*job, request, &error)) continue;
      return error;
    }
    auto type = worker::PeekMessageType(ev->frame);
    if (!type || *type == worker::MessageType::kStarted || *type == worker::MessageType::kDelta)
      continue;
    job->finished = true;
    if (*type == worker::MessageType::kJobError) {
      auto m = worker::Decode<worker::JobErrorMessage>(ev->frame);
      if (!m) return ServerError(500, "internal_error", "internal error");
      return FromJobError(*m, job->input);
    }
    if (*type == worker::MessageType::kDone) return ClientGone();  // cancelled: nobody waits for it
    return JobAnswer{*type, std::move(ev->frame), *queue_ms};
  }
}

void ApiService::RunTokenJob(Call& call, worker::JobRequest request, uint64_t ticket) {
  double queue_ms = 0;
  std::vector<HttpHeader> extra;
  auto answer = AwaitAnswer(call, request, ticket, &extra, &queue_ms);
  if (auto* e = std::get_if<ApiError>(&answer)) return SendError(call, *e, queue_ms, extra);
  const JobAnswer& a = std::get<JobAnswer>(answer);
  if (a.type == worker::MessageType::kTokens) {
    auto m = worker::Decode<worker::TokensMessage>(a.frame);
    if (!m) return SendError(call, ServerError(500, "internal_error", "internal error"));
    const size_t n = m->ids.size();
    call.exchange->Note([&](AccessRecord& r) { r.prompt_tokens = static_cast<int64_t>(n); });
    return SendJson(
        call, 200,
        {{"model", request.model}, {"tokens", m->ids}, {"count", n}, {"usage", TokenUsage(n)}},
        queue_ms);
  }
  auto m = worker::Decode<worker::TextMessage>(a.frame);
  if (!m) return SendError(call, ServerError(500, "internal_error", "internal error"));
  return SendJson(
      call, 200,
      {{"model", request.model},
       {"prompt", m->text},
       {"usage", TokenUsage(std::get<worker::DetokenizePayload>(request.payload).ids.size())}},
      queue_ms);
}

}  // namespace tessera::server
