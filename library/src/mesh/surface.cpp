#include <fmt/format.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>

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

// Unique undirected edges by a counting sort on the smaller node (linear time; each bucket is
// short and sorted in place), then listed in lexicographic order.
template <class EdgeOf>
Edges unique_edges_by_bucket(std::size_t count, int num_nodes, EdgeOf&& edge_of) {
  std::vector<int> start(std::size_t(num_nodes) + 1, 0);
  for (std::size_t e = 0; e < count; ++e) ++start[std::size_t(edge_of(e).first) + 1];
  for (int v = 0; v < num_nodes; ++v) start[std::size_t(v) + 1] += start[std::size_t(v)];
  std::vector<int> other(count), fill(start.begin(), start.end() - 1);
  for (std::size_t e = 0; e < count; ++e) {
    const auto [i, j] = edge_of(e);
    other[std::size_t(fill[std::size_t(i)]++)] = j;
  }
  std::vector<int> rows;
  rows.reserve(count);
  for (int v = 0; v < num_nodes; ++v) {
    const auto b = other.begin() + start[std::size_t(v)], e = other.begin() + start[std::size_t(v) + 1];
    std::sort(b, e);
    for (auto it = b; it != e; ++it)
      if (it == b || *it != *(it - 1)) rows.insert(rows.end(), {v, *it});
  }
  return Eigen::Map<const Edges>(rows.data(), Eigen::Index(rows.size() / 2), 2);
}

template <class Mat>
int max_index(const Mat& m) {
  if (m.size() == 0) return -1;
  if (m.minCoeff() < 0) throw MeshError("unique_edges: negative node index");
  return m.maxCoeff();
}

// Winding number of the surface around p seen along direction `dir`: Σ ±1 (by the sign of n·dir) over the
// triangles the ray p + t dir (t > 0) crosses. Sets `degenerate` when the ray passes within
// round-off of a triangle edge/vertex or starts on a triangle (then the count is unreliable).
int ray_winding(const SurfaceMesh& s, const Vec3& p, const Vec3& dir, bool& degenerate) {
  constexpr double eps = 1e-10;
  int w = 0;
  degenerate = false;
  for (Eigen::Index f = 0; f < s.triangles.rows(); ++f) {
    const Vec3 a = s.nodes.row(s.triangles(f, 0)).transpose(), b = s.nodes.row(s.triangles(f, 1)).transpose(),
               c = s.nodes.row(s.triangles(f, 2)).transpose();
    const Vec3 e1 = b - a, e2 = c - a, pv = dir.cross(e2);
    const double det = e1.dot(pv);
    const double scale = e1.norm() * e2.norm();
    if (std::abs(det) <= 1e-14 * scale) continue;  // ray parallel to the triangle plane
    const double inv = 1.0 / det;
    const Vec3 tv = p - a;
    const double u = tv.dot(pv) * inv;
    const Vec3 qv = tv.cross(e1);
    const double v = dir.dot(qv) * inv;
    const double t = e2.dot(qv) * inv;
    if (u < -eps || v < -eps || u + v > 1 + eps) continue;
    const double len = std::max({e1.norm(), e2.norm(), 1e-300});
    if (std::abs(t) <= eps * len) {
      degenerate = true;  // p on (or within round-off of) the triangle
      continue;
    }
    if (t < 0) continue;
    if (u <= eps || v <= eps || u + v >= 1 - eps) degenerate = true;
    w += det > 0 ? 1 : -1;
  }
  return w;
}

}  // namespace

bool inside_closed_surface(const SurfaceMesh& s, const Vec3& p) {
  static const std::array<Vec3, 5> dirs{Vec3(0.5773502691896258, 0.6123724356957945, 0.5400617248673217).normalized(),
                                        Vec3(-0.3713906763541037, 0.7427813527082074, -0.5570860145311556).normalized(),
                                        Vec3(0.8017837257372732, -0.2672612419124244, -0.5345224838248488).normalized(),
                                        Vec3(-0.6859943405700354, -0.5144957554275265, 0.5144957554275265).normalized(),
                                        Vec3(0.1825741858350554, -0.9128709291752769, 0.3651483716701107).normalized()};
  int w = 0;
  for (const Vec3& d : dirs) {
    bool degenerate = false;
    w = ray_winding(s, p, d, degenerate);
    if (!degenerate) break;
  }
  return w != 0;
}

namespace {
// Every tet's 4 faces, sorted by their node triple (then by 4·tet + local face): a face shared by
// tets appears as a run of equal keys.
std::vector<FaceKey> sorted_face_keys(const Tets& tets) {
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
  return keys;
}
}  // namespace

std::vector<std::vector<int>> tet_face_neighbours(const Tets& tets) {
  const Eigen::Index nt = tets.rows();
  const std::vector<FaceKey> keys = sorted_face_keys(tets);
  std::vector<std::vector<int>> next(static_cast<std::size_t>(nt));
  for (std::size_t i = 0; i < keys.size();) {
    std::size_t j = i + 1;
    while (j < keys.size() && keys[j].sorted == keys[i].sorted) ++j;
    for (std::size_t a = i; a < j; ++a)
      for (std::size_t b = i; b < j; ++b)
        if (a != b) next[static_cast<std::size_t>(keys[a].id / 4)].push_back(static_cast<int>(keys[b].id / 4));
    i = j;
  }
  for (auto& n : next) std::sort(n.begin(), n.end());
  return next;
}

Triangles boundary_faces(const Tets& tets) {
  // Sort all faces by their sorted node triple; a key seen once is a boundary face.
  const std::vector<FaceKey> keys = sorted_face_keys(tets);
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
  return unique_edges_by_bucket(std::size_t(6 * tets.rows()), max_index(tets) + 1, [&](std::size_t e) {
    const int i = tets(Eigen::Index(e / 6), kEdges[e % 6][0]), j = tets(Eigen::Index(e / 6), kEdges[e % 6][1]);
    return std::pair{std::min(i, j), std::max(i, j)};
  });
}

Edges unique_edges(const Triangles& triangles) {
  return unique_edges_by_bucket(std::size_t(3 * triangles.rows()), max_index(triangles) + 1, [&](std::size_t e) {
    const int i = triangles(Eigen::Index(e / 3), int(e % 3)), j = triangles(Eigen::Index(e / 3), int((e + 1) % 3));
    return std::pair{std::min(i, j), std::max(i, j)};
  });
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

SurfaceMesh crop_surface(const SurfaceMesh& surface, const Vec3& center, double radius) {
  const Eigen::Index nv = surface.nodes.rows();
  std::vector<char> inside(static_cast<std::size_t>(nv), 0);
  for (Eigen::Index v = 0; v < nv; ++v)
    inside[static_cast<std::size_t>(v)] = (surface.nodes.row(v).transpose() - center).norm() <= radius;
  std::vector<Eigen::Index> kept;
  for (Eigen::Index f = 0; f < surface.triangles.rows(); ++f) {
    bool in = true;
    for (int k = 0; k < 3; ++k) {
      const int v = surface.triangles(f, k);
      if (v < 0 || v >= nv)
        throw MeshError("crop_surface: triangle " + std::to_string(f) + " has a vertex out of range");
      in = in && inside[static_cast<std::size_t>(v)];
    }
    if (in) kept.push_back(f);
  }
  if (kept.empty()) throw MeshError("crop_surface: no triangle lies in the ball");
  std::vector<int> index(static_cast<std::size_t>(nv), -1);
  for (const Eigen::Index f : kept)
    for (int k = 0; k < 3; ++k) index[static_cast<std::size_t>(surface.triangles(f, k))] = 0;
  SurfaceMesh out;
  int used = 0;
  for (auto& i : index)
    if (i == 0) i = used++;
  out.nodes.resize(used, 3);
  for (Eigen::Index v = 0; v < nv; ++v)
    if (index[static_cast<std::size_t>(v)] >= 0)
      out.nodes.row(index[static_cast<std::size_t>(v)]) = surface.nodes.row(v);
  out.triangles.resize(static_cast<Eigen::Index>(kept.size()), 3);
  for (std::size_t f = 0; f < kept.size(); ++f)
    for (int k = 0; k < 3; ++k)
      out.triangles(static_cast<Eigen::Index>(f), k) = index[static_cast<std::size_t>(surface.triangles(kept[f], k))];
  return out;
}

SurfaceMesh subdivide_midpoint(const SurfaceMesh& surface, int levels) {
  if (levels < 0) throw MeshError("subdivide_midpoint: levels must be >= 0");
  SurfaceMesh s = surface;
  for (int level = 0; level < levels; ++level) {
    const Edges edges = unique_edges(s.triangles);
    const Eigen::Index nv = s.nodes.rows();
    // Edge (i, j), i < j → its midpoint's index, found by binary search in the sorted edge list.
    auto mid = [&](int a, int b) {
      const std::array<int, 2> key{std::min(a, b), std::max(a, b)};
      Eigen::Index lo = 0, hi = edges.rows();
      while (lo < hi) {
        const Eigen::Index m = (lo + hi) / 2;
        if (std::array<int, 2>{edges(m, 0), edges(m, 1)} < key)
          lo = m + 1;
        else
          hi = m;
      }
      return static_cast<int>(nv + lo);
    };
    Points nodes(nv + edges.rows(), 3);
    nodes.topRows(nv) = s.nodes;
    for (Eigen::Index e = 0; e < edges.rows(); ++e)
      nodes.row(nv + e) = 0.5 * (s.nodes.row(edges(e, 0)) + s.nodes.row(edges(e, 1)));
    Triangles tris(4 * s.triangles.rows(), 3);
    for (Eigen::Index f = 0; f < s.triangles.rows(); ++f) {
      const int a = s.triangles(f, 0), b = s.triangles(f, 1), c = s.triangles(f, 2);
      const int ab = mid(a, b), bc = mid(b, c), ca = mid(c, a);
      tris.row(4 * f) << a, ab, ca;
      tris.row(4 * f + 1) << ab, b, bc;
      tris.row(4 * f + 2) << ca, bc, c;
      tris.row(4 * f + 3) << ab, bc, ca;
    }
    s.nodes = std::move(nodes);
    s.triangles = std::move(tris);
  }
  return s;
}

SurfaceMesh make_icosphere(const Vec3& center, double radius, int levels) {
  if (!(radius > 0) || !std::isfinite(radius))
    throw MeshError(fmt::format("make_icosphere: radius must be a positive finite length (got {})", radius));
  if (levels < 0) throw MeshError("make_icosphere: levels must be >= 0");
  // The icosahedron's vertices are the cyclic permutations of (0, ±1, ±φ).
  const double phi = 0.5 * (1.0 + std::sqrt(5.0));
  SurfaceMesh s;
  s.nodes.resize(12, 3);
  s.nodes << -1, phi, 0, 1, phi, 0, -1, -phi, 0, 1, -phi, 0, 0, -1, phi, 0, 1, phi, 0, -1, -phi, 0, 1, -phi, phi, 0, -1,
      phi, 0, 1, -phi, 0, -1, -phi, 0, 1;
  s.triangles.resize(20, 3);
  s.triangles << 0, 11, 5, 0, 5, 1, 0, 1, 7, 0, 7, 10, 0, 10, 11, 1, 5, 9, 5, 11, 4, 11, 10, 2, 10, 7, 6, 7, 1, 8, 3, 9,
      4, 3, 4, 2, 3, 2, 6, 3, 6, 8, 3, 8, 9, 4, 9, 5, 2, 4, 11, 6, 2, 10, 8, 6, 7, 9, 8, 1;
  s.nodes.rowwise().normalize();
  for (int level = 0; level < levels; ++level) {
    s = subdivide_midpoint(s, 1);
    s.nodes.rowwise().normalize();
  }
  s.nodes *= radius;
  s.nodes.rowwise() += center.transpose();
  return s;
}

}  // namespace xpd
