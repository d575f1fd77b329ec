// Spatial-hash proximity search (proximity.hpp).
#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <xpd/collision/distance.hpp>
#include <xpd/collision/proximity.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

namespace {

using Pair = std::array<int, 2>;

void validate(const Points& x, const Triangles& faces, const Edges& edges, double D) {
  if (!(D > 0) || !std::isfinite(D))
    throw Error(fmt::format("proximity search: the distance must be finite and > 0 (got {})", D));
  if (!x.allFinite()) throw Error("proximity search: non-finite position");
  const auto n = static_cast<int>(x.rows());
  if (faces.size() > 0 && (faces.minCoeff() < 0 || faces.maxCoeff() >= n))
    throw Error(fmt::format("proximity search: a face index is outside [0, {})", n));
  if (edges.size() > 0 && (edges.minCoeff() < 0 || edges.maxCoeff() >= n))
    throw Error(fmt::format("proximity search: an edge index is outside [0, {})", n));
}

std::vector<int> face_vertices(const Triangles& faces, Eigen::Index n) {
  std::vector<char> used(static_cast<std::size_t>(n), 0);
  for (Eigen::Index f = 0; f < faces.rows(); ++f)
    for (int k = 0; k < 3; ++k) used[static_cast<std::size_t>(faces(f, k))] = 1;
  std::vector<int> v;
  for (Eigen::Index i = 0; i < n; ++i)
    if (used[static_cast<std::size_t>(i)]) v.push_back(static_cast<int>(i));
  return v;
}

double vt_distance(const Points& x, int v, const Triangles& faces, int f) {
  return std::sqrt(point_triangle_squared_distance(x.row(v).transpose(), x.row(faces(f, 0)).transpose(),
                                                   x.row(faces(f, 1)).transpose(), x.row(faces(f, 2)).transpose()));
}

double ee_distance(const Points& x, const Edges& edges, int a, int b) {
  return std::sqrt(edge_edge_squared_distance(x.row(edges(a, 0)).transpose(), x.row(edges(a, 1)).transpose(),
                                              x.row(edges(b, 0)).transpose(), x.row(edges(b, 1)).transpose()));
}

// Distance from vertex v to the plane of face f: a lower bound of the point–triangle distance
// (0 for a degenerate face).
double plane_distance(const Points& x, int v, const Triangles& faces, int f) {
  const Vec3 a = x.row(faces(f, 0)).transpose();
  const Vec3 n = (x.row(faces(f, 1)).transpose() - a).cross(x.row(faces(f, 2)).transpose() - a);
  const double nn = n.norm();
  return nn > 0 ? std::abs((x.row(v).transpose() - a).dot(n)) / nn : 0.0;
}

// Distance between the lines of two edges: a lower bound of the segment distance (0 when they are
// nearly parallel, where it is ill-conditioned).
double line_distance(const Points& x, const Edges& edges, int a, int b) {
  const Vec3 a0 = x.row(edges(a, 0)).transpose(), b0 = x.row(edges(b, 0)).transpose();
  const Vec3 ua = x.row(edges(a, 1)).transpose() - a0, ub = x.row(edges(b, 1)).transpose() - b0;
  const Vec3 n = ua.cross(ub);
  const double nn = n.squaredNorm();
  if (!(nn > 1e-6 * ua.squaredNorm() * ub.squaredNorm())) return 0.0;
  return std::abs((b0 - a0).dot(n)) / std::sqrt(nn);
}

bool face_has(const Triangles& faces, int f, int v) { return faces(f, 0) == v || faces(f, 1) == v || faces(f, 2) == v; }

bool edges_share(const Edges& edges, int a, int b) {
  return edges(a, 0) == edges(b, 0) || edges(a, 0) == edges(b, 1) || edges(a, 1) == edges(b, 0) ||
         edges(a, 1) == edges(b, 1);
}

struct Box {
  Vec3 lo, hi;
};

template <int K, typename Rows>
Box row_box(const Points& x, const Rows& rows, Eigen::Index r, double grow) {
  Box b{x.row(rows(r, 0)).transpose(), x.row(rows(r, 0)).transpose()};
  for (int k = 1; k < K; ++k) {
    b.lo = b.lo.cwiseMin(x.row(rows(r, k)).transpose());
    b.hi = b.hi.cwiseMax(x.row(rows(r, k)).transpose());
  }
  b.lo.array() -= grow;
  b.hi.array() += grow;
  return b;
}

bool contains(const Box& b, const Vec3& p) {
  return (p.array() >= b.lo.array()).all() && (p.array() <= b.hi.array()).all();
}
bool overlap(const Box& a, const Box& b) {
  return (a.lo.array() <= b.hi.array()).all() && (b.lo.array() <= a.hi.array()).all();
}

// The grid: cells of size `cell` from `origin`, dims[a] per axis, at most ~4M cells in all (the cell
// size grows when the surface spans more). Tables are CSR: the primitives of cell c are
// items[start[c] .. start[c+1]) (a counting sort: no comparison sort of the entries).
struct Grid {
  Vec3 origin;
  double cell = 1;
  std::array<std::int64_t, 3> dims{1, 1, 1};
  std::array<std::int64_t, 3> coords(const Vec3& p) const {
    std::array<std::int64_t, 3> c{};
    for (int a = 0; a < 3; ++a)
      c[a] = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor((p[a] - origin[a]) / cell)), 0, dims[a] - 1);
    return c;
  }
  std::int64_t index(std::int64_t i, std::int64_t j, std::int64_t k) const { return (i * dims[1] + j) * dims[2] + k; }
  std::int64_t size() const { return dims[0] * dims[1] * dims[2]; }
  template <typename F>
  void for_cells(const Box& b, F&& f) const {
    const auto lo = coords(b.lo), hi = coords(b.hi);
    for (std::int64_t i = lo[0]; i <= hi[0]; ++i)
      for (std::int64_t j = lo[1]; j <= hi[1]; ++j)
        for (std::int64_t k = lo[2]; k <= hi[2]; ++k) f(index(i, j, k));
  }
};

struct CellTable {
  std::vector<int> start, items;
};

CellTable build_table(const std::vector<Box>& boxes, const Grid& grid) {
  CellTable t;
  t.start.assign(static_cast<std::size_t>(grid.size()) + 1, 0);
  for (const Box& b : boxes) grid.for_cells(b, [&](std::int64_t c) { ++t.start[static_cast<std::size_t>(c) + 1]; });
  for (std::size_t c = 1; c < t.start.size(); ++c) t.start[c] += t.start[c - 1];
  t.items.resize(static_cast<std::size_t>(t.start.back()));
  std::vector<int> fill(t.start.begin(), t.start.end() - 1);
  for (std::size_t p = 0; p < boxes.size(); ++p)
    grid.for_cells(boxes[p], [&](std::int64_t c) {
      t.items[static_cast<std::size_t>(fill[static_cast<std::size_t>(c)]++)] = static_cast<int>(p);
    });
  return t;
}

struct Found {
  std::vector<std::pair<Pair, double>> vt, ee;
};

ProximityPairs collect(tbb::enumerable_thread_specific<Found>& local) {
  std::vector<std::pair<Pair, double>> vt, ee;
  for (auto& part : local) {
    vt.insert(vt.end(), part.vt.begin(), part.vt.end());
    ee.insert(ee.end(), part.ee.begin(), part.ee.end());
  }
  auto by_pair = [](const auto& a, const auto& b) { return a.first < b.first; };
  tbb::parallel_sort(vt.begin(), vt.end(), by_pair);
  tbb::parallel_sort(ee.begin(), ee.end(), by_pair);
  ee.erase(std::unique(ee.begin(), ee.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
           ee.end());
  ProximityPairs out;
  out.vertex_triangle.reserve(vt.size());
  out.vertex_triangle_distance.reserve(vt.size());
  for (const auto& [p, d] : vt) {
    out.vertex_triangle.push_back(p);
    out.vertex_triangle_distance.push_back(d);
  }
  out.edge_edge.reserve(ee.size());
  out.edge_edge_distance.reserve(ee.size());
  for (const auto& [p, d] : ee) {
    out.edge_edge.push_back(p);
    out.edge_edge_distance.push_back(d);
  }
  return out;
}

}  // namespace

ProximityPairs proximity_search(const Points& x, const Triangles& faces, const Edges& edges, double D) {
  validate(x, faces, edges, D);
  const std::vector<int> verts = face_vertices(faces, x.rows());
  if (verts.empty()) return {};

  Grid grid;
  Vec3 lo = x.row(verts[0]).transpose(), hi = lo;
  for (int v : verts) {
    lo = lo.cwiseMin(x.row(v).transpose());
    hi = hi.cwiseMax(x.row(v).transpose());
  }
  for (Eigen::Index e = 0; e < edges.rows(); ++e)
    for (int k = 0; k < 2; ++k) {
      lo = lo.cwiseMin(x.row(edges(e, k)).transpose());
      hi = hi.cwiseMax(x.row(edges(e, k)).transpose());
    }
  grid.origin = lo.array() - 2 * D;
  const Edges face_edges = unique_edges(faces);
  grid.cell = std::max(D, mean_edge_length(x, face_edges));
  const Vec3 extent = (hi - lo).array() + 4 * D;
  auto count_cells = [&] {
    for (int a = 0; a < 3; ++a) grid.dims[a] = static_cast<std::int64_t>(std::floor(extent[a] / grid.cell)) + 1;
    return grid.size();
  };
  while (count_cells() > (std::int64_t(1) << 22)) grid.cell *= 1.5;

  tbb::enumerable_thread_specific<Found> local;

  // Vertex–triangle: triangles registered with their boxes grown by D; a vertex reads its cell.
  {
    std::vector<Box> boxes(static_cast<std::size_t>(faces.rows()));
    for (Eigen::Index f = 0; f < faces.rows(); ++f) boxes[static_cast<std::size_t>(f)] = row_box<3>(x, faces, f, D);
    const CellTable table = build_table(boxes, grid);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, verts.size(), 256), [&](const auto& range) {
      auto& out = local.local();
      for (std::size_t q = range.begin(); q != range.end(); ++q) {
        const int v = verts[q];
        const Vec3 p = x.row(v).transpose();
        const auto c = grid.coords(p);
        const auto cell = static_cast<std::size_t>(grid.index(c[0], c[1], c[2]));
        for (int q2 = table.start[cell]; q2 < table.start[cell + 1]; ++q2) {
          const int f = table.items[static_cast<std::size_t>(q2)];
          if (face_has(faces, f, v) || !contains(boxes[static_cast<std::size_t>(f)], p)) continue;
          if (plane_distance(x, v, faces, f) > D * (1 + 1e-9)) continue;  // a lower bound of the distance
          const double d = vt_distance(x, v, faces, f);
          if (d < D) out.vt.push_back({{v, f}, d});
        }
      }
    });
  }

  // Edge–edge: edges registered with boxes grown by D; an edge reads the cells of its own box and
  // keeps partners of larger index (duplicates from several cells are removed after sorting).
  {
    std::vector<Box> grown(static_cast<std::size_t>(edges.rows())), own(static_cast<std::size_t>(edges.rows()));
    for (Eigen::Index e = 0; e < edges.rows(); ++e) {
      grown[static_cast<std::size_t>(e)] = row_box<2>(x, edges, e, D);
      own[static_cast<std::size_t>(e)] = row_box<2>(x, edges, e, 0.0);
    }
    const CellTable table = build_table(grown, grid);
    tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, edges.rows(), 256), [&](const auto& range) {
      auto& out = local.local();
      for (Eigen::Index a = range.begin(); a != range.end(); ++a) {
        const int ia = static_cast<int>(a);
        const Box& own_a = own[static_cast<std::size_t>(a)];
        const auto alo = grid.coords(own_a.lo);
        grid.for_cells(own_a, [&](std::int64_t cell) {
          for (int q2 = table.start[static_cast<std::size_t>(cell)];
               q2 < table.start[static_cast<std::size_t>(cell) + 1]; ++q2) {
            const int b = table.items[static_cast<std::size_t>(q2)];
            if (b <= ia) continue;
            const Box& grown_b = grown[static_cast<std::size_t>(b)];
            if (!overlap(grown_b, own_a) || edges_share(edges, ia, b)) continue;
            // Seen from several cells: keep it in the lowest cell both ranges share.
            const auto blo = grid.coords(grown_b.lo);
            if (grid.index(std::max(alo[0], blo[0]), std::max(alo[1], blo[1]), std::max(alo[2], blo[2])) != cell)
              continue;
            if (line_distance(x, edges, ia, b) > D * (1 + 1e-9)) continue;  // a lower bound of the distance
            const double d = ee_distance(x, edges, ia, b);
            if (d < D) out.ee.push_back({{ia, b}, d});
          }
        });
      }
    });
  }
  return collect(local);
}

ProximityPairs brute_force_proximity(const Points& x, const Triangles& faces, const Edges& edges, double D) {
  validate(x, faces, edges, D);
  const std::vector<int> verts = face_vertices(faces, x.rows());
  tbb::enumerable_thread_specific<Found> local;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, verts.size()), [&](const auto& range) {
    auto& out = local.local();
    for (std::size_t q = range.begin(); q != range.end(); ++q)
      for (Eigen::Index f = 0; f < faces.rows(); ++f) {
        const int v = verts[q], fi = static_cast<int>(f);
        if (face_has(faces, fi, v)) continue;
        const double d = vt_distance(x, v, faces, fi);
        if (d < D) out.vt.push_back({{v, fi}, d});
      }
  });
  tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, edges.rows()), [&](const auto& range) {
    auto& out = local.local();
    for (Eigen::Index a = range.begin(); a != range.end(); ++a)
      for (Eigen::Index b = a + 1; b < edges.rows(); ++b) {
        const int ia = static_cast<int>(a), ib = static_cast<int>(b);
        if (edges_share(edges, ia, ib)) continue;
        const double d = ee_distance(x, edges, ia, ib);
        if (d < D) out.ee.push_back({{ia, ib}, d});
      }
  });
  return collect(local);
}

}  // namespace xpd
