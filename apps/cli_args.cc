#include "cli_args.h"

#include "backend/cpu/cpu_features.h"
#include "engine/placement.h"
#include "npu_device.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tessera {

void CliArgs::AddString(const std::string& name, const std::string& help, bool required,
                        std::optional<std::string> default_value) {
  options_[name] = Option{Kind::kString, help, required, std::move(default_value), {}};
  order_.push_back(name);
}

void CliArgs::AddInt(const std::string& name, const std::string& help,
                     std::optional<int64_t> default_value) {
  std::optional<std::string> d;
  if (default_value) d = std::to_string(*default_value);
  options_[name] = Option{Kind::kInt, help, false, d, {}};
  order_.push_back(name);
}

void CliArgs::AddDouble(const std::string& name, const std::string& help,
                        std::optional<double> default_value) {
  std::optional<std::string> d;
  if (default_value) d = std::to_string(*default_value);
  options_[name] = Option{Kind::kDouble, help, false, d, {}};
  order_.push_back(name);
}

void CliArgs::AddFlag(const std::string& name, const std::string& help) {
  options_[name] = Option{Kind::kFlag, help, false, std::nullopt, {}};
  order_.push_back(name);
}

void CliArgs::AddList(const std::string& name, const std::string& help) {
  options_[name] = Option{Kind::kList, help, false, std::nullopt, {}};
  order_.push_back(name);
}

namespace {

bool ParseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool ParseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

Status CliArgs::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      return Status::Ok();
    }
    if (arg.rfind("--", 0) != 0) {
      return InvalidArgument("unexpected argument '" + arg + "'; options start with --");
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = options_.find(name);
    if (it == options_.end()) {
      return InvalidArgument("unknown option --" + name + "; see --help");
    }
    Option& opt = it->second;
    if (opt.kind == Kind::kFlag) {
      if (value) return InvalidArgument("--" + name + " takes no value");
      opt.values.push_back("1");
      continue;
    }
    if (!value) {
      if (i + 1 >= argc) return InvalidArgument("--" + name + " needs a value");
      value = argv[++i];
    }
    if (opt.kind == Kind::kInt) {
      int64_t v;
      if (!ParseInt64(*value, &v)) {
        return InvalidArgument("--" + name + " must be an integer, got '" + *value + "'");
      }
    }
    if (opt.kind == Kind::kDouble) {
      double v;
      if (!ParseDouble(*value, &v)) {
        return InvalidArgument("--" + name + " must be a finite number, got '" + *value + "'");
      }
    }
    if (opt.kind != Kind::kList) opt.values.clear();  // the last occurrence wins
    opt.values.push_back(*value);
  }
  for (const auto& [name, opt] : options_) {
    if (opt.required && opt.values.empty()) {
      return InvalidArgument("--" + name + " is required (" + opt.help + ")");
    }
  }
  return Status::Ok();
}

std::string CliArgs::Usage() const {
  std::string out = "usage: tessera " + command_ + " [options]\n\noptions:\n";
  for (const auto& name : order_) {
    const Option& opt = options_.at(name);
    std::string left = "  --" + name;
    if (opt.kind != Kind::kFlag) left += " VALUE";
    if (left.size() < 26) left.resize(26, ' ');
    out += left + " " + opt.help;
    if (opt.required) out += " (required)";
    if (opt.default_value) out += " (default " + *opt.default_value + ")";
    out += "\n";
  }
  return out;
}

bool CliArgs::Has(const std::string& name) const {
  auto it = options_.find(name);
  return it != options_.end() && (!it->second.values.empty() || it->second.default_value);
}

std::string CliArgs::GetString(const std::string& name) const {
  const Option& opt = options_.at(name);
  if (!opt.values.empty()) return opt.values.back();
  return opt.default_value.value_or("");
}

int64_t CliArgs::GetInt(const std::string& name) const {
  int64_t v = 0;
  ParseInt64(GetString(name), &v);
  return v;
}

double CliArgs::GetDouble(const std::string& name) const {
  double v = 0;
  ParseDouble(GetString(name), &v);
  return v;
}

bool CliArgs::GetFlag(const std::string& name) const {
  return !options_.at(name).values.empty();
}

std::vector<std::string> CliArgs::GetList(const std::string& name) const {
  return options_.at(name).values;
}

int ReportError(const std::string& command, const Status& status) {
  std::fprintf(stderr, "tessera %s: %s\n", command.c_str(), status.message().c_str());
  return status.code() == ErrorCode::kInvalidArgument ? 2 : 1;
}

void AddPlacementOptions(CliArgs& args, const std::string& placement_help) {
  args.AddString("placement", placement_help, false, "cpu");
  args.AddInt("npu-layers",
              "run the first N decoder layers on the NPU (xdna backend), the rest and the LM "
              "head on the CPU; the same as --placement xdna:N,cpu");
  args.AddDouble("npu-percent", "run this percentage of the layers on the NPU (0-100)");
  args.AddString("npu-device",
                 "the NPU device for xdna layers: xrt (default) or fake:xdna1 / fake:xdna2 (the "
                 "NPU program's CPU reference kernels; no NPU executes anything)");
  args.AddString(
      "cpu-isa",
      "the cpu backend's kernel family: scalar, avx2, avx2vnni, avx512 or avx512amx "
      "(default: the best this CPU runs; one it lacks is refused, naming those it runs)");
}

void AddSamplingOptions(CliArgs& args) {
  args.AddDouble("temperature", "0..2, 0 = greedy (default: generation_config.json, else greedy)");
  args.AddInt("top-k", ">= 0, 0 = off");
  args.AddDouble("top-p", "(0, 1], 1 = off");
  args.AddDouble("min-p", "0..1, 0 = off");
  args.AddDouble("repetition-penalty", "0.1..2, 1 = off");
  args.AddDouble("presence-penalty", "-2..2, 0 = off");
  args.AddDouble("frequency-penalty", "-2..2, 0 = off");
  args.AddInt("seed", "sampling seed, 0..2^63-1 (default: random, printed)");
}

Expected<SamplingParams> SamplingFromArgs(const CliArgs& args) {
  SamplingParams all;
  // Sets one flag's field in `p` when the flag was given.
  using Setter = void (*)(const CliArgs&, SamplingParams*);
  struct Flag {
    const char* name;
    Setter set;
  };
  static constexpr Flag kFlags[] = {
      {"temperature",
       [](const CliArgs& a, SamplingParams* p) { p->temperature = a.GetDouble("temperature"); }},
      {"top-k", [](const CliArgs& a, SamplingParams* p) { p->top_k = a.GetInt("top-k"); }},
      {"top-p", [](const CliArgs& a, SamplingParams* p) { p->top_p = a.GetDouble("top-p"); }},
      {"min-p", [](const CliArgs& a, SamplingParams* p) { p->min_p = a.GetDouble("min-p"); }},
      {"repetition-penalty",
       [](const CliArgs& a, SamplingParams* p) {
         p->repetition_penalty = a.GetDouble("repetition-penalty");
       }},
      {"presence-penalty",
       [](const CliArgs& a, SamplingParams* p) {
         p->presence_penalty = a.GetDouble("presence-penalty");
       }},
      {"frequency-penalty",
       [](const CliArgs& a, SamplingParams* p) {
         p->frequency_penalty = a.GetDouble("frequency-penalty");
       }},
      {"seed", [](const CliArgs& a, SamplingParams* p) { p->seed = a.GetInt("seed"); }},
  };
  for (const Flag& f : kFlags) {
    if (!args.Has(f.name)) continue;
    SamplingParams alone;
    f.set(args, &alone);
    if (auto checked = ResolveSamplingParams(alone, SamplingDefaults{}); !checked) {
      return checked.status().WithContext("--" + std::string(f.name));
    }
    f.set(args, &all);
  }
  return all;
}

Expected<NpuOptions> NpuOptionsFromArgs(const CliArgs& args) {
  NpuOptions npu;
  if (args.Has("npu-device")) npu.device = args.GetString("npu-device");
  TS_ASSIGN_OR_RETURN(NpuDeviceChoice device, ProgramNpuDevice(npu.device));
  npu.make_device = std::move(device.make);
  if (args.Has("npu-queue")) npu.queue = static_cast<int>(args.GetInt("npu-queue"));
  if (args.Has("npu-queue-timeout-ms")) npu.queue_timeout_ms = args.GetInt("npu-queue-timeout-ms");
  return npu;
}

Expected<std::optional<CpuIsa>> CpuIsaFromArgs(const CliArgs& args) {
  if (!args.Has("cpu-isa")) return std::optional<CpuIsa>();
  auto isa = ParseCpuIsa(args.GetString("cpu-isa"));
  if (!isa) return isa.status().WithContext("--cpu-isa");
  // Refused here, before anything loads, rather than by the backend after the weights.
  if (!CpuSupports(*isa)) return InvalidArgument(CpuIsaUnavailableMessage(*isa));
  return std::optional<CpuIsa>(*isa);
}

Expected<std::string> PlacementFromArgs(const CliArgs& args) {
  const bool layers = args.Has("npu-layers"), percent = args.Has("npu-percent");
  if (!layers && !percent) return args.GetString("placement");
  // Has() is true for a flag's default too, so --placement counts only when it differs.
  if (args.GetString("placement") != "cpu") {
    return InvalidArgument("give --placement or --npu-layers/--npu-percent, not both");
  }
  return NpuPlacementSpec(layers ? args.GetInt("npu-layers") : -1,
                          percent ? args.GetDouble("npu-percent") : -1);
}

}  // namespace tessera
