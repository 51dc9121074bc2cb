// Session: one Request running on a LoadedModel's scheduler, reported as typed events. It is
// the one path from a request to text: the prompt is encoded, the sampling resolved, the
// sequence submitted, each token detokenized in context and cut at stop strings (TextStream),
// and the end reported once. Sessions of one model batch together: the caller steps the
// scheduler (RunUntilDone, or the worker's loop) and the events arrive inside those steps.
//
//   auto sink = [](const SessionEvent& e) {
//     if (auto* d = std::get_if<TextDelta>(&e)) print(d->text);
//   };
//   TS_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Start(model, request, sink));
//   TS_RETURN_IF_ERROR(RunUntilDone(model.scheduler(), *s));
//   s->result().generated_ids;
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/status.h"
#include "engine/scheduler.h"
#include "runtime/loaded_model.h"
#include "runtime/request.h"
#include "runtime/text_stream.h"

namespace tessera {

// Text safe to show, after token `id` (empty while a possible stop string is held back): one
// per generated token, and a last one (id -1) with the text held back at the end.
struct TextDelta {
  int32_t id = 0;
  std::string text;
  std::optional<TokenLogprobText> logprob{};  // with Request::logprobs
  int64_t generated = 0;                      // tokens generated so far, this one included
};

// How a session ended. kStopString: a stop string ended the text (the token that completed
// it is in generated_ids, its text is not shown). kConstraintDone: the Request's constraint
// took a token after which nothing may follow.
enum class FinishReason {
  kStopToken,
  kStopString,
  kConstraintDone,
  kLength,
  kContext,
  kCancelled,
  kError
};
const char* FinishReasonName(FinishReason reason);  // "stop" for both stops, "length", ...

struct SessionResult {
  Status status;  // not ok with kError: what failed (the tokens so far stand)
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
  std::string text;  // everything shown, stop strings cut
  FinishReason finish = FinishReason::kLength;
  std::string stop_string;          // kStopString: the stop string that ended the text
  ResolvedSamplingParams sampling;  // what ran (the seed drawn when none was given)
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;  // Request::top_logits
  int64_t cached_tokens = 0;  // prompt tokens reused from the prefix cache
  double queue_ms = 0;        // waiting for a sequence slot
  GenerateTimings timings;
};

struct SessionFinished {
  const SessionResult* result = nullptr;  // valid while the session lives
};

using SessionEvent = std::variant<TextDelta, SessionFinished>;
using SessionSink = std::function<void(const SessionEvent&)>;

class Session {
 public:
  // Checks and prepares `request` (prompt encoding, sampling, max_tokens against the context)
  // and submits it to the model's scheduler. Events go to `sink` from inside scheduler steps.
  static Expected<std::unique_ptr<Session>> Start(LoadedModel& model, Request request,
                                                  SessionSink sink);
  // A session dropped before it is done cancels its sequence; no event reaches the sink after.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ends the sequence at its next token (FinishReason::kCancelled; that token is not shown).
  void Cancel();
  bool done() const;
  const SessionResult& result() const;
  uint64_t sequence() const;  // its scheduler sequence (Request::share_prompt_with)

 private:
  struct Core;  // what the scheduler's callbacks share with the session
  explicit Session(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  std::shared_ptr<Core> core_;
};

// Steps `scheduler` until `session` is done (other sequences of the scheduler advance too).
// `keep_going`, when given, is asked before each step; false cancels the session (Ctrl-C).
Status RunUntilDone(Scheduler& scheduler, Session& session,
                    const std::function<bool()>& keep_going = {});

}  // namespace tessera
