#include "engine/placement.h"

#include <algorithm>
#include <charconv>

#include "backend/cpu/cpu_backend.h"
#include "backend/reference/reference_backend.h"

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
    out += "layers " + std::to_string(s.layers.begin) + "-" + std::to_string(s.layers.end - 1);
    if (i + 1 == stages.size()) out += " + head";
    out += " -> " + s.backend + "#" + std::to_string(i);
  }
  return out;
}

std::vector<std::string> AvailableBackendKinds() {
  return {"reference", "cpu"};
}

Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& kind,
                                                 const BackendOptions& options) {
  if (kind == "reference") {
    if (options.weights != WeightFormat::kAuto && options.weights != WeightFormat::kF32) {
      return InvalidArgument("the reference backend computes in fp32 only; use --dtype f32");
    }
    return MakeReferenceBackend();
  }
  if (kind == "cpu") return MakeCpuBackend(options);
  std::string known;
  for (const auto& k : AvailableBackendKinds()) known += (known.empty() ? "" : ", ") + k;
  return InvalidArgument("unknown backend '" + kind + "'; available: " + known);
}

Expected<Placement> ParsePlacement(std::string_view spec, int64_t num_layers) {
  if (num_layers <= 0) return InvalidArgument("the model has no layers to place");
  Placement p;
  int64_t next = 0;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view item = spec.substr(start, comma - start);
    bool last = comma == spec.size();
    std::string_view kind = item;
    int64_t count = -1;
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      kind = item.substr(0, colon);
      std::string_view num = item.substr(colon + 1);
      auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), count);
      if (ec != std::errc() || ptr != num.data() + num.size() || count <= 0) {
        return InvalidArgument("placement '" + std::string(item) +
                               "': the layer count must be a positive integer");
      }
    }
    if (kind.empty())
      return InvalidArgument("placement '" + std::string(spec) + "' has an empty stage");
    if (count < 0) {
      if (!last) {
        return InvalidArgument("placement stage '" + std::string(item) +
                               "' needs a layer count (kind:count); only the last may omit it");
      }
      count = num_layers - next;
    }
    if (count <= 0 || next + count > num_layers) {
      return InvalidArgument("placement '" + std::string(spec) + "' places more than the model's " +
                             std::to_string(num_layers) + " layers");
    }
    p.stages.push_back({std::string(kind), {next, next + count}});
    next += count;
    start = comma + 1;
    if (last) break;
  }
  if (next != num_layers) {
    return InvalidArgument("placement '" + std::string(spec) + "' covers " + std::to_string(next) +
                           " of the model's " + std::to_string(num_layers) + " layers");
  }
  return p;
}

}  // namespace tessera
