// Sort-and-sweep broad phase (broad_phase.hpp).
#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_sort.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

namespace {

// An axis-aligned box; the cache's filter uses these alone (48 bytes: the pass stays in cache).
struct Bounds {
  double lo[3], hi[3];
};

// The swept box of vertex i over x0 → x1, grown by r.
Bounds swept_bounds(const Points& x0, const Points& x1, Eigen::Index i, double r) {
  Bounds b;
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = std::min(x0(i, a), x1(i, a)) - r;
    b.hi[a] = std::max(x0(i, a), x1(i, a)) + r;
  }
  return b;
}

// Grows b to contain o.
void grow(Bounds& b, const Bounds& o) {
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = std::min(b.lo[a], o.lo[a]);
    b.hi[a] = std::max(b.hi[a], o.hi[a]);
  }
}

bool overlap(const Bounds& a, const Bounds& b) {
  for (int k = 0; k < 3; ++k)
    if (a.lo[k] > b.hi[k] || b.lo[k] > a.hi[k]) return false;
  return true;
}

struct Box : Bounds {
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
    static_cast<Bounds&>(b) = swept_bounds(x0, x1, i, r);
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
    for (int k = 1; k < K; ++k) grow(b, vb[static_cast<std::size_t>(rows(e, k))]);
    b.id = static_cast<int>(e);
    b.kinematic = true;
    for (int k = 0; k < 3; ++k) {
      b.v[k] = k < K ? rows(e, k) : -1;
      if (k < K && b.v[k] < kinematic_from) b.kinematic = false;
    }
  }
  return boxes;
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

CandidateCache::CandidateCache(Triangles faces, Edges edges, double margin, double largest_inflation,
                               int kinematic_from)
    : faces_(std::move(faces)),
      edges_(std::move(edges)),
      margin_(margin),
      largest_inflation_(largest_inflation),
      kinematic_from_(kinematic_from),
      used_(boundary_nodes(faces_)) {
  // The edges' vertices too (an edge list need not come from the faces): every vertex a cached pair
  // can name, so that the validity test of query() watches the motion of all of them.
  for (Eigen::Index e = 0; e < edges_.rows(); ++e)
    for (Eigen::Index c = 0; c < edges_.cols(); ++c) used_.push_back(edges_(e, c));
  std::sort(used_.begin(), used_.end());
  used_.erase(std::unique(used_.begin(), used_.end()), used_.end());
  if (!(margin > 0) || !std::isfinite(margin))
    throw Error(fmt::format("candidate cache: margin must be finite and > 0 (got {})", margin));
  if (!(largest_inflation >= 0) || !std::isfinite(largest_inflation))
    throw Error(fmt::format("candidate cache: largest inflation must be finite and >= 0 (got {})", largest_inflation));
}

SurfaceCandidates CandidateCache::query(const Points& x0, const Points& x1, double inflation, bool mixed_only) {
  validate(x0, x1, faces_, edges_, inflation);
  ++queries_;
  // Largest distance of a used vertex from its centre at either end (max norm), and the scale of
  // the coordinates for the rounding slack of the containment test.
  auto reach = [&](const Points& c) {
    double far = 0, scale = 0;
    for (const int v : used_) {
      far = std::max({far, (x0.row(v) - c.row(v)).cwiseAbs().maxCoeff(), (x1.row(v) - c.row(v)).cwiseAbs().maxCoeff()});
      scale = std::max(scale, c.row(v).cwiseAbs().maxCoeff());
    }
    return std::make_pair(far, scale);
  };
  double half = 0;  // half of the step's largest motion
  for (const int v : used_) half = std::max(half, 0.5 * (x1.row(v) - x0.row(v)).cwiseAbs().maxCoeff());
  const double needed = std::max(inflation, largest_inflation_) + margin_ + half;
  // Valid: the query's boxes inside the cached ones, and the cache not oversized for this query
  // (after a long step, a short one rebuilds rather than filter a list 4³ times too large).
  bool valid = centre_.rows() == x0.rows() && radius_ <= 4 * needed;
  if (valid) {
    const auto [far, scale] = reach(centre_);
    valid = far + inflation <= radius_ - 1e-9 * radius_ - 8 * std::numeric_limits<double>::epsilon() * scale;
  }
  if (!valid) {
    centre_ = 0.5 * (x0 + x1);
    radius_ = needed;
    cached_ = swept_candidates(centre_, centre_, faces_, edges_, radius_, kinematic_from_, false);
    ++rebuilds_;
  }
  // The cached pairs whose boxes at this query overlap (and, with mixed_only, that pair a
  // kinematic element with another): the order of the cached lists, which are sorted, is kept.
  // Compact bounds (no ids) keep the pass over the pairs in cache.
  // Only the surface's vertices: a contact surface is often a small part of the body's nodes
  // (scenes/face_ipc.json: 2,594 triangles of an 18,818-node mesh), and the others' boxes are never
  // read.
  std::vector<Bounds> vb(static_cast<std::size_t>(x0.rows()));
  tbb::parallel_for(std::size_t{0}, used_.size(), [&](std::size_t k) {
    vb[static_cast<std::size_t>(used_[k])] = swept_bounds(x0, x1, used_[k], inflation);
  });
  auto unions = [&](const auto& rows) {
    std::vector<Bounds> out(static_cast<std::size_t>(rows.rows()));
    tbb::parallel_for(Eigen::Index{0}, rows.rows(), [&](Eigen::Index e) {
      Bounds& b = out[static_cast<std::size_t>(e)];
      b = vb[static_cast<std::size_t>(rows(e, 0))];
      for (Eigen::Index c = 1; c < rows.cols(); ++c) grow(b, vb[static_cast<std::size_t>(rows(e, c))]);
    });
    return out;
  };
  const std::vector<Bounds> fb = unions(faces_), eb = unions(edges_);
  auto kinematic = [&](const auto& rows, int e) {
    for (Eigen::Index c = 0; c < rows.cols(); ++c)
      if (rows(e, c) < kinematic_from_) return false;
    return true;
  };
  auto keep = [&](const std::vector<std::array<int, 2>>& in, auto test) {
    std::vector<char> flag(in.size());
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, in.size(), 1024),
                      [&](const tbb::blocked_range<std::size_t>& r) {
                        for (std::size_t k = r.begin(); k < r.end(); ++k) flag[k] = test(in[k]) ? 1 : 0;
                      });
    std::vector<std::array<int, 2>> out;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (flag[k]) out.push_back(in[k]);
    return out;
  };
  SurfaceCandidates c;
  c.vertex_face = keep(cached_.vertex_face, [&](const std::array<int, 2>& p) {
    return overlap(vb[static_cast<std::size_t>(p[0])], fb[static_cast<std::size_t>(p[1])]) &&
           (!mixed_only || (p[0] >= kinematic_from_) != kinematic(faces_, p[1]));
  });
  c.edge_edge = keep(cached_.edge_edge, [&](const std::array<int, 2>& p) {
    return overlap(eb[static_cast<std::size_t>(p[0])], eb[static_cast<std::size_t>(p[1])]) &&
           (!mixed_only || kinematic(edges_, p[0]) != kinematic(edges_, p[1]));
  });
  return c;
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
