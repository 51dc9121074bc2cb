// The worker's time slices between models (worker/step_slicer.h), on made-up step costs: no
// wall clock, so every figure here is exact.
#include "worker/step_slicer.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera::worker {
namespace {

StepCost Measured(double step_ms, double ms_per_row) {
  return {step_ms, ms_per_row, true};
}

TEST(StepCost, AveragesMoveByTheSmoothingAndEmptyStepsAreIgnored) {
  StepCost c;
  c.Record(0, 5.0);
  EXPECT_FALSE(c.measured);
  c.Record(10, 2.0);  // the first measurement is taken as it is
  EXPECT_TRUE(c.measured);
  EXPECT_DOUBLE_EQ(c.step_ms, 2.0);
  EXPECT_DOUBLE_EQ(c.ms_per_row, 0.2);
  c.Record(1, 1.0);
  EXPECT_DOUBLE_EQ(c.step_ms, 2.0 + StepCost::kSmoothing * (1.0 - 2.0));
  EXPECT_DOUBLE_EQ(c.ms_per_row, 0.2 + StepCost::kSmoothing * (1.0 - 0.2));
}

TEST(StepRowLimit, NoLimitUnlessAnotherModelWithWorkIsDecoding) {
  std::vector<ModelLoad> loads = {{true, true, Measured(10, 0.1)}};
  EXPECT_EQ(StepRowLimit(0, loads), std::nullopt);  // alone, decoding or not
  loads.push_back({true, false, Measured(1, 0.01)});
  EXPECT_EQ(StepRowLimit(0, loads), std::nullopt);  // the other only runs prompts
  loads[1] = {false, true, Measured(1, 0.01)};
  EXPECT_EQ(StepRowLimit(0, loads), std::nullopt);  // nothing to run (its stream ended)
  EXPECT_EQ(StepRowLimit(1, loads), 1000);          // model 0 decodes: 10 ms / 0.01 ms a row
}

TEST(StepRowLimit, TheSliceIsTheShortestStepOfTheDecodingModels) {
  std::vector<ModelLoad> loads = {{true, false, Measured(20, 0.0625)},
                                  {true, true, Measured(3, 0.5)},
                                  {true, true, Measured(1.5, 0.75)}};
  EXPECT_EQ(StepRowLimit(0, loads), 24);  // 1.5 ms (the shorter) / 0.0625 ms a row
  EXPECT_EQ(StepRowLimit(1, loads), 3);   // 1.5 / 0.5
  EXPECT_EQ(StepRowLimit(2, loads), 4);   // 3 / 0.75: model 0 is not decoding
  loads[2].cost = Measured(1.4, 0.75);
  EXPECT_EQ(StepRowLimit(1, loads), 3);  // 1.4 / 0.5 = 2.8, rounded up
}

TEST(StepRowLimit, AtLeastOneRowAndOneForAModelNotMeasuredYet) {
  std::vector<ModelLoad> loads = {{true, true, Measured(0.1, 0.01)}, {true, true, StepCost{}}};
  EXPECT_EQ(StepRowLimit(1, loads), 1);  // unmeasured: the smallest step first
  loads[1].cost = Measured(50, 5.0);
  EXPECT_EQ(StepRowLimit(1, loads), 1);     // 0.1 ms fits no row: still the minimum
  EXPECT_EQ(StepRowLimit(0, loads), 5000);  // 50 ms / 0.01 ms a row
  loads[1].cost = StepCost{};
  EXPECT_EQ(StepRowLimit(0, loads), 1);  // the other not measured: a zero slice
}

// A bulk model (fixed 0.3 ms a step, 0.02 ms a row, up to 300 rows of prompt work) beside a
// streaming model (0.5 ms a step): the bulk model's steps grow from the minimum to about the
// stream's step and stay there, so the stream's next token waits about one of its own steps;
// when the stream ends the bulk model takes whole steps again.
TEST(StepRowLimit, ABulkModelsStepsSettleAtTheStreamsStepTime) {
  auto bulk_ms = [](int64_t rows) { return 0.3 + 0.02 * static_cast<double>(rows); };
  std::vector<ModelLoad> loads = {{true, false, StepCost{}}, {true, true, StepCost{}}};
  double last_bulk_ms = 0;
  for (int round = 0; round < 40; ++round) {
    const std::optional<int64_t> limit = StepRowLimit(0, loads);
    ASSERT_TRUE(limit);
    const int64_t rows = std::min<int64_t>(*limit, 300);
    last_bulk_ms = bulk_ms(rows);
    loads[0].cost.Record(rows, last_bulk_ms);
    loads[1].cost.Record(1, 0.5);
  }
  // The fixed point: 0.3 + 0.02 r = 0.5, r = 10 (rounding up may add a row).
  EXPECT_GE(last_bulk_ms, 0.5);
  EXPECT_LE(last_bulk_ms, 0.5 + 0.02);
  loads[1].has_work = false;
  EXPECT_EQ(StepRowLimit(0, loads), std::nullopt);
}

}  // namespace
}  // namespace tessera::worker
