#include "engine/placement.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(Placement, ParsesStagesAndTheRemainder) {
  auto p = ParsePlacement("reference:3,reference", 5);
  ASSERT_TRUE(p) << p.status().message();
  ASSERT_EQ(p->stages.size(), 2u);
  EXPECT_EQ(p->stages[0].layers.begin, 0);
  EXPECT_EQ(p->stages[0].layers.end, 3);
  EXPECT_EQ(p->stages[1].layers.begin, 3);
  EXPECT_EQ(p->stages[1].layers.end, 5);
  EXPECT_EQ(p->Describe(), "layers 0-2 -> reference#0, layers 3-4 + head -> reference#1");
}

TEST(Placement, RefusesBadSpecs) {
  for (const char* spec : {"reference:6", "reference:0,reference", "reference,reference",
                           "reference:2,reference:2", "", "reference:x", "reference:-1"}) {
    auto p = ParsePlacement(spec, 5);
    EXPECT_FALSE(p) << spec;
    if (!p) {
      EXPECT_EQ(p.status().message().find('\n'), std::string::npos);
    }
  }
  EXPECT_FALSE(CreateBackend("gpu"));
}

TEST(Placement, RefusesUnknownBackendsNamingTheAvailableOnes) {
  for (const char* spec : {"bogus", "gpu:2,reference", "reference:2,gpu"}) {
    auto p = ParsePlacement(spec, 5);
    ASSERT_FALSE(p) << spec;
    EXPECT_NE(p.status().message().find("unknown backend"), std::string::npos);
    EXPECT_NE(p.status().message().find("available: reference, cpu"), std::string::npos);
  }
}

// Without a model: the syntax and the kinds, not the layer counts.
TEST(Placement, CheckSpecNeedsNoModel) {
  for (const char* spec : {"cpu", "reference", "reference:3,cpu", "cpu:1000"}) {
    EXPECT_TRUE(CheckPlacementSpec(spec).ok()) << spec;
  }
  for (const char* spec : {"", "bogus", "cpu,cpu", "cpu:0", "cpu:x", "cpu:2,", "reference:1,gpu"}) {
    Status st = CheckPlacementSpec(spec);
    EXPECT_FALSE(st.ok()) << spec;
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << spec;
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << spec;
  }
}

}  // namespace
}  // namespace tessera
