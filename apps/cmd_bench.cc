// tessera bench: load time, prefill tok/s per prompt length, decode tok/s, TTFT, peak RSS and
// decode's achieved weight bandwidth, as medians over repeats. Prompts are fixed pseudo-random
// token ids, so the numbers do not depend on a tokenizer. Prefill is one forward pass per
// length; decode and TTFT are one greedy stream through the Scheduler, the product's path.
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "base/progress.h"
#include "cli_args.h"
#include "commands.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "engine/run_sequence.h"
#include "engine/scheduler.h"
#include "model/checkpoint.h"
#include "runtime/loaded_model.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

Expected<std::vector<int64_t>> ParseLengths(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v <= 0) {
      return InvalidArgument(
          "--prompt-tokens must be a comma-separated list of positive integers, got '" + item +
          "'");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("--prompt-tokens is empty");
  return out;
}

// Deterministic token ids in [1, vocab) (xorshift), independent of any tokenizer.
std::vector<int32_t> PromptIds(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t x = 0x9E3779B97F4A7C15ull ^ salt;
  for (auto& id : ids) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    id = static_cast<int32_t>(1 + x % static_cast<uint64_t>(vocab - 1));
  }
  return ids;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct ConcurrencyFigures {
  double decode_tok_s = 0;  // all streams together, once every stream is decoding
  double total_tok_s = 0;   // generated tokens / wall time from submit to the last token
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
};

// Per stream count: every repeat's figures, medians taken at the end.
struct ConcurrencySamples {
  std::vector<double> decode;  // one per repeat, 0 where there was no decode time
  std::vector<double> total, ttft;
  ConcurrencyFigures Figures() const {
    std::vector<double> timed;
    std::copy_if(decode.begin(), decode.end(), std::back_inserter(timed),
                 [](double x) { return x > 0; });
    return ConcurrencyFigures{Median(timed), Median(total), Percentile(ttft, 50),
                              Percentile(ttft, 99)};
  }
};

// `streams` greedy sequences submitted together to the scheduler (continuous batching), each
// with its own prompt of `prompt_len` ids and `gen` new tokens: one repeat (r), added to `out`.
Status RunConcurrency(ModelExecutor& exec, int streams, int64_t prompt_len, int64_t gen, int64_t r,
                      ConcurrencySamples* out) {
  std::vector<double>& decode = out->decode;
  std::vector<double>& total = out->total;
  std::vector<double>& ttft = out->ttft;
  {
    Scheduler sched(exec, {.reuse_prefixes = false});
    // The decode window runs from the last stream's first token to the end; only the tokens
    // inside it count (an earlier stream's tokens before that moment are not in the window).
    Clock::time_point last_first_token;
    int64_t generated = 0, generated_before_window = 0;
    const auto t0 = Clock::now();
    std::vector<SequenceRequest> reqs(static_cast<size_t>(streams));
    for (int i = 0; i < streams; ++i) {
      SequenceRequest& req = reqs[static_cast<size_t>(i)];
      req.prompt_ids =
          PromptIds(prompt_len, exec.spec().vocab, static_cast<uint64_t>(7919 * (r + 1) + 31 * i));
      req.max_new_tokens = gen;
      req.on_token = [&, first = true](int32_t) mutable {
        ++generated;
        if (first) {
          last_first_token = Clock::now();
          generated_before_window = generated;
        }
        first = false;
        return true;
      };
    }
    TS_ASSIGN_OR_RETURN(std::vector<SequenceResult> results, RunAllToEnd(sched, std::move(reqs)));
    for (const SequenceResult& res : results) ttft.push_back(res.timings.ttft_ms);
    const double all_s = Seconds(t0);
    const double decode_s = all_s - std::chrono::duration<double>(last_first_token - t0).count();
    total.push_back(static_cast<double>(generated) / all_s);
    decode.push_back(
        decode_s > 0 ? static_cast<double>(generated - generated_before_window) / decode_s : 0.0);
  }
  return Status::Ok();
}

int Run(int argc, char** argv) {
  CliArgs args("bench");
  args.AddString("model", "checkpoint directory", true);
  args.AddString("dtype", "weights: auto, f32, bf16, int8, int4", false, "auto");
  args.AddInt("threads", "worker threads (0: all cores)", 0);
  args.AddFlag("bf16-activations",
               "bf16 weights: round prompt activations to bf16 and use bf16 dot products (AVX-512 "
               "BF16; faster prefill, less exact)");
  args.AddString("prompt-tokens", "prompt lengths to time prefill at", false, "32,128,512");
  args.AddInt("gen-tokens", "tokens to decode per repeat", 128);
  args.AddInt("repeat", "repeats; medians are reported", 3);
  AddPlacementOptions(args, "layers per backend");
  args.AddString(
      "kv-cache",
      "KV cache precision of the cpu backend: auto (f32 for F32 weights, else bf16), bf16 or f32",
      false, "auto");
  args.AddString("concurrency",
                 "also run N streams at once through the scheduler, for each N in the list "
                 "(aggregate decode tok/s, TTFT p50/p99; prompts of the first --prompt-tokens)");
  args.AddFlag("json", "print one JSON object");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("bench", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  auto lengths = ParseLengths(args.GetString("prompt-tokens"));
  if (!lengths) return ReportError("bench", lengths.status());
  auto dtype = ParseWeightFormat(args.GetString("dtype"));
  if (!dtype) return ReportError("bench", InvalidArgument("--dtype: " + dtype.status().message()));
  const int64_t gen = args.GetInt("gen-tokens"), repeat = args.GetInt("repeat");
  const int64_t threads = args.GetInt("threads");
  if (gen < 1 || gen > 100000)
    return ReportError("bench", InvalidArgument("--gen-tokens must be 1..100000"));
  if (repeat < 1 || repeat > 1000)
    return ReportError("bench", InvalidArgument("--repeat must be 1..1000"));
  if (threads < 0 || threads > 1024)
    return ReportError("bench", InvalidArgument("--threads must be 0..1024"));

  std::vector<int64_t> concurrency;
  if (!args.GetString("concurrency").empty()) {
    auto parsed = ParseLengths(args.GetString("concurrency"));
    if (!parsed || *std::max_element(parsed->begin(), parsed->end()) > 256) {
      return ReportError("bench", InvalidArgument("--concurrency must be a comma-separated list "
                                                  "of stream counts 1..256"));
    }
    concurrency = *parsed;
  }
  const int64_t slots =
      concurrency.empty() ? 1 : *std::max_element(concurrency.begin(), concurrency.end());

  // What it is doing, phase by phase, on stderr: --json keeps stdout to the one object.
  ProgressRenderer shown = ProgressRenderer::ForStderr();
  // An error starts on a line of its own, below a bar being drawn.
  auto fail = [&shown](const Status& st) {
    shown.EndLine();
    return ReportError("bench", st);
  };
  const std::string loading = "loading " + args.GetString("model");
  shown.Update({.phase = loading});
  auto t_load = Clock::now();
  auto ckpt = OpenCheckpoint(args.GetString("model"));
  if (!ckpt) return fail(ckpt.status());
  auto placement_spec = PlacementFromArgs(args);
  if (!placement_spec) return fail(placement_spec.status());
  auto placement = ParsePlacement(*placement_spec, (*ckpt)->config.num_layers);
  if (!placement) return fail(placement.status());
  const int64_t max_len = *std::max_element(lengths->begin(), lengths->end());
  ModelExecutor::Options options;
  options.max_seq = std::max<int64_t>(max_len, (*lengths)[0] + gen) + 1;
  options.max_batch_tokens = std::max(std::min<int64_t>(max_len, 512), slots + kPrefillChunkTokens);
  options.max_slots = static_cast<int>(slots);
  options.backend.weights = *dtype;
  options.backend.threads = static_cast<int>(threads);
  options.backend.bf16_activations = args.GetFlag("bf16-activations");
  auto cpu_isa = CpuIsaFromArgs(args);
  if (!cpu_isa) return fail(cpu_isa.status());
  options.backend.cpu_isa = *cpu_isa;
  auto npu = NpuOptionsFromArgs(args);
  if (!npu) return fail(npu.status());
  options.backend.npu = *npu;
  auto kv_cache = ParseKvCacheType(args.GetString("kv-cache"));
  if (!kv_cache) return fail(kv_cache.status());
  auto resolved_kv = KvCacheFor(**ckpt, *dtype, *kv_cache);
  if (!resolved_kv) return fail(resolved_kv.status());
  options.backend.kv_cache = *resolved_kv;
  auto exec = ModelExecutor::Load(*ckpt, *placement, options);
  if (!exec) return fail(exec.status());
  const double load_s = Seconds(t_load);
  shown.Update({.phase = loading, .finished = true});
  const int64_t vocab = (*exec)->spec().vocab;
  std::string length_list;
  for (int64_t len : *lengths)
    length_list += (length_list.empty() ? "" : ",") + std::to_string(len);
  const std::string timing = "prefill at " + length_list + " tokens, decode of " +
                             std::to_string(gen) + " tokens (repeats)";
  const uint64_t repeats = static_cast<uint64_t>(repeat);
  std::vector<float> logits(static_cast<size_t>(vocab));

  std::map<int64_t, std::vector<double>> prefill;  // tok/s per length
  std::vector<double> decode, ttft;
  for (int64_t r = 0; r < repeat; ++r) {
    shown.Update({.phase = timing,
                  .done = static_cast<uint64_t>(r),
                  .total = repeats,
                  .unit = ProgressUnit::kRepeats});
    for (int64_t len : *lengths) {
      auto ids = PromptIds(len, vocab, static_cast<uint64_t>(r * 1000 + len));
      auto t0 = Clock::now();
      if (Status st = (*exec)->Forward(0, 0, ids, logits); !st.ok()) return fail(st);
      prefill[len].push_back(static_cast<double>(len) / Seconds(t0));
    }
    // One greedy stream through the scheduler, as the product decodes (batches of one).
    SequenceRequest req;
    req.prompt_ids = PromptIds((*lengths)[0], vocab, static_cast<uint64_t>(r));
    req.max_new_tokens = gen;  // no stop ids: always the full count
    auto result = RunOneSequence(**exec, std::move(req), 0, {.reuse_prefixes = false});
    if (!result) return fail(result.status());
    ttft.push_back(result->timings.ttft_ms);
    if (result->timings.decode_tok_s > 0) decode.push_back(result->timings.decode_tok_s);
  }
  shown.Update({.phase = timing,
                .done = repeats,
                .total = repeats,
                .unit = ProgressUnit::kRepeats,
                .finished = true});
  // Weights streamed per decoded token: every resident layer and the LM head (the
  // embedding row gathered per token is negligible).
  const double bytes_per_token = static_cast<double>((*exec)->resident_weight_bytes());
  const double decode_tok_s = Median(decode);
  nlohmann::ordered_json out;
  out["model"] = args.GetString("model");
  out["placement"] = placement->Describe();
  out["embedding"] = (*exec)->embedding_source();
  out["dtype"] = std::string(WeightFormatName(*dtype));
  out["bf16_activations"] = options.backend.bf16_activations;
  out["kv_cache"] = KvCacheTypeName(options.backend.kv_cache);
  out["threads"] = threads;
  out["load_s"] = load_s;
  nlohmann::ordered_json pf = nlohmann::ordered_json::object();
  for (int64_t len : *lengths) pf[std::to_string(len)] = Median(prefill[len]);
  out["prefill_tok_s"] = pf;
  out["decode_tok_s"] = decode_tok_s;
  out["ttft_ms"] = Median(ttft);
  out["ttft_prompt_tokens"] = (*lengths)[0];
  out["peak_rss_mib"] = PeakRssMib();
  out["weight_bytes_per_token"] = bytes_per_token;
  out["decode_gb_s"] = bytes_per_token * decode_tok_s / 1e9;
  out["gen_tokens"] = gen;
  out["repeat"] = repeat;
  std::vector<std::pair<int64_t, ConcurrencyFigures>> streams;
  // The stream counts alternate within each repeat, so that the machine's drift over minutes
  // does not land on one of them: their ratios are measured side by side.
  std::vector<ConcurrencySamples> samples(concurrency.size());
  std::string stream_list;
  for (int64_t c : concurrency) stream_list += (stream_list.empty() ? "" : ",") + std::to_string(c);
  const std::string concurrent = "concurrent streams " + stream_list + " (repeats)";
  for (int64_t r = 0; r < repeat && !concurrency.empty(); ++r) {
    shown.Update({.phase = concurrent,
                  .done = static_cast<uint64_t>(r),
                  .total = repeats,
                  .unit = ProgressUnit::kRepeats});
    for (size_t i = 0; i < concurrency.size(); ++i) {
      if (Status st = RunConcurrency(**exec, static_cast<int>(concurrency[i]), (*lengths)[0], gen,
                                     r, &samples[i]);
          !st.ok()) {
        return fail(st);
      }
    }
  }
  if (!concurrency.empty()) {
    shown.Update({.phase = concurrent,
                  .done = repeats,
                  .total = repeats,
                  .unit = ProgressUnit::kRepeats,
                  .finished = true});
  }
  // Scaling against one stream: within a repeat the counts run back to back, seconds apart,
  // while the machine's speed drifts over minutes; so the ratio is taken within each repeat
  // and the median of those ratios reported (with their range).
  const auto one = std::find(concurrency.begin(), concurrency.end(), int64_t{1});
  std::vector<std::vector<double>> ratios(concurrency.size());
  for (size_t i = 0; one != concurrency.end() && i < concurrency.size(); ++i) {
    if (concurrency[i] == 1) continue;
    const auto& base = samples[static_cast<size_t>(one - concurrency.begin())].decode;
    const auto& mine = samples[i].decode;
    for (size_t r = 0; r < base.size() && r < mine.size(); ++r) {
      if (base[r] > 0 && mine[r] > 0) ratios[i].push_back(mine[r] / base[r]);
    }
  }
  for (size_t i = 0; i < concurrency.size(); ++i) {
    const ConcurrencyFigures f = samples[i].Figures();
    streams.emplace_back(concurrency[i], f);
    auto& entry = out["concurrency"][std::to_string(concurrency[i])];
    entry = {{"decode_tok_s", f.decode_tok_s},
             {"total_tok_s", f.total_tok_s},
             {"ttft_p50_ms", f.ttft_p50_ms},
             {"ttft_p99_ms", f.ttft_p99_ms}};
    if (!ratios[i].empty()) {
      entry["decode_vs_one_stream"] = Median(ratios[i]);
      entry["decode_vs_one_stream_per_repeat"] = ratios[i];
    }
  }
  if (args.GetFlag("json")) {
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf(
      "model      %s\nplacement  %s\nembedding  %s\ndtype      %s   threads %lld\nload       %.2f "
      "s\n",
      args.GetString("model").c_str(), placement->Describe().c_str(),
      (*exec)->embedding_source().c_str(), std::string(WeightFormatName(*dtype)).c_str(),
      static_cast<long long>(threads), load_s);
  for (int64_t len : *lengths) {
    std::printf("prefill@%-5lld %.1f tok/s\n", static_cast<long long>(len), Median(prefill[len]));
  }
  std::printf(
      "decode     %.1f tok/s  (%.1f GB/s of weights)\nttft@%lld   %.1f ms\npeak RSS   %.0f MiB\n",
      decode_tok_s, bytes_per_token * decode_tok_s / 1e9, static_cast<long long>((*lengths)[0]),
      Median(ttft), PeakRssMib());
  for (size_t i = 0; i < streams.size(); ++i) {
    const auto& [c, f] = streams[i];
    std::printf(
        "streams %-3lld decode %.1f tok/s aggregate, %.1f tok/s overall, ttft p50 %.1f ms p99 "
        "%.1f ms",
        static_cast<long long>(c), f.decode_tok_s, f.total_tok_s, f.ttft_p50_ms, f.ttft_p99_ms);
    if (!ratios[i].empty()) {
      const auto [lo, hi] = std::minmax_element(ratios[i].begin(), ratios[i].end());
      std::printf(", decode %.2fx one stream (median of %zu repeats' ratios, %.2f-%.2f)",
                  Median(ratios[i]), ratios[i].size(), *lo, *hi);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int RunBenchCommand(int argc, char** argv) {
  return Run(argc, argv);
}

}  // namespace tessera
