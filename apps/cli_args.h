// A small command-line parser shared by the subcommands: --flag, --key value, --key=value.
// Unknown options and missing values are errors that name the option.
//
//   CliArgs args;
//   args.AddString("model", "checkpoint directory", /*required=*/true);
//   args.AddInt("max-tokens", "tokens to generate", 128);
//   args.AddFlag("json", "print one JSON object");
//   if (auto st = args.Parse(argc, argv, 2); !st.ok()) { ...print st.message()... }
//   std::string dir = args.GetString("model");
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"
#include "sampling/sampling_params.h"

namespace tessera {

class CliArgs {
 public:
  explicit CliArgs(std::string command) : command_(std::move(command)) {}

  void AddString(const std::string& name, const std::string& help, bool required = false,
                 std::optional<std::string> default_value = std::nullopt);
  void AddInt(const std::string& name, const std::string& help,
              std::optional<int64_t> default_value = std::nullopt);
  void AddDouble(const std::string& name, const std::string& help,
                 std::optional<double> default_value = std::nullopt);
  void AddFlag(const std::string& name, const std::string& help);
  // A repeatable string option; every occurrence is kept in order.
  void AddList(const std::string& name, const std::string& help);

  // Parses argv[first..argc). "--help" sets help_requested().
  Status Parse(int argc, char** argv, int first);

  bool help_requested() const { return help_; }
  std::string Usage() const;

  bool Has(const std::string& name) const;
  std::string GetString(const std::string& name) const;
  int64_t GetInt(const std::string& name) const;
  double GetDouble(const std::string& name) const;
  bool GetFlag(const std::string& name) const;
  std::vector<std::string> GetList(const std::string& name) const;

 private:
  enum class Kind { kString, kInt, kDouble, kFlag, kList };
  struct Option {
    Kind kind;
    std::string help;
    bool required = false;
    std::optional<std::string> default_value;
    std::vector<std::string> values;  // as given
  };
  std::string command_;
  std::map<std::string, Option> options_;
  std::vector<std::string> order_;
  bool help_ = false;
};

// --placement (default `cpu`), --npu-layers N and --npu-percent P: where a model's layers run;
// --cpu-isa NAME: the cpu backend's kernel family.
void AddPlacementOptions(CliArgs& args, const std::string& placement_help);
// --npu-device (checked, with the maker of its device: npu_device.h), and --npu-queue /
// --npu-queue-timeout-ms where the command has them.
Expected<NpuOptions> NpuOptionsFromArgs(const CliArgs& args);
// --cpu-isa as given (nullopt: not given, the best this CPU runs); an unknown name is an error
// listing the valid ones, a family this CPU lacks one naming the missing features and the
// families it runs (before any model loads).
Expected<std::optional<CpuIsa>> CpuIsaFromArgs(const CliArgs& args);
// The placement those ask for: --placement, or the first N layers (P percent) on the NPU
// (`xdna:N,cpu`); refused when an NPU flag comes with --placement or both NPU flags are given.
Expected<std::string> PlacementFromArgs(const CliArgs& args);

// --temperature, --top-k, --top-p, --min-p, --repetition-penalty, --presence-penalty,
// --frequency-penalty and --seed: what a Request's sampling asks for.
void AddSamplingOptions(CliArgs& args);
// The sampling flags given; the others stay unset, so generation_config.json's defaults apply.
// Each given flag is checked on its own, so an error names the flag ("--top-p: top_p must be
// greater than 0 ...").
Expected<SamplingParams> SamplingFromArgs(const CliArgs& args);

// Prints "tessera <command>: <message>" to stderr and returns the exit code for a failure.
int ReportError(const std::string& command, const Status& status);

}  // namespace tessera
