// Contact distances, the IPC barrier and their derivatives (distance.hpp). Each formula is written
// once, generic over double and Jet2<12> (jet2.hpp), so that the value and the derivatives come
// from the same expression.
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <xpd/collision/distance.hpp>

#include "collision/jet2.hpp"

namespace xpd {

namespace detail {
namespace {

template <typename S>
using Points4 = std::array<Vec<S>, 4>;

template <typename S>
S point_point(const Vec<S>& p, const Vec<S>& q) {
  const Vec<S> d = p - q;
  return dot(d, d);
}

template <typename S>
S point_line(const Vec<S>& p, const Vec<S>& a, const Vec<S>& b) {
  const Vec<S> c = cross(a - p, b - p);
  const Vec<S> e = b - a;
  return dot(c, c) / dot(e, e);
}

template <typename S>
S point_plane(const Vec<S>& p, const Vec<S>& a, const Vec<S>& b, const Vec<S>& c) {
  const Vec<S> n = cross(b - a, c - a);
  const S e = dot(p - a, n);
  return e * e / dot(n, n);
}

template <typename S>
S line_line(const Vec<S>& a0, const Vec<S>& a1, const Vec<S>& b0, const Vec<S>& b1) {
  const Vec<S> n = cross(a1 - a0, b1 - b0);
  const S e = dot(b0 - a0, n);
  return e * e / dot(n, n);
}

// x = (p, t0, t1, t2).
template <typename S>
S point_triangle(PointTriangleType type, const Points4<S>& x) {
  switch (type) {
    case PointTriangleType::P_T0:
      return point_point(x[0], x[1]);
    case PointTriangleType::P_T1:
      return point_point(x[0], x[2]);
    case PointTriangleType::P_T2:
      return point_point(x[0], x[3]);
    case PointTriangleType::P_E0:
      return point_line(x[0], x[1], x[2]);
    case PointTriangleType::P_E1:
      return point_line(x[0], x[2], x[3]);
    case PointTriangleType::P_E2:
      return point_line(x[0], x[3], x[1]);
    case PointTriangleType::P_T:
      return point_plane(x[0], x[1], x[2], x[3]);
  }
  return point_plane(x[0], x[1], x[2], x[3]);
}

// x = (a0, a1, b0, b1).
template <typename S>
S edge_edge(EdgeEdgeType type, const Points4<S>& x) {
  switch (type) {
    case EdgeEdgeType::A0_B0:
      return point_point(x[0], x[2]);
    case EdgeEdgeType::A0_B1:
      return point_point(x[0], x[3]);
    case EdgeEdgeType::A1_B0:
      return point_point(x[1], x[2]);
    case EdgeEdgeType::A1_B1:
      return point_point(x[1], x[3]);
    case EdgeEdgeType::A_B0:
      return point_line(x[2], x[0], x[1]);
    case EdgeEdgeType::A_B1:
      return point_line(x[3], x[0], x[1]);
    case EdgeEdgeType::A0_B:
      return point_line(x[0], x[2], x[3]);
    case EdgeEdgeType::A1_B:
      return point_line(x[1], x[2], x[3]);
    case EdgeEdgeType::A_B:
      return line_line(x[0], x[1], x[2], x[3]);
  }
  return line_line(x[0], x[1], x[2], x[3]);
}

Points4<double> values(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  return {point_value(a), point_value(b), point_value(c), point_value(d)};
}

Points4<Jet2<12>> variables(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  return {point_variable<12>(a, 0), point_variable<12>(b, 1), point_variable<12>(c, 2), point_variable<12>(d, 3)};
}

PairDerivatives to_pair(const Jet2<12>& j) {
  PairDerivatives r;
  r.value = j.v;
  r.gradient = j.g;
  r.hessian = j.h;
  return r;
}

// Closest point of segment (a, b) to p as a parameter in [0, 1] and the squared distance.
std::pair<double, double> point_segment(const Vec3& p, const Vec3& a, const Vec3& b) {
  const Vec3 e = b - a;
  const double len2 = e.squaredNorm();
  const double s = len2 > 0 ? std::clamp((p - a).dot(e) / len2, 0.0, 1.0) : 0.0;
  return {s, (a + s * e - p).squaredNorm()};
}

template <typename T>
T point_segment_type(double s, T at_start, T at_end, T interior) {
  return s <= 0 ? at_start : s >= 1 ? at_end : interior;
}

Jet2<12> mollifier_jet(const Points4<Jet2<12>>& x, double eps) {
  const Vec<Jet2<12>> n = cross(x[1] - x[0], x[3] - x[2]);
  const Jet2<12> c = (1.0 / eps) * dot(n, n);
  if (c.v >= 1.0) return Jet2<12>::constant(1.0);
  return chain(c, c.v * (2 - c.v), 2 - 2 * c.v, -2.0);
}

Jet2<12> barrier_jet(const Jet2<12>& d, double dhat, double kappa) {
  const double d2 = dhat * dhat;
  return kappa * chain(d, barrier(d.v, d2), barrier_first_derivative(d.v, d2), barrier_second_derivative(d.v, d2));
}

}  // namespace
}  // namespace detail

PointTriangleType point_triangle_distance_type(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2) {
  const Vec3 e0 = t1 - t0, e1 = t2 - t0, q = p - t0;
  const double a = e0.dot(e0), b = e0.dot(e1), c = e1.dot(e1), d = e0.dot(q), e = e1.dot(q);
  const double det = a * c - b * b;
  // A triangle whose normal is at rounding level (|e0 × e1|² ≤ 1e−20 |e0|² |e1|², the edge–edge
  // rule's threshold) is degenerate: a c − b² of a collinear one rounds to ~ε a c, not 0, and the
  // plane's formula would divide by that rounding (found by the exact-rational test: 5.8e−10 for
  // an exact 0 at a size of 2.6e−3).
  if (det > 0 && e0.cross(e1).squaredNorm() > 1e-20 * a * c) {
    const double u = (c * d - b * e) / det, v = (a * e - b * d) / det;
    if (u >= 0 && v >= 0 && u + v <= 1) return PointTriangleType::P_T;
  }
  // Outside (or a degenerate triangle): the closest point is on the boundary.
  const Vec3* t[3] = {&t0, &t1, &t2};
  const PointTriangleType vertex[3] = {PointTriangleType::P_T0, PointTriangleType::P_T1, PointTriangleType::P_T2};
  const PointTriangleType edge[3] = {PointTriangleType::P_E0, PointTriangleType::P_E1, PointTriangleType::P_E2};
  PointTriangleType best = PointTriangleType::P_T0;
  double best_d = std::numeric_limits<double>::infinity();
  for (int k = 0; k < 3; ++k) {
    const auto [s, dist] = detail::point_segment(p, *t[k], *t[(k + 1) % 3]);
    if (dist < best_d) {
      best_d = dist;
      best = detail::point_segment_type(s, vertex[k], vertex[(k + 1) % 3], edge[k]);
    }
  }
  return best;
}

EdgeEdgeType edge_edge_distance_type(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1) {
  const Vec3 da = a1 - a0, db = b1 - b0, r = a0 - b0;
  const double A = da.dot(da), B = da.dot(db), C = db.dot(db), D = da.dot(r), E = db.dot(r);
  const double n2 = da.cross(db).squaredNorm();
  if (n2 > 1e-20 * A * C) {
    const double det = A * C - B * B;
    const double s = (B * E - C * D) / det, t = (A * E - B * D) / det;
    if (s > 0 && s < 1 && t > 0 && t < 1) return EdgeEdgeType::A_B;
  }
  // The minimum is at an end of one segment against the other segment.
  using T = EdgeEdgeType;
  const auto [s0, d0] = detail::point_segment(a0, b0, b1);
  const auto [s1, d1] = detail::point_segment(a1, b0, b1);
  const auto [s2, d2] = detail::point_segment(b0, a0, a1);
  const auto [s3, d3] = detail::point_segment(b1, a0, a1);
  const double ds[4] = {d0, d1, d2, d3};
  const T types[4] = {detail::point_segment_type(s0, T::A0_B0, T::A0_B1, T::A0_B),
                      detail::point_segment_type(s1, T::A1_B0, T::A1_B1, T::A1_B),
                      detail::point_segment_type(s2, T::A0_B0, T::A1_B0, T::A_B0),
                      detail::point_segment_type(s3, T::A0_B1, T::A1_B1, T::A_B1)};
  return types[std::min_element(ds, ds + 4) - ds];
}

double point_triangle_squared_distance(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2) {
  return detail::point_triangle(point_triangle_distance_type(p, t0, t1, t2), detail::values(p, t0, t1, t2));
}

double squared_distance_rounding_allowance(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  // The formulas subtract points (rounding ε M each), square and multiply a few such differences and
  // divide by squared lengths; the test's measured worst case is in docs/validation.md §9.
  const double m =
      std::max({a.cwiseAbs().maxCoeff(), b.cwiseAbs().maxCoeff(), c.cwiseAbs().maxCoeff(), d.cwiseAbs().maxCoeff()});
  return 64 * std::numeric_limits<double>::epsilon() * m * m;
}

double edge_edge_squared_distance(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1) {
  return detail::edge_edge(edge_edge_distance_type(a0, a1, b0, b1), detail::values(a0, a1, b0, b1));
}

PairDerivatives point_triangle_squared_distance_derivatives(const Vec3& p, const Vec3& t0, const Vec3& t1,
                                                            const Vec3& t2) {
  return detail::to_pair(
      detail::point_triangle(point_triangle_distance_type(p, t0, t1, t2), detail::variables(p, t0, t1, t2)));
}

PairDerivatives edge_edge_squared_distance_derivatives(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1) {
  return detail::to_pair(detail::edge_edge(edge_edge_distance_type(a0, a1, b0, b1), detail::variables(a0, a1, b0, b1)));
}

double edge_edge_mollifier_threshold(const Vec3& a0_rest, const Vec3& a1_rest, const Vec3& b0_rest,
                                     const Vec3& b1_rest) {
  return 1e-3 * (a1_rest - a0_rest).squaredNorm() * (b1_rest - b0_rest).squaredNorm();
}

PairDerivatives edge_edge_mollifier(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double eps) {
  return detail::to_pair(detail::mollifier_jet(detail::variables(a0, a1, b0, b1), eps));
}

double barrier(double d, double dhat) {
  if (d <= 0) return std::numeric_limits<double>::infinity();
  if (d >= dhat) return 0.0;
  return -(d - dhat) * (d - dhat) * std::log(d / dhat);
}

double barrier_first_derivative(double d, double dhat) {
  if (d <= 0) return -std::numeric_limits<double>::infinity();
  if (d >= dhat) return 0.0;
  return (dhat - d) * (2 * std::log(d / dhat) - dhat / d + 1);
}

double barrier_second_derivative(double d, double dhat) {
  if (d <= 0) return std::numeric_limits<double>::infinity();
  if (d >= dhat) return 0.0;
  return (dhat / d + 2) * (dhat / d) - 2 * std::log(d / dhat) - 3;
}

PairDerivatives point_triangle_barrier(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2, double dhat,
                                       double kappa) {
  const auto x = detail::variables(p, t0, t1, t2);
  return detail::to_pair(
      detail::barrier_jet(detail::point_triangle(point_triangle_distance_type(p, t0, t1, t2), x), dhat, kappa));
}

PairDerivatives edge_edge_barrier(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double dhat,
                                  double kappa, double eps) {
  const auto x = detail::variables(a0, a1, b0, b1);
  const detail::Jet2<12> b =
      detail::barrier_jet(detail::edge_edge(edge_edge_distance_type(a0, a1, b0, b1), x), dhat, kappa);
  return detail::to_pair(detail::mollifier_jet(x, eps) * b);
}

Mat12 project_to_psd(const Mat12& h) {
  const Eigen::SelfAdjointEigenSolver<Mat12> eig(0.5 * (h + h.transpose()));
  const Vec12 lambda = eig.eigenvalues().cwiseMax(0.0);
  return eig.eigenvectors() * lambda.asDiagonal() * eig.eigenvectors().transpose();
}

}  // namespace xpd
