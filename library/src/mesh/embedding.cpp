#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <xpd/core/error.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd {
namespace {

Vec3 vertex(const SurfaceMesh& s, Eigen::Index f, int k) { return s.nodes.row(s.triangles(f, k)).transpose(); }

// ---------------------------------------------------------------------------------------------
// Inside test of grid nodes: winding number along +x rays.

struct Crossing {
  int line;
  double x;
  int sign;
};

// 2D orientation (b − a) × (q − a) in the (y,z) plane.
double orient_yz(const Vec3& a, const Vec3& b, double qy, double qz) {
  return (b[1] - a[1]) * (qz - a[2]) - (b[2] - a[2]) * (qy - a[1]);
}

// inside[node] for every grid node (corners and centres).
std::vector<char> grid_nodes_inside(const SurfaceMesh& s, const BccGrid& g) {
  const int nx = g.cells[0], ny = g.cells[1], nz = g.cells[2];
  const double h = g.cell_size;
  const Vec3 o = g.origin;
  // Lines along x: corner lines (j,k) ∈ [0,ny]×[0,nz] first, then centre lines [0,ny)×[0,nz).
  const int corner_lines = (ny + 1) * (nz + 1), lines = corner_lines + ny * nz;
  tbb::enumerable_thread_specific<std::vector<Crossing>> crossings_tls;
  tbb::enumerable_thread_specific<std::vector<int>> degenerate_tls;

  tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, s.triangles.rows(), 1024), [&](const auto& range) {
    auto& crossings = crossings_tls.local();
    auto& degenerate = degenerate_tls.local();
    for (Eigen::Index f = range.begin(); f < range.end(); ++f) {
      const Vec3 a = vertex(s, f, 0), b = vertex(s, f, 1), c = vertex(s, f, 2);
      const double area = orient_yz(a, b, c[1], c[2]);  // = n_x of the triangle (times 2)
      if (area == 0) continue;                          // parallel to x: crossed only at its edges
      const int sign = area > 0 ? 1 : -1;
      const double ymin = std::min({a[1], b[1], c[1]}), ymax = std::max({a[1], b[1], c[1]});
      const double zmin = std::min({a[2], b[2], c[2]}), zmax = std::max({a[2], b[2], c[2]});
      const double lab = (b - a).tail<2>().lpNorm<Eigen::Infinity>(), lbc = (c - b).tail<2>().lpNorm<Eigen::Infinity>(),
                   lca = (a - c).tail<2>().lpNorm<Eigen::Infinity>();
      const double diam = std::max({lab, lbc, lca});
      for (int kind = 0; kind < 2; ++kind) {  // 0: corner lines, 1: centre lines
        const double shift = kind == 0 ? 0.0 : 0.5;
        const int jmax = kind == 0 ? ny : ny - 1, kmax = kind == 0 ? nz : nz - 1;
        const int j0 = std::max(0, int(std::ceil((ymin - o[1]) / h - shift)) - 1);
        const int j1 = std::min(jmax, int(std::floor((ymax - o[1]) / h - shift)) + 1);
        const int k0 = std::max(0, int(std::ceil((zmin - o[2]) / h - shift)) - 1);
        const int k1 = std::min(kmax, int(std::floor((zmax - o[2]) / h - shift)) + 1);
        for (int k = k0; k <= k1; ++k)
          for (int j = j0; j <= j1; ++j) {
            const double qy = o[1] + (j + shift) * h, qz = o[2] + (k + shift) * h;
            // Edge functions, signed so that the interior is positive.
            const double eab = sign * orient_yz(a, b, qy, qz), ebc = sign * orient_yz(b, c, qy, qz),
                         eca = sign * orient_yz(c, a, qy, qz);
            const double tol = 1e-12 * diam * (diam + std::abs(qy - a[1]) + std::abs(qz - a[2]));
            if (eab < -tol || ebc < -tol || eca < -tol) continue;  // clearly outside
            const int line = kind == 0 ? j + (ny + 1) * k : corner_lines + j + ny * k;
            if (eab <= tol || ebc <= tol || eca <= tol) {
              degenerate.push_back(line);  // through an edge or vertex: parity unreliable
              continue;
            }
            const double total = eab + ebc + eca;
            const double x = (ebc * a[0] + eca * b[0] + eab * c[0]) / total;
            crossings.push_back({line, x, sign});
          }
      }
    }
  });

  std::vector<Crossing> crossings;
  for (auto& v : crossings_tls) crossings.insert(crossings.end(), v.begin(), v.end());
  tbb::parallel_sort(crossings.begin(), crossings.end(), [](const Crossing& p, const Crossing& q) {
    return p.line != q.line ? p.line < q.line : p.x < q.x;
  });
  std::vector<char> line_degenerate(std::size_t(lines), 0);
  for (auto& v : degenerate_tls)
    for (int l : v) line_degenerate[std::size_t(l)] = 1;
  std::vector<std::size_t> line_start(std::size_t(lines) + 1, 0);
  for (const Crossing& c : crossings) ++line_start[std::size_t(c.line) + 1];
  for (int l = 0; l < lines; ++l) line_start[std::size_t(l) + 1] += line_start[std::size_t(l)];

  std::vector<char> inside(std::size_t(g.num_nodes()), 0);
  std::vector<std::int64_t> redo;  // nodes of unreliable lines, decided ray by ray
  for (int l = 0; l < lines; ++l) {
    const bool center = l >= corner_lines;
    const int local = center ? l - corner_lines : l;
    const int j = center ? local % ny : local % (ny + 1), k = center ? local / ny : local / (ny + 1);
    const int count = center ? nx : nx + 1;
    const auto node = [&](int i) { return center ? g.center_index(i, j, k) : g.corner_index(i, j, k); };
    const std::size_t b = line_start[std::size_t(l)], e = line_start[std::size_t(l) + 1];
    int net = 0;
    for (std::size_t c = b; c < e; ++c) net += crossings[c].sign;
    if (line_degenerate[std::size_t(l)] || net != 0) {
      for (int i = 0; i < count; ++i) redo.push_back(node(i));
      continue;
    }
    // Winding of node i = Σ signs of the crossings ahead of it (x_cross > x_i).
    int ahead = 0;
    std::size_t c = b;
    for (int i = 0; i < count; ++i) {
      const double xi = o[0] + (i + (center ? 0.5 : 0.0)) * h;
      while (c < e && crossings[c].x <= xi) ahead -= crossings[c++].sign;
      inside[std::size_t(node(i))] = ahead != 0;  // `ahead` counts crossings behind, negated
    }
  }
  tbb::parallel_for(std::size_t(0), redo.size(), [&](std::size_t r) {
    inside[std::size_t(redo[r])] = inside_closed_surface(s, g.node_position(redo[r]));
  });
  return inside;
}

// ---------------------------------------------------------------------------------------------
// Triangle–tet overlap by the separating axis theorem (4 tet face normals, the triangle normal,
// 6 × 3 edge cross products). Conservative: intervals that touch within `slack` overlap.

bool triangle_tet_overlap(const std::array<Vec3, 3>& tri, const std::array<Vec3, 4>& tet, double slack) {
  const auto separated = [&](const Vec3& n) {
    const double len = n.norm();
    if (len == 0) return false;
    double t0 = std::numeric_limits<double>::infinity(), t1 = -t0, s0 = t0, s1 = -t0;
    for (const Vec3& p : tri) t0 = std::min(t0, n.dot(p)), t1 = std::max(t1, n.dot(p));
    for (const Vec3& p : tet) s0 = std::min(s0, n.dot(p)), s1 = std::max(s1, n.dot(p));
    const double tol = slack * len;
    return t1 < s0 - tol || s1 < t0 - tol;
  };
  const std::array<Vec3, 3> te{tri[1] - tri[0], tri[2] - tri[1], tri[0] - tri[2]};
  const std::array<Vec3, 6> ke{tet[1] - tet[0], tet[2] - tet[0], tet[3] - tet[0],
                               tet[2] - tet[1], tet[3] - tet[1], tet[3] - tet[2]};
  if (separated(te[0].cross(te[1]))) return false;
  if (separated(ke[0].cross(ke[1])) || separated(ke[0].cross(ke[2])) || separated(ke[1].cross(ke[2])) ||
      separated(ke[3].cross(ke[4])))
    return false;
  for (const Vec3& a : te)
    for (const Vec3& b : ke)
      if (separated(a.cross(b))) return false;
  return true;
}

// Ids of the (up to) 24 tets overlapping cell c: 4 per face, faces toward ±e_a.
int tets_around_cell(const BccGrid& g, const Eigen::Vector3i& c, std::array<std::int64_t, 24>& ids) {
  int n = 0;
  for (int a = 0; a < 3; ++a) {
    if (c[a] + 1 < g.cells[a]) {
      const std::int64_t base = 12 * g.cell_index(c[0], c[1], c[2]) + 4 * a;
      for (int e = 0; e < 4; ++e) ids[std::size_t(n++)] = base + e;
    }
    if (c[a] > 0) {
      Eigen::Vector3i d = c;
      --d[a];
      const std::int64_t base = 12 * g.cell_index(d[0], d[1], d[2]) + 4 * a;
      for (int e = 0; e < 4; ++e) ids[std::size_t(n++)] = base + e;
    }
  }
  return n;
}

void check_binding(const Tets& tets, const std::vector<int>& tet_of, const BarycentricWeights& weights,
                   Eigen::Index num_nodes, const char* who) {
  if (weights.rows() != Eigen::Index(tet_of.size()))
    throw MeshError(fmt::format("{}: {} tets but {} weight rows", who, tet_of.size(), weights.rows()));
  for (std::size_t s = 0; s < tet_of.size(); ++s)
    if (tet_of[s] < 0 || tet_of[s] >= tets.rows())
      throw MeshError(
          fmt::format("{}: point {} is bound to tet {} (mesh has {} tets)", who, s, tet_of[s], tets.rows()));
  if (tets.rows() > 0 && (tets.minCoeff() < 0 || tets.maxCoeff() >= num_nodes))
    throw MeshError(fmt::format("{}: tet node index out of range [0, {})", who, num_nodes));
}

}  // namespace

Embedding make_bcc_embedding(const SurfaceMesh& closed, const BccOptions& options) {
  validate_surface(closed, "make_bcc_embedding");
  Eigen::AlignedBox3d box;
  for (Eigen::Index v = 0; v < closed.nodes.rows(); ++v) box.extend(closed.nodes.row(v).transpose());
  if (options.cell_size <= 0 && options.resolution < 1)
    throw MeshError(fmt::format("make_bcc_embedding: resolution must be ≥ 1, got {}", options.resolution));
  const double longest = box.sizes().maxCoeff();
  const double h = options.cell_size > 0 ? options.cell_size : longest / options.resolution;
  Embedding out;
  out.grid = BccGrid::covering(box, h);
  const BccGrid& g = out.grid;
  if (g.num_cells() > (std::int64_t(16) << 20))
    throw MeshError(fmt::format("make_bcc_embedding: {} lattice cells is too many (cell size {})", g.num_cells(), h));

  // (1) Tets with a node inside the surface.
  const std::vector<char> inside = grid_nodes_inside(closed, g);
  // Flags per tet id; atomics (relaxed) because step (2) reads and sets them concurrently. The
  // final set is the union of all hits, so the result does not depend on thread timing.
  std::unique_ptr<std::atomic<std::uint8_t>[]> keep(new std::atomic<std::uint8_t>[std::size_t(g.num_tet_ids())]);
  tbb::parallel_for(std::int64_t(0), g.num_tet_ids(),
                    [&](std::int64_t id) { keep[std::size_t(id)].store(0, std::memory_order_relaxed); });
  // Node indices are affine in the cell: node(c, t, k) = node(0, t, k) + (corner_index(c) for a
  // corner, cell_index(c) for a centre), so each template is resolved once.
  std::array<std::array<std::int64_t, 4>, 12> node0;
  std::array<std::array<bool, 4>, 12> is_center;
  for (int t = 0; t < 12; ++t) {
    node0[std::size_t(t)] = g.tet_nodes(t);
    for (std::size_t k = 0; k < 4; ++k) is_center[std::size_t(t)][k] = node0[std::size_t(t)][k] >= g.num_corners();
  }
  tbb::parallel_for(0, g.cells[2], [&](int k) {
    for (int j = 0; j < g.cells[1]; ++j)
      for (int i = 0; i < g.cells[0]; ++i) {
        const std::int64_t cell = g.cell_index(i, j, k), corner = g.corner_index(i, j, k);
        const int c[3] = {i, j, k};
        for (int t = 0; t < 12; ++t) {
          const int a = t / 4;
          if (c[a] + 1 >= g.cells[a]) continue;  // no neighbour across this face
          for (std::size_t q = 0; q < 4; ++q) {
            const std::int64_t n = node0[std::size_t(t)][q] + (is_center[std::size_t(t)][q] ? cell : corner);
            if (inside[std::size_t(n)]) {
              keep[std::size_t(12 * cell + t)].store(1, std::memory_order_relaxed);
              break;
            }
          }
        }
      }
  });

  // (2) Tets overlapping a surface triangle (a tet already kept is not tested again).
  const double slack = 1e-10 * h;
  tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, closed.triangles.rows(), 256), [&](const auto& range) {
    std::array<std::int64_t, 24> ids;
    for (Eigen::Index f = range.begin(); f < range.end(); ++f) {
      const std::array<Vec3, 3> tri{vertex(closed, f, 0), vertex(closed, f, 1), vertex(closed, f, 2)};
      Eigen::AlignedBox3d tb;
      for (const Vec3& p : tri) tb.extend(p);
      const Eigen::Vector3i lo = g.cell_of(tb.min() - Vec3::Constant(slack));
      const Eigen::Vector3i hi = g.cell_of(tb.max() + Vec3::Constant(slack));
      for (int k = lo[2]; k <= hi[2]; ++k)
        for (int j = lo[1]; j <= hi[1]; ++j)
          for (int i = lo[0]; i <= hi[0]; ++i) {
            const int n = tets_around_cell(g, Eigen::Vector3i(i, j, k), ids);
            for (int q = 0; q < n; ++q) {
              const std::int64_t id = ids[std::size_t(q)];
              if (keep[std::size_t(id)].load(std::memory_order_relaxed)) continue;
              const std::array<Vec3, 4> tet = g.tet_positions(id);
              Eigen::AlignedBox3d kb;
              for (const Vec3& p : tet) kb.extend(p);
              if (!kb.intersects(
                      Eigen::AlignedBox3d(tb.min() - Vec3::Constant(slack), tb.max() + Vec3::Constant(slack))))
                continue;
              if (triangle_tet_overlap(tri, tet, slack)) keep[std::size_t(id)].store(1, std::memory_order_relaxed);
            }
          }
    }
  });

  // (3) The most interior tet of each surface vertex among the 24 overlapping its cell.
  const Eigen::Index ns = closed.nodes.rows();
  std::vector<std::int64_t> vertex_tet(static_cast<std::size_t>(ns), -1);
  out.weights.resize(ns, 4);
  tbb::parallel_for(Eigen::Index(0), ns, [&](Eigen::Index s) {
    const Vec3 p = closed.nodes.row(s).transpose();
    std::array<std::int64_t, 24> ids;
    const int n = tets_around_cell(g, g.cell_of(p), ids);
    double best = -std::numeric_limits<double>::infinity();
    for (int q = 0; q < n; ++q) {
      const std::array<Vec3, 4> x = g.tet_positions(ids[std::size_t(q)]);
      const Vec4 w = barycentric(p, x[0], x[1], x[2], x[3]);
      if (w.minCoeff() > best) {
        best = w.minCoeff();
        vertex_tet[std::size_t(s)] = ids[std::size_t(q)];
        out.weights.row(s) = w.transpose();
      }
    }
  });
  for (const std::int64_t id : vertex_tet) keep[std::size_t(id)].store(1, std::memory_order_relaxed);

  // (4) Compact: kept ids ascending, nodes in grid order.
  std::vector<std::int64_t> kept;
  for (std::int64_t id = 0; id < g.num_tet_ids(); ++id)
    if (keep[std::size_t(id)].load(std::memory_order_relaxed)) kept.push_back(id);
  out.lattice = make_bcc_submesh(g, kept, &out.grid_node_of);
  out.tet_of_vertex.resize(std::size_t(ns));
  for (Eigen::Index s = 0; s < ns; ++s)
    out.tet_of_vertex[std::size_t(s)] =
        int(std::lower_bound(kept.begin(), kept.end(), vertex_tet[std::size_t(s)]) - kept.begin());
  return out;
}

Points embedded_positions(const Tets& tets, const std::vector<int>& tet_of, const BarycentricWeights& weights,
                          const Points& nodes) {
  check_binding(tets, tet_of, weights, nodes.rows(), "embedded_positions");
  Points x(Eigen::Index(tet_of.size()), 3);
  for (Eigen::Index s = 0; s < x.rows(); ++s) {
    const int t = tet_of[std::size_t(s)];
    x.row(s) = weights(s, 0) * nodes.row(tets(t, 0)) + weights(s, 1) * nodes.row(tets(t, 1)) +
               weights(s, 2) * nodes.row(tets(t, 2)) + weights(s, 3) * nodes.row(tets(t, 3));
  }
  return x;
}

Points embedded_positions(const Embedding& embedding, const Points& lattice_positions) {
  return embedded_positions(embedding.lattice.tets, embedding.tet_of_vertex, embedding.weights, lattice_positions);
}

Eigen::SparseMatrix<double> embedding_matrix(const Tets& tets, const std::vector<int>& tet_of,
                                             const BarycentricWeights& weights, Eigen::Index num_nodes) {
  check_binding(tets, tet_of, weights, num_nodes, "embedding_matrix");
  std::vector<Eigen::Triplet<double>> entries;
  entries.reserve(4 * tet_of.size());
  for (std::size_t s = 0; s < tet_of.size(); ++s)
    for (int k = 0; k < 4; ++k) entries.emplace_back(int(s), tets(tet_of[s], k), weights(Eigen::Index(s), k));
  Eigen::SparseMatrix<double> W(Eigen::Index(tet_of.size()), num_nodes);
  W.setFromTriplets(entries.begin(), entries.end());
  return W;
}

Eigen::SparseMatrix<double> embedding_matrix(const Embedding& embedding) {
  return embedding_matrix(embedding.lattice.tets, embedding.tet_of_vertex, embedding.weights,
                          embedding.lattice.nodes.rows());
}

PointEmbedding embed_points(const TetMesh& mesh, const Points& points, const EmbedPointsOptions& options) {
  if (!points.allFinite()) throw MeshError("embed_points: non-finite point coordinate");
  const TetLocator locator(mesh.nodes, mesh.tets);
  PointEmbedding out;
  const Eigen::Index np = points.rows();
  out.tet_of_point.assign(std::size_t(np), -1);
  out.weights = BarycentricWeights::Zero(np, 4);
  std::vector<double> distance(static_cast<std::size_t>(np), 0.0);
  std::vector<char> is_outside(static_cast<std::size_t>(np), 0);
  tbb::parallel_for(Eigen::Index(0), np, [&](Eigen::Index p) {
    const Vec3 x = points.row(p).transpose();
    TetLocation hit = locator.find_tet(x, options.tolerance);
    if (!hit.found()) {
      // Outside every tet by more than the tolerance: report, and bind only when snapping.
      is_outside[std::size_t(p)] = 1;
      hit = locator.nearest_tet(x, options.tolerance);
      distance[std::size_t(p)] = hit.distance;
      if (!options.snap_outside) return;
    }
    out.tet_of_point[std::size_t(p)] = hit.tet;
    out.weights.row(p) = hit.weights.transpose();
  });
  for (Eigen::Index p = 0; p < np; ++p)
    if (is_outside[std::size_t(p)]) {
      out.outside.push_back(int(p));
      out.outside_distance.push_back(distance[std::size_t(p)]);
    }
  return out;
}

PointEmbedding bind_points(const TetMesh& mesh, const Points& points, const std::vector<int>& tet_of_point,
                           double tolerance) {
  const Eigen::Index np = points.rows();
  if (tet_of_point.size() != static_cast<std::size_t>(np))
    throw MeshError(fmt::format("bind_points: {} tet indices for {} points", tet_of_point.size(), np));
  PointEmbedding out;
  out.tet_of_point = tet_of_point;
  out.weights = BarycentricWeights::Zero(np, 4);
  for (Eigen::Index p = 0; p < np; ++p) {
    const int t = tet_of_point[static_cast<std::size_t>(p)];
    if (t < 0 || t >= mesh.tets.rows())
      throw MeshError(
          fmt::format("bind_points: point {} is bound to tet {}, but the mesh has {} tets", p, t, mesh.tets.rows()));
    const Vec3 x = points.row(p).transpose();
    if (!x.allFinite()) throw MeshError(fmt::format("bind_points: point {} has a non-finite coordinate", p));
    const Vec4 w = barycentric(x, mesh.nodes, mesh.tets, t);
    out.weights.row(p) = w.transpose();
    if (w.minCoeff() < -tolerance) {
      out.outside.push_back(static_cast<int>(p));
      out.outside_distance.push_back(point_tet_distance(
          x, mesh.nodes.row(mesh.tets(t, 0)).transpose(), mesh.nodes.row(mesh.tets(t, 1)).transpose(),
          mesh.nodes.row(mesh.tets(t, 2)).transpose(), mesh.nodes.row(mesh.tets(t, 3)).transpose()));
    }
  }
  return out;
}

}  // namespace xpd
