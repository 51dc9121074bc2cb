#include "worker/step_slicer.h"

#include <algorithm>
#include <cmath>

namespace tessera::worker {

void StepCost::Record(int64_t rows, double ms) {
  if (rows <= 0) return;
  const double per_row = ms / static_cast<double>(rows);
  if (!measured) {
    *this = {ms, per_row, true};
    return;
  }
  step_ms += kSmoothing * (ms - step_ms);
  ms_per_row += kSmoothing * (per_row - ms_per_row);
}

std::optional<int64_t> StepRowLimit(size_t index, std::span<const ModelLoad> loads) {
  // The slice: the shortest recent step of another model that is decoding.
  std::optional<double> slice_ms;
  for (size_t j = 0; j < loads.size(); ++j) {
    if (j == index || !loads[j].has_work || !loads[j].decoding) continue;
    const double ms = loads[j].cost.measured ? loads[j].cost.step_ms : 0.0;
    slice_ms = slice_ms ? std::min(*slice_ms, ms) : ms;
  }
  if (!slice_ms) return std::nullopt;
  const StepCost& own = loads[index].cost;
  if (!own.measured || own.ms_per_row <= 0) return 1;
  // Rounded up: from a small step (where fixed costs make the cost per row high) the next is
  // a little larger, so the steps grow to the slice instead of staying small.
  const double rows = std::ceil(*slice_ms / own.ms_per_row);
  return std::max<int64_t>(1, static_cast<int64_t>(std::min(rows, 1e9)));
}

}  // namespace tessera::worker
