#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <utility>
#include <xpd/collision/sdf_grid.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

namespace {

// 2D orientation with Simulation-of-Simplicity tie-breaking (as in SDFGen): the sign of
// y1 x2 − x1 y2, and on an exact zero a lexicographic rule that is antisymmetric under swapping
// the two points. Because the two triangles sharing an edge evaluate the same products on the same
// (identically translated) coordinates, a grid line through an edge or vertex is attributed to
// exactly one side — the crossing count of a closed surface stays exact without any epsilon.
int orientation(double x1, double y1, double x2, double y2, double& twice_area) {
  twice_area = y1 * x2 - x1 * y2;
  if (twice_area > 0) return 1;
  if (twice_area < 0) return -1;
  if (y2 > y1) return 1;
  if (y2 < y1) return -1;
  if (x1 > x2) return 1;
  if (x1 < x2) return -1;
  return 0;
}

// Whether the 2D point (x0, y0) lies in the projected triangle; on success the barycentric
// weights (a, b, c) and the orientation sign (the crossing's winding contribution).
bool point_in_triangle_2d(double x0, double y0, double x1, double y1, double x2, double y2, double x3, double y3,
                          double& a, double& b, double& c, int& sign) {
  x1 -= x0, x2 -= x0, x3 -= x0;
  y1 -= y0, y2 -= y0, y3 -= y0;
  const int sa = orientation(x2, y2, x3, y3, a);
  if (sa == 0) return false;
  if (orientation(x3, y3, x1, y1, b) != sa) return false;
  if (orientation(x1, y1, x2, y2, c) != sa) return false;
  const double sum = a + b + c;
  if (sum == 0) return false;  // all three areas zero: a degenerate (edge-on) triangle, no crossing
  a /= sum, b /= sum, c /= sum;
  sign = sa;
  return true;
}

int floor_index(double u) { return static_cast<int>(std::floor(u)); }
int ceil_index(double u) { return static_cast<int>(std::ceil(u)); }

}  // namespace

SdfGrid::SdfGrid(const SurfaceMesh& s, const SdfGridOptions& options) {
  const Eigen::Index nv = s.nodes.rows(), nf = s.triangles.rows();
  if (nf == 0) throw MeshError("SdfGrid: the surface has no triangles");
  if (options.padding < 1) throw MeshError(fmt::format("SdfGrid: padding must be >= 1, got {}", options.padding));
  if (options.band < 1) throw MeshError(fmt::format("SdfGrid: band must be >= 1, got {}", options.band));
  if (!std::isfinite(options.cell_size) || options.cell_size < 0)
    throw MeshError(fmt::format("SdfGrid: cell_size must be finite and >= 0, got {}", options.cell_size));
  if (options.cell_size == 0 && options.resolution < 1)
    throw MeshError(fmt::format("SdfGrid: resolution must be >= 1, got {}", options.resolution));
  Vec3 lo = Vec3::Constant(std::numeric_limits<double>::infinity()), hi = -lo;
  for (Eigen::Index f = 0; f < nf; ++f)
    for (int a = 0; a < 3; ++a) {
      const int v = s.triangles(f, a);
      if (v < 0 || v >= nv)
        throw MeshError(fmt::format("SdfGrid: triangle {} references vertex {} out of range [0, {})", f, v, nv));
      const Vec3 p = s.nodes.row(v).transpose();
      if (!p.allFinite()) throw MeshError(fmt::format("SdfGrid: vertex {} has a non-finite coordinate", v));
      lo = lo.cwiseMin(p);
      hi = hi.cwiseMax(p);
    }
  const Vec3 extent = hi - lo;
  const double longest = extent.maxCoeff();
  if (!(longest > 0)) throw MeshError("SdfGrid: the surface's bounding box is degenerate");
  h_ = options.cell_size > 0 ? options.cell_size : longest / options.resolution;
  band_ = options.band;
  double total = 1;
  for (int d = 0; d < 3; ++d) {
    const double n = std::ceil(extent[d] / h_) + 2.0 * options.padding + 1.0;
    if (!(n <= 65536)) throw MeshError(fmt::format("SdfGrid: {} nodes along axis {} (cell size too small)", n, d));
    dims_[d] = static_cast<int>(n);
    total *= n;
  }
  if (total > double(1 << 27))
    throw MeshError(fmt::format("SdfGrid: {} grid nodes exceed the limit of 2^27 (cell size too small)", total));
  origin_ = lo - options.padding * h_ * Vec3::Ones();
  const std::size_t count = static_cast<std::size_t>(total);
  phi_.assign(count, std::numeric_limits<double>::infinity());
  std::vector<int> nearest(count, -1);  // triangle realizing |phi| (closest-feature propagation)

  const auto tri = [&](int f, int a) -> Vec3 { return s.nodes.row(s.triangles(f, a)).transpose(); };
  const auto dist_to = [&](int f, const Vec3& p) {
    return (p - closest_point_on_triangle(p, tri(f, 0), tri(f, 1), tri(f, 2))).norm();
  };
  const int nx = dims_[0], ny = dims_[1], nz = dims_[2];

  // ---- 1. Exact distances in the band. Triangles are bucketed by the z-slices their enlarged
  // bounding box covers, so each slice is written by one task only (no atomics, deterministic).
  std::vector<std::vector<int>> slab(static_cast<std::size_t>(nz));
  std::vector<Eigen::Vector3i> blo(static_cast<std::size_t>(nf)), bhi(static_cast<std::size_t>(nf));
  for (Eigen::Index f = 0; f < nf; ++f) {
    Vec3 tlo = tri(int(f), 0), thi = tlo;
    for (int a = 1; a < 3; ++a) tlo = tlo.cwiseMin(tri(int(f), a)), thi = thi.cwiseMax(tri(int(f), a));
    for (int d = 0; d < 3; ++d) {
      blo[std::size_t(f)][d] = std::max(0, ceil_index((tlo[d] - origin_[d]) / h_ - band_));
      bhi[std::size_t(f)][d] = std::min(dims_[d] - 1, floor_index((thi[d] - origin_[d]) / h_ + band_));
    }
    for (int k = blo[std::size_t(f)][2]; k <= bhi[std::size_t(f)][2]; ++k) slab[std::size_t(k)].push_back(int(f));
  }
  tbb::parallel_for(0, nz, [&](int k) {
    for (int f : slab[std::size_t(k)]) {
      const Eigen::Vector3i& l = blo[std::size_t(f)];
      const Eigen::Vector3i& u = bhi[std::size_t(f)];
      const Vec3 a = tri(f, 0), b = tri(f, 1), c = tri(f, 2);
      for (int j = l[1]; j <= u[1]; ++j)
        for (int i = l[0]; i <= u[0]; ++i) {
          const Vec3 p = node(i, j, k);
          const double d = (p - closest_point_on_triangle(p, a, b, c)).norm();
          const std::size_t id = index(i, j, k);
          if (d < phi_[id]) phi_[id] = d, nearest[id] = f;
        }
    }
  });

  // ---- 2. Outside the band: closest-triangle propagation (the idea of SDFGen). Nodes
  // are swept plane by plane along ±x, ±y, ±z; every node of a plane looks at the 9 nodes of the
  // previous plane it touches and adopts a neighbour's triangle when that one is nearer (exact
  // distance to that triangle, so values only decrease and never drop below the true distance).
  // Within a plane the nodes are independent, hence parallel. Band nodes are already exact.
  std::vector<char> exact(count, 0);
  for (std::size_t id = 0; id < count; ++id) exact[id] = phi_[id] <= band_ * h_;
  const auto sweep = [&](int axis, int dir) {
    const int o1 = (axis + 1) % 3, o2 = (axis + 2) % 3;
    for (int step = 1; step < dims_[axis]; ++step) {
      const int cur = dir > 0 ? step : dims_[axis] - 1 - step;
      tbb::parallel_for(0, dims_[o2], [&](int c2) {
        Eigen::Vector3i ijk, q;
        ijk[axis] = cur;
        ijk[o2] = c2;
        q[axis] = cur - dir;
        for (int c1 = 0; c1 < dims_[o1]; ++c1) {
          ijk[o1] = c1;
          const std::size_t id = index(ijk[0], ijk[1], ijk[2]);
          if (exact[id]) continue;
          const Vec3 p = node(ijk[0], ijk[1], ijk[2]);
          for (int d2 = -1; d2 <= 1; ++d2) {
            q[o2] = c2 + d2;
            if (q[o2] < 0 || q[o2] >= dims_[o2]) continue;
            for (int d1 = -1; d1 <= 1; ++d1) {
              q[o1] = c1 + d1;
              if (q[o1] < 0 || q[o1] >= dims_[o1]) continue;
              const int f = nearest[index(q[0], q[1], q[2])];
              if (f < 0 || f == nearest[id]) continue;
              const double d = dist_to(f, p);
              if (d < phi_[id]) phi_[id] = d, nearest[id] = f;
            }
          }
        }
      });
    }
  };
  for (int round = 0; round < 2; ++round)
    for (int axis = 0; axis < 3; ++axis) {
      sweep(axis, +1);
      sweep(axis, -1);
    }

  // ---- 3. Sign from winding numbers along +x rays, one per grid line (y_j, z_k).
  std::vector<std::vector<int>> zslab(static_cast<std::size_t>(nz));
  std::vector<std::pair<int, int>> jrange(static_cast<std::size_t>(nf));
  for (Eigen::Index f = 0; f < nf; ++f) {
    double ylo = std::numeric_limits<double>::infinity(), yhi = -ylo, zlo = ylo, zhi = -ylo;
    for (int a = 0; a < 3; ++a) {
      const Vec3 p = tri(int(f), a);
      ylo = std::min(ylo, p.y()), yhi = std::max(yhi, p.y()), zlo = std::min(zlo, p.z()), zhi = std::max(zhi, p.z());
    }
    jrange[std::size_t(f)] = {std::max(0, ceil_index((ylo - origin_.y()) / h_) - 1),
                              std::min(ny - 1, floor_index((yhi - origin_.y()) / h_) + 1)};
    const int k0 = std::max(0, ceil_index((zlo - origin_.z()) / h_) - 1);
    const int k1 = std::min(nz - 1, floor_index((zhi - origin_.z()) / h_) + 1);
    for (int k = k0; k <= k1; ++k) zslab[std::size_t(k)].push_back(int(f));
  }
  std::atomic<bool> open_surface{false};
  tbb::parallel_for(0, nz, [&](int k) {
    std::vector<std::vector<std::pair<double, int>>> lines(static_cast<std::size_t>(ny));
    const double z0 = origin_.z() + k * h_;
    for (int f : zslab[std::size_t(k)]) {
      const Vec3 A = tri(f, 0), B = tri(f, 1), C = tri(f, 2);
      for (int j = jrange[std::size_t(f)].first; j <= jrange[std::size_t(f)].second; ++j) {
        const double y0 = origin_.y() + j * h_;
        double a, b, c;
        int sign;
        if (point_in_triangle_2d(y0, z0, A.y(), A.z(), B.y(), B.z(), C.y(), C.z(), a, b, c, sign))
          lines[std::size_t(j)].emplace_back(a * A.x() + b * B.x() + c * C.x(), sign);
      }
    }
    for (int j = 0; j < ny; ++j) {
      auto& line = lines[std::size_t(j)];
      int net = 0;
      for (const auto& [x, sign] : line) net += sign;
      if (net != 0) open_surface = true;
      std::sort(line.begin(), line.end());
      // Walk from +x to −x: winding of node i = Σ signs of the crossings with x > x_i.
      int w = 0;
      std::size_t next = line.size();
      for (int i = nx - 1; i >= 0; --i) {
        const double xi = origin_.x() + i * h_;
        while (next > 0 && line[next - 1].first > xi) w += line[--next].second;
        if (w != 0) phi_[index(i, j, k)] = -phi_[index(i, j, k)];
      }
    }
  });
  if (open_surface)
    throw MeshError("SdfGrid: the surface is not closed (a grid line crosses it a net non-zero number of times)");
}

double SdfGrid::interior(const Vec3& x, Vec3* gradient) const {
  int c[3];
  double f[3];
  for (int d = 0; d < 3; ++d) {
    const double u = (x[d] - origin_[d]) / h_;
    c[d] = std::clamp(static_cast<int>(std::floor(u)), 0, dims_[d] - 2);
    f[d] = std::clamp(u - c[d], 0.0, 1.0);
  }
  double v[2][2][2];
  for (int dk = 0; dk < 2; ++dk)
    for (int dj = 0; dj < 2; ++dj)
      for (int di = 0; di < 2; ++di) v[dk][dj][di] = phi_[index(c[0] + di, c[1] + dj, c[2] + dk)];
  const double fx = f[0], fy = f[1], fz = f[2];
  // Interpolate along x, then y, then z; derivatives by the product rule on the same factors.
  double vx[2][2], dx[2][2];
  for (int dk = 0; dk < 2; ++dk)
    for (int dj = 0; dj < 2; ++dj) {
      vx[dk][dj] = (1 - fx) * v[dk][dj][0] + fx * v[dk][dj][1];
      dx[dk][dj] = v[dk][dj][1] - v[dk][dj][0];
    }
  double vy[2], dxy[2], dy[2];
  for (int dk = 0; dk < 2; ++dk) {
    vy[dk] = (1 - fy) * vx[dk][0] + fy * vx[dk][1];
    dxy[dk] = (1 - fy) * dx[dk][0] + fy * dx[dk][1];
    dy[dk] = vx[dk][1] - vx[dk][0];
  }
  const double value = (1 - fz) * vy[0] + fz * vy[1];
  if (gradient) *gradient = Vec3((1 - fz) * dxy[0] + fz * dxy[1], (1 - fz) * dy[0] + fz * dy[1], vy[1] - vy[0]) / h_;
  return value;
}

double SdfGrid::value_and_gradient(const Vec3& x, Vec3& gradient) const {
  if (!x.allFinite()) throw Error("SdfGrid: query point is not finite");
  const Vec3 c = x.cwiseMax(origin_).cwiseMin(upper());
  const double v = interior(c, &gradient);
  const Vec3 off = x - c;
  const double d = off.stableNorm();  // stable: finite up to |x| ~ 1e308
  if (d == 0) return v;
  for (int a = 0; a < 3; ++a)
    if (off[a] != 0) gradient[a] = off[a] / d;
  return v + d;
}

double SdfGrid::value(const Vec3& x) const {
  if (!x.allFinite()) throw Error("SdfGrid: query point is not finite");
  const Vec3 c = x.cwiseMax(origin_).cwiseMin(upper());
  return interior(c, nullptr) + (x - c).stableNorm();
}

Vec3 SdfGrid::gradient(const Vec3& x) const {
  Vec3 g;
  value_and_gradient(x, g);
  return g;
}

}  // namespace xpd
