#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/tet_locator.hpp>

namespace xpd {

namespace {

// The Voronoi-region walk of Ericson 2005, §5.1.5: the closest feature of triangle (a, b, c) to p
// and its parameters: vertex a, b, c; edge ab, ac (s along it from a), bc (s from b); face (s, t
// along ab, ac).
enum class TriangleRegion { A, B, C, AB, AC, BC, Face };
struct TriangleWalk {
  TriangleRegion region;
  double s = 0, t = 0;
};

TriangleWalk triangle_walk(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const Vec3 ab = b - a, ac = c - a, ap = p - a;
  const double d1 = ab.dot(ap), d2 = ac.dot(ap);
  if (d1 <= 0 && d2 <= 0) return {TriangleRegion::A};
  const Vec3 bp = p - b;
  const double d3 = ab.dot(bp), d4 = ac.dot(bp);
  if (d3 >= 0 && d4 <= d3) return {TriangleRegion::B};
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) return {TriangleRegion::AB, d1 / (d1 - d3)};
  const Vec3 cp = p - c;
  const double d5 = ab.dot(cp), d6 = ac.dot(cp);
  if (d6 >= 0 && d5 <= d6) return {TriangleRegion::C};
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) return {TriangleRegion::AC, d2 / (d2 - d6)};
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) return {TriangleRegion::BC, (d4 - d3) / ((d4 - d3) + (d5 - d6))};
  const double denom = 1.0 / (va + vb + vc);
  return {TriangleRegion::Face, vb * denom, vc * denom};
}

}  // namespace

Vec3 closest_point_on_triangle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const TriangleWalk k = triangle_walk(p, a, b, c);
  switch (k.region) {
    case TriangleRegion::A:
      return a;
    case TriangleRegion::B:
      return b;
    case TriangleRegion::C:
      return c;
    case TriangleRegion::AB:
      return a + k.s * (b - a);
    case TriangleRegion::AC:
      return a + k.s * (c - a);
    case TriangleRegion::BC:
      return b + k.s * (c - b);
    case TriangleRegion::Face:
      break;
  }
  return a + (b - a) * k.s + (c - a) * k.t;
}

Vec3 closest_point_weights_on_triangle(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c) {
  const TriangleWalk k = triangle_walk(p, a, b, c);
  switch (k.region) {
    case TriangleRegion::A:
      return Vec3(1, 0, 0);
    case TriangleRegion::B:
      return Vec3(0, 1, 0);
    case TriangleRegion::C:
      return Vec3(0, 0, 1);
    case TriangleRegion::AB:
      return Vec3(1 - k.s, k.s, 0);
    case TriangleRegion::AC:
      return Vec3(1 - k.s, 0, k.s);
    case TriangleRegion::BC:
      return Vec3(0, 1 - k.s, k.s);
    case TriangleRegion::Face:
      break;
  }
  return Vec3(1 - k.s - k.t, k.s, k.t);
}

namespace {

// The selection rules shared by the grid and the brute-force oracle.
struct InsideBest {
  TetLocation best;
  double best_min = -std::numeric_limits<double>::infinity();
  void offer(int t, const Vec4& w, double tolerance) {
    const double m = w.minCoeff();
    if (!(m >= -tolerance)) return;
    if (m > best_min || (m == best_min && t < best.tet)) {
      best_min = m;
      best.tet = t;
      best.weights = w;
    }
  }
};

struct NearestBest {
  TetLocation best;
  double best_d = std::numeric_limits<double>::infinity();
  void offer(int t, double d) {
    if (d < best_d || (d == best_d && t < best.tet)) {
      best_d = d;
      best.tet = t;
      best.distance = d;
    }
  }
};

void check_mesh(const Points& nodes, const Tets& tets, const char* who) {
  if (tets.rows() == 0) throw MeshError(fmt::format("{}: mesh has no tets", who));
  if (tets.minCoeff() < 0 || tets.maxCoeff() >= nodes.rows())
    throw MeshError(fmt::format("{}: tet node index out of range [0, {})", who, nodes.rows()));
}

}  // namespace

double point_tet_distance(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  if (barycentric(p, a, b, c, d).minCoeff() >= 0) return 0.0;
  // Outside: the closest point of the solid lies on its boundary.
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [u, v, w] :
       {std::tuple{&a, &b, &c}, std::tuple{&a, &b, &d}, std::tuple{&a, &c, &d}, std::tuple{&b, &c, &d}})
    best = std::min(best, (closest_point_on_triangle(p, *u, *v, *w) - p).norm());
  return best;
}

TetLocator::TetLocator(const Points& nodes, const Tets& tets, double cell_size) : nodes_(nodes), tets_(tets) {
  check_mesh(nodes_, tets_, "TetLocator");
  const Eigen::Index nt = tets_.rows();
  // Tet bounding boxes, the mesh bounding box and the default cell size.
  std::vector<Eigen::AlignedBox3d> boxes(static_cast<std::size_t>(nt));
  Eigen::AlignedBox3d all;
  double mean_extent = 0;
  for (Eigen::Index t = 0; t < nt; ++t) {
    Eigen::AlignedBox3d& box = boxes[std::size_t(t)];
    for (int k = 0; k < 4; ++k) box.extend(nodes_.row(tets_(t, k)).transpose());
    all.extend(box);
    mean_extent += box.sizes().mean();
    max_tet_extent_ = std::max(max_tet_extent_, box.sizes().maxCoeff());
  }
  mean_extent /= double(nt);
  const Vec3 extent = all.sizes();
  h_ = cell_size > 0 ? cell_size : std::max(mean_extent, 1e-12 * std::max(extent.maxCoeff(), 1e-300));
  const double max_cells = 8.0 * double(nt) + 4096.0;
  while (true) {
    for (int a = 0; a < 3; ++a) dims_[a] = int(std::floor(extent[a] / h_)) + 1;
    if (double(dims_[0]) * dims_[1] * dims_[2] <= max_cells) break;
    h_ *= 1.25;
  }
  origin_ = all.min();

  // CSR fill: count, prefix sum, scatter (ascending tet order within each cell).
  const double margin = 1e-12 * h_ + 1e-12 * max_tet_extent_;
  const auto cell_range = [&](const Eigen::AlignedBox3d& b, Eigen::Vector3i& lo, Eigen::Vector3i& hi) {
    lo = cell_of(b.min() - Vec3::Constant(margin));
    hi = cell_of(b.max() + Vec3::Constant(margin));
  };
  const std::size_t ncells = std::size_t(dims_[0]) * dims_[1] * dims_[2];
  cell_start_.assign(ncells + 1, 0);
  Eigen::Vector3i lo, hi;
  for (Eigen::Index t = 0; t < nt; ++t) {
    cell_range(boxes[std::size_t(t)], lo, hi);
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j)
        for (int i = lo[0]; i <= hi[0]; ++i) ++cell_start_[std::size_t(cell_index(i, j, k)) + 1];
  }
  for (std::size_t c = 0; c < ncells; ++c) cell_start_[c + 1] += cell_start_[c];
  cell_tets_.resize(std::size_t(cell_start_[ncells]));
  std::vector<int> fill(cell_start_.begin(), cell_start_.end() - 1);
  for (Eigen::Index t = 0; t < nt; ++t) {
    cell_range(boxes[std::size_t(t)], lo, hi);
    for (int k = lo[2]; k <= hi[2]; ++k)
      for (int j = lo[1]; j <= hi[1]; ++j)
        for (int i = lo[0]; i <= hi[0]; ++i) cell_tets_[std::size_t(fill[std::size_t(cell_index(i, j, k))]++)] = int(t);
  }
}

Eigen::Vector3i TetLocator::cell_of(const Vec3& p) const {
  Eigen::Vector3i c;
  for (int a = 0; a < 3; ++a) {
    const double x = std::floor((p[a] - origin_[a]) / h_);
    c[a] = x < 0 ? 0 : (x >= dims_[a] - 1 ? dims_[a] - 1 : int(x));  // NaN-safe: NaN goes high
  }
  return c;
}

TetLocation TetLocator::find_tet(const Vec3& p, double tolerance) const {
  // A point with all weights ≥ −tol lies in the tet scaled by (1 + 4 tol) about its centroid,
  // i.e. within 4·tol·(tet extent) of the tet's bounding box: visit the cells of that box.
  const double reach = 4.0 * std::max(tolerance, 0.0) * max_tet_extent_ + 1e-12 * h_;
  const Eigen::Vector3i lo = cell_of(p - Vec3::Constant(reach)), hi = cell_of(p + Vec3::Constant(reach));
  InsideBest best;
  for (int k = lo[2]; k <= hi[2]; ++k)
    for (int j = lo[1]; j <= hi[1]; ++j)
      for (int i = lo[0]; i <= hi[0]; ++i) {
        const int c = cell_index(i, j, k);
        for (int s = cell_start_[std::size_t(c)]; s < cell_start_[std::size_t(c) + 1]; ++s) {
          const int t = cell_tets_[std::size_t(s)];
          best.offer(t, barycentric(p, nodes_, tets_, t), tolerance);
        }
      }
  return best.best;
}

TetLocation TetLocator::nearest_tet(const Vec3& p, double tolerance) const {
  if (TetLocation inside = find_tet(p, tolerance); inside.found()) return inside;
  // Search shells of cells around p's (clamped) cell. After shell r, every unvisited tet lies
  // farther than r·h from p, so the search stops once the best distance is ≤ r·h.
  const Eigen::Vector3i c0 = cell_of(p);
  const int max_r = dims_.maxCoeff();
  NearestBest best;
  for (int r = 0; r <= max_r; ++r) {
    for (int k = std::max(0, c0[2] - r); k <= std::min(dims_[2] - 1, c0[2] + r); ++k)
      for (int j = std::max(0, c0[1] - r); j <= std::min(dims_[1] - 1, c0[1] + r); ++j)
        for (int i = std::max(0, c0[0] - r); i <= std::min(dims_[0] - 1, c0[0] + r); ++i) {
          const int cheb = std::max({std::abs(i - c0[0]), std::abs(j - c0[1]), std::abs(k - c0[2])});
          if (cheb != r) continue;
          const int c = cell_index(i, j, k);
          for (int s = cell_start_[std::size_t(c)]; s < cell_start_[std::size_t(c) + 1]; ++s) {
            const int t = cell_tets_[std::size_t(s)];
            best.offer(t, point_tet_distance(p, nodes_.row(tets_(t, 0)), nodes_.row(tets_(t, 1)),
                                             nodes_.row(tets_(t, 2)), nodes_.row(tets_(t, 3))));
          }
        }
    if (best.best.found() && best.best_d <= r * h_) break;
  }
  if (best.best.found()) best.best.weights = barycentric(p, nodes_, tets_, best.best.tet);
  return best.best;
}

TetLocation find_tet_brute_force(const Points& nodes, const Tets& tets, const Vec3& p, double tolerance) {
  check_mesh(nodes, tets, "find_tet_brute_force");
  InsideBest best;
  for (Eigen::Index t = 0; t < tets.rows(); ++t) best.offer(int(t), barycentric(p, nodes, tets, t), tolerance);
  return best.best;
}

TetLocation nearest_tet_brute_force(const Points& nodes, const Tets& tets, const Vec3& p, double tolerance) {
  if (TetLocation inside = find_tet_brute_force(nodes, tets, p, tolerance); inside.found()) return inside;
  NearestBest best;
  for (Eigen::Index t = 0; t < tets.rows(); ++t)
    best.offer(int(t), point_tet_distance(p, nodes.row(tets(t, 0)), nodes.row(tets(t, 1)), nodes.row(tets(t, 2)),
                                          nodes.row(tets(t, 3))));
  if (best.best.found()) best.best.weights = barycentric(p, nodes, tets, best.best.tet);
  return best.best;
}

}  // namespace xpd
