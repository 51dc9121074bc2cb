// Generation over a ModelExecutor: prefill the prompt in one pass, then decode one token at a
// time until a stop id, the token budget or the context is reached. Greedy unless sampling
// parameters are given (then the sampler chain of src/sampling, seeded). Reports the top-K
// raw logits per generated step and timings. The engine never sees JSON or HTTP.
//
//   GenerateRequest req{.prompt_ids = ids, .max_new_tokens = 64, .stop_ids = {2}};
//   req.on_token = [&](int32_t id) { print(detok.Push(id)); return true; };  // false = stop
//   TS_ASSIGN_OR_RETURN(GenerateResult r, GenerateGreedy(*exec, /*slot=*/0, req));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/model_executor.h"
#include "sampling/sampling_params.h"

namespace tessera {

enum class StopReason { kStopToken, kLength, kContext, kCancelled };
const char* StopReasonName(StopReason reason);  // "stop", "length", "context", "cancelled"

struct GenerateRequest {
  std::vector<int32_t> prompt_ids;
  int64_t max_new_tokens = 128;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
  int top_logits_k = 0;           // record the K highest [id, logit] per generated step
  // Absent: greedy argmax. Present: the sampler chain with these resolved parameters.
  std::optional<ResolvedSamplingParams> sampling;
  // Called with each generated token (including a final stop token); return false to cancel.
  std::function<bool(int32_t)> on_token;
  // Called with each step's raw logits before a token is chosen from them (the sampler edits
  // the row in place afterwards); for reporting the model's own distribution, e.g. logprobs.
  std::function<void(std::span<const float>)> on_logits;
  // The first N prompt ids are already in the slot's KV cache at positions 0..N-1 (a chat
  // turn extending the previous one), so the prefill runs only prompt_ids[N..]. At least the
  // last prompt id is always run, to get its logits. 0 (the default): prefill everything.
  int64_t reuse_prefix_tokens = 0;
  // Asked between prefill chunks of kPrefillChunkTokens; return false to cancel a long prompt
  // before its first token (the result then has no tokens and stop reason kCancelled).
  std::function<bool()> keep_prefilling;
};

// Prompt tokens run per forward call when keep_prefilling is set (one fewer where that would
// leave a single token: NextPromptRows in backend/backend.h).
inline constexpr int64_t kPrefillChunkTokens = 256;

// The checkpoint's stop ids: generation_config.json's eos ids, else config.json's, keeping
// only ids inside the vocabulary.
std::vector<int32_t> StopIds(const Checkpoint& ckpt);

// The sampling defaults generation_config.json gives (see ResolveSamplingParams).
SamplingDefaults SamplingDefaultsFor(const GenerationConfig& generation);

struct GenerateTimings {
  int64_t prefill_tokens = 0;  // prompt ids actually run (after reuse_prefix_tokens)
  double prefill_ms = 0;       // prompt forward pass
  double ttft_ms = 0;          // request start to first generated token
  double decode_ms = 0;        // all later tokens
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
};

struct GenerateResult {
  std::vector<int32_t> generated_ids;
  StopReason stop_reason = StopReason::kLength;
  std::vector<std::vector<std::pair<int32_t, float>>> top_logits;  // per generated step
  GenerateTimings timings;
};

// Argmax with the first index winning ties (the convention of the reference implementations).
int32_t ArgMax(std::span<const float> logits);
// The k highest [id, logit], highest first, ties by lower id.
std::vector<std::pair<int32_t, float>> TopK(std::span<const float> logits, int k);

Expected<GenerateResult> Generate(ModelExecutor& exec, int slot, const GenerateRequest& req);

// Greedy regardless of req.sampling.
Expected<GenerateResult> GenerateGreedy(ModelExecutor& exec, int slot, GenerateRequest req);

}  // namespace tessera
