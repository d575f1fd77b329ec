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

bool contains(const Box& b, const Vec3& p) { return (p.array() >= b.lo.array()).all() && (p.array() <= b.hi.array()).all(); }
bool overlap(const Box& a, const Box& b) { return (a.lo.array() <= b.hi.array()).all() && (b.lo.array() <= a.hi.array()).all(); }

// The grid: integer cell coordinates relative to the lower corner of the grown bounding box,
// packed into 21 bits per axis (the cell size is raised until every axis fits, so keys never alias).
struct Grid {
  Vec3 origin;
  double cell = 1;
  std::uint64_t key(std::int64_t i, std::int64_t j, std::int64_t k) const {
    return (static_cast<std::uint64_t>(i) << 42) | (static_cast<std::uint64_t>(j) << 21) | static_cast<std::uint64_t>(k);
  }
  std::array<std::int64_t, 3> coords(const Vec3& p) const {
    std::array<std::int64_t, 3> c{};
    for (int a = 0; a < 3; ++a) c[a] = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor((p[a] - origin[a]) / cell)));
    return c;
  }
  template <typename F>
  void for_cells(const Box& b, F&& f) const {
    const auto lo = coords(b.lo), hi = coords(b.hi);
    for (std::int64_t i = lo[0]; i <= hi[0]; ++i)
      for (std::int64_t j = lo[1]; j <= hi[1]; ++j)
        for (std::int64_t k = lo[2]; k <= hi[2]; ++k) f(key(i, j, k));
  }
};

// (cell key, primitive) sorted by key, for equal_range lookups.
using CellTable = std::vector<std::pair<std::uint64_t, int>>;

auto lookup(const CellTable& table, std::uint64_t key) {
  return std::equal_range(table.begin(), table.end(), std::pair<std::uint64_t, int>{key, -1},
                          [](const auto& a, const auto& b) { return a.first < b.first; });
}

CellTable build_table(const std::vector<Box>& boxes, const Grid& grid) {
  tbb::enumerable_thread_specific<CellTable> local;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, boxes.size(), 256), [&](const auto& range) {
    auto& out = local.local();
    for (std::size_t p = range.begin(); p != range.end(); ++p)
      grid.for_cells(boxes[p], [&](std::uint64_t key) { out.emplace_back(key, static_cast<int>(p)); });
  });
  CellTable table;
  for (auto& part : local) table.insert(table.end(), part.begin(), part.end());
  tbb::parallel_sort(table.begin(), table.end());
  return table;
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
  ee.erase(std::unique(ee.begin(), ee.end(), [](const auto& a, const auto& b) { return a.first == b.first; }), ee.end());
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
  const double extent = (hi - lo).maxCoeff() + 4 * D;
  while (extent / grid.cell >= double(1 << 20)) grid.cell *= 2;  // 21-bit coordinates never alias

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
        const auto [first, last] = lookup(table, grid.key(c[0], c[1], c[2]));
        for (auto it = first; it != last; ++it) {
          const int f = it->second;
          if (face_has(faces, f, v) || !contains(boxes[static_cast<std::size_t>(f)], p)) continue;
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
      std::vector<int> seen;
      for (Eigen::Index a = range.begin(); a != range.end(); ++a) {
        seen.clear();
        grid.for_cells(own[static_cast<std::size_t>(a)], [&](std::uint64_t key) {
          const auto [first, last] = lookup(table, key);
          for (auto it = first; it != last; ++it)
            if (it->second > a) seen.push_back(it->second);
        });
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        const int ia = static_cast<int>(a);
        for (int b : seen) {
          if (edges_share(edges, ia, b) || !overlap(grown[static_cast<std::size_t>(b)], own[static_cast<std::size_t>(a)]))
            continue;
          const double d = ee_distance(x, edges, ia, b);
          if (d < D) out.ee.push_back({{ia, b}, d});
        }
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
