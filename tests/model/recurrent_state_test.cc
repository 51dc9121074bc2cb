// RecurrentState::CopyTo: a sequence's state copied into another slot from the live state or a
// snapshot; a position it does not hold is refused and leaves the target as it was.
#include "model/recurrent_state.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(RecurrentState, CopyToTakesTheLiveStateOrASnapshotAndRefusesOtherPositions) {
  RecurrentState st;
  ASSERT_TRUE(st.Allocate(/*slots=*/3, /*layers=*/2, /*floats_per_layer=*/4, /*snapshots=*/2).ok());
  // Slot 0: state 1.0 at position 5 (snapshotted), then 2.0 live at position 9.
  ASSERT_TRUE(st.Prepare(0, 0).ok());
  std::fill_n(st.Live(0, 0), 8, 1.0f);
  st.Finish(0, 5, /*snapshot=*/true);
  std::fill_n(st.Live(0, 0), 8, 2.0f);
  st.Finish(0, 9, /*snapshot=*/false);
  // Slot 2 holds its own state 7.0 at position 3.
  ASSERT_TRUE(st.Prepare(2, 0).ok());
  std::fill_n(st.Live(2, 0), 8, 7.0f);
  st.Finish(2, 3, /*snapshot=*/true);

  ASSERT_TRUE(st.CopyTo(0, 1, 9).ok());  // the live state
  EXPECT_EQ(st.position(1), 9);
  EXPECT_EQ(st.Live(1, 1)[3], 2.0f);
  ASSERT_TRUE(st.CopyTo(0, 1, 5).ok());  // the snapshot
  EXPECT_EQ(st.position(1), 5);
  EXPECT_EQ(st.Live(1, 0)[0], 1.0f);
  ASSERT_TRUE(st.CopyTo(0, 1, 0).ok());  // the start: zeros
  EXPECT_EQ(st.Live(1, 0)[0], 0.0f);

  EXPECT_FALSE(st.CopyTo(0, 2, 7).ok());  // neither live nor saved at 7
  EXPECT_EQ(st.position(2), 3);           // slot 2 untouched, its snapshot still there
  EXPECT_EQ(st.Live(2, 1)[2], 7.0f);
  EXPECT_EQ(st.Resumable(2, 3), 3);
  EXPECT_FALSE(st.CopyTo(0, 0, 9).ok());  // onto itself
}

}  // namespace
}  // namespace tessera
