#include "symmetric_kernel.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cstddef>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define XPD_SYMMETRIC_AVX2 1
#endif

namespace xpd::detail {

namespace {

// Slices of the columns accumulated apart. Fixed (not the thread count) so that the summation
// order, and with it the result, is the same whatever the number of threads; 8 keeps two to
// eight threads busy on slices of equal work.
constexpr int kSlices = 8;
// Below this order one slice: the buffers and the task cost more than the product.
constexpr int kParallelFrom = 256;

struct Columns {
  const double* x[3];
  double* y[3];  // the slice's buffer
};

// Columns [j0, j1) of the lower triangle into y: row i gets A(i, j) x_j, row j gets A(i, j) x_i.
void slice_scalar(int m, const double* a, const Columns& c, int j0, int j1) {
  const double *x0 = c.x[0], *x1 = c.x[1], *x2 = c.x[2];
  double *y0 = c.y[0], *y1 = c.y[1], *y2 = c.y[2];
  for (int j = j0; j < j1; ++j) {
    const double* col = a + static_cast<std::ptrdiff_t>(j) * m;
    const double xj0 = x0[j], xj1 = x1[j], xj2 = x2[j];
    double s0 = col[j] * xj0, s1 = col[j] * xj1, s2 = col[j] * xj2;
    for (int i = j + 1; i < m; ++i) {
      const double v = col[i];
      y0[i] += v * xj0;
      y1[i] += v * xj1;
      y2[i] += v * xj2;
      s0 += v * x0[i];
      s1 += v * x1[i];
      s2 += v * x2[i];
    }
    y0[j] += s0;
    y1[j] += s1;
    y2[j] += s2;
  }
}

#ifdef XPD_SYMMETRIC_AVX2

__attribute__((target("avx2,fma"))) inline double horizontal_sum(__m256d v) {
  const __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
  const __m128d s = _mm_add_pd(lo, hi);
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// Two columns per pass: each row's three x and three y values are loaded once for both, which
// halves the loads per stored entry (the loop is bound by loads when A streams from memory at
// full speed); 16 vector registers hold the two columns' entries, their six x_j broadcasts and
// six running sums, x_i and y_i.
__attribute__((target("avx2,fma"))) void slice_avx2(int m, const double* a, const Columns& c, int j0, int j1) {
  const double* x[3] = {c.x[0], c.x[1], c.x[2]};
  double* y[3] = {c.y[0], c.y[1], c.y[2]};
  int j = j0;
  for (; j + 1 < j1; j += 2) {
    const double* c0 = a + static_cast<std::ptrdiff_t>(j) * m;
    const double* c1 = c0 + m;
    const double d00 = c0[j], d10 = c0[j + 1], d11 = c1[j + 1];
    double xa[3], xb[3], t0[3], t1[3];
    __m256d ba[3], bb[3], s0[3], s1[3];
    for (int k = 0; k < 3; ++k) {
      xa[k] = x[k][j], xb[k] = x[k][j + 1];
      t0[k] = d00 * xa[k] + d10 * xb[k];  // the 2 × 2 diagonal block
      t1[k] = d10 * xa[k] + d11 * xb[k];
      ba[k] = _mm256_set1_pd(xa[k]), bb[k] = _mm256_set1_pd(xb[k]);
      s0[k] = _mm256_setzero_pd(), s1[k] = _mm256_setzero_pd();
    }
    int i = j + 2;
    for (; i + 4 <= m; i += 4) {
      const __m256d v0 = _mm256_loadu_pd(c0 + i), v1 = _mm256_loadu_pd(c1 + i);
      for (int k = 0; k < 3; ++k) {
        const __m256d xi = _mm256_loadu_pd(x[k] + i);
        __m256d yi = _mm256_loadu_pd(y[k] + i);
        yi = _mm256_fmadd_pd(v0, ba[k], yi);
        yi = _mm256_fmadd_pd(v1, bb[k], yi);
        _mm256_storeu_pd(y[k] + i, yi);
        s0[k] = _mm256_fmadd_pd(v0, xi, s0[k]);
        s1[k] = _mm256_fmadd_pd(v1, xi, s1[k]);
      }
    }
    for (int k = 0; k < 3; ++k) t0[k] += horizontal_sum(s0[k]), t1[k] += horizontal_sum(s1[k]);
    for (; i < m; ++i) {
      const double v0 = c0[i], v1 = c1[i];
      for (int k = 0; k < 3; ++k) {
        y[k][i] += v0 * xa[k] + v1 * xb[k];
        t0[k] += v0 * x[k][i];
        t1[k] += v1 * x[k][i];
      }
    }
    for (int k = 0; k < 3; ++k) y[k][j] += t0[k], y[k][j + 1] += t1[k];
  }
  if (j < j1) slice_scalar(m, a, c, j, j1);
}

#endif

using SliceKernel = void (*)(int, const double*, const Columns&, int, int);

SliceKernel best_kernel() {
#ifdef XPD_SYMMETRIC_AVX2
  if (symmetric_times3_vector_available()) return slice_avx2;
#endif
  return slice_scalar;
}

}  // namespace

bool symmetric_times3_vector_available() {
#ifdef XPD_SYMMETRIC_AVX2
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
#else
  return false;
#endif
}

void symmetric_times3(int m, const double* a, const double* x, int ldx, double alpha, double* out, bool accumulate,
                      std::vector<double>& scratch) {
  if (m <= 0) return;
  static const SliceKernel kernel = best_kernel();
  const int slices = m >= kParallelFrom ? kSlices : 1;
  // Slice boundaries: equal shares of the triangle's m (m + 1) / 2 entries (column j holds m − j).
  std::array<int, kSlices + 1> bound{};
  {
    const double total = 0.5 * static_cast<double>(m) * (m + 1);
    double done = 0;
    int j = 0;
    for (int s = 1; s < slices; ++s) {
      const double target = total * s / slices;
      while (j < m && done + (m - j) <= target) done += m - j, ++j;
      bound[static_cast<std::size_t>(s)] = j;
    }
    bound[static_cast<std::size_t>(slices)] = m;
  }
  const auto stride = static_cast<std::size_t>(3) * static_cast<std::size_t>(m);
  scratch.assign(static_cast<std::size_t>(slices) * stride, 0.0);  // keeps its capacity
  auto run = [&](int s) {
    double* y = scratch.data() + static_cast<std::size_t>(s) * stride;
    const Columns c{{x, x + ldx, x + 2 * static_cast<std::ptrdiff_t>(ldx)}, {y, y + m, y + 2 * m}};
    kernel(m, a, c, bound[static_cast<std::size_t>(s)], bound[static_cast<std::size_t>(s) + 1]);
  };
  if (slices == 1)
    run(0);
  else
    tbb::parallel_for(0, slices, run);
  for (std::size_t e = 0; e < stride; ++e) {
    double sum = 0;
    for (int s = 0; s < slices; ++s) sum += scratch[static_cast<std::size_t>(s) * stride + e];
    out[e] = accumulate ? out[e] + alpha * sum : alpha * sum;
  }
}

}  // namespace xpd::detail
