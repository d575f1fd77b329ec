#pragma once
// Internal: allocation-free scalar kernel of the polar rotation, compiled for the CPU (inlined into
// the local step) and for the CUDA backend's local step (gpu/local_step.cu), which therefore
// repeats the CPU's operations exactly.
#include <math.h>

#ifdef __CUDACC__
#define XPD_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#else
#define XPD_HOST_DEVICE_INLINE [[gnu::always_inline]] inline
#endif

namespace xpd::detail {

/// Cofactor matrix c = det(X) X⁻ᵀ of the column-major 3×3 x: columns c_i = x_{i+1} × x_{i+2}.
/// T = double or a lane vector: the scalar and four-lane Newton kernels share these operations, in
/// this order, which keeps them bitwise identical.
template <class T>
XPD_HOST_DEVICE_INLINE void cofactor(const T* x, T* c) {
  c[0] = x[4] * x[8] - x[5] * x[7];
  c[1] = x[5] * x[6] - x[3] * x[8];
  c[2] = x[3] * x[7] - x[4] * x[6];
  c[3] = x[7] * x[2] - x[8] * x[1];
  c[4] = x[8] * x[0] - x[6] * x[2];
  c[5] = x[6] * x[1] - x[7] * x[0];
  c[6] = x[1] * x[5] - x[2] * x[4];
  c[7] = x[2] * x[3] - x[0] * x[5];
  c[8] = x[0] * x[4] - x[1] * x[3];
}

/// Polar rotation of the column-major 3×3 `f` into `r` by Newton's iteration
/// X ← (ζX + ζ⁻¹X⁻ᵀ)/2 (Higham 1986), Frobenius-norm scaling ζ on the first step only.
/// Returns false (r undefined) when F is not safely orientation preserving
/// (det F ≤ 1e-6 ||F||³) or the iteration did not converge; the caller then uses the SVD.
/// Stops once ||X_{k+1} − X_k||_F < 1e-7; by quadratic convergence the error of the returned
/// iterate is then ≈ ||X_{k+1} − X_k||² / 2 < 1e-14.
XPD_HOST_DEVICE_INLINE bool polar_rotation_newton(const double* f, double* r) {
  double x[9];
  double nx = 0.0;
  for (int i = 0; i < 9; ++i) {
    x[i] = f[i];
    nx += f[i] * f[i];
  }
  {
    const double det =
        x[0] * (x[4] * x[8] - x[5] * x[7]) + x[1] * (x[5] * x[6] - x[3] * x[8]) + x[2] * (x[3] * x[7] - x[4] * x[6]);
    if (!(det > 1e-6 * nx * sqrt(nx))) return false;
  }
  for (int it = 0; it < 40; ++it) {
    // Cofactor matrix c = det(X) X⁻ᵀ, columns c_i = x_{i+1} × x_{i+2}.
    double c[9];
    cofactor(x, c);
    const double det = x[0] * c[0] + x[1] * c[1] + x[2] * c[2];
    const double inv = 1.0 / det;
    double a = 0.5, b = 0.5 * inv;
    if (it == 0) {
      double nc = 0.0;
      for (int i = 0; i < 9; ++i) nc += c[i] * c[i];
      const double zeta = sqrt(sqrt(nc * inv * inv / nx));  // sqrt(||X⁻¹|| / ||X||)
      a = 0.5 * zeta;
      b = 0.5 * inv / zeta;
    }
    double d2 = 0.0;
    for (int i = 0; i < 9; ++i) {
      const double xn = a * x[i] + b * c[i];
      const double d = xn - x[i];
      d2 += d * d;
      x[i] = xn;
    }
    if (d2 < 1e-14) {
      for (int i = 0; i < 9; ++i) r[i] = x[i];
      return true;
    }
  }
  return false;
}

}  // namespace xpd::detail
