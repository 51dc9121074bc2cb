// exp(x) computed with nothing but IEEE-754 double additions, multiplications and exact
// scalings, so it returns the same bits on every platform. The C library's std::exp is only
// "close to" exp and differs between libm versions in the last bit, which would let two
// machines draw different tokens from the same seed. Accurate to about one ulp.
//
//   double w = PortableExp(logit - max_logit);  // PortableExp(0.0) == 1.0 exactly
#pragma once

namespace tessera {

// NaN -> NaN; x > 709.78 -> +inf; x < -745.2 -> 0.
double PortableExp(double x);

}  // namespace tessera
