#pragma once
// TEST-ONLY fixtures for the collision tests: an icosphere surface, a U-shaped tet block, and an
// independent brute-force point–triangle distance (not the library's Voronoi-region walk).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::test {

/// Icosahedron subdivided `levels` times, vertices on the sphere (center, radius), outward CCW.
inline SurfaceMesh icosphere(int levels, const Vec3& center = Vec3::Zero(), double radius = 1) {
  const double t = (1 + std::sqrt(5.0)) / 2;
  std::vector<Vec3> v{{-1, t, 0},  {1, t, 0},  {-1, -t, 0}, {1, -t, 0}, {0, -1, t},  {0, 1, t},
                      {0, -1, -t}, {0, 1, -t}, {t, 0, -1},  {t, 0, 1},  {-t, 0, -1}, {-t, 0, 1}};
  for (Vec3& p : v) p.normalize();
  std::vector<std::array<int, 3>> f{{0, 11, 5},  {0, 5, 1},  {0, 1, 7},  {0, 7, 10}, {0, 10, 11}, {1, 5, 9}, {5, 11, 4},
                                    {11, 10, 2}, {10, 7, 6}, {7, 1, 8},  {3, 9, 4},  {3, 4, 2},   {3, 2, 6}, {3, 6, 8},
                                    {3, 8, 9},   {4, 9, 5},  {2, 4, 11}, {6, 2, 10}, {8, 6, 7},   {9, 8, 1}};
  for (int l = 0; l < levels; ++l) {
    std::map<std::pair<int, int>, int> mid;
    const auto midpoint = [&](int a, int b) {
      const auto key = std::minmax(a, b);
      auto it = mid.find(key);
      if (it != mid.end()) return it->second;
      v.push_back((v[std::size_t(a)] + v[std::size_t(b)]).normalized());
      return mid[key] = int(v.size()) - 1;
    };
    std::vector<std::array<int, 3>> g;
    for (const auto& [a, b, c] : f) {
      const int ab = midpoint(a, b), bc = midpoint(b, c), ca = midpoint(c, a);
      g.push_back({a, ab, ca});
      g.push_back({b, bc, ab});
      g.push_back({c, ca, bc});
      g.push_back({ab, bc, ca});
    }
    f = g;
  }
  SurfaceMesh s;
  s.nodes.resize(Eigen::Index(v.size()), 3);
  for (std::size_t i = 0; i < v.size(); ++i) s.nodes.row(Eigen::Index(i)) = (center + radius * v[i]).transpose();
  s.triangles.resize(Eigen::Index(f.size()), 3);
  for (std::size_t i = 0; i < f.size(); ++i) s.triangles.row(Eigen::Index(i)) << f[i][0], f[i][1], f[i][2];
  return s;
}

/// Distance from p to segment [a, b]: clamped orthogonal projection.
inline double segment_distance_oracle(const Vec3& p, const Vec3& a, const Vec3& b) {
  const Vec3 d = b - a;
  const double s = std::clamp((p - a).dot(d) / d.squaredNorm(), 0.0, 1.0);
  return (p - a - s * d).norm();
}

/// Point–triangle distance: projection onto the plane when it falls inside (sign test of the three
/// edge normals), otherwise the nearest of the three edges.
inline double triangle_distance_oracle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const Vec3 n = (b - a).cross(c - a).normalized();
  const Vec3 q = p - n.dot(p - a) * n;
  const bool inside =
      n.dot((b - a).cross(q - a)) >= 0 && n.dot((c - b).cross(q - b)) >= 0 && n.dot((a - c).cross(q - c)) >= 0;
  if (inside) return std::abs(n.dot(p - a));
  return std::min(
      {segment_distance_oracle(p, a, b), segment_distance_oracle(p, b, c), segment_distance_oracle(p, c, a)});
}

/// Unsigned distance from p to a triangle surface by checking every triangle.
inline double surface_distance_oracle(const SurfaceMesh& s, const Vec3& p) {
  double best = std::numeric_limits<double>::infinity();
  for (Eigen::Index f = 0; f < s.triangles.rows(); ++f)
    best = std::min(best, triangle_distance_oracle(p, s.nodes.row(s.triangles(f, 0)), s.nodes.row(s.triangles(f, 1)),
                                                   s.nodes.row(s.triangles(f, 2))));
  return best;
}

/// Keeps the tets for which keep(centroid) holds and drops unused nodes (order preserved).
template <class Keep>
TetMesh keep_tets(const TetMesh& m, Keep keep) {
  std::vector<int> kept;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += m.nodes.row(m.tets(t, a)).transpose() / 4;
    if (keep(c)) kept.push_back(int(t));
  }
  std::vector<int> map(std::size_t(m.nodes.rows()), -1);
  for (int t : kept)
    for (int a = 0; a < 4; ++a) map[std::size_t(m.tets(t, a))] = 0;
  int n = 0;
  for (int& v : map)
    if (v == 0) v = n++;
  TetMesh out;
  out.nodes.resize(n, 3);
  for (std::size_t v = 0; v < map.size(); ++v)
    if (map[v] >= 0) out.nodes.row(map[v]) = m.nodes.row(Eigen::Index(v));
  out.tets.resize(Eigen::Index(kept.size()), 4);
  for (std::size_t r = 0; r < kept.size(); ++r)
    for (int a = 0; a < 4; ++a) out.tets(Eigen::Index(r), a) = map[std::size_t(m.tets(kept[r], a))];
  return out;
}

/// U-shaped block, cell 0.5: box [0,6]×[0,3]×[0,5] minus the slot 2 < x < 4, z > 1. Two lobes
/// (x ∈ [0,2] and x ∈ [4,6], z ∈ [1,5]) on a base z ∈ [0,1]; the gap between the lobes is 2.
inline TetMesh u_block() {
  const TetMesh box = make_box(13, 7, 11, Vec3(0, 0, 0), Vec3(6, 3, 5));
  return keep_tets(box, [](const Vec3& c) { return !(c.x() > 2 && c.x() < 4 && c.z() > 1); });
}

/// Moves the lobes towards each other: u_x = shift · clamp(3 − x, −1, 1) · smoothstep(z − 1), so for
/// z ≥ 2 the left lobe is translated by +shift and the right one by −shift (rigidly), the base stays.
inline Points close_u(const Points& rest, double shift) {
  Points x = rest;
  for (Eigen::Index v = 0; v < x.rows(); ++v) {
    const double s = std::clamp(3 - rest(v, 0), -1.0, 1.0);
    const double z = std::clamp(rest(v, 2) - 1, 0.0, 1.0);
    x(v, 0) += shift * s * z * z * (3 - 2 * z);
  }
  return x;
}

/// `faces` separate small triangles (size ~`size`) at random centres in the unit cube, each moving
/// rigidly by a random translation of up to `motion` per axis from x0 to x1. Vertex 3f + k is corner
/// k of face f.
struct TriangleSoup {
  Points x0, x1;
  Triangles faces;
};
inline TriangleSoup triangle_soup(int faces, double size, double motion, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> U(0, 1), D(-size, size), M(-motion, motion);
  TriangleSoup t;
  t.x0.resize(3 * faces, 3);
  t.x1.resize(3 * faces, 3);
  t.faces.resize(faces, 3);
  for (int f = 0; f < faces; ++f) {
    const Vec3 c(U(rng), U(rng), U(rng)), m(M(rng), M(rng), M(rng));
    for (int k = 0; k < 3; ++k) {
      t.x0.row(3 * f + k) = (c + Vec3(D(rng), D(rng), D(rng))).transpose();
      t.x1.row(3 * f + k) = t.x0.row(3 * f + k) + m.transpose();
      t.faces(f, k) = 3 * f + k;
    }
  }
  return t;
}

}  // namespace xpd::test
