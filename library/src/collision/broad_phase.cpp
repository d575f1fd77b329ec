// Sort-and-sweep broad phase (broad_phase.hpp).
#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <cmath>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

namespace {

struct Box {
  double lo[3], hi[3];
  int id;          // vertex, edge or face index
  int v[3];        // its vertices (-1 where it has fewer)
  bool kinematic;  // every vertex at or above the kinematic_from index
};

using Pairs = std::vector<std::array<int, 2>>;

void validate(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges, double inflation) {
  if (x0.rows() != x1.rows())
    throw Error(fmt::format("broad phase: {} positions at t = 0 but {} at t = 1", x0.rows(), x1.rows()));
  if (!(inflation >= 0) || !std::isfinite(inflation))
    throw Error(fmt::format("broad phase: inflation must be finite and >= 0 (got {})", inflation));
  if (!x0.allFinite() || !x1.allFinite()) throw Error("broad phase: non-finite position");
  const auto n = static_cast<int>(x0.rows());
  if (faces.size() > 0 && (faces.minCoeff() < 0 || faces.maxCoeff() >= n))
    throw Error(fmt::format("broad phase: a face index is outside [0, {})", n));
  if (edges.size() > 0 && (edges.minCoeff() < 0 || edges.maxCoeff() >= n))
    throw Error(fmt::format("broad phase: an edge index is outside [0, {})", n));
}

// Swept, inflated boxes of the vertices (all rows), then unions for edges and faces.
std::vector<Box> vertex_boxes(const Points& x0, const Points& x1, double r) {
  std::vector<Box> boxes(static_cast<std::size_t>(x0.rows()));
  for (Eigen::Index i = 0; i < x0.rows(); ++i) {
    Box& b = boxes[static_cast<std::size_t>(i)];
    for (int a = 0; a < 3; ++a) {
      b.lo[a] = std::min(x0(i, a), x1(i, a)) - r;
      b.hi[a] = std::max(x0(i, a), x1(i, a)) + r;
    }
    b.id = static_cast<int>(i);
    b.v[0] = static_cast<int>(i);
    b.v[1] = b.v[2] = -1;
    b.kinematic = false;
  }
  return boxes;
}

template <int K, typename Rows>
std::vector<Box> union_boxes(const std::vector<Box>& vb, const Rows& rows, int kinematic_from) {
  std::vector<Box> boxes(static_cast<std::size_t>(rows.rows()));
  for (Eigen::Index e = 0; e < rows.rows(); ++e) {
    Box& b = boxes[static_cast<std::size_t>(e)];
    b = vb[static_cast<std::size_t>(rows(e, 0))];
    for (int k = 1; k < K; ++k) {
      const Box& o = vb[static_cast<std::size_t>(rows(e, k))];
      for (int a = 0; a < 3; ++a) {
        b.lo[a] = std::min(b.lo[a], o.lo[a]);
        b.hi[a] = std::max(b.hi[a], o.hi[a]);
      }
    }
    b.id = static_cast<int>(e);
    b.kinematic = true;
    for (int k = 0; k < 3; ++k) {
      b.v[k] = k < K ? rows(e, k) : -1;
      if (k < K && b.v[k] < kinematic_from) b.kinematic = false;
    }
  }
  return boxes;
}

bool overlap(const Box& a, const Box& b) {
  for (int k = 0; k < 3; ++k)
    if (a.lo[k] > b.hi[k] || b.lo[k] > a.hi[k]) return false;
  return true;
}

bool share_vertex(const Box& a, const Box& b) {
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      if (a.v[i] >= 0 && a.v[i] == b.v[j]) return true;
  return false;
}

// Vertex boxes of the vertices the faces use.
std::vector<Box> used_vertex_boxes(const std::vector<Box>& all, const Triangles& faces, int kinematic_from) {
  std::vector<Box> out;
  for (const int v : boundary_nodes(faces)) {
    out.push_back(all[static_cast<std::size_t>(v)]);
    out.back().kinematic = v >= kinematic_from;
  }
  return out;
}

int spread_axis(const std::vector<Box>& boxes) {
  if (boxes.empty()) return 0;
  double mean[3] = {0, 0, 0}, sq[3] = {0, 0, 0};
  for (const Box& b : boxes)
    for (int a = 0; a < 3; ++a) mean[a] += 0.5 * (b.lo[a] + b.hi[a]);
  for (double& m : mean) m /= static_cast<double>(boxes.size());
  for (const Box& b : boxes)
    for (int a = 0; a < 3; ++a) {
      const double d = 0.5 * (b.lo[a] + b.hi[a]) - mean[a];
      sq[a] += d * d;
    }
  return static_cast<int>(std::max_element(sq, sq + 3) - sq);
}

void sort_by_lo(std::vector<Box>& boxes, int axis) {
  tbb::parallel_sort(boxes.begin(), boxes.end(), [axis](const Box& a, const Box& b) {
    return a.lo[axis] < b.lo[axis] || (a.lo[axis] == b.lo[axis] && a.id < b.id);
  });
}

Pairs gather(tbb::enumerable_thread_specific<Pairs>& local) {
  Pairs out;
  for (Pairs& p : local) out.insert(out.end(), p.begin(), p.end());
  tbb::parallel_sort(out.begin(), out.end());
  return out;
}

// Pairs (a from `as`, b from `bs`) with overlapping boxes, both lists sorted by lo[axis]: each pair
// is found once, from the box whose lo is smaller (ties: from `as`).
template <typename Accept>
Pairs sweep_two(const std::vector<Box>& as, const std::vector<Box>& bs, int axis, Accept accept) {
  tbb::enumerable_thread_specific<Pairs> local;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, as.size(), 256), [&](const tbb::blocked_range<std::size_t>& r) {
    Pairs& out = local.local();
    for (std::size_t i = r.begin(); i < r.end(); ++i) {
      const Box& a = as[i];
      auto j =
          std::lower_bound(bs.begin(), bs.end(), a.lo[axis], [axis](const Box& b, double v) { return b.lo[axis] < v; });
      for (; j != bs.end() && j->lo[axis] <= a.hi[axis]; ++j)
        if (overlap(a, *j) && accept(a, *j)) out.push_back({a.id, j->id});
    }
  });
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, bs.size(), 256), [&](const tbb::blocked_range<std::size_t>& r) {
    Pairs& out = local.local();
    for (std::size_t i = r.begin(); i < r.end(); ++i) {
      const Box& b = bs[i];
      auto j =
          std::upper_bound(as.begin(), as.end(), b.lo[axis], [axis](double v, const Box& a) { return v < a.lo[axis]; });
      for (; j != as.end() && j->lo[axis] <= b.hi[axis]; ++j)
        if (overlap(*j, b) && accept(*j, b)) out.push_back({j->id, b.id});
    }
  });
  return gather(local);
}

// Pairs within one list sorted by lo[axis], as (smaller id, larger id).
template <typename Accept>
Pairs sweep_one(const std::vector<Box>& bs, int axis, Accept accept) {
  tbb::enumerable_thread_specific<Pairs> local;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, bs.size(), 256), [&](const tbb::blocked_range<std::size_t>& r) {
    Pairs& out = local.local();
    for (std::size_t i = r.begin(); i < r.end(); ++i) {
      const Box& a = bs[i];
      for (std::size_t j = i + 1; j < bs.size() && bs[j].lo[axis] <= a.hi[axis]; ++j)
        if (overlap(a, bs[j]) && accept(a, bs[j])) out.push_back({std::min(a.id, bs[j].id), std::max(a.id, bs[j].id)});
    }
  });
  return gather(local);
}

// Candidates: no common vertex; not both of kinematic vertices only, or (mixed_only) exactly one so.
auto candidate_test(bool mixed_only) {
  return [mixed_only](const Box& a, const Box& b) {
    return (mixed_only ? a.kinematic != b.kinematic : !(a.kinematic && b.kinematic)) && !share_vertex(a, b);
  };
}

}  // namespace

SurfaceCandidates swept_candidates(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                                   double inflation, int kinematic_from, bool mixed_only) {
  validate(x0, x1, faces, edges, inflation);
  const std::vector<Box> all = vertex_boxes(x0, x1, inflation);
  std::vector<Box> vs = used_vertex_boxes(all, faces, kinematic_from);
  std::vector<Box> fs = union_boxes<3>(all, faces, kinematic_from);
  std::vector<Box> es = union_boxes<2>(all, edges, kinematic_from);
  SurfaceCandidates c;
  {
    std::vector<Box> both = vs;
    both.insert(both.end(), fs.begin(), fs.end());
    const int axis = spread_axis(both);
    sort_by_lo(vs, axis);
    sort_by_lo(fs, axis);
    c.vertex_face = sweep_two(vs, fs, axis, candidate_test(mixed_only));
  }
  const int axis = spread_axis(es);
  sort_by_lo(es, axis);
  c.edge_edge = sweep_one(es, axis, candidate_test(mixed_only));
  return c;
}

std::vector<std::array<int, 2>> edge_face_candidates(const Points& x, const Triangles& faces, const Edges& edges,
                                                     int kinematic_from) {
  validate(x, x, faces, edges, 0.0);
  const std::vector<Box> all = vertex_boxes(x, x, 0.0);
  std::vector<Box> fs = union_boxes<3>(all, faces, kinematic_from);
  std::vector<Box> es = union_boxes<2>(all, edges, kinematic_from);
  std::vector<Box> both = es;
  both.insert(both.end(), fs.begin(), fs.end());
  const int axis = spread_axis(both);
  sort_by_lo(es, axis);
  sort_by_lo(fs, axis);
  return sweep_two(es, fs, axis, candidate_test(false));
}

SurfaceCandidates brute_force_candidates(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                                         double inflation, int kinematic_from, bool mixed_only) {
  validate(x0, x1, faces, edges, inflation);
  const std::vector<Box> all = vertex_boxes(x0, x1, inflation);
  const std::vector<Box> vs = used_vertex_boxes(all, faces, kinematic_from);
  const std::vector<Box> fs = union_boxes<3>(all, faces, kinematic_from);
  const std::vector<Box> es = union_boxes<2>(all, edges, kinematic_from);
  const auto accept = candidate_test(mixed_only);
  tbb::enumerable_thread_specific<Pairs> vf, ee;
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, vs.size(), 64), [&](const tbb::blocked_range<std::size_t>& r) {
    Pairs& out = vf.local();
    for (std::size_t i = r.begin(); i < r.end(); ++i)
      for (const Box& f : fs)
        if (overlap(vs[i], f) && accept(vs[i], f)) out.push_back({vs[i].id, f.id});
  });
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, es.size(), 64), [&](const tbb::blocked_range<std::size_t>& r) {
    Pairs& out = ee.local();
    for (std::size_t i = r.begin(); i < r.end(); ++i)
      for (std::size_t j = i + 1; j < es.size(); ++j)
        if (overlap(es[i], es[j]) && accept(es[i], es[j])) out.push_back({es[i].id, es[j].id});
  });
  SurfaceCandidates c;
  c.vertex_face = gather(vf);
  c.edge_edge = gather(ee);
  return c;
}

}  // namespace xpd
