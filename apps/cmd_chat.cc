// tessera chat --model DIR: a multi-turn terminal chat with the model's chat template.
// A model without one (the built-in stories260k) runs in completion mode: each line is a
// plain-text prompt the model continues, without history.
//
//   tessera chat --model ./Qwen2.5-0.5B-Instruct --system "Be brief." --temperature 0.7
//   you> Hello!
//   Hi! How can I help you today?
//   you> /stats
//
// Replies stream as they are decoded; only the model's text is printed, never template text.
// Commands: /reset, /stats, /help, /exit (EOF also exits). The conversation is re-rendered
// each turn and trimmed to the context window (oldest whole turns first, with a notice); the
// scheduler's prompt cache reuses the part of the new prompt the slot already holds. The
// model is opened and run through the same pipeline as the server (runtime/loaded_model.h).
//
// Ctrl-C (SIGINT) while a reply streams stops that reply and returns to the prompt (the
// partial reply stays in the history). Ctrl-C at the prompt discards the line being typed and
// prints a hint; /exit or Ctrl-D quits. With --prompt (one shot) the reply is printed and the
// program exits; Ctrl-C there stops the reply and exits with 130.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli_args.h"
#include "commands.h"
#include "engine/decoding.h"
#include "format/gguf.h"
#include "format/json_util.h"
#include "model/checkpoint.h"
#include "model_loading.h"
#include "prompt/prompt.h"
#include "runtime/loaded_model.h"
#include "runtime/session.h"
#include "sampling/sampling_params.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

constexpr const char* kCommand = "chat";
constexpr const char* kPromptMarker = "you> ";
// Completion mode's reply length when --max-tokens is not given: a model without a chat
// template (stories260k never emits its EOS) would otherwise run to the end of its context.
constexpr int64_t kCompletionModeMaxTokens = 200;

// Set by SIGINT; checked between generated tokens and by the line reader.
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void OnInterrupt(int) {
  g_interrupted = 1;
}

void InstallInterruptHandler() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read() returns EINTR so the prompt can react
  sigaction(SIGINT, &action, nullptr);
}

void Print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Reads lines from fd 0 with read(2), so that Ctrl-C interrupts a waiting read (std::getline
// would retry it silently).
class LineReader {
 public:
  enum class Result { kLine, kEof, kInterrupted };

  Result Read(std::string* line) {
    while (true) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        *line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        if (!line->empty() && line->back() == '\r') line->pop_back();
        return Result::kLine;
      }
      if (WaitForInput() == Result::kInterrupted) {
        buffer_.clear();  // the terminal discarded the typed line too
        return Result::kInterrupted;
      }
      char chunk[4096];
      ssize_t n = ::read(0, chunk, sizeof(chunk));
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) {
        if (g_interrupted) {
          g_interrupted = 0;
          buffer_.clear();  // the terminal discarded the typed line too
          return Result::kInterrupted;
        }
        continue;
      }
      if (buffer_.empty()) return Result::kEof;
      *line = std::move(buffer_);  // a last line without a newline
      buffer_.clear();
      return Result::kLine;
    }
  }

 private:
  // Waits until stdin is readable or Ctrl-C arrives. SIGINT is blocked between checking the
  // flag and waiting, and ppoll unblocks it atomically, so a Ctrl-C that lands just before the
  // wait is not lost (a plain read() would sleep through it).
  Result WaitForInput() {
    sigset_t block, previous;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &previous);
    Result result = Result::kLine;
    while (true) {
      if (g_interrupted) {
        g_interrupted = 0;
        result = Result::kInterrupted;
        break;
      }
      pollfd fd = {0, POLLIN, 0};
      int r = ::ppoll(&fd, 1, nullptr, &previous);
      if (r < 0 && errno == EINTR) continue;
      break;  // readable, closed or an error: read() tells which
    }
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return result;
  }

  std::string buffer_;
};

struct ReplyStats {
  bool valid = false;
  GenerateTimings timings;
  size_t generated = 0;
};

class ChatSession {
 public:
  ChatSession(LoadedModel& model, std::optional<int64_t> max_tokens, SamplingParams sampling,
              std::vector<std::string> stop, ordered_json kwargs, std::string system,
              int64_t reply_reserve)
      : model_(model),
        max_tokens_(max_tokens),
        stop_(std::move(stop)),
        sampling_(std::move(sampling)),
        kwargs_(model.ChatTemplateKwargs(std::move(kwargs))),
        system_(std::move(system)),
        reply_reserve_(reply_reserve) {
    Reset();
  }

  // A new conversation: /stats then describes it, not the previous one.
  void Reset() {
    stats_ = ReplyStats{};
    context_used_ = 0;
    history_ = ordered_json::array();
    if (!system_.empty()) history_.push_back({{"role", "system"}, {"content", system_}});
  }

  // One turn: streams the reply to stdout. Errors that leave the session usable (the
  // message does not fit) come back as a Status with the history unchanged. The scheduler's
  // prompt cache reuses the part of the new prompt the slot already holds.
  Status Turn(const std::string& user_text, bool* cancelled) {
    *cancelled = false;
    if (!model_.has_chat_template()) return Complete(user_text, cancelled);
    ordered_json candidate = history_;
    candidate.push_back({{"role", "user"}, {"content", user_text}});
    const int64_t context = model_.context();
    const int64_t budget = context - reply_reserve_;
    TS_ASSIGN_OR_RETURN(TrimmedPrompt trimmed,
                        model_.assembler()->AssembleWithin(candidate,
                                                           /*add_generation_prompt=*/true, kwargs_,
                                                           static_cast<size_t>(budget)));
    if (trimmed.dropped_messages > 0) {
      std::fprintf(stderr,
                   "[history trimmed: %zu earlier message%s dropped to fit the %lld-token "
                   "context]\n",
                   trimmed.dropped_messages, trimmed.dropped_messages == 1 ? "" : "s",
                   static_cast<long long>(context));
    }
    TS_ASSIGN_OR_RETURN(SessionResult result, Stream(trimmed.prompt.ids, cancelled));
    history_ = std::move(trimmed.messages);
    history_.push_back({{"role", "assistant"}, {"content", result.text}});
    return Status::Ok();
  }

  // Completion mode (a model without a chat template, e.g. the built-in stories260k): the
  // line is a plain-text prompt the model continues; no history is kept.
  Status Complete(const std::string& text, bool* cancelled) {
    TS_ASSIGN_OR_RETURN(std::vector<int32_t> ids, model_.EncodeText(text, /*add_special=*/true));
    return Stream(std::move(ids), cancelled).status();
  }

  // Runs one prompt, streaming the reply to stdout, and records its stats.
  Expected<SessionResult> Stream(std::vector<int32_t> ids, bool* cancelled) {
    const size_t prompt_size = ids.size();
    Request request;
    request.prompt = std::move(ids);
    request.sampling = sampling_;
    request.max_tokens = max_tokens_;
    request.stop = stop_;
    auto print = [](const SessionEvent& e) {
      if (const auto* d = std::get_if<TextDelta>(&e)) Print(d->text);
    };
    g_interrupted = 0;
    TS_ASSIGN_OR_RETURN(std::unique_ptr<Session> session,
                        Session::Start(model_, std::move(request), print));
    Status st = RunUntilDone(model_.scheduler(), *session, [] { return !g_interrupted; });
    SessionResult result = session->result();
    if (st.ok()) st = result.status;
    Print("\n");
    if (!st.ok()) return st;
    *cancelled = result.finish == FinishReason::kCancelled;
    g_interrupted = 0;
    context_used_ =
        prompt_size + (result.generated_ids.empty() ? 0 : result.generated_ids.size() - 1);
    stats_.valid = true;
    stats_.timings = result.timings;
    stats_.generated = result.generated_ids.size();
    return result;
  }

  std::string StatsText() const {
    struct rusage usage;
    std::memset(&usage, 0, sizeof(usage));
    getrusage(RUSAGE_SELF, &usage);
    double peak_rss_mb = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
    char line[512];
    std::string out;
    if (stats_.valid) {
      const GenerateTimings& t = stats_.timings;
      std::snprintf(line, sizeof(line),
                    "ttft: %.1f ms\nprefill: %lld tokens, %.1f tok/s\ndecode: %zu tokens, %.1f "
                    "tok/s\n",
                    t.ttft_ms, static_cast<long long>(t.prefill_tokens), t.prefill_tok_s,
                    stats_.generated, t.decode_tok_s);
      out += line;
    } else {
      out += "no reply yet in this conversation\n";
    }
    std::snprintf(line, sizeof(line),
                  "context: %zu of %lld tokens\npeak rss: %.1f MB (since start)\n", context_used_,
                  static_cast<long long>(model_.context()), peak_rss_mb);
    out += line;
    return out;
  }

 private:
  LoadedModel& model_;
  std::optional<int64_t> max_tokens_;  // unset: until a stop or the end of the context
  std::vector<std::string> stop_;      // stop strings, cut from each reply
  SamplingParams sampling_;
  ordered_json kwargs_;
  std::string system_;
  int64_t reply_reserve_;
  ordered_json history_;
  size_t context_used_ = 0;  // positions the slot's cache holds after the last reply
  ReplyStats stats_;
};

constexpr const char* kHelp =
    "commands:\n"
    "  /reset   start a new conversation (keeps --system)\n"
    "  /stats   the last reply's timings and the context use of this conversation (both\n"
    "           cleared by /reset), peak memory since start\n"
    "  /help    this list\n"
    "  /exit    quit (Ctrl-D too)\n"
    "Ctrl-C stops a reply; at the prompt it clears the line.\n";

int RunInteractive(ChatSession& session) {
  LineReader reader;
  std::fprintf(stderr, "tessera chat: type a message, /help for commands, /exit to quit\n");
  while (true) {
    Print(kPromptMarker);
    std::string line;
    LineReader::Result r = reader.Read(&line);
    if (r == LineReader::Result::kEof) {
      Print("\n");
      return 0;
    }
    if (r == LineReader::Result::kInterrupted) {
      Print("\n(Ctrl-C clears the line; type /exit or press Ctrl-D to quit)\n");
      continue;
    }
    size_t begin = line.find_first_not_of(" \t");
    if (begin == std::string::npos) continue;
    std::string trimmed = line.substr(begin, line.find_last_not_of(" \t") - begin + 1);
    if (trimmed == "/exit" || trimmed == "/quit") return 0;
    if (trimmed == "/help") {
      Print(kHelp);
      continue;
    }
    if (trimmed == "/reset") {
      session.Reset();
      Print("[conversation cleared]\n");
      continue;
    }
    if (trimmed == "/stats") {
      Print(session.StatsText());
      continue;
    }
    if (trimmed[0] == '/' && trimmed.find(' ') == std::string::npos) {
      Print("unknown command " + trimmed + "; /help lists the commands\n");
      continue;
    }
    bool cancelled = false;
    Status st = session.Turn(line, &cancelled);
    if (!st.ok()) {
      std::fprintf(stderr, "tessera chat: %s\n", st.message().c_str());
      continue;
    }
    if (cancelled) Print("[reply stopped]\n");
  }
}

int Run(int argc, char** argv) {
  CliArgs args(kCommand);
  args.AddString(
      "model",
      "checkpoint directory, GGUF file or model name (default: the one installed model, else "
      "the built-in demo model stories260k)");
  args.AddString("system", "system message");
  args.AddString("prompt", "one shot: send this message, print the reply and exit");
  args.AddString("template-kwargs",
                 "JSON object of extra chat template variables, e.g. {\"enable_thinking\":false}");
  AddSamplingOptions(args);
  args.AddInt("max-tokens", "maximum tokens per reply (default: until the model stops)");
  args.AddList("stop", "stop string: a reply ends before it (repeatable)");
  AddPlacementOptions(args, "layers per backend, e.g. cpu or reference:3,cpu");
  args.AddInt("context", "KV cache positions (default: the model's, at most 4096)", 0);
  args.AddString(
      "kv-cache",
      "KV cache precision of the cpu backend: auto (f32 for F32 weights, else bf16), bf16 or f32",
      false, "auto");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError(kCommand, st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  std::optional<int64_t> max_tokens;
  if (args.Has("max-tokens")) max_tokens = args.GetInt("max-tokens");
  if (max_tokens && *max_tokens < 1) {
    return ReportError(kCommand, InvalidArgument("--max-tokens must be at least 1"));
  }
  if (args.GetInt("context") < 0) {
    return ReportError(kCommand, InvalidArgument("--context must be >= 0 (0: the model's)"));
  }
  ordered_json kwargs = ordered_json::object();
  if (args.Has("template-kwargs")) {
    // dump() and copies recurse: nesting is bounded before anything is parsed.
    if (NestsDeeperThan(args.GetString("template-kwargs"), kMaxCliJsonDepth)) {
      return ReportError(kCommand, InvalidArgument("--template-kwargs nests deeper than " +
                                                   std::to_string(kMaxCliJsonDepth) + " levels"));
    }
    kwargs = ordered_json::parse(args.GetString("template-kwargs"), nullptr, false);
    if (kwargs.is_discarded() || !kwargs.is_object()) {
      return ReportError(kCommand, InvalidArgument("--template-kwargs must be a JSON object"));
    }
  }
  auto model_name =
      args.Has("model") ? Expected<std::string>(args.GetString("model")) : DefaultChatModelName();
  if (!model_name) return ReportError(kCommand, model_name.status());
  auto resolved_model = ResolveModelToLoad(*model_name);
  if (!resolved_model) return ReportError("chat", resolved_model.status());
  const std::string dir = resolved_model->Where();
  bool completion_mode = false;
  if (resolved_model->gguf) {
    // A GGUF file's chat template is its tokenizer.chat_template (Ollama's Go template layer
    // is not interpreted), so one without it cannot chat.
    auto file = GgufFile::Open(dir);
    if (!file) return ReportError(kCommand, file.status());
    if (!file->Has("tokenizer.chat_template")) {
      return ReportError(kCommand, Unsupported(*model_name + " (" + dir +
                                               ") has no chat template (tokenizer.chat_template); "
                                               "use tessera generate for completion"));
    }
  } else if (auto chat_config = LoadChatTemplateConfig(dir); !chat_config) {
    if (chat_config.status().code() != ErrorCode::kNotFound) {
      return ReportError(kCommand, chat_config.status());
    }
    completion_mode = true;
    if (args.Has("system") || args.Has("template-kwargs")) {
      return ReportError(
          kCommand, InvalidArgument(*model_name + " has no chat template, so --system and "
                                                  "--template-kwargs cannot apply; drop them"));
    }
  }
  // Flags are checked before anything is loaded (the generation defaults come from the
  // checkpoint's small config files).
  auto ckpt = OpenCheckpoint(dir);
  if (!ckpt) return ReportError(kCommand, ckpt.status());
  auto flags = SamplingFromArgs(args);
  if (!flags) return ReportError(kCommand, flags.status());
  SamplingParams sampling = *flags;
  auto resolved = ResolveSamplingParams(sampling, SamplingDefaultsFor((*ckpt)->generation));
  if (!resolved) return ReportError(kCommand, resolved.status());
  ckpt->reset();
  auto kv_cache = ParseKvCacheType(args.GetString("kv-cache"));
  if (!kv_cache) return ReportError(kCommand, kv_cache.status());
  ModelLoadOptions options;
  options.kv_cache = *kv_cache;
  auto placement = PlacementFromArgs(args);
  if (!placement) return ReportError("chat", placement.status());
  options.placement = *placement;
  auto cpu_isa = CpuIsaFromArgs(args);
  if (!cpu_isa) return ReportError(kCommand, cpu_isa.status());
  options.cpu_isa = *cpu_isa;
  auto npu = NpuOptionsFromArgs(args);
  if (!npu) return ReportError(kCommand, npu.status());
  options.npu = *npu;
  options.context = args.GetInt("context");
  options.parallel = 1;
  auto model = OpenModelShowingProgress(*resolved_model, options);
  if (!model) return ReportError(kCommand, model.status());
  LoadedModel& m = **model;
  if (resolved_model->gguf) {
    // Ollama's params layer gives defaults the checkpoint files could not give above.
    if (!sampling.seed) sampling.seed = m.request_defaults().seed;
    resolved = ResolveSamplingParams(sampling, m.sampling_defaults());
    if (!resolved) return ReportError(kCommand, resolved.status());
  }
  if (resolved->seed_was_generated) {
    // One seed for the whole conversation, printed so that it can be replayed.
    sampling.seed = static_cast<int64_t>(resolved->seed);
    std::fprintf(stderr, "tessera chat: sampling seed %llu\n",
                 static_cast<unsigned long long>(resolved->seed));
  }
  if (completion_mode) {
    if (!max_tokens) max_tokens = kCompletionModeMaxTokens;
    std::fprintf(stderr,
                 "tessera chat: %s has no chat template: completion mode, each line you type is "
                 "a prompt the model continues (no conversation history; replies stop after "
                 "%lld tokens unless --max-tokens says otherwise)\n",
                 model_name->c_str(), static_cast<long long>(*max_tokens));
  }
  // Room kept for the reply when trimming the history: the reply budget, but never more than
  // half the context so that a long --max-tokens still leaves space for the conversation.
  const int64_t reply_reserve = std::min(max_tokens.value_or(m.context()), m.context() / 2);

  // --system, else the model's own (Ollama's system layer).
  const std::string system =
      args.Has("system") ? args.GetString("system") : m.default_system_prompt().value_or("");
  ChatSession session(m, max_tokens, sampling, args.GetList("stop"), std::move(kwargs), system,
                      reply_reserve);
  InstallInterruptHandler();
  if (args.Has("prompt")) {
    bool cancelled = false;
    Status st = session.Turn(args.GetString("prompt"), &cancelled);
    if (!st.ok()) return ReportError(kCommand, st);
    return cancelled ? 130 : 0;
  }
  return RunInteractive(session);
}

}  // namespace

int RunChatCommand(int argc, char** argv) {
  return Run(argc, argv);
}

}  // namespace tessera
