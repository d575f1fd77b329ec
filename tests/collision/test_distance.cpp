// Contact distances, barrier and PSD projection (collision/distance.hpp). Oracles: Ericson's
// closest point on a triangle (mesh/barycentric.hpp, an independent implementation) and a dense
// search over the segments' parameters for the values; central finite differences for gradients
// (1e-6 relative) and Hessians (1e-4 relative), on random and near-degenerate configurations of
// every distance type; exact rational arithmetic (GMP) for the values' rounding error.
#include <gmpxx.h>
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <xpd/collision/distance.hpp>
#include <xpd/mesh/barycentric.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

using Four = std::array<Vec3, 4>;

Four unpack(const Vec12& x) { return {x.segment<3>(0), x.segment<3>(3), x.segment<3>(6), x.segment<3>(9)}; }

Vec12 pack(const Four& p) {
  Vec12 x;
  for (int k = 0; k < 4; ++k) x.segment<3>(3 * k) = p[static_cast<std::size_t>(k)];
  return x;
}

double segment_distance_by_search(const Four& x) {
  // Convex in (s, t): a coarse grid, then a shrinking local grid around the best point.
  auto f = [&](double s, double t) { return ((x[0] + s * (x[1] - x[0])) - (x[2] + t * (x[3] - x[2]))).squaredNorm(); };
  double bs = 0, bt = 0, best = f(0, 0);
  double h = 1.0 / 64;
  for (int i = 0; i <= 64; ++i)
    for (int j = 0; j <= 64; ++j)
      if (const double v = f(i * h, j * h); v < best) best = v, bs = i * h, bt = j * h;
  // Pattern search: the step halves only when no neighbour improves, so the search can travel
  // along the long valley of nearly parallel edges.
  for (int round = 0; round < 20000 && h > 1e-17; ++round) {
    const double cs = bs, ct = bt, before = best;
    for (int i = -4; i <= 4; ++i)
      for (int j = -4; j <= 4; ++j) {
        const double s = std::clamp(cs + i * h / 4, 0.0, 1.0), t = std::clamp(ct + j * h / 4, 0.0, 1.0);
        if (const double v = f(s, t); v < best) best = v, bs = s, bt = t;
      }
    if (!(best < before)) h *= 0.5;
  }
  return best;
}

// Random configurations, many near-degenerate: a point close to an edge, a vertex or the plane,
// parallel and nearly parallel edges, coplanar edges.
Four random_configuration(std::mt19937& rng, int kind) {
  std::uniform_real_distribution<double> U(-1, 1);
  auto r = [&] { return Vec3(U(rng), U(rng), U(rng)); };
  Four x = {r(), r(), r(), r()};
  const double tiny = std::pow(10.0, -1 - static_cast<int>(rng() % 4));  // 1e-1 … 1e-4
  switch (kind % 6) {
    case 1:  // near edge 0 (or edge a for edge–edge: b0 near edge a)
      x[0] = x[1] + 0.4 * (x[2] - x[1]) + tiny * r();
      break;
    case 2:  // near a vertex
      x[0] = x[3] + tiny * r();
      break;
    case 3:  // nearly parallel second pair
      x[3] = x[2] + (x[1] - x[0]) * 0.7 + tiny * 1e-2 * r();
      break;
    case 4:  // coplanar-ish: all four near z = 0
      for (auto& p : x) p.z() = tiny * U(rng);
      break;
    default:
      break;
  }
  return x;
}

struct FdResult {
  double gradient_error, hessian_error;
};

// Relative errors of an analytic gradient/Hessian against central differences of `value` and of
// the analytic gradient.
FdResult check_fd(const std::function<PairDerivatives(const Vec12&)>& f, const Vec12& x) {
  const PairDerivatives d = f(x);
  const double h = 1e-6 * std::max(1.0, x.cwiseAbs().maxCoeff());
  Vec12 g_fd;
  Mat12 h_fd;
  for (int i = 0; i < 12; ++i) {
    Vec12 xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const PairDerivatives p = f(xp), m = f(xm);
    g_fd[i] = (p.value - m.value) / (2 * h);
    h_fd.col(i) = (p.gradient - m.gradient) / (2 * h);
  }
  const double gn = std::max(d.gradient.norm(), 1e-300), hn = std::max(d.hessian.norm(), 1e-300);
  return {(d.gradient - g_fd).norm() / gn, (d.hessian - h_fd).norm() / hn};
}

// The type does not change within the finite-difference stencil (the Hessian jumps across types).
template <typename TypeOf>
bool type_stable(const TypeOf& type_of, const Vec12& x, double h) {
  const auto t = type_of(x);
  for (int i = 0; i < 12; ++i)
    for (const double s : {-h, h}) {
      Vec12 y = x;
      y[i] += s;
      if (type_of(y) != t) return false;
    }
  return true;
}

TEST(Distance, PointTriangleMatchesTheClosestPointAndItsDerivatives) {
  std::mt19937 rng(1);
  std::set<PointTriangleType> seen;
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Four x = random_configuration(rng, trial);
    const double d = point_triangle_squared_distance(x[0], x[1], x[2], x[3]);
    const Vec3 cp = closest_point_on_triangle(x[0], x[1], x[2], x[3]);
    ASSERT_NEAR(d, (cp - x[0]).squaredNorm(), 1e-12 * std::max(1.0, d)) << "trial " << trial;
    const Vec12 v = pack(x);
    auto type_of = [](const Vec12& y) {
      const Four p = unpack(y);
      return point_triangle_distance_type(p[0], p[1], p[2], p[3]);
    };
    if (d < 1e-12 || !type_stable(type_of, v, 1e-6 * std::max(1.0, v.cwiseAbs().maxCoeff()))) continue;
    seen.insert(type_of(v));
    const FdResult e = check_fd(
        [](const Vec12& y) {
          const Four p = unpack(y);
          return point_triangle_squared_distance_derivatives(p[0], p[1], p[2], p[3]);
        },
        v);
    ++checked;
    EXPECT_LE(e.gradient_error, 1e-6) << "trial " << trial << " type " << static_cast<int>(type_of(v));
    EXPECT_LE(e.hessian_error, 1e-4) << "trial " << trial << " type " << static_cast<int>(type_of(v));
  }
  EXPECT_EQ(seen.size(), 7u);  // every point–triangle type was differentiated
  EXPECT_GT(checked, 2000);
}

TEST(Distance, EdgeEdgeMatchesASearchAndItsDerivatives) {
  std::mt19937 rng(2);
  std::set<EdgeEdgeType> seen;
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Four x = random_configuration(rng, trial);
    const double d = edge_edge_squared_distance(x[0], x[1], x[2], x[3]);
    if (trial % 5 == 0) {
      const double s = segment_distance_by_search(x);
      ASSERT_LE(d, s + 1e-12) << "trial " << trial;
      ASSERT_GE(d, s - 1e-10 * std::max(1.0, s)) << "trial " << trial << " diff " << s - d << " type "
                                                 << static_cast<int>(edge_edge_distance_type(x[0], x[1], x[2], x[3]));
    }
    const Vec12 v = pack(x);
    auto type_of = [](const Vec12& y) {
      const Four p = unpack(y);
      return edge_edge_distance_type(p[0], p[1], p[2], p[3]);
    };
    if (d < 1e-12 || !type_stable(type_of, v, 1e-6 * std::max(1.0, v.cwiseAbs().maxCoeff()))) continue;
    seen.insert(type_of(v));
    const FdResult e = check_fd(
        [](const Vec12& y) {
          const Four p = unpack(y);
          return edge_edge_squared_distance_derivatives(p[0], p[1], p[2], p[3]);
        },
        v);
    ++checked;
    EXPECT_LE(e.gradient_error, 1e-6) << "trial " << trial << " type " << static_cast<int>(type_of(v));
    EXPECT_LE(e.hessian_error, 1e-4) << "trial " << trial << " type " << static_cast<int>(type_of(v));
  }
  EXPECT_EQ(seen.size(), 9u);  // every edge–edge type was differentiated
  EXPECT_GT(checked, 2000);
}

TEST(Distance, ParallelEdgesUseTheirEndpoints) {
  // Two parallel unit segments 0.5 apart, overlapping over half their length.
  const Vec3 a0(0, 0, 0), a1(1, 0, 0), b0(0.5, 0.5, 0), b1(1.5, 0.5, 0);
  EXPECT_NE(edge_edge_distance_type(a0, a1, b0, b1), EdgeEdgeType::A_B);
  EXPECT_DOUBLE_EQ(edge_edge_squared_distance(a0, a1, b0, b1), 0.25);
  // Crossing edges at height 0.1: line–line.
  EXPECT_EQ(edge_edge_distance_type(a0, a1, Vec3(0.5, -1, 0.1), Vec3(0.5, 1, 0.1)), EdgeEdgeType::A_B);
  EXPECT_NEAR(edge_edge_squared_distance(a0, a1, Vec3(0.5, -1, 0.1), Vec3(0.5, 1, 0.1)), 0.01, 1e-15);
}

// ---- exact squared distances (rational arithmetic; doubles convert to rationals exactly) -------
// The minimum of |x − y|² over a triangle or a pair of segments is attained in the relative interior
// of one feature (vertex, edge, face; end point, interior pair); each feature's candidate below is
// the distance to an actual point of the primitive and is taken only where that feature's closest
// point exists, so the smallest candidate is the exact distance. No branch depends on a rounded
// value.
using Q3 = std::array<mpq_class, 3>;
Q3 q3(const Vec3& v) { return {mpq_class(v.x()), mpq_class(v.y()), mpq_class(v.z())}; }
Q3 sub(const Q3& a, const Q3& b) { return {a[0] - b[0], a[1] - b[1], a[2] - b[2]}; }
mpq_class dot(const Q3& a, const Q3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Q3 cross(const Q3& a, const Q3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}

// |p − segment(a, b)|², exactly.
mpq_class exact_point_segment(const Q3& p, const Q3& a, const Q3& b) {
  const Q3 e = sub(b, a), ap = sub(p, a);
  const mpq_class ee = dot(e, e), t = dot(ap, e);
  if (ee == 0 || t <= 0) return dot(ap, ap);
  if (t >= ee) {
    const Q3 bp = sub(p, b);
    return dot(bp, bp);
  }
  return dot(ap, ap) - t * t / ee;
}

mpq_class exact_point_triangle(const Vec3& pv, const Vec3& t0v, const Vec3& t1v, const Vec3& t2v) {
  const Q3 p = q3(pv), t[3] = {q3(t0v), q3(t1v), q3(t2v)};
  mpq_class best = exact_point_segment(p, t[0], t[1]);
  for (int k = 1; k < 3; ++k) best = std::min(best, exact_point_segment(p, t[k], t[(k + 1) % 3]));
  const Q3 n = cross(sub(t[1], t[0]), sub(t[2], t[0]));
  const mpq_class nn = dot(n, n);
  if (nn == 0) return best;  // a degenerate triangle is its edges
  const mpq_class h = dot(sub(p, t[0]), n);
  // The projection q = p − (h / nn) n lies in the closed triangle when each edge sees it on n's side.
  Q3 q = p;
  for (int c = 0; c < 3; ++c) q[c] -= h / nn * n[c];
  bool inside = true;
  for (int k = 0; k < 3 && inside; ++k) inside = dot(cross(sub(t[(k + 1) % 3], t[k]), sub(q, t[k])), n) >= 0;
  if (inside) best = std::min(best, mpq_class(h * h / nn));
  return best;
}

mpq_class exact_edge_edge(const Vec3& a0v, const Vec3& a1v, const Vec3& b0v, const Vec3& b1v) {
  const Q3 a0 = q3(a0v), a1 = q3(a1v), b0 = q3(b0v), b1 = q3(b1v);
  mpq_class best = std::min({exact_point_segment(a0, b0, b1), exact_point_segment(a1, b0, b1),
                             exact_point_segment(b0, a0, a1), exact_point_segment(b1, a0, a1)});
  const Q3 d1 = sub(a1, a0), d2 = sub(b1, b0), r = sub(a0, b0);
  const mpq_class a = dot(d1, d1), e = dot(d2, d2), b = dot(d1, d2), c = dot(d1, r), f = dot(d2, r);
  const mpq_class den = a * e - b * b;
  if (den > 0) {  // both closest points interior: the stationary point of the two parameters
    const mpq_class s = (b * f - c * e) / den, t = (a * f - b * c) / den;
    if (s > 0 && s < 1 && t > 0 && t < 1) {
      Q3 w = r;
      for (int k = 0; k < 3; ++k) w[k] += s * d1[k] - t * d2[k];
      best = std::min(best, dot(w, w));
    }
  }
  return best;
}

// Configurations the random ones above rarely give exactly: a zero-area (collinear) triangle,
// coincident points, exactly parallel and collinear edges, a point exactly in the plane or on an
// edge's line, and a degenerate (zero-length) edge; coordinates on a grid of 1/64 keep them exact.
Four exactly_degenerate_configuration(std::mt19937& rng, int kind) {
  std::uniform_int_distribution<int> I(-64, 64);
  auto r = [&]() -> Vec3 { return Vec3(I(rng), I(rng), I(rng)) / 64.0; };  // a Vec3, not a dangling expression
  Four x = {r(), r(), r(), r()};
  switch (kind % 7) {
    case 0:  // collinear triangle (p; t0, t1, t2) / collinear edges
      x[3] = x[1] + 2.0 * (x[2] - x[1]);
      x[0] = x[1] + 0.5 * (x[2] - x[1]);
      if (kind % 14 >= 7) x[0] += r() / 8.0;
      break;
    case 1:  // coincident points
      x[0] = x[2];
      break;
    case 2:  // exactly parallel second pair (for point–triangle, a general triangle)
      x[3] = x[2] + 0.5 * (x[1] - x[0]);
      break;
    case 3:  // p in the triangle's plane / b0 on the line of edge a
      x[0] = x[1] + 0.25 * (x[2] - x[1]) + 0.25 * (x[3] - x[1]);
      break;
    case 4:  // zero-length second edge / a triangle with two equal vertices
      x[3] = x[2];
      break;
    case 5:  // crossing edges (distance 0) / p on edge 0
      x[0] = x[1] + 0.5 * (x[2] - x[1]);
      x[3] = x[0] + (x[0] - x[2]);
      break;
    default:
      break;
  }
  return x;
}

TEST(Distance, SquaredDistancesAreWithinTheirRoundingAllowanceOfExactRationals) {
  // 10⁵ configurations (half point–triangle, half edge–edge): the random and near-degenerate ones
  // above and the exactly degenerate ones, each scaled by 10⁻³, 1 or 10³ and moved away from the
  // origin by 0 or 10 times that scale. Checked: |D − D_exact| ≤ squared_distance_rounding_allowance
  // (64 ε M², M the largest coordinate magnitude), the bound the two-way projection takes off so
  // that a computed distance never overstates a safe one; and, where D_exact ≥ 10⁻⁴ M², 1e-12 of D.
  std::mt19937 rng(12);
  double worst_in_allowances = 0, worst_relative = 0;
  int zero_exact = 0, compared_relative = 0;
  for (int trial = 0; trial < 100000; ++trial) {
    const bool ee = trial % 2 == 1;
    const int kind = trial / 2;
    Four x = kind % 3 == 2 ? exactly_degenerate_configuration(rng, kind / 3) : random_configuration(rng, kind / 3);
    const double scale = std::array<double, 3>{1e-3, 1.0, 1e3}[static_cast<std::size_t>(kind % 9 / 3)];
    const Vec3 offset = (kind % 18 < 9 ? 0.0 : 10.0) * Vec3(1.0, -0.75, 0.5);
    for (Vec3& p : x) p = scale * (p + offset);
    const double d = ee ? edge_edge_squared_distance(x[0], x[1], x[2], x[3])
                        : point_triangle_squared_distance(x[0], x[1], x[2], x[3]);
    const mpq_class exact = ee ? exact_edge_edge(x[0], x[1], x[2], x[3]) : exact_point_triangle(x[0], x[1], x[2], x[3]);
    const double allowance = squared_distance_rounding_allowance(x[0], x[1], x[2], x[3]);
    const mpq_class error = abs(mpq_class(d) - exact);
    const double in_allowances = error.get_d() / allowance;
    worst_in_allowances = std::max(worst_in_allowances, in_allowances);
    ASSERT_LE(error, mpq_class(allowance))
        << (ee ? "edge-edge" : "point-triangle") << " trial " << trial << ": " << d << " against " << exact.get_d();
    if (exact == 0) ++zero_exact;
    double m = 0;
    for (const Vec3& p : x) m = std::max(m, p.cwiseAbs().maxCoeff());
    if (exact.get_d() >= 1e-4 * m * m) {
      ++compared_relative;
      worst_relative = std::max(worst_relative, mpq_class(error / exact).get_d());
    }
  }
  test::report("largest |D - D_exact| in allowances (64 eps M^2)", worst_in_allowances, 1.0);
  test::report("largest relative error where D_exact >= 1e-4 M^2", worst_relative, 1e-12);
  EXPECT_LE(worst_relative, 1e-12);
  EXPECT_GT(zero_exact, 1000);  // touching and crossing configurations were among them
  EXPECT_GT(compared_relative, 50000);
}

TEST(Barrier, VanishesBeyondDhatAndMatchesItsDerivatives) {
  const double dhat = 1e-3;
  for (const double d : {dhat, 1.5 * dhat, 10 * dhat}) {
    EXPECT_EQ(barrier(d, dhat), 0.0);
    EXPECT_EQ(barrier_first_derivative(d, dhat), 0.0);
    EXPECT_EQ(barrier_second_derivative(d, dhat), 0.0);
  }
  EXPECT_TRUE(std::isinf(barrier(0.0, dhat)));
  EXPECT_TRUE(std::isinf(barrier(-1e-3, dhat)));
  // C² at dhat from below.
  EXPECT_LT(std::abs(barrier_first_derivative(dhat * (1 - 1e-6), dhat)), 1e-12);
  EXPECT_LT(std::abs(barrier_second_derivative(dhat * (1 - 1e-6), dhat)), 1e-5);
  for (const double f : {1e-6, 1e-3, 0.1, 0.5, 0.9}) {
    const double d = f * dhat, h = 1e-6 * d;
    const double g_fd = (barrier(d + h, dhat) - barrier(d - h, dhat)) / (2 * h);
    const double h_fd = (barrier_first_derivative(d + h, dhat) - barrier_first_derivative(d - h, dhat)) / (2 * h);
    EXPECT_NEAR(barrier_first_derivative(d, dhat), g_fd, 1e-6 * std::abs(g_fd)) << f;
    EXPECT_NEAR(barrier_second_derivative(d, dhat), h_fd, 1e-4 * std::abs(h_fd)) << f;
    EXPECT_GT(barrier(d, dhat), 0.0);
    EXPECT_LT(barrier_first_derivative(d, dhat), 0.0);
    EXPECT_GT(barrier_second_derivative(d, dhat), 0.0);
  }
}

TEST(Barrier, PairPotentialsMatchFiniteDifferences) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> U(-1, 1);
  const double dhat = 0.05, kappa = 3.0;
  int pt = 0, ee = 0, mollified = 0;
  for (int trial = 0; trial < 2000 && (pt < 100 || ee < 100 || mollified < 30); ++trial) {
    Four x = {Vec3(U(rng), U(rng), 0), Vec3(U(rng), U(rng), 0), Vec3(U(rng), U(rng), 0), Vec3(U(rng), U(rng), 0)};
    const bool edge = trial % 2 == 1;
    if (!edge) {
      x[0] = (x[1] + x[2] + x[3]) / 3 + Vec3(0.01 * U(rng), 0.01 * U(rng), 0.002 + 0.04 * std::abs(U(rng)));
    } else {
      // Edge b above edge a within dhat; every third one nearly parallel, so that the mollifier acts.
      x[2] = 0.5 * (x[0] + x[1]) + Vec3(0.3 * U(rng), 0.3 * U(rng), 0.002 + 0.04 * std::abs(U(rng)));
      const Vec3 dir = trial % 3 == 0 ? Vec3(x[1] - x[0] + Vec3(0.01 * U(rng), 0.01 * U(rng), 0.01 * U(rng)))
                                      : Vec3(U(rng), U(rng), 0.2 * U(rng));
      x[3] = x[2] + dir;
    }
    const Vec12 v = pack(x);
    const double h = 1e-6;
    std::function<PairDerivatives(const Vec12&)> f;
    double eps = 0;
    if (!edge) {
      auto type_of = [](const Vec12& y) {
        const Four p = unpack(y);
        return point_triangle_distance_type(p[0], p[1], p[2], p[3]);
      };
      if (!type_stable(type_of, v, h)) continue;
      f = [&](const Vec12& y) {
        const Four p = unpack(y);
        return point_triangle_barrier(p[0], p[1], p[2], p[3], dhat, kappa);
      };
    } else {
      auto type_of = [](const Vec12& y) {
        const Four p = unpack(y);
        return edge_edge_distance_type(p[0], p[1], p[2], p[3]);
      };
      if (!type_stable(type_of, v, h)) continue;
      eps = edge_edge_mollifier_threshold(x[0], x[1], x[2], x[3]) * (trial % 3 == 0 ? 1e3 : 1.0);
      f = [&](const Vec12& y) {
        const Four p = unpack(y);
        return edge_edge_barrier(p[0], p[1], p[2], p[3], dhat, kappa, eps);
      };
    }
    const PairDerivatives d = f(v);
    if (d.value == 0) continue;  // beyond dhat
    const FdResult e = check_fd(f, v);
    EXPECT_LE(e.gradient_error, 1e-6) << "trial " << trial;
    EXPECT_LE(e.hessian_error, 1e-4) << "trial " << trial;
    if (!edge) {
      ++pt;
    } else {
      ++ee;
      const Vec3 n = (x[1] - x[0]).cross(x[3] - x[2]);
      mollified += n.squaredNorm() < eps;
    }
  }
  EXPECT_GE(pt, 100);
  EXPECT_GE(ee, 100);
  EXPECT_GE(mollified, 30);  // the mollifier's own derivatives were exercised
}

TEST(Barrier, MollifierIsOneAwayFromParallelAndMatchesFiniteDifferences) {
  const Vec3 a0(0, 0, 0), a1(1, 0, 0), b0(0.5, -0.5, 0.1), b1(0.5, 0.5, 0.1);
  const double eps = edge_edge_mollifier_threshold(a0, a1, b0, b1);
  EXPECT_DOUBLE_EQ(eps, 1e-3);
  const PairDerivatives m = edge_edge_mollifier(a0, a1, b0, b1, eps);
  EXPECT_EQ(m.value, 1.0);
  EXPECT_EQ(m.gradient.norm(), 0.0);
  // Nearly parallel: c = |n|² < eps, χ in (0, 1).
  const Vec3 c1(1.5, 0.01, 0.1);
  const Four x = {a0, a1, Vec3(0.5, 0, 0.1), c1};
  const PairDerivatives p = edge_edge_mollifier(x[0], x[1], x[2], x[3], eps);
  EXPECT_GT(p.value, 0.0);
  EXPECT_LT(p.value, 1.0);
  const FdResult e = check_fd(
      [eps](const Vec12& y) {
        const Four q = unpack(y);
        return edge_edge_mollifier(q[0], q[1], q[2], q[3], eps);
      },
      pack(x));
  EXPECT_LE(e.gradient_error, 1e-6);
  EXPECT_LE(e.hessian_error, 1e-4);
}

TEST(Barrier, ProjectionToPsdIsTheNearestPsdMatrix) {
  std::mt19937 rng(9);
  std::normal_distribution<double> N(0, 1);
  for (int trial = 0; trial < 20; ++trial) {
    Mat12 a;
    for (int i = 0; i < 12; ++i)
      for (int j = 0; j < 12; ++j) a(i, j) = N(rng);
    const Mat12 h = a + a.transpose();
    const Mat12 p = project_to_psd(h);
    const Eigen::SelfAdjointEigenSolver<Mat12> in(h), out(p);
    EXPECT_GE(out.eigenvalues().minCoeff(), -1e-12 * h.norm());
    double negative = 0;
    for (int i = 0; i < 12; ++i) negative += std::pow(std::min(in.eigenvalues()[i], 0.0), 2);
    EXPECT_NEAR((h - p).norm(), std::sqrt(negative), 1e-10 * h.norm());
    const Mat12 psd = a * a.transpose();
    EXPECT_LE((project_to_psd(psd) - psd).norm(), 1e-12 * psd.norm());
  }
}

}  // namespace
}  // namespace xpd
