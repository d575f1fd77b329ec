#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fmt/format.h>
#include <tbb/parallel_sort.h>

namespace xpd {
namespace {

// Outward faces of a positive tet (a,b,c,d); face f omits node f.
constexpr std::array<std::array<int, 3>, 4> kTetFaces{{{1, 2, 3}, {0, 3, 2}, {0, 1, 3}, {0, 2, 1}}};

struct FaceKey {
  std::array<int, 3> sorted;  // node indices, ascending
  std::int64_t id;            // 4·tet + local face
  bool even;                  // orientation parity of the face relative to `sorted`
};

// Parity of the permutation that sorts (a,b,c): even parity means same cyclic order.
bool sort3(std::array<int, 3>& v) {
  bool even = true;
  if (v[0] > v[1]) std::swap(v[0], v[1]), even = !even;
  if (v[1] > v[2]) std::swap(v[1], v[2]), even = !even;
  if (v[0] > v[1]) std::swap(v[0], v[1]), even = !even;
  return even;
}

Edges edges_from_keys(std::vector<std::uint64_t>& keys) {
  tbb::parallel_sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  Edges edges(static_cast<Eigen::Index>(keys.size()), 2);
  for (std::size_t e = 0; e < keys.size(); ++e) {
    edges(Eigen::Index(e), 0) = static_cast<int>(keys[e] >> 32);
    edges(Eigen::Index(e), 1) = static_cast<int>(keys[e] & 0xffffffffu);
  }
  return edges;
}

std::uint64_t edge_key(int i, int j) {
  if (i > j) std::swap(i, j);
  return (std::uint64_t(std::uint32_t(i)) << 32) | std::uint32_t(j);
}

}  // namespace

Triangles boundary_faces(const Tets& tets) {
  // Sort all faces by their sorted node triple; a key seen once is a boundary face.
  const Eigen::Index nt = tets.rows();
  std::vector<FaceKey> keys(static_cast<std::size_t>(4 * nt));
  for (Eigen::Index t = 0; t < nt; ++t)
    for (int f = 0; f < 4; ++f) {
      FaceKey& k = keys[std::size_t(4 * t + f)];
      k.sorted = {tets(t, kTetFaces[f][0]), tets(t, kTetFaces[f][1]), tets(t, kTetFaces[f][2])};
      k.even = sort3(k.sorted);
      k.id = 4 * t + f;
    }
  tbb::parallel_sort(keys.begin(), keys.end(), [](const FaceKey& a, const FaceKey& b) {
    return a.sorted != b.sorted ? a.sorted < b.sorted : a.id < b.id;
  });
  std::vector<std::int64_t> boundary;
  for (std::size_t i = 0; i < keys.size();) {
    std::size_t j = i + 1;
    while (j < keys.size() && keys[j].sorted == keys[i].sorted) ++j;
    if (j - i == 1) {
      boundary.push_back(keys[i].id);
    } else if (j - i > 2) {
      throw MeshError(fmt::format("boundary_faces: face ({}, {}, {}) is shared by {} tets (non-manifold)",
                                  keys[i].sorted[0], keys[i].sorted[1], keys[i].sorted[2], j - i));
    } else if (keys[i].even == keys[i + 1].even) {
      throw MeshError(fmt::format("boundary_faces: tets {} and {} share face ({}, {}, {}) with the same orientation",
                                  keys[i].id / 4, keys[i + 1].id / 4, keys[i].sorted[0], keys[i].sorted[1],
                                  keys[i].sorted[2]));
    }
    i = j;
  }
  std::sort(boundary.begin(), boundary.end());
  Triangles faces(static_cast<Eigen::Index>(boundary.size()), 3);
  for (std::size_t b = 0; b < boundary.size(); ++b) {
    const Eigen::Index t = boundary[b] / 4;
    const int f = int(boundary[b] % 4);
    faces.row(Eigen::Index(b)) << tets(t, kTetFaces[f][0]), tets(t, kTetFaces[f][1]), tets(t, kTetFaces[f][2]);
  }
  return faces;
}

std::vector<int> boundary_nodes(const Triangles& faces) {
  std::vector<int> nodes(faces.data(), faces.data() + faces.size());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::vector<int> boundary_nodes(const Tets& tets) { return boundary_nodes(boundary_faces(tets)); }

Edges unique_edges(const Tets& tets) {
  static constexpr std::array<std::array<int, 2>, 6> kEdges{{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}};
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(6 * tets.rows()));
  for (Eigen::Index t = 0; t < tets.rows(); ++t)
    for (int e = 0; e < 6; ++e) keys[std::size_t(6 * t + e)] = edge_key(tets(t, kEdges[e][0]), tets(t, kEdges[e][1]));
  return edges_from_keys(keys);
}

Edges unique_edges(const Triangles& triangles) {
  std::vector<std::uint64_t> keys(static_cast<std::size_t>(3 * triangles.rows()));
  for (Eigen::Index f = 0; f < triangles.rows(); ++f)
    for (int e = 0; e < 3; ++e) keys[std::size_t(3 * f + e)] = edge_key(triangles(f, e), triangles(f, (e + 1) % 3));
  return edges_from_keys(keys);
}

double mean_edge_length(const Points& nodes, const Edges& edges) {
  if (edges.rows() == 0) return 0.0;
  double sum = 0.0;
  for (Eigen::Index e = 0; e < edges.rows(); ++e) sum += (nodes.row(edges(e, 0)) - nodes.row(edges(e, 1))).norm();
  return sum / double(edges.rows());
}

double mean_edge_length(const Points& nodes, const Tets& tets) { return mean_edge_length(nodes, unique_edges(tets)); }

double mean_edge_length(const Points& nodes, const Triangles& triangles) {
  return mean_edge_length(nodes, unique_edges(triangles));
}

bool is_closed_manifold(const Triangles& triangles) {
  if (triangles.rows() == 0) return false;
  // Every directed edge must appear exactly once, together with its reverse.
  std::vector<std::uint64_t> directed(static_cast<std::size_t>(3 * triangles.rows()));
  for (Eigen::Index f = 0; f < triangles.rows(); ++f)
    for (int e = 0; e < 3; ++e) {
      const int i = triangles(f, e), j = triangles(f, (e + 1) % 3);
      if (i < 0 || j < 0 || i == j) return false;
      directed[std::size_t(3 * f + e)] = (std::uint64_t(std::uint32_t(i)) << 32) | std::uint32_t(j);
    }
  tbb::parallel_sort(directed.begin(), directed.end());
  if (std::adjacent_find(directed.begin(), directed.end()) != directed.end()) return false;
  for (const std::uint64_t k : directed) {
    const std::uint64_t rev = (k << 32) | (k >> 32);
    if (!std::binary_search(directed.begin(), directed.end(), rev)) return false;
  }
  return true;
}

double enclosed_volume(const Points& nodes, const Triangles& triangles) {
  if (triangles.rows() == 0) return 0.0;
  // Translation invariant for a closed surface; measuring from a surface point limits round-off.
  const Vec3 o = nodes.row(triangles(0, 0));
  double v = 0.0;
  for (Eigen::Index f = 0; f < triangles.rows(); ++f) {
    const Vec3 a = nodes.row(triangles(f, 0)) - o.transpose(), b = nodes.row(triangles(f, 1)) - o.transpose(),
               c = nodes.row(triangles(f, 2)) - o.transpose();
    v += a.dot(b.cross(c));
  }
  return v / 6.0;
}

double surface_area(const Points& nodes, const Triangles& triangles) {
  double s = 0.0;
  for (Eigen::Index f = 0; f < triangles.rows(); ++f) {
    const Vec3 a = nodes.row(triangles(f, 0)), b = nodes.row(triangles(f, 1)), c = nodes.row(triangles(f, 2));
    s += (b - a).cross(c - a).norm();
  }
  return s / 2.0;
}

}  // namespace xpd
