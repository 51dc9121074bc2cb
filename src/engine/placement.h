// Placement: which backend runs which decoder layers, decided once at load and logged.
//
//   // first 3 layers on one reference instance, the rest (and the LM head) on another:
//   TS_ASSIGN_OR_RETURN(Placement p, ParsePlacement("reference:3,reference", 5));
//   p.stages[1].layers  // {3, 5}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "base/status.h"

namespace tessera {

struct PlacementStage {
  std::string backend;  // backend kind: "reference" (more kinds plug in here)
  LayerRange layers;
};

struct Placement {
  std::vector<PlacementStage> stages;  // contiguous, in layer order, covering every layer
  // The final norm + LM head run on the last stage's backend.
  std::string Describe() const;  // "layers 0-2 -> reference#0, layers 3-4 + head -> reference#1"
  bool OnlyOn(std::string_view kind) const;  // every stage runs on backend `kind`
};

// "kind[:count],kind[:count],...,kind": counts are layer counts, or percentages of the model's
// layers ("xdna:50%", rounded, at least one layer); the last stage may omit its count and
// takes the remaining layers, or, when there are none left, runs the LM head alone
// ("xdna:100%,cpu"). Every other stage needs at least one layer, and every kind must be one of
// AvailableBackendKinds().
Expected<Placement> ParsePlacement(std::string_view spec, int64_t num_layers);

// What ParsePlacement checks without a model: the syntax, the counts and the backend kinds.
// The layer counts are checked against a model only by ParsePlacement.
Status CheckPlacementSpec(std::string_view spec);

// The placement `--npu-layers N` (npu_percent < 0) or `--npu-percent P` (npu_layers < 0) ask
// for: the first layers on the xdna backend, the rest and the LM head on the cpu backend.
Expected<std::string> NpuPlacementSpec(int64_t npu_layers, double npu_percent);

// The backend kinds this build can create.
std::vector<std::string> AvailableBackendKinds();
Expected<std::unique_ptr<Backend>> CreateBackend(const std::string& kind,
                                                 const BackendOptions& options = {});

}  // namespace tessera
