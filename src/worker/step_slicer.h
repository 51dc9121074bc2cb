// How the worker shares its one thread between resident models (docs/server.md, "Scheduling
// and models"): round robin, one scheduler step per model with work per round, and while
// another model is decoding (a client waits for its next token), a model's step is cut to take
// about as long as that model's step: its rows are limited to what its measured cost per row
// fits in that time. A streaming model's next token then waits about one of its own steps per
// other model, however large the other models' jobs are; a model's step is never cut below its
// decode rows and one small prompt chunk (Scheduler::Step). With nobody else decoding, a step
// takes the scheduler's whole budget (prefill throughput stays what it was).
//
// The policy is a function of numbers the worker measures and reports (each model's StepCost),
// so it is tested with made-up costs (tests/worker/step_slicer_test.cc).
//
//   for each resident model i with work, in turn:
//     std::optional<int64_t> rows = StepRowLimit(i, loads);   // nullopt: no limit
//     sched.Step(rows);  loads[i].cost.Record(sched.last_step_rows(), measured_ms);
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace tessera::worker {

// A model's measured step cost: exponential moving averages, so recent steps count most and
// one noisy step does not decide the next slice.
struct StepCost {
  static constexpr double kSmoothing = 0.3;  // how much a new measurement moves an average
  double step_ms = 0;                        // wall time of a step
  double ms_per_row = 0;                     // wall time per row run (its fixed costs included)
  bool measured = false;
  // A step ran `rows` rows (tokens) in `ms` milliseconds; a step that ran nothing is ignored.
  void Record(int64_t rows, double ms);
};

// One resident model as the policy sees it before its step.
struct ModelLoad {
  bool has_work = false;  // its scheduler has sequences running or waiting
  bool decoding = false;  // a running sequence of it is past its prompt (a token is awaited)
  StepCost cost{};
};

// The most rows model `index`'s next step may run: nullopt (no limit) unless another model with
// work is decoding; then what the model's cost per row fits in the shortest recent step of such
// a model (rounded up), at least 1 (the scheduler still runs every decode row and one small
// prompt chunk).
// A model not measured yet gets 1: its first steps are small and grow as its cost is learnt.
std::optional<int64_t> StepRowLimit(size_t index, std::span<const ModelLoad> loads);

}  // namespace tessera::worker
