// Inclusion-based CCD (see ccd.hpp for the formulas and guarantees).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <vector>
#include <xpd/collision/ccd.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

namespace {

// Rounding bound of one corner value, per unit of M (the largest |coordinate| on the axis). Every
// corner is computed as q_m = x_m⁰ + t (x_m¹ − x_m⁰) (|q_m| ≤ M, error ≤ 5uM: difference, product,
// sum) and then, for vertex–face, F = (q_p − q_a) − u (q_b − q_a) − v (q_c − q_a): the errors add
// to 12, 14, 30, 14 and 50 uM along that expression (intermediates bounded by 2M, 2M, 4M, 2M and
// 6M, t, u, v ∈ [0, 1] exact dyadic numbers); edge–edge, (q_a + u (q_b − q_a)) − (q_c + v (q_d − q_c)),
// stays below 42 uM. A fused multiply-add only removes roundings. 64 u covers both with room for
// the second-order terms.
constexpr double kRoundingFactor = 64.0 * 0x1p-53;
// Absolute part for subnormal results (each operation may then lose up to 2⁻¹⁰⁷⁵ absolutely).
constexpr double kRoundingAbsolute = 64.0 * DBL_TRUE_MIN;
// Coordinates beyond this could overflow in the differences and products above.
constexpr double kMaxCoordinate = 1e150;

struct Box {
  double t[2], u[2], v[2];
};

// Heap order: the box with the smallest lower t on top; among equal lower t the smaller box
// first, so that the search dives depth-first at the earliest time instead of sweeping a whole
// curve of near-roots there (parallel edges lying on each other) box by box.
struct LaterFirst {
  static double size(const Box& b) { return (b.t[1] - b.t[0]) + (b.u[1] - b.u[0]) + (b.v[1] - b.v[0]); }
  bool operator()(const Box& a, const Box& b) const {
    if (a.t[0] != b.t[0]) return a.t[0] > b.t[0];
    return size(a) > size(b);
  }
};

void check_options(const CcdOptions& o) {
  if (!(o.tolerance > 0) || !std::isfinite(o.tolerance))
    throw Error(fmt::format("ccd: tolerance must be a positive finite number (got {})", o.tolerance));
  if (!(o.minimum_separation >= 0) || !std::isfinite(o.minimum_separation))
    throw Error(fmt::format("ccd: minimum_separation must be finite and >= 0 (got {})", o.minimum_separation));
  if (o.max_checks <= 0) throw Error(fmt::format("ccd: max_checks must be positive (got {})", o.max_checks));
  if (!(o.max_time >= 0 && o.max_time <= 1))
    throw Error(fmt::format("ccd: max_time must be in [0, 1] (got {})", o.max_time));
}

// x[0..3] at t = 0, x[4..7] at t = 1, in the order of the formulas in ccd.hpp (p, a, b, c or a, b, c, d).
template <bool kVertexFace>
CcdResult solve(const std::array<const Vec3*, 8>& x, const CcdOptions& options) {
  check_options(options);
  double slack[3];
  for (int axis = 0; axis < 3; ++axis) {
    double m = 0;
    for (const Vec3* p : x) {
      const double c = (*p)[axis];
      if (!std::isfinite(c) || std::abs(c) > kMaxCoordinate)
        throw Error(fmt::format("ccd: coordinate {} is not finite or beyond {:g} in magnitude", c, kMaxCoordinate));
      m = std::max(m, std::abs(c));
    }
    slack[axis] = kRoundingFactor * m + kRoundingAbsolute + options.minimum_separation;
  }

  // One scratch heap per thread: queries run in parallel from the broad phase and must not allocate
  // once warm.
  thread_local std::vector<Box> heap;
  heap.clear();
  heap.push_back(Box{{0.0, 1.0}, {0.0, 1.0}, {0.0, 1.0}});
  CcdResult result;
  LaterFirst order;
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), order);
    const Box b = heap.back();
    heap.pop_back();
    if (b.t[0] > options.max_time) break;                // every queued box starts later still
    if (kVertexFace && b.u[0] + b.v[0] > 1.0) continue;  // outside the triangle (sum of dyadics: exact)
    if (result.checks >= options.max_checks) {
      // Every box still queued starts at t ≥ b.t[0], and all earlier ones were proved root-free.
      result.hit = true;
      result.capped = true;
      result.toi = b.t[0];
      return result;
    }
    ++result.checks;

    double f[2][2][2][3];  // F at (t_i, u_j, v_k), per axis
    for (int i = 0; i < 2; ++i) {
      const double t = b.t[i];
      for (int axis = 0; axis < 3; ++axis) {
        double q[4];
        for (int m = 0; m < 4; ++m) q[m] = (*x[m])[axis] + t * ((*x[m + 4])[axis] - (*x[m])[axis]);
        for (int j = 0; j < 2; ++j) {
          for (int k = 0; k < 2; ++k) {
            if constexpr (kVertexFace) {
              f[i][j][k][axis] = ((q[0] - q[1]) - b.u[j] * (q[2] - q[1])) - b.v[k] * (q[3] - q[1]);
            } else {
              f[i][j][k][axis] = (q[0] + b.u[j] * (q[1] - q[0])) - (q[2] + b.v[k] * (q[3] - q[2]));
            }
          }
        }
      }
    }

    bool may_contain = true;
    double width = 0;
    for (int axis = 0; axis < 3 && may_contain; ++axis) {
      double lo = f[0][0][0][axis], hi = lo;
      for (int c = 1; c < 8; ++c) {
        const double value = f[c >> 2][(c >> 1) & 1][c & 1][axis];
        lo = std::min(lo, value);
        hi = std::max(hi, value);
      }
      may_contain = lo <= slack[axis] && hi >= -slack[axis];
      width = std::max(width, hi - lo);
    }
    if (!may_contain) continue;
    if (width <= options.tolerance) {
      result.hit = true;
      result.toi = b.t[0];
      return result;
    }

    // Split the parameter along which F varies most (largest corner-to-corner change on any axis).
    double variation[3] = {0, 0, 0};
    for (int c = 0; c < 4; ++c) {
      const int p = c >> 1, q = c & 1;
      for (int axis = 0; axis < 3; ++axis) {
        variation[0] = std::max(variation[0], std::abs(f[1][p][q][axis] - f[0][p][q][axis]));
        variation[1] = std::max(variation[1], std::abs(f[p][1][q][axis] - f[p][0][q][axis]));
        variation[2] = std::max(variation[2], std::abs(f[p][q][1][axis] - f[p][q][0][axis]));
      }
    }
    const int d = static_cast<int>(std::max_element(variation, variation + 3) - variation);
    const double* range = d == 0 ? b.t : d == 1 ? b.u : b.v;
    const double mid = 0.5 * (range[0] + range[1]);
    if (!(mid > range[0] && mid < range[1])) {
      // The interval cannot be halved any more (not reached for any sane tolerance): conservative hit.
      result.hit = true;
      result.capped = true;
      result.toi = b.t[0];
      return result;
    }
    Box lower = b, upper = b;
    double* lo_range = d == 0 ? lower.t : d == 1 ? lower.u : lower.v;
    double* hi_range = d == 0 ? upper.t : d == 1 ? upper.u : upper.v;
    lo_range[1] = mid;
    hi_range[0] = mid;
    heap.push_back(lower);
    std::push_heap(heap.begin(), heap.end(), order);
    heap.push_back(upper);
    std::push_heap(heap.begin(), heap.end(), order);
  }
  return result;
}

}  // namespace

CcdResult vertex_face_ccd(const Vec3& p0, const Vec3& a0, const Vec3& b0, const Vec3& c0, const Vec3& p1,
                          const Vec3& a1, const Vec3& b1, const Vec3& c1, const CcdOptions& options) {
  return solve<true>({&p0, &a0, &b0, &c0, &p1, &a1, &b1, &c1}, options);
}

CcdResult edge_edge_ccd(const Vec3& a0, const Vec3& b0, const Vec3& c0, const Vec3& d0, const Vec3& a1, const Vec3& b1,
                        const Vec3& c1, const Vec3& d1, const CcdOptions& options) {
  return solve<false>({&a0, &b0, &c0, &d0, &a1, &b1, &c1, &d1}, options);
}

}  // namespace xpd
