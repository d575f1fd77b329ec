#pragma once
// Internal: the four-lane polar kernel of the local step (the scalar one, shared with the CUDA
// backend, is in polar_newton.hpp).
#include <cmath>

#include "polar_newton.hpp"

namespace xpd::detail {

/// Four lanes of doubles (GCC/Clang vector extension). Compiled as one AVX register inside a
/// function with target("avx2"), as two SSE2 registers otherwise.
typedef double Lanes4 __attribute__((vector_size(32)));
typedef long long Mask4 __attribute__((vector_size(32)));

/// polar_rotation_newton on four matrices at once: `f[i]` holds entry i (column-major) of the four
/// matrices, `r[i]` receives the rotations. Lane l follows exactly the scalar iteration of
/// polar_rotation_newton (same operations in the same order, a lane is frozen once it meets the
/// scalar stopping test), so each lane's result is bitwise identical to the scalar kernel's.
/// Returns a bit mask of the lanes that succeeded; the others (r undefined) need the SVD fallback.
[[gnu::always_inline]] inline int polar_rotation_newton4(const Lanes4 (&f)[9], Lanes4 (&r)[9]) {
  Lanes4 x[9];
  Lanes4 nx = f[0] * f[0];
  x[0] = f[0];
  for (int i = 1; i < 9; ++i) {
    x[i] = f[i];
    nx += f[i] * f[i];
  }
  int ok = 0;
  {
    const Lanes4 det =
        x[0] * (x[4] * x[8] - x[5] * x[7]) + x[1] * (x[5] * x[6] - x[3] * x[8]) + x[2] * (x[3] * x[7] - x[4] * x[6]);
    for (int l = 0; l < 4; ++l)
      if (det[l] > 1e-6 * nx[l] * std::sqrt(nx[l])) ok |= 1 << l;
  }
  if (!ok) return 0;
  // Lanes that fail the test run on the identity (harmless, finite) and are reported as failed.
  Mask4 done = Mask4{ok & 1 ? 0 : -1, ok & 2 ? 0 : -1, ok & 4 ? 0 : -1, ok & 8 ? 0 : -1};
  for (int l = 0; l < 4; ++l) {
    if (!(ok >> l & 1)) {
      for (int i = 0; i < 9; ++i) x[i][l] = (i % 4 == 0) ? 1.0 : 0.0;
      nx[l] = 3.0;
    }
  }
  const Mask4 failed = done;
  for (int it = 0; it < 40; ++it) {
    Lanes4 c[9];
    cofactor(x, c);
    const Lanes4 det = x[0] * c[0] + x[1] * c[1] + x[2] * c[2];
    const Lanes4 inv = 1.0 / det;
    Lanes4 a, b;
    if (it == 0) {
      Lanes4 nc = c[0] * c[0];
      for (int i = 1; i < 9; ++i) nc += c[i] * c[i];
      const Lanes4 q = nc * inv * inv / nx;
      const Lanes4 zeta{std::sqrt(std::sqrt(q[0])), std::sqrt(std::sqrt(q[1])), std::sqrt(std::sqrt(q[2])),
                        std::sqrt(std::sqrt(q[3]))};  // sqrt(||X⁻¹|| / ||X||)
      a = 0.5 * zeta;
      b = 0.5 * inv / zeta;
    } else {
      a = Lanes4{0.5, 0.5, 0.5, 0.5};
      b = 0.5 * inv;
    }
    Lanes4 d2 = Lanes4{0.0, 0.0, 0.0, 0.0};
    for (int i = 0; i < 9; ++i) {
      const Lanes4 xn = a * x[i] + b * c[i];
      const Lanes4 d = xn - x[i];
      d2 += d * d;
      x[i] = done ? x[i] : xn;  // converged lanes keep their returned iterate
    }
    done |= d2 < 1e-14;
    bool all = true;
    for (int l = 0; l < 4; ++l) all = all && done[l] != 0;
    if (all) break;
  }
  for (int i = 0; i < 9; ++i) r[i] = x[i];
  int success = 0;
  for (int l = 0; l < 4; ++l)
    if (done[l] != 0 && failed[l] == 0) success |= 1 << l;
  return success;
}

}  // namespace xpd::detail
