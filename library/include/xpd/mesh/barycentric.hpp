#pragma once
// Barycentric coordinates in a tetrahedron, the weights of every embedding in xpd, and the closest
// point on a triangle (the distance queries of mesh/ and collision/).
#include <algorithm>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

using Vec4 = Eigen::Vector4d;
/// #P × 4 barycentric weights, one row per embedded point (row-major).
using BarycentricWeights = Eigen::Matrix<double, Eigen::Dynamic, 4, Eigen::RowMajor>;

/// Barycentric weights w of p in tet (a,b,c,d): p = w0 a + w1 b + w2 c + w3 d with Σ w = 1.
/// Solved by Cramer's rule on [b−a, c−a, d−a] λ = p − a, w = (1 − λ1 − λ2 − λ3, λ1, λ2, λ3), so
/// Σ w = 1 to round-off and the weights are affine in p (they extrapolate outside the tet:
/// p is inside iff min w ≥ 0). Either orientation of the tet works; a degenerate tet gives
/// non-finite weights.
inline Vec4 barycentric(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  const Vec3 e1 = b - a, e2 = c - a, e3 = d - a, r = p - a;
  const Vec3 n23 = e2.cross(e3);
  const double inv = 1.0 / e1.dot(n23);
  const double l1 = r.dot(n23) * inv;
  const double l2 = e1.dot(r.cross(e3)) * inv;
  const double l3 = e1.dot(e2.cross(r)) * inv;
  return Vec4(1.0 - l1 - l2 - l3, l1, l2, l3);
}

/// Barycentric weights of p in tet `t` of a mesh (nodes #V × 3, tets #T × 4).
inline Vec4 barycentric(const Vec3& p, const Points& nodes, const Tets& tets, Eigen::Index t) {
  return barycentric(p, nodes.row(tets(t, 0)), nodes.row(tets(t, 1)), nodes.row(tets(t, 2)), nodes.row(tets(t, 3)));
}

/// Closest point to p on triangle (a, b, c): the Voronoi-region walk of Ericson 2005, §5.1.5
/// (vertex regions, then edge regions, then the face). Defined in mesh/tet_locator.cpp.
Vec3 closest_point_on_triangle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c);
/// The same closest point as barycentric weights (w_a, w_b, w_c), Σ w = 1, from the same walk.
Vec3 closest_point_weights_on_triangle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c);

}  // namespace xpd
