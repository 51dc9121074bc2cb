// tessera synth: a Hugging Face checkpoint with random weights at a real model's exact shapes
// and a working tokenizer, for benchmarks without downloads.
#include <cstdio>

#include "base/progress.h"
#include "cli_args.h"
#include "commands.h"
#include "model/synthetic_checkpoint.h"

namespace tessera {

int RunSynthCommand(int argc, char** argv) {
  CliArgs args("synth");
  std::string presets;
  for (const auto& n : SyntheticPresetNames()) presets += (presets.empty() ? "" : ", ") + n;
  args.AddString("preset", "model shape: " + presets, true);
  args.AddString("out", "output directory (created; existing files are overwritten)", true);
  args.AddInt("seed", "weight seed", 1);
  args.AddString("dtype", "weight dtype: bf16, f16 or f32", false, "bf16");
  args.AddInt("vocab", "vocabulary size instead of the preset's (0: the preset's; at least 4096)",
              0);
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return ReportError("synth", st);
  if (args.help_requested()) {
    std::printf("%s", args.Usage().c_str());
    return 0;
  }
  auto spec = SyntheticPreset(args.GetString("preset"));
  if (!spec) return ReportError("synth", spec.status());
  std::string dtype = args.GetString("dtype");
  if (dtype == "bf16") {
    spec->dtype = DType::kBF16;
  } else if (dtype == "f16") {
    spec->dtype = DType::kF16;
  } else if (dtype == "f32") {
    spec->dtype = DType::kF32;
  } else {
    return ReportError("synth",
                       InvalidArgument("--dtype must be bf16, f16 or f32, got '" + dtype + "'"));
  }
  if (args.GetInt("seed") < 0) return ReportError("synth", InvalidArgument("--seed must be >= 0"));
  spec->seed = static_cast<uint64_t>(args.GetInt("seed"));
  // Comparisons across runtimes at one vocabulary (the head is a large share of a small model).
  if (const int64_t vocab = args.GetInt("vocab"); vocab != 0) {
    if (vocab < 4096 || vocab > (int64_t{1} << 24)) {
      return ReportError("synth", InvalidArgument("--vocab must be 0 or 4096..16777216, got " +
                                                  std::to_string(vocab)));
    }
    spec->vocab = vocab;
  }
  const std::string out = args.GetString("out");
  ProgressRenderer shown = ProgressRenderer::ForStderr();  // a bar on a terminal, else lines
  if (Status st = WriteSyntheticModel(out, *spec, shown.Callback()); !st.ok()) {
    shown.EndLine();
    return ReportError("synth", st);
  }
  std::printf("wrote %s (%s, %s weights, seed %lld)\n", out.c_str(),
              args.GetString("preset").c_str(), dtype.c_str(),
              static_cast<long long>(args.GetInt("seed")));
  return 0;
}

}  // namespace tessera
