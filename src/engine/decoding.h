// What a decode step and its result need, apart from the loop (the Scheduler's): why a
// sequence stopped, its timings, choosing the top logits, and the defaults a checkpoint gives.
//
//   int32_t next = ArgMax(logits);                       // greedy, first index wins ties
//   auto top = TopK(logits, 5);                          // [id, logit], highest first
//   std::vector<int32_t> stops = StopIds(*ckpt);         // generation_config.json's eos ids
//   std::printf("%s\n", StopReasonName(StopReason::kLength));  // "length"
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "model/checkpoint.h"
#include "sampling/sampling_params.h"

namespace tessera {

enum class StopReason { kStopToken, kLength, kContext, kCancelled };
const char* StopReasonName(StopReason reason);  // "stop", "length", "context", "cancelled"

// The checkpoint's stop ids: generation_config.json's eos ids, else config.json's, keeping
// only ids inside the vocabulary.
std::vector<int32_t> StopIds(const Checkpoint& ckpt);

// The sampling defaults generation_config.json gives (see ResolveSamplingParams).
SamplingDefaults SamplingDefaultsFor(const GenerationConfig& generation);

struct GenerateTimings {
  int64_t prefill_tokens = 0;  // prompt ids actually run (not found in the prefix cache)
  double prefill_ms = 0;       // the prompt's forward passes
  double ttft_ms = 0;          // request start to first generated token
  double decode_ms = 0;        // all later tokens
  double prefill_tok_s = 0;
  double decode_tok_s = 0;
};

// Argmax with the first index winning ties (the convention of the reference implementations).
int32_t ArgMax(std::span<const float> logits);
// The k highest [id, logit], highest first, ties by lower id.
std::vector<std::pair<int32_t, float>> TopK(std::span<const float> logits, int k);

}  // namespace tessera
