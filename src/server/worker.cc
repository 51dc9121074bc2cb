#include "server/worker.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <memory>
#include <optional>

#include "base/mapped_file.h"
#include "catalog/package_cache.h"
#include "chat/chat_template.h"
#include "engine/generator.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "format/model_config.h"
#include "model/checkpoint.h"
#include "prompt/prompt.h"
#include "sampling/stages.h"
#include "server/stop_strings.h"
#include "server/worker_protocol.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {
namespace {

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

struct ResidentModel {
  std::string name;
  std::shared_ptr<const Checkpoint> ckpt;
  std::unique_ptr<ModelExecutor> exec;
  std::optional<Tokenizer> tokenizer;
  TokenizerConfig tokenizer_config;
  std::optional<PromptAssembler> assembler;  // absent: the model has no chat template
  SamplingDefaults defaults;
  std::vector<int32_t> stop_ids;
  uint64_t last_used = 0;
};

// A job-level failure: the kind decides the HTTP status, the message is shown to the client.
struct JobFailure {
  JobErrorKind kind;
  std::string message;
  int64_t prompt_tokens = 0;  // for kContextLength
};

class Worker {
 public:
  Worker(int fd, const WorkerOptions& options) : fd_(fd), options_(options) {}

  int Run() {
    if (options_.models.empty()) {
      std::fprintf(stderr, "tessera worker: no models given\n");
      return 2;
    }
    if (options_.prewarm) {
      double load_ms = 0;
      auto model = Acquire(options_.models.front().name, &load_ms);
      if (!model) {
        // The message names the cause for the operator's log; the server keeps /ready at 503.
        std::fprintf(stderr, "tessera worker: %s\n", model.status().message().c_str());
        return 1;
      }
    }
    if (!WriteFrame(fd_, EncodeReady({options_.models.front().name})).ok()) return 0;
    while (!closed_) {
      std::string frame;
      if (!backlog_.empty()) {
        frame = std::move(backlog_.front());
        backlog_.pop_front();
      } else {
        auto read = ReadFrame(fd_);
        if (!read) return 0;  // the server went away: nothing left to serve
        frame = std::move(*read);
      }
      auto type = PeekMessageType(frame);
      if (!type || *type != MessageType::kJobRequest) continue;  // a stale Cancel
      auto job = DecodeJobRequest(frame);
      if (!job) {
        std::fprintf(stderr, "tessera worker: %s\n", job.status().message().c_str());
        return 1;
      }
      HandleJob(*job);
    }
    return 0;
  }

 private:
  Expected<ResidentModel*> Acquire(const std::string& name, double* load_ms) {
    ++clock_;
    for (auto& m : resident_) {
      if (m->name == name) {
        m->last_used = clock_;
        return m.get();
      }
    }
    const ModelEntry* entry = nullptr;
    for (const ModelEntry& e : options_.models) {
      if (e.name == name) entry = &e;
    }
    if (entry == nullptr) return NotFound("the model '" + name + "' is not served here");
    // Evict least recently used models to stay within the residency limit.
    while (!resident_.empty() && static_cast<int>(resident_.size()) >= options_.max_loaded_models) {
      auto lru = std::min_element(
          resident_.begin(), resident_.end(),
          [](const auto& a, const auto& b) { return a->last_used < b->last_used; });
      std::fprintf(stderr, "tessera worker: unloading model '%s'\n", (*lru)->name.c_str());
      resident_.erase(lru);
    }
    auto t0 = std::chrono::steady_clock::now();
    TS_ASSIGN_OR_RETURN(std::unique_ptr<ResidentModel> m, Load(*entry));
    m->last_used = clock_;
    *load_ms = MsSince(t0);
    std::fprintf(stderr,
                 "tessera worker: model '%s' loaded and warmed in %.0f ms (%s; %s; token "
                 "embedding: %s)\n",
                 name.c_str(), *load_ms, DescribeCheckpoint(m->exec->checkpoint()).c_str(),
                 m->exec->placement().Describe().c_str(), m->exec->embedding_source().c_str());
    resident_.push_back(std::move(m));
    return resident_.back().get();
  }

  Expected<std::unique_ptr<ResidentModel>> Load(const ModelEntry& entry) {
    auto m = std::make_unique<ResidentModel>();
    m->name = entry.name;
    TS_ASSIGN_OR_RETURN(m->ckpt, OpenCheckpoint(entry.dir));
    TS_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(entry.dir + "/tokenizer.json"));
    m->tokenizer.emplace(std::move(tok));
    const std::string config_path = entry.dir + "/tokenizer_config.json";
    if (FileExists(config_path)) {
      TS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(config_path, 64u << 20));
      TS_ASSIGN_OR_RETURN(m->tokenizer_config, ParseTokenizerConfig(text));
    }
    if (auto tmpl = LoadChatTemplateConfig(entry.dir); tmpl && !tmpl->source.empty()) {
      TS_ASSIGN_OR_RETURN(PromptAssembler assembler, PromptAssembler::Create(*tmpl, *m->tokenizer));
      m->assembler.emplace(std::move(assembler));
    }
    m->defaults = SamplingDefaultsFor(m->ckpt->generation);
    m->stop_ids = StopIds(*m->ckpt);
    TS_ASSIGN_OR_RETURN(Placement placement,
                        ParsePlacement(options_.placement, m->ckpt->config.num_layers));
    // A checkpoint given by path runs from its package, converted on first use.
    std::string note;
    TS_ASSIGN_OR_RETURN(m->ckpt,
                        CheckpointForRun(entry.dir, std::move(m->ckpt), placement.OnlyOn("cpu"),
                                         WeightFormat::kAuto, &note));
    if (!note.empty()) std::fprintf(stderr, "tessera worker: %s\n", note.c_str());
    ModelExecutor::Options exec_options;
    exec_options.max_slots = 1;  // one sequence at a time today; batching adds slots
    exec_options.max_seq = options_.context;
    exec_options.backend.bf16_activations = options_.bf16_activations;
    TS_ASSIGN_OR_RETURN(m->exec, ModelExecutor::Load(m->ckpt, placement, exec_options));
    // Prewarm: one forward pass touches every weight page and sizes every buffer, so the
    // first request does not pay for it.
    std::vector<float> logits(static_cast<size_t>(m->exec->spec().vocab));
    const int32_t warm_id = static_cast<int32_t>(m->ckpt->generation.bos_token_id.value_or(0));
    TS_RETURN_IF_ERROR(m->exec->Forward(0, 0, std::span<const int32_t>(&warm_id, 1), logits));
    return m;
  }

  void Send(const std::string& payload) {
    if (!WriteFrame(fd_, payload).ok()) closed_ = true;
  }

  void Fail(uint64_t job_id, const JobFailure& f) {
    Send(EncodeJobError({job_id, f.kind, f.message, f.prompt_tokens}));
  }

  // Between tokens: has the server asked to cancel `job_id` (or gone away)? Other frames are
  // kept for later.
  bool CancelRequested(uint64_t job_id) {
    while (!closed_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) return false;
      auto frame = ReadFrame(fd_);
      if (!frame) {
        closed_ = true;
        return true;
      }
      auto type = PeekMessageType(*frame);
      if (type && *type == MessageType::kCancel) {
        auto cancel = DecodeCancel(*frame);
        if (cancel && cancel->job_id == job_id) return true;
        if (cancel) DropQueuedJob(cancel->job_id);
      } else {
        backlog_.push_back(std::move(*frame));
      }
    }
    return true;
  }

  // A job that arrived while another ran and was cancelled before it started: it is
  // answered Done("cancelled") without running, so its client is not held up behind it.
  void DropQueuedJob(uint64_t job_id) {
    for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
      auto type = PeekMessageType(*it);
      if (!type || *type != MessageType::kJobRequest) continue;
      auto queued = DecodeJobRequest(*it);
      if (!queued || queued->job_id != job_id) continue;
      backlog_.erase(it);
      DoneMessage done;
      done.job_id = job_id;
      done.finish_reason = "cancelled";
      Send(EncodeDone(done));
      return;
    }
  }

  void HandleJob(const JobRequest& job) {
    double load_ms = 0;
    auto model = Acquire(job.model, &load_ms);
    if (!model) {
      if (model.status().code() == ErrorCode::kNotFound) {
        Fail(job.job_id, {JobErrorKind::kModelNotFound, model.status().message()});
      } else {
        // Load errors name files; the operator sees them here, the client a generic line.
        std::fprintf(stderr, "tessera worker: loading '%s': %s\n", job.model.c_str(),
                     model.status().message().c_str());
        Fail(job.job_id,
             {JobErrorKind::kInternal, "the model '" + job.model + "' could not be loaded"});
      }
      return;
    }
    ResidentModel& m = **model;
    switch (job.kind) {
      case JobKind::kTokenize:
        return Tokenize(m, job);
      case JobKind::kDetokenize:
        return Detokenize(m, job);
      case JobKind::kChat:
      case JobKind::kCompletion:
        if (auto failure = Generate(m, job, load_ms)) Fail(job.job_id, *failure);
        return;
    }
  }

  Expected<std::vector<int32_t>> EncodeUserText(const ResidentModel& m, const std::string& text,
                                                bool add_special) {
    EncodeOptions opts;
    opts.add_special_tokens = add_special;
    TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, m.tokenizer->Encode(text, opts));
    // A BOS the tokenizer_config.json asks for and the post-processor did not add.
    if (add_special && m.tokenizer_config.add_bos_token.value_or(false) &&
        m.tokenizer_config.bos_token) {
      std::optional<int32_t> bos = m.tokenizer->TokenToId(*m.tokenizer_config.bos_token);
      if (bos && (ids.empty() || ids.front() != *bos)) ids.insert(ids.begin(), *bos);
    }
    return ids;
  }

  void Tokenize(const ResidentModel& m, const JobRequest& job) {
    auto ids = EncodeUserText(m, job.prompt, job.add_special_tokens);
    if (!ids) return Fail(job.job_id, {JobErrorKind::kInvalidRequest, ids.status().message()});
    Send(EncodeTokens({job.job_id, std::move(*ids)}));
  }

  void Detokenize(const ResidentModel& m, const JobRequest& job) {
    for (int32_t id : job.ids) {
      if (id < 0 || id >= m.tokenizer->vocab_size()) {
        return Fail(job.job_id,
                    {JobErrorKind::kInvalidRequest, "tokens: id " + std::to_string(id) +
                                                        " is outside the vocabulary of " +
                                                        std::to_string(m.tokenizer->vocab_size())});
      }
    }
    auto text = m.tokenizer->Decode(job.ids, /*skip_special_tokens=*/false);
    if (!text)
      return Fail(job.job_id,
                  {JobErrorKind::kInvalidRequest, "tokens: " + text.status().message()});
    Send(EncodeText({job.job_id, std::move(*text)}));
  }

  // The text `id` would add after what `detok` has seen (empty for a special token or an
  // incomplete UTF-8 sequence).
  static std::string TokenTextAfter(const ResidentModel& m, const StreamingDetokenizer& detok,
                                    int32_t id) {
    if (id < 0 || id >= m.tokenizer->vocab_size()) return "";
    StreamingDetokenizer probe = detok;
    auto text = probe.Push(id);
    return text ? *text : std::string();
  }

  std::optional<JobFailure> Generate(ResidentModel& m, const JobRequest& job, double load_ms) {
    std::vector<int32_t> prompt_ids;
    if (job.kind == JobKind::kChat) {
      if (!m.assembler) {
        return JobFailure{
            JobErrorKind::kInvalidRequest,
            "the model '" + m.name + "' has no chat template; use /v1/completions with a prompt"};
      }
      nlohmann::ordered_json messages = nlohmann::ordered_json::array();
      for (const ChatMessage& msg : job.messages) {
        messages.push_back({{"role", msg.role}, {"content", msg.content}});
      }
      nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
      if (const auto thinking = m.exec->checkpoint().config.default_enable_thinking) {
        kwargs["enable_thinking"] = *thinking;  // e.g. Qwen3.5: answer directly
      }
      auto prompt = m.assembler->Assemble(messages, /*add_generation_prompt=*/true, kwargs);
      if (!prompt)
        return JobFailure{JobErrorKind::kInvalidRequest, "messages: " + prompt.status().message()};
      prompt_ids = std::move(prompt->ids);
    } else {
      auto ids = EncodeUserText(m, job.prompt, /*add_special=*/true);
      if (!ids)
        return JobFailure{JobErrorKind::kInvalidRequest, "prompt: " + ids.status().message()};
      prompt_ids = std::move(*ids);
    }
    if (prompt_ids.empty())
      return JobFailure{JobErrorKind::kInvalidRequest, "prompt: the prompt is empty"};
    const int64_t context = m.exec->max_seq();
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids.size());
    if (prompt_len >= context) {
      return JobFailure{JobErrorKind::kContextLength,
                        "the prompt is " + std::to_string(prompt_len) + " tokens but the model '" +
                            m.name + "' has a context of " + std::to_string(context) +
                            " tokens, which must also hold the reply; shorten the prompt",
                        prompt_len};
    }
    for (int32_t id : prompt_ids) {
      if (id < 0 || id >= m.ckpt->config.vocab_size) {
        return JobFailure{JobErrorKind::kInvalidRequest, "prompt: token id " + std::to_string(id) +
                                                             " is outside the model's vocabulary"};
      }
    }
    auto sampling = ResolveSamplingParams(job.sampling, m.defaults);
    if (!sampling) return JobFailure{JobErrorKind::kInvalidRequest, sampling.status().message()};
    // A drawn seed is reported so the user can replay it; keep it below 2^53 so that every
    // JSON client (JavaScript numbers are doubles) can send it back exactly.
    if (sampling->seed_was_generated) sampling->seed &= (uint64_t{1} << 53) - 1;
    Send(EncodeStarted({job.job_id, prompt_len, *sampling}));

    GenerateRequest req;
    req.prompt_ids = prompt_ids;
    const int64_t room = context - prompt_len;
    req.max_new_tokens = job.max_tokens < 0 ? room : std::min(job.max_tokens, room);
    req.stop_ids = m.stop_ids;
    req.sampling = *sampling;
    StreamingDetokenizer detok(*m.tokenizer, /*skip_special_tokens=*/true);
    // Decode the completion in the prompt's context (a leading-space strip applies only at
    // the start of a sequence).
    for (int32_t id : prompt_ids) {
      if (id < m.tokenizer->vocab_size()) (void)detok.Push(id);
    }
    // Logprob token texts are decoded in context by a second detokenizer (a token's text can
    // depend on its neighbours, e.g. a SentencePiece leading space); alternatives are decoded
    // on a copy of it, so the chosen token and its top_logprobs entry read the same.
    StreamingDetokenizer logprob_detok = detok;
    StopStringFilter filter(job.stop);
    std::vector<float> step_logits;
    bool stopped_by_string = false;
    bool cancelled = false;
    if (job.logprobs) {
      req.on_logits = [&](std::span<const float> logits) {
        step_logits.assign(logits.begin(), logits.end());
      };
    }
    int64_t generated = 0;
    req.on_token = [&](int32_t id) {
      DeltaMessage delta;
      delta.job_id = job.job_id;
      delta.completion_tokens = ++generated;
      const bool is_stop_id =
          std::find(req.stop_ids.begin(), req.stop_ids.end(), id) != req.stop_ids.end();
      if (!is_stop_id && id < m.tokenizer->vocab_size()) {
        auto piece = detok.Push(id);
        if (piece) {
          StopStringFilter::Step step = filter.Push(*piece);
          delta.text = std::move(step.text);
          stopped_by_string = step.stopped;
        }
      }
      if (job.logprobs && !step_logits.empty()) {
        TokenLogprobEntry entry;
        if (auto lp = ComputeTokenLogprob(step_logits, id)) entry.logprob = *lp;
        if (job.top_logprobs > 0) {
          if (auto top = ComputeTopLogprobs(step_logits, job.top_logprobs)) {
            for (const TokenLogprob& t : *top)
              entry.top.push_back({TokenTextAfter(m, logprob_detok, t.id), t.logprob});
          }
        }
        entry.token = TokenTextAfter(m, logprob_detok, id);
        if (id < m.tokenizer->vocab_size()) (void)logprob_detok.Push(id);
        delta.logprobs.push_back(std::move(entry));
      }
      // Sent for every token, also one whose text is held back (a possible stop string):
      // the count lets an error after it still report the usage so far.
      Send(EncodeDelta(delta));
      if (stopped_by_string) return false;
      if (closed_ || CancelRequested(job.job_id)) {
        cancelled = true;
        return false;
      }
      return true;
    };
    req.keep_prefilling = [&] {
      cancelled = closed_ || CancelRequested(job.job_id);
      return !cancelled;
    };
    auto result = tessera::Generate(*m.exec, 0, req);
    if (!result) {
      std::fprintf(stderr, "tessera worker: generation failed: %s\n",
                   result.status().message().c_str());
      return JobFailure{JobErrorKind::kInternal, "generation failed inside the engine"};
    }
    if (!stopped_by_string && !cancelled) {
      StopStringFilter::Step step = filter.Push(detok.Finish());
      std::string tail = step.text + filter.Finish();
      stopped_by_string = step.stopped;
      if (!tail.empty()) Send(EncodeDelta({job.job_id, tail, {}, generated}));
    }
    DoneMessage done;
    done.job_id = job.job_id;
    if (cancelled) {
      done.finish_reason = "cancelled";
    } else if (stopped_by_string || result->stop_reason == StopReason::kStopToken) {
      done.finish_reason = "stop";
    } else {
      done.finish_reason = "length";
    }
    done.prompt_tokens = prompt_len;
    done.completion_tokens = static_cast<int64_t>(result->generated_ids.size());
    done.load_ms = load_ms;
    const GenerateTimings& t = result->timings;
    done.prefill_ms = t.prefill_ms;
    done.ttft_ms = t.ttft_ms;
    done.decode_ms = t.decode_ms;
    done.prefill_tok_s = t.prefill_tok_s;
    done.decode_tok_s = t.decode_tok_s;
    Send(EncodeDone(done));
    return std::nullopt;
  }

  int fd_;
  const WorkerOptions& options_;
  std::vector<std::unique_ptr<ResidentModel>> resident_;
  uint64_t clock_ = 0;
  bool closed_ = false;
  std::deque<std::string> backlog_;
};

}  // namespace

int RunWorker(int fd, const WorkerOptions& options) {
  Worker worker(fd, options);
  return worker.Run();
}

}  // namespace tessera::server
