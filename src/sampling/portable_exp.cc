#include "sampling/portable_exp.h"

#include <array>
#include <cmath>
#include <limits>

namespace tessera {
namespace {

// ln 2 split Cody-Waite style (the fdlibm constants): the high part has enough trailing zero
// bits that k * kLn2High is exact for every k we can reach, so the reduction loses nothing.
constexpr double kLn2High = 6.93147180369123816490e-01;
constexpr double kLn2Low = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;

// Past these, exp overflows to +inf or underflows to zero in double precision.
constexpr double kOverflowAbove = 709.782712893383973096;
constexpr double kUnderflowBelow = -745.133219101941108420;

// 1/n! for n = 0..13. After reduction |r| <= ln2/2, where the first dropped Taylor term,
// r^14/14!, is below 4e-18: smaller than half an ulp of the result.
constexpr int kDegree = 13;
constexpr std::array<double, kDegree + 1> MakeInverseFactorials() {
  std::array<double, kDegree + 1> c{};
  c[0] = 1.0;
  for (int n = 1; n <= kDegree; ++n) c[n] = c[n - 1] / n;
  return c;
}
constexpr std::array<double, kDegree + 1> kInverseFactorials = MakeInverseFactorials();

}  // namespace

double PortableExp(double x) {
  if (std::isnan(x)) return x;
  if (x > kOverflowAbove) return std::numeric_limits<double>::infinity();
  if (x < kUnderflowBelow) return 0.0;
  // x = k ln2 + r with k the nearest integer to x / ln2; floor is exact, so k is too.
  const double k = std::floor(x * kInvLn2 + 0.5);
  const double r = (x - k * kLn2High) - k * kLn2Low;
  double poly = kInverseFactorials[kDegree];
  for (int n = kDegree - 1; n >= 0; --n) poly = poly * r + kInverseFactorials[n];
  // Multiplying by 2^k only changes the exponent (or rounds once into the subnormals).
  return std::ldexp(poly, static_cast<int>(k));
}

}  // namespace tessera
