#include "engine/placement.h"

#include <algorithm>
#include <charconv>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"
#include "backend/xdna/xdna_backend.h"

namespace tessera {

bool Placement::OnlyOn(std::string_view kind) const {
  return std::all_of(stages.begin(), stages.end(),
                     [&](const PlacementStage& s) { return s.backend == kind; });
}

std::string Placement::Describe() const {
  std::string out;
  for (size_t i = 0; i < stages.size(); ++i) {
    const PlacementStage& s = stages[i];
    if (i) out += ", ";
    if (s.layers.size() == 0) {
      out += "head";  // a head-only last stage
    } else {
      out += "layers " + std::to_string(s.layers.begin) + "-" + std::to_string(s.layers.end - 1);
      if (i + 1 == stages.size()) out += " + head";
    }
    out += " -> " + s.backend + "#" + std::to_string(i);
  }
  return out;
}

std::vector<std::string> AvailableBackendKinds() {
  return {"reference", "cpu", "xdna"};
}

namespace {

// "reference, cpu": for messages naming what this build offers.
std::string KnownKindsText() {
  std::string known;
  for (const auto& k : AvailableBackendKinds()) known += (known.empty() ? "" : ", ") + k;
  return known;
}

bool IsKnownKind(std::string_view kind) {
  const auto kinds = AvailableBackendKinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

struct StageSpec {
  std::string_view kind;
  int64_t count = -1;    // -1: the remaining layers (the last stage only)
  bool percent = false;  // count is a percentage of the model's layers
};

// The stages as written, with their syntax, counts and backend kinds checked: all that needs
// no model.
Expected<std::vector<StageSpec>> ParseStages(std::string_view spec) {
  std::vector<StageSpec> stages;
  size_t start = 0;
  while (true) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(start, comma - start);
    const bool last = comma == spec.size();
    StageSpec stage{item};
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      stage.kind = item.substr(0, colon);
      std::string_view num = item.substr(colon + 1);
      if (!num.empty() && num.back() == '%') {
        stage.percent = true;
        num.remove_suffix(1);
      }
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), stage.count);
      if (ec != std::errc() || ptr != num.data() + num.size() || stage.count <= 0 ||
          (stage.percent && stage.count > 100)) {
        return InvalidArgument("placement '" + std::string(item) +
                               "': the layer count must be a positive integer (or a percentage "
                               "from 1% to 100%)");
      }
    }
    if (stage.kind.empty())
      return InvalidArgument("placement '" + std::string(spec) + "' has an empty stage");
    if (!IsKnownKind(stage.kind)) {
      return InvalidArgument("placement '" + std::string(spec) + "': unknown backend '" +
                             std::string(stage.kind) + "'; available: " + KnownKindsText());
    }
    if (stage.count < 0 && !last) {
      return InvalidArgument("placement stage '" + std::string(item) +
                             "' needs a layer count (kind:count); only the last may omit it");
    }
    stages.push_back(stage);
    if (last) return stages;
    start = comma + 1;
  }
}

}  // namespace

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& kind,
                                                 const BackendOptions& options) {
  if (kind == "reference") {
    if (options.weights != WeightFormat::kAuto && options.weights != WeightFormat::kF32) {
      return InvalidArgument("the reference backend computes in fp32 only; use --dtype f32");
    }
    return MakeReferenceBackend();
  }
  if (kind == "cpu") return MakeCpuBackend(options);
  if (kind == "xdna") return MakeXdnaBackend(options);
  return InvalidArgument("unknown backend '" + kind + "'; available: " + KnownKindsText());
}

Expected<std::string> NpuPlacementSpec(int64_t npu_layers, double npu_percent) {
  if (npu_layers >= 0 && npu_percent >= 0) {
    return InvalidArgument("give --npu-layers or --npu-percent, not both");
  }
  if (npu_percent >= 0) {
    if (npu_percent > 100 ||
        npu_percent != static_cast<double>(static_cast<int64_t>(npu_percent))) {
      return InvalidArgument("--npu-percent must be a whole number from 0 to 100");
    }
    if (npu_percent == 0) return std::string("cpu");
    return "xdna:" + std::to_string(static_cast<int64_t>(npu_percent)) + "%,cpu";
  }
  if (npu_layers < 0) return InvalidArgument("--npu-layers must be >= 0");
  if (npu_layers == 0) return std::string("cpu");
  return "xdna:" + std::to_string(npu_layers) + ",cpu";
}

Status CheckPlacementSpec(std::string_view spec) {
  return ParseStages(spec).status();
}

Expected<Placement> ParsePlacement(std::string_view spec, int64_t num_layers) {
  if (num_layers <= 0) return InvalidArgument("the model has no layers to place");
  TS_ASSIGN_OR_RETURN(std::vector<StageSpec> stages, ParseStages(spec));
  Placement p;
  int64_t next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageSpec& stage = stages[i];
    int64_t count = stage.count < 0 ? num_layers - next : stage.count;
    // A percentage rounds to the nearest layer count, at least one.
    if (stage.percent) count = std::max<int64_t>(1, (num_layers * stage.count + 50) / 100);
    // The last stage, when its count is left out, may be left with no layers: it then runs the
    // LM head alone (every layer on the stages before it).
    const bool head_only = stage.count < 0 && count == 0 && i > 0;
    if (head_only) {
      p.stages.push_back({std::string(stage.kind), {next, next}});
      continue;
    }
    if (count <= 0 || next + count > num_layers) {
      return InvalidArgument("placement '" + std::string(spec) + "' places more than the model's " +
                             std::to_string(num_layers) + " layers");
    }
    p.stages.push_back({std::string(stage.kind), {next, next + count}});
    next += count;
  }
  if (next != num_layers) {
    return InvalidArgument("placement '" + std::string(spec) + "' covers " + std::to_string(next) +
                           " of the model's " + std::to_string(num_layers) + " layers");
  }
  return p;
}

}  // namespace tessera
