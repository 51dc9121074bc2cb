// tessera convert SRC DST [--dtype auto|bf16|int8|int4|f32]: a checkpoint into a verified
// runtime package of packed CPU panels (src/catalog/package.h), written to staging and
// swapped in atomically.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/progress.h"
#include "catalog/package.h"
#include "cli_args.h"
#include "commands.h"

namespace tessera {

int RunConvertCommand(int argc, char** argv) {
  CliArgs args("convert SRC DST");
  // auto by default: an F32 checkpoint is never silently rounded to bf16.
  args.AddString("dtype",
                 "weight format of the packed matrices: auto (the checkpoint's own: F32 stays "
                 "f32, BF16 and F16 become bf16), bf16, int8, int4 or f32",
                 false, "auto");
  // SRC and DST come first; options follow.
  std::vector<std::string> positional;
  int first_option = 2;
  while (first_option < argc && positional.size() < 2 &&
         std::string(argv[first_option]).rfind("--", 0) != 0) {
    positional.push_back(argv[first_option++]);
  }
  if (Status st = args.Parse(argc, argv, first_option); !st.ok()) {
    return ReportError("convert", st);
  }
  if (args.help_requested()) {
    std::printf(
        "%s\nWrites DST: one 64-byte aligned tensor file with the matrices already packed (and "
        "quantized) for the cpu backend, the config and tokenizer files, and a versioned manifest "
        "with every file's size and sha256. DST is replaced "
        "atomically when it is already a package.\n",
        args.Usage().c_str());
    return 0;
  }
  if (positional.size() != 2) {
    return ReportError("convert", InvalidArgument("usage: tessera convert SRC DST [--dtype "
                                                  "auto|bf16|int8|int4|f32]"));
  }
  PackageOptions options;
  const std::string dtype = args.GetString("dtype");
  auto format = ParseWeightFormat(dtype);
  if (!format)
    return ReportError("convert", InvalidArgument("--dtype: " + format.status().message()));
  options.weights = *format;
  ProgressRenderer shown = ProgressRenderer::ForStderr();  // a bar on a terminal, else lines
  options.progress = shown.Callback();
  auto begin = std::chrono::steady_clock::now();
  if (Status st = ConvertToPackage(positional[0], positional[1], options); !st.ok()) {
    shown.EndLine();
    return ReportError("convert", st);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  // Says the format it chose when asked for auto.
  auto package = VerifyPackage(positional[1]);
  if (!package) return ReportError("convert", package.status());
  const std::string chosen =
      *format == WeightFormat::kAuto ? package->dtype + ", the checkpoint's own (auto)" : dtype;
  std::printf("converted %s into %s (%s) in %.2f s\n", positional[0].c_str(), positional[1].c_str(),
              chosen.c_str(), seconds);
  return 0;
}

}  // namespace tessera
