// tessera generate: greedy generation from a prompt, streamed or as one JSON object.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "cli_args.h"
#include "commands.h"
#include "engine/generator.h"
#include "engine/model_executor.h"
#include "engine/placement.h"
#include "model/checkpoint.h"
#include "model_loading.h"

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
  args.AddString("model", "checkpoint directory, or a model name from `tessera list`", true);
  args.AddString("prompt", "prompt text");
  args.AddString("prompt-ids", "prompt as comma-separated token ids (no special tokens added)");
  args.AddInt("max-tokens", "maximum tokens to generate", 128);
  args.AddFlag("json", "print one JSON object instead of streaming text");
  args.AddFlag("echo", "when streaming, print the prompt text before the continuation");
  args.AddInt("top-logits", "with --json: the K highest [id, logit] per generated step", 0);
  args.AddString("placement", "layers per backend, e.g. cpu, reference or reference:3,cpu", false,
                 "cpu");
  args.AddString("dtype", "cpu backend weights: auto, f32, bf16, int8, int4", false, "auto");
  args.AddFlag("bf16-activations",
               "bf16 weights: round prompt activations to bf16 and use bf16 dot products (AVX-512 "
               "BF16; faster prefill, less exact)");
  args.AddInt("context", "KV cache positions (default: the model's, at most 4096)", 0);
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("generate", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  if (args.Has("prompt") == args.Has("prompt-ids")) {
    return ReportError("generate", InvalidArgument("give exactly one of --prompt or --prompt-ids"));
  }
  int64_t max_tokens = args.GetInt("max-tokens");
  int64_t top_k = args.GetInt("top-logits");
  if (max_tokens < 0) return ReportError("generate", InvalidArgument("--max-tokens must be >= 0"));
  if (top_k < 0 || top_k > 1000) {
    return ReportError("generate", InvalidArgument("--top-logits must be between 0 and 1000"));
  }
  auto resolved_dir = ResolveModelDir(args.GetString("model"));
  if (!resolved_dir) return ReportError("generate", resolved_dir.status());
  const std::string dir = *resolved_dir;

  auto ckpt = OpenCheckpoint(dir);
  if (!ckpt) return ReportError("generate", ckpt.status());
  auto tok = LoadTokenizerDir(dir);
  if (!tok) return ReportError("generate", tok.status());

  std::vector<int32_t> prompt_ids;
  if (args.Has("prompt")) {
    auto ids = EncodePrompt(*tok, args.GetString("prompt"));
    if (!ids) return ReportError("generate", ids.status());
    prompt_ids = std::move(*ids);
  } else {
    auto ids = ParseIdList(args.GetString("prompt-ids"));
    if (!ids) return ReportError("generate", ids.status());
    prompt_ids = std::move(*ids);
  }
  for (int32_t id : prompt_ids) {
    if (id >= (*ckpt)->config.vocab_size) {
      return ReportError("generate", InvalidArgument("prompt token id " + std::to_string(id) +
                                                     " is outside the model's vocabulary of " +
                                                     std::to_string((*ckpt)->config.vocab_size)));
    }
  }

  auto placement = ParsePlacement(args.GetString("placement"), (*ckpt)->config.num_layers);
  if (!placement) return ReportError("generate", placement.status());
  ModelExecutor::Options options;
  options.max_seq = args.GetInt("context");
  auto weights = ParseWeightFormat(args.GetString("dtype"));
  if (!weights) {
    return ReportError("generate", InvalidArgument("--dtype: " + weights.status().message()));
  }
  options.backend.weights = *weights;
  options.backend.bf16_activations = args.GetFlag("bf16-activations");
  auto run_ckpt = UsePackageCache(args.GetString("model"), *ckpt, *placement, *weights);
  if (!run_ckpt) return ReportError("generate", run_ckpt.status());
  auto t_load = std::chrono::steady_clock::now();
  auto exec = ModelExecutor::Load(*run_ckpt, *placement, options);
  if (!exec) return ReportError("generate", exec.status());
  double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
  std::fprintf(stderr, "tessera: model: %s\n", DescribeCheckpoint(**run_ckpt).c_str());
  std::fprintf(stderr, "tessera: placement: %s\n", (*placement).Describe().c_str());
  std::fprintf(stderr, "tessera: token embedding: %s\n", (*exec)->embedding_source().c_str());

  const bool json = args.GetFlag("json");
  GenerateRequest req;
  req.prompt_ids = prompt_ids;
  req.max_new_tokens = max_tokens;
  req.stop_ids = StopIds(**ckpt);
  req.top_logits_k = static_cast<int>(top_k);
  StreamingDetokenizer detok(tok->tokenizer, /*skip_special_tokens=*/true);
  // Prime the stream with the prompt so the completion decodes in context (a SentencePiece
  // Strip decoder removes a leading space only at the very start of the text).
  std::string prompt_echo;
  for (int32_t id : prompt_ids) {
    auto piece = detok.Push(id);
    if (piece) prompt_echo += *piece;
  }
  if (!json && args.GetFlag("echo")) {
    std::fwrite(prompt_echo.data(), 1, prompt_echo.size(), stdout);
    std::fflush(stdout);
  }
  if (!json) {
    req.on_token = [&](int32_t id) {
      auto piece = detok.Push(id);  // ids past the tokenizer's vocabulary have no text
      if (piece) {
        std::fwrite(piece->data(), 1, piece->size(), stdout);
        std::fflush(stdout);
      }
      return true;
    };
  }
  auto result = GenerateGreedy(**exec, 0, req);
  if (!result) return ReportError("generate", result.status());
  if (!json) {
    std::string rest = detok.Finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }

  // A model's vocabulary may be padded past the tokenizer's; such ids have no text.
  auto known = [&](const std::vector<int32_t>& ids) {
    std::vector<int32_t> out;
    for (int32_t id : ids) {
      if (id < tok->tokenizer.vocab_size()) out.push_back(id);
    }
    return out;
  };
  std::vector<int32_t> all = prompt_ids;
  all.insert(all.end(), result->generated_ids.begin(), result->generated_ids.end());
  auto text = tok->tokenizer.Decode(known(all), /*skip_special_tokens=*/true);
  auto prompt_text = tok->tokenizer.Decode(known(prompt_ids), /*skip_special_tokens=*/true);
  if (!text || !prompt_text) {
    return ReportError("generate", (!text ? text : prompt_text).status());
  }
  std::string completion;
  if (text->compare(0, prompt_text->size(), *prompt_text) == 0) {
    completion = text->substr(prompt_text->size());
  } else {
    auto gen_text = tok->tokenizer.Decode(known(result->generated_ids), true);
    if (!gen_text) return ReportError("generate", gen_text.status());
    completion = *gen_text;
  }
  nlohmann::ordered_json out;
  out["prompt_ids"] = prompt_ids;
  out["generated_ids"] = result->generated_ids;
  out["text"] = *text;
  out["completion_text"] = completion;
  out["stop_reason"] = StopReasonName(result->stop_reason);
  nlohmann::ordered_json tops = nlohmann::ordered_json::array();
  for (const auto& step : result->top_logits) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (const auto& [id, logit] : step) row.push_back({id, logit});
    tops.push_back(row);
  }
  out["top_logits"] = tops;
  out["placement"] = placement->Describe();
  const GenerateTimings& t = result->timings;
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
