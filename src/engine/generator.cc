#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "sampling/sampler.h"

namespace tessera {

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop";
    case StopReason::kLength:
      return "length";
    case StopReason::kContext:
      return "context";
    case StopReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

int32_t ArgMax(std::span<const float> logits) {
  // The first index of the largest value (NaN never wins a comparison; a leading NaN is
  // kept, as a plain scan keeps it). Two passes over 16 independent lanes, held in four
  // 4-float GCC / clang vector types (the width every x86-64 has): the maximum per lane, then
  // the first block of 16 holding it. A batched step takes one per sequence over the whole
  // vocabulary; written as plain loops over a float array, GCC 12 kept the lanes in scalar
  // registers (maxss) and scanned for the first occurrence one float at a time.
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  using Quad = float __attribute__((vector_size(4 * sizeof(float))));
  constexpr size_t kQuads = 4, kLanes = 4 * kQuads;
  const float* x = logits.data();
  Quad lane[kQuads];
  for (Quad& q : lane) q = Quad{} - INFINITY;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t k = 0; k < kQuads; ++k) {
      Quad v;
      std::memcpy(&v, x + i + 4 * k, sizeof(v));
      lane[k] = v > lane[k] ? v : lane[k];
    }
  }
  float most = x[0];
  for (; i < n; ++i) most = x[i] > most ? x[i] : most;
  for (const Quad& q : lane)
    for (int l = 0; l < 4; ++l) most = q[l] > most ? q[l] : most;
  size_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    auto hit = Quad{} == Quad{} + 1.0f;  // all false: lanes of 0, -1 where equal
    for (size_t k = 0; k < kQuads; ++k) {
      Quad v;
      std::memcpy(&v, x + j + 4 * k, sizeof(v));
      hit |= v == most;
    }
    if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) break;
  }
  for (; j < n; ++j)
    if (x[j] == most) return static_cast<int32_t>(j);
  return 0;
}

std::vector<std::pair<int32_t, float>> TopK(std::span<const float> logits, int k) {
  std::vector<std::pair<int32_t, float>> all;
  all.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) all.emplace_back(static_cast<int32_t>(i), logits[i]);
  size_t kk = std::min(all.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(kk), all.end(),
                    [](const auto& a, const auto& b) {
                      return a.second > b.second || (a.second == b.second && a.first < b.first);
                    });
  all.resize(kk);
  return all;
}

namespace {
double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Expected<GenerateResult> GenerateGreedy(ModelExecutor& exec, int slot, GenerateRequest req) {
  req.sampling.reset();
  return Generate(exec, slot, req);
}

Expected<GenerateResult> Generate(ModelExecutor& exec, int slot, const GenerateRequest& req) {
  if (req.prompt_ids.empty()) return InvalidArgument("the prompt is empty: nothing to continue");
  if (req.max_new_tokens < 0) return InvalidArgument("max_new_tokens must be >= 0");
  const int64_t prompt_len = static_cast<int64_t>(req.prompt_ids.size());
  if (prompt_len > exec.max_seq()) {
    return InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                           " tokens, more than the context of " + std::to_string(exec.max_seq()));
  }
  if (req.reuse_prefix_tokens < 0) return InvalidArgument("reuse_prefix_tokens must be >= 0");
  // Keep at least one prompt id to run: its logits pick the first generated token. Recurrent
  // layers resume only from their live state or a snapshot, which may be earlier.
  const int64_t reused =
      exec.ResumablePosition(slot, std::min(req.reuse_prefix_tokens, prompt_len - 1));
  GenerateResult result;
  std::vector<float> logits(static_cast<size_t>(exec.spec().vocab));
  std::optional<Sampler> sampler;
  if (req.sampling && req.sampling->mode == SamplingMode::kSample) {
    TS_ASSIGN_OR_RETURN(Sampler s, Sampler::Create(*req.sampling, exec.spec().vocab));
    TS_RETURN_IF_ERROR(s.AcceptPrompt(req.prompt_ids));
    sampler.emplace(std::move(s));
  }
  auto t0 = std::chrono::steady_clock::now();
  if (req.max_new_tokens == 0) {
    result.stop_reason = StopReason::kLength;
    return result;
  }
  std::span<const int32_t> to_run(req.prompt_ids);
  for (int64_t done = reused; done < prompt_len;) {
    const int64_t n = req.keep_prefilling ? NextPromptRows(prompt_len - done, kPrefillChunkTokens)
                                          : prompt_len - done;
    TS_RETURN_IF_ERROR(exec.Forward(
        slot, done, to_run.subspan(static_cast<size_t>(done), static_cast<size_t>(n)), logits));
    done += n;
    if (done < prompt_len && !req.keep_prefilling()) {
      result.stop_reason = StopReason::kCancelled;
      result.timings.prefill_ms = MsSince(t0);
      result.timings.prefill_tokens = done - reused;
      return result;
    }
  }
  result.timings.prefill_ms = MsSince(t0);
  result.timings.prefill_tokens = prompt_len - reused;
  int64_t pos = prompt_len;
  auto t_decode = std::chrono::steady_clock::now();
  result.generated_ids.reserve(static_cast<size_t>(req.max_new_tokens));
  while (true) {
    if (req.on_logits) req.on_logits(logits);
    if (req.top_logits_k > 0) result.top_logits.push_back(TopK(logits, req.top_logits_k));
    int32_t next;
    if (sampler) {
      TS_ASSIGN_OR_RETURN(next, sampler->Sample(logits));  // edits logits in place
      TS_RETURN_IF_ERROR(sampler->Accept(next));
    } else {
      next = ArgMax(logits);
    }
    result.generated_ids.push_back(next);
    if (result.generated_ids.size() == 1) {
      result.timings.ttft_ms = MsSince(t0);
      t_decode = std::chrono::steady_clock::now();
    }
    bool keep_going = !req.on_token || req.on_token(next);
    if (std::find(req.stop_ids.begin(), req.stop_ids.end(), next) != req.stop_ids.end()) {
      result.stop_reason = StopReason::kStopToken;
      break;
    }
    if (!keep_going) {
      result.stop_reason = StopReason::kCancelled;
      break;
    }
    if (static_cast<int64_t>(result.generated_ids.size()) >= req.max_new_tokens) {
      result.stop_reason = StopReason::kLength;
      break;
    }
    if (pos >= exec.max_seq()) {
      result.stop_reason = StopReason::kContext;
      break;
    }
    TS_RETURN_IF_ERROR(exec.Forward(slot, pos, std::span<const int32_t>(&next, 1), logits));
    ++pos;
  }
  result.timings.decode_ms = MsSince(t_decode);
  if (result.timings.prefill_ms > 0) {
    result.timings.prefill_tok_s =
        static_cast<double>(result.timings.prefill_tokens) / (result.timings.prefill_ms / 1000.0);
  }
  size_t decoded = result.generated_ids.size() > 1 ? result.generated_ids.size() - 1 : 0;
  if (decoded > 0 && result.timings.decode_ms > 0) {
    result.timings.decode_tok_s = decoded / (result.timings.decode_ms / 1000.0);
  }
  return result;
}

std::vector<int32_t> StopIds(const Checkpoint& ckpt) {
  const std::vector<int64_t>& src = !ckpt.generation.eos_token_ids.empty()
                                        ? ckpt.generation.eos_token_ids
                                        : ckpt.config.eos_token_ids;
  std::vector<int32_t> ids;
  for (int64_t id : src) {
    if (id >= 0 && id < ckpt.config.vocab_size) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

SamplingDefaults SamplingDefaultsFor(const GenerationConfig& g) {
  SamplingDefaults d;
  d.do_sample = g.do_sample;
  d.temperature = g.temperature;
  d.top_k = g.top_k;
  d.top_p = g.top_p;
  d.min_p = g.min_p;
  d.repetition_penalty = g.repetition_penalty;
  return d;
}

}  // namespace tessera
