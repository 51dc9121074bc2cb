// Request: one generation as every front end asks for it (tessera generate, chat, bench and
// the server's worker), before anything is computed. Each default is set here, once, so the
// same request gives the same tokens wherever it comes from: the sampling defaults come from
// the checkpoint's generation_config.json (else greedy), max_tokens runs to a stop or the end
// of the context, and stop ids are the checkpoint's.
//
//   Request r;
//   r.prompt = std::string("Once upon a time");   // or token ids, or a rendered chat
//   r.sampling.temperature = 0.8;
//   r.sampling.seed = 5;
//   r.max_tokens = 24;
//   r.stop = {"."};
//   TS_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::Start(model, std::move(r), sink));
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "engine/cache_scope.h"
#include "sampling/sampling_params.h"

namespace tessera {

// What a reply may be, step by step (structured outputs and tool calls: a grammar over the
// vocabulary). Session asks Mask before each token is chosen and Accept after; Accept false
// ends the reply there, complete (FinishReason::kConstraintDone).
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual void Mask(std::span<float> logits) = 0;  // set what may not follow to -inf
  virtual bool Accept(int32_t id) = 0;             // false: nothing may follow this token
};

struct Request {
  // Text (encoded with the checkpoint's BOS policy, LoadedModel::EncodeText) or token ids used
  // as given (a chat rendered by LoadedModel::RenderChat, or ids from the command line).
  std::variant<std::string, std::vector<int32_t>> prompt;
  // Unset fields take generation_config.json's defaults (ResolveSamplingParams); an unset seed
  // with sampling on is drawn at random and reported in the result.
  SamplingParams sampling;
  // At most this many generated tokens (>= 1); unset: until a stop id, a stop string or the
  // end of the context.
  std::optional<int64_t> max_tokens;
  std::vector<std::string> stop;  // stop strings, cut from the text (never shown)
  int top_logits = 0;             // also record the K highest raw [id, logit] of each step
  // Report each token's logprob (and this many alternatives) with its TextDelta.
  bool logprobs = false;
  int top_logprobs = 0;
  // Added to a token's logit before each choice (and before the constraint); ids inside the
  // vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::shared_ptr<TokenConstraint> constraint;  // null: any token
  // Where the prompt is likely shared with others (SequenceRequest::keep_state_at).
  int64_t keep_state_at = 0;
  // Who may share its cached prefixes (SequenceRequest::cache_scope); empty: one shared scope.
  CacheScope cache_scope{};
  // Another choice of the same prompt (n > 1): its Session::sequence() (the prompt runs once).
  std::optional<uint64_t> share_prompt_with;
};

}  // namespace tessera
