#include "base/status.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

Expected<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Expected<int> Quarter(int x) {
  TS_ASSIGN_OR_RETURN(int h, Half(x));
  TS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = NotFound("no such tensor");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.WithContext("model.safetensors").message(), "model.safetensors: no such tensor");
}

TEST(Expected, PropagatesErrors) {
  auto ok = Quarter(8);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(), "odd: 3");
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
}

TEST(Expected, OkStatusBecomesInternalError) {
  Expected<int> e(Status::Ok());
  EXPECT_FALSE(e.has_value());
  EXPECT_EQ(e.status().code(), ErrorCode::kInternal);
}

}  // namespace
}  // namespace tessera
