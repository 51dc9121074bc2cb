// tessera generate: generation from a prompt (greedy unless sampling flags or the checkpoint's
// generation_config.json ask otherwise), streamed or as one JSON object, through the same
// request path as the server (runtime/request.h, runtime/session.h).
#include <charconv>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/backend.h"
#include "cli_args.h"
#include "commands.h"
#include "engine/decoding.h"
#include "model/checkpoint.h"
#include "model_loading.h"
#include "runtime/loaded_model.h"
#include "runtime/session.h"

namespace tessera {
namespace {

Expected<std::vector<int32_t>> ParseIdList(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v = -1;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < 0 ||
        v > INT32_MAX) {
      return InvalidArgument("--prompt-ids must be comma-separated non-negative integers, got '" +
                             item + "'");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) return InvalidArgument("--prompt-ids is empty");
  return ids;
}

int Run(int argc, char** argv) {
  CliArgs args("generate");
  args.AddString("model", "checkpoint directory or GGUF file, or a model name from `tessera list`",
                 true);
  args.AddString("prompt", "prompt text");
  args.AddString("prompt-ids", "prompt as comma-separated token ids (no special tokens added)");
  args.AddInt("max-tokens",
              "maximum tokens to generate (default: until a stop or the context's end)");
  AddSamplingOptions(args);
  args.AddFlag("json", "print one JSON object instead of streaming text");
  args.AddFlag("echo", "when streaming, print the prompt text before the continuation");
  args.AddInt("top-logits", "with --json: the K highest [id, logit] per generated step", 0);
  AddPlacementOptions(args, "layers per backend, e.g. cpu, reference or reference:3,cpu");
  args.AddString("dtype", "cpu backend weights: auto, f32, bf16, int8, int4", false, "auto");
  args.AddFlag("bf16-activations",
               "bf16 weights: round prompt activations to bf16 and use bf16 dot products (AVX-512 "
               "BF16; faster prefill, less exact)");
  args.AddInt("context", "KV cache positions (default: the model's, at most 4096)", 0);
  args.AddList("stop", "stop string: the text ends before it (repeatable)");
  args.AddString(
      "kv-cache",
      "KV cache precision of the cpu backend: auto (f32 for F32 weights, else bf16), bf16 or f32",
      false, "auto");
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("generate", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  if (args.Has("prompt") == args.Has("prompt-ids")) {
    return ReportError("generate", InvalidArgument("give exactly one of --prompt or --prompt-ids"));
  }
  std::optional<int64_t> max_tokens;
  if (args.Has("max-tokens")) max_tokens = args.GetInt("max-tokens");
  int64_t top_k = args.GetInt("top-logits");
  if (max_tokens && *max_tokens < 1) {
    return ReportError("generate", InvalidArgument("--max-tokens must be at least 1"));
  }
  if (top_k < 0 || top_k > 1000) {
    return ReportError("generate", InvalidArgument("--top-logits must be between 0 and 1000"));
  }
  auto sampling = SamplingFromArgs(args);
  if (!sampling) return ReportError("generate", sampling.status());
  auto resolved = ResolveModelToLoad(args.GetString("model"));
  if (!resolved) return ReportError("generate", resolved.status());
  auto weights = ParseWeightFormat(args.GetString("dtype"));
  if (!weights) {
    return ReportError("generate", InvalidArgument("--dtype: " + weights.status().message()));
  }
  // Prompt ids are checked against the checkpoint's vocabulary before anything is loaded.
  std::vector<int32_t> given_ids;
  if (args.Has("prompt-ids")) {
    auto ids = ParseIdList(args.GetString("prompt-ids"));
    if (!ids) return ReportError("generate", ids.status());
    auto ckpt = OpenCheckpoint(resolved->Where());
    if (!ckpt) return ReportError("generate", ckpt.status());
    const int64_t vocab = (*ckpt)->config.vocab_size;
    for (int32_t id : *ids) {
      if (id >= vocab) {
        return ReportError("generate", InvalidArgument("prompt token id " + std::to_string(id) +
                                                       " is outside the model's vocabulary of " +
                                                       std::to_string(vocab)));
      }
    }
    given_ids = std::move(*ids);
  }
  auto kv_cache = ParseKvCacheType(args.GetString("kv-cache"));
  if (!kv_cache) return ReportError("generate", kv_cache.status());
  ModelLoadOptions options;
  options.kv_cache = *kv_cache;
  auto placement = PlacementFromArgs(args);
  if (!placement) return ReportError("generate", placement.status());
  options.placement = *placement;
  auto cpu_isa = CpuIsaFromArgs(args);
  if (!cpu_isa) return ReportError("generate", cpu_isa.status());
  options.cpu_isa = *cpu_isa;
  auto npu = NpuOptionsFromArgs(args);
  if (!npu) return ReportError("generate", npu.status());
  options.npu = *npu;
  options.weights = *weights;
  options.bf16_activations = args.GetFlag("bf16-activations");
  options.context = args.GetInt("context");
  options.parallel = 1;
  auto t_load = std::chrono::steady_clock::now();
  auto model = OpenModelShowingProgress(*resolved, options);
  if (!model) return ReportError("generate", model.status());
  LoadedModel& m = **model;
  double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
  std::fprintf(stderr, "tessera: model: %s\n", DescribeCheckpoint(m.checkpoint()).c_str());
  std::fprintf(stderr, "tessera: placement: %s\n", m.executor().placement().Describe().c_str());
  std::fprintf(stderr, "tessera: token embedding: %s\n", m.executor().embedding_source().c_str());

  const bool json = args.GetFlag("json");
  Request request;
  if (args.Has("prompt")) {
    request.prompt = args.GetString("prompt");
  } else {
    request.prompt = std::move(given_ids);
  }
  request.sampling = *sampling;
  request.max_tokens = max_tokens;
  request.stop = args.GetList("stop");
  request.top_logits = static_cast<int>(top_k);
  auto print = [json](const SessionEvent& e) {
    const auto* d = std::get_if<TextDelta>(&e);
    if (json || d == nullptr) return;
    std::fwrite(d->text.data(), 1, d->text.size(), stdout);
    std::fflush(stdout);
  };
  auto session = Session::Start(m, std::move(request), print);
  if (!session) return ReportError("generate", session.status());
  const SessionResult& result = (*session)->result();
  if (result.sampling.seed_was_generated) {
    std::fprintf(stderr, "tessera: sampling seed %llu\n",
                 static_cast<unsigned long long>(result.sampling.seed));
  }
  const std::vector<int32_t>& prompt_ids = result.prompt_ids;
  if (!json && args.GetFlag("echo")) {
    // Printed before the first step, so the continuation follows it.
    StreamingDetokenizer echo(m.tokenizer(), /*skip_special_tokens=*/true);
    std::string prompt_text;
    for (int32_t id : prompt_ids) {
      if (auto piece = echo.Push(id)) prompt_text += *piece;
    }
    std::fwrite(prompt_text.data(), 1, prompt_text.size(), stdout);
    std::fflush(stdout);
  }
  if (Status st = RunUntilDone(m.scheduler(), **session); !st.ok()) {
    return ReportError("generate", st);
  }
  if (!result.status.ok()) return ReportError("generate", result.status);
  if (!json) {
    std::fputc('\n', stdout);
    return 0;
  }

  // A model's vocabulary may be padded past the tokenizer's; such ids have no text.
  auto known = [&](const std::vector<int32_t>& ids) {
    std::vector<int32_t> out;
    for (int32_t id : ids) {
      if (id < m.tokenizer().vocab_size()) out.push_back(id);
    }
    return out;
  };
  std::vector<int32_t> all = prompt_ids;
  all.insert(all.end(), result.generated_ids.begin(), result.generated_ids.end());
  auto text = m.tokenizer().Decode(known(all), /*skip_special_tokens=*/true);
  if (!text) return ReportError("generate", text.status());
  nlohmann::ordered_json out;
  out["prompt_ids"] = prompt_ids;
  out["generated_ids"] = result.generated_ids;
  out["text"] = *text;
  out["completion_text"] = result.text;
  out["stop_reason"] = FinishReasonName(result.finish);
  nlohmann::ordered_json tops = nlohmann::ordered_json::array();
  for (const auto& step : result.top_logits) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (const auto& [id, logit] : step) row.push_back({id, logit});
    tops.push_back(row);
  }
  out["top_logits"] = tops;
  out["placement"] = m.executor().placement().Describe();
  const GenerateTimings& t = result.timings;
  out["timings"] = {{"load_ms", load_ms},
                    {"prefill_ms", t.prefill_ms},
                    {"ttft_ms", t.ttft_ms},
                    {"decode_ms", t.decode_ms},
                    {"prefill_tok_s", t.prefill_tok_s},
                    {"decode_tok_s", t.decode_tok_s}};
  std::string s = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::printf("%s\n", s.c_str());
  return 0;
}

}  // namespace

int RunGenerateCommand(int argc, char** argv) {
  return Run(argc, argv);
}

}  // namespace tessera
