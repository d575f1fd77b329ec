#pragma once
// Exact intersection test of a triangle surface for the tests: every edge against every triangle
// that shares no vertex with it, with orientation predicates evaluated in exact rational arithmetic
// (GMP; doubles convert to rationals without rounding). The oracle of "intersection-free".
#include <gmpxx.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/core/types.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd::test {

inline int exact_orient3d(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  mpq_class m[3][3];
  for (int k = 0; k < 3; ++k) {
    m[0][k] = mpq_class(b[k]) - mpq_class(a[k]);
    m[1][k] = mpq_class(c[k]) - mpq_class(a[k]);
    m[2][k] = mpq_class(d[k]) - mpq_class(a[k]);
  }
  const mpq_class det = m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) -
                        m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
                        m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  return sgn(det);
}

// Orientation of (a, b, c) in the plane of coordinates (i, j), exactly.
inline int exact_orient2d(const Vec3& a, const Vec3& b, const Vec3& c, int i, int j) {
  const mpq_class det = (mpq_class(b[i]) - mpq_class(a[i])) * (mpq_class(c[j]) - mpq_class(a[j])) -
                        (mpq_class(b[j]) - mpq_class(a[j])) * (mpq_class(c[i]) - mpq_class(a[i]));
  return sgn(det);
}

// Closed segments (p, q) and (a, b) in the plane (i, j), exactly.
inline bool segments_meet_2d(const Vec3& p, const Vec3& q, const Vec3& a, const Vec3& b, int i, int j) {
  const int o1 = exact_orient2d(p, q, a, i, j), o2 = exact_orient2d(p, q, b, i, j);
  const int o3 = exact_orient2d(a, b, p, i, j), o4 = exact_orient2d(a, b, q, i, j);
  auto on = [&](const Vec3& u, const Vec3& v, const Vec3& w) {  // w on segment uv, given collinear
    return std::min(u[i], v[i]) <= w[i] && w[i] <= std::max(u[i], v[i]) && std::min(u[j], v[j]) <= w[j] &&
           w[j] <= std::max(u[j], v[j]);
  };
  if (o1 != o2 && o3 != o4 && o1 * o2 <= 0 && o3 * o4 <= 0) return true;
  return (o1 == 0 && on(p, q, a)) || (o2 == 0 && on(p, q, b)) || (o3 == 0 && on(a, b, p)) || (o4 == 0 && on(a, b, q));
}

// Point p in the closed triangle (a, b, c) of the plane (i, j), exactly.
inline bool point_in_triangle_2d(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c, int i, int j) {
  const int s1 = exact_orient2d(a, b, p, i, j), s2 = exact_orient2d(b, c, p, i, j), s3 = exact_orient2d(c, a, p, i, j);
  const bool has_pos = s1 > 0 || s2 > 0 || s3 > 0, has_neg = s1 < 0 || s2 < 0 || s3 < 0;
  return !(has_pos && has_neg);
}

/// Does segment (p, q) meet triangle (a, b, c) (closed sets)? Exact, coplanar cases included
/// (decided in the coordinate plane the triangle projects to without degenerating).
inline bool segment_meets_triangle(const Vec3& p, const Vec3& q, const Vec3& a, const Vec3& b, const Vec3& c) {
  const int sp = exact_orient3d(a, b, c, p), sq = exact_orient3d(a, b, c, q);
  if (sp != 0 && sp == sq) return false;
  if (sp == 0 && sq == 0) {
    int i = 0, j = 1;
    if (exact_orient2d(a, b, c, 0, 1) == 0) {
      if (exact_orient2d(a, b, c, 1, 2) != 0) {
        i = 1;
        j = 2;
      } else {
        i = 0;
        j = 2;
      }
    }
    return point_in_triangle_2d(p, a, b, c, i, j) || point_in_triangle_2d(q, a, b, c, i, j) ||
           segments_meet_2d(p, q, a, b, i, j) || segments_meet_2d(p, q, b, c, i, j) ||
           segments_meet_2d(p, q, c, a, i, j);
  }
  const int s1 = exact_orient3d(p, q, a, b), s2 = exact_orient3d(p, q, b, c), s3 = exact_orient3d(p, q, c, a);
  const bool has_pos = s1 > 0 || s2 > 0 || s3 > 0, has_neg = s1 < 0 || s2 < 0 || s3 < 0;
  return !(has_pos && has_neg);
}

/// Number of (edge, triangle) pairs of the surface that meet without sharing a vertex; candidates
/// from the broad phase with a tiny inflation (boxes that merely touch are included).
inline int count_intersections(const Points& x, const Triangles& triangles, std::string* first = nullptr) {
  const Edges edges = unique_edges(triangles);
  int count = 0;
  // Edge–triangle candidates: every edge endpoint box vs every triangle box via vertex-face pairs is
  // not enough, so test each edge against the triangles whose boxes overlap its box (brute force on
  // the small test surfaces).
  for (Eigen::Index e = 0; e < edges.rows(); ++e) {
    const int i = edges(e, 0), j = edges(e, 1);
    const Vec3 p = x.row(i).transpose(), q = x.row(j).transpose();
    const Vec3 lo = p.cwiseMin(q), hi = p.cwiseMax(q);
    for (Eigen::Index f = 0; f < triangles.rows(); ++f) {
      const int a = triangles(f, 0), b = triangles(f, 1), c = triangles(f, 2);
      if (a == i || a == j || b == i || b == j || c == i || c == j) continue;
      const Vec3 va = x.row(a).transpose(), vb = x.row(b).transpose(), vc = x.row(c).transpose();
      const Vec3 tlo = va.cwiseMin(vb).cwiseMin(vc), thi = va.cwiseMax(vb).cwiseMax(vc);
      if ((lo.array() > thi.array()).any() || (tlo.array() > hi.array()).any()) continue;
      if (segment_meets_triangle(p, q, va, vb, vc)) {
        if (count == 0 && first)
          *first = "edge (" + std::to_string(i) + ", " + std::to_string(j) + ") meets triangle (" + std::to_string(a) +
                   ", " + std::to_string(b) + ", " + std::to_string(c) + ")";
        ++count;
      }
    }
  }
  return count;
}

/// The same count with the broad phase's edge–triangle candidates (boxes that touch included) in
/// place of the brute-force loop: for surfaces of many thousand triangles (the run checks of
/// tools/count_intersections.cpp); checked against count_intersections in test_two_way.cpp.
inline int count_intersections_broad_phase(const Points& x, const Triangles& triangles) {
  const Edges edges = unique_edges(triangles);
  int count = 0;
  for (const auto& [e, f] : edge_face_candidates(x, triangles, edges)) {
    const Vec3 p = x.row(edges(e, 0)).transpose(), q = x.row(edges(e, 1)).transpose();
    count += segment_meets_triangle(p, q, x.row(triangles(f, 0)).transpose(), x.row(triangles(f, 1)).transpose(),
                                    x.row(triangles(f, 2)).transpose());
  }
  return count;
}

}  // namespace xpd::test
