// Contact distances, barrier and PSD projection (collision/distance.hpp). Oracles: Ericson's
// closest point on a triangle (mesh/barycentric.hpp, an independent implementation) and a dense
// search over the segments' parameters for the values; central finite differences for gradients
// (1e-6 relative) and Hessians (1e-4 relative), on random and near-degenerate configurations of
// every distance type.
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <xpd/collision/distance.hpp>
#include <xpd/mesh/barycentric.hpp>

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
