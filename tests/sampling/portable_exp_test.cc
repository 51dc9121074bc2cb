#include "sampling/portable_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tessera {
namespace {

TEST(PortableExpTest, ExactAndClosedFormValues) {
  EXPECT_EQ(PortableExp(0.0), 1.0);  // the max-logit token's weight must be exactly 1
  EXPECT_NEAR(PortableExp(1.0), 2.718281828459045, 4.5e-16);
  EXPECT_NEAR(PortableExp(-1.0), 0.36787944117144233, 1e-16);
  EXPECT_NEAR(PortableExp(0.6931471805599453), 2.0, 4.5e-16);  // ln 2
  EXPECT_NEAR(PortableExp(-0.6931471805599453), 0.5, 1e-16);
  EXPECT_NEAR(PortableExp(10.0), 22026.465794806718, 22026.0 * 4.5e-16);
}

TEST(PortableExpTest, AgreesWithLibmToAFewUlpsAcrossTheRange) {
  for (double x = -744.0; x <= 709.0; x += 0.0137) {
    const double expected = std::exp(x);
    const double got = PortableExp(x);
    // Below 2^-1022 the result is subnormal and only absolute accuracy is meaningful.
    const double tolerance = std::max(std::abs(expected) * 4.0 * 2.220446049250313e-16,
                                      4.0 * std::numeric_limits<double>::denorm_min());
    ASSERT_NEAR(got, expected, tolerance) << "x = " << x;
  }
}

TEST(PortableExpTest, EdgeInputs) {
  EXPECT_TRUE(std::isnan(PortableExp(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(PortableExp(710.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(PortableExp(std::numeric_limits<double>::infinity()),
            std::numeric_limits<double>::infinity());
  EXPECT_EQ(PortableExp(-746.0), 0.0);
  EXPECT_EQ(PortableExp(-std::numeric_limits<double>::infinity()), 0.0);
}

}  // namespace
}  // namespace tessera
