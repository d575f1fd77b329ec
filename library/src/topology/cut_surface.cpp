#include <fmt/format.h>

#include <Eigen/Geometry>
#include <cmath>
#include <limits>
#include <xpd/core/error.hpp>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

std::vector<SweptTriangle> swept_triangles(const SweptPath& path) {
  const size_t m = path.points.size();
  if (m < 2) throw MeshError(fmt::format("swept path: {} point(s), at least 2 needed", m));
  if (path.sweep.size() != 1 && path.sweep.size() != m)
    throw MeshError(fmt::format("swept path: {} sweep vectors for {} points (give 1 or {})", path.sweep.size(), m, m));
  for (const auto* list : {&path.points, &path.sweep})
    for (const Vec3& v : *list)
      if (!v.allFinite()) throw MeshError("swept path: a point or sweep vector is not finite");
  std::vector<SweptTriangle> tris;
  double arc = 0;
  for (size_t i = 0; i + 1 < m; ++i) {
    const Vec3 &p0 = path.points[i], &p1 = path.points[i + 1];
    const double next = arc + (p1 - p0).norm();
    const Vec3 q0 = p0 + path.sweep_at(i), q1 = p1 + path.sweep_at(i + 1);
    tris.push_back(SweptTriangle{{p0, p1, q1}, {arc, next, next}});
    tris.push_back(SweptTriangle{{p0, q1, q0}, {arc, next, arc}});
    arc = next;
  }
  return tris;
}

std::optional<std::array<double, 3>> segment_triangle(const Vec3& a, const Vec3& b, const Vec3& v0, const Vec3& v1,
                                                      const Vec3& v2) {
  const Vec3 d = b - a, e1 = v1 - v0, e2 = v2 - v0;
  const Vec3 p = d.cross(e2);
  const double det = e1.dot(p);
  if (std::abs(det) <= 1e-14 * d.norm() * e1.norm() * e2.norm()) return std::nullopt;
  const Vec3 s = a - v0;
  const double u = s.dot(p) / det;
  if (u < 0 || u > 1) return std::nullopt;
  const Vec3 q = s.cross(e1);
  const double v = d.dot(q) / det;
  if (v < 0 || u + v > 1) return std::nullopt;
  const double t = e2.dot(q) / det;
  if (t < 0 || t > 1) return std::nullopt;
  return std::array<double, 3>{t, u, v};
}

namespace {

class SweptCutSurface final : public CutSurface {
 public:
  explicit SweptCutSurface(std::vector<SweptTriangle> all) {
    for (const SweptTriangle& t : all) {
      const Vec3 n = (t.v[1] - t.v[0]).cross(t.v[2] - t.v[0]);
      if (!(n.norm() > 0)) continue;  // a degenerate patch (a zero sweep or a repeated point)
      tris_.push_back(t);
      normals_.push_back(n.normalized());
      for (const Vec3& v : t.v) box_.extend(v);
    }
    if (tris_.empty()) throw MeshError("swept path: every patch is degenerate (zero sweep or repeated points)");
  }
  Vec3 closest(const Vec3& x, size_t k) const {
    return closest_point_on_triangle(x, tris_[k].v[0], tris_[k].v[1], tris_[k].v[2]);
  }
  double distance(const Vec3& x, size_t k) const { return (x - closest(x, k)).norm(); }
  double side(const Vec3& x) const override {
    // The nearest triangle decides (a degenerate patch, with a zero normal, is skipped); the
    // distance to its plane, not to the triangle, so that a node beside the blade's end sees the
    // plane the blade will pass through.
    double best = std::numeric_limits<double>::infinity(), plane = 0;
    for (size_t k = 0; k < tris_.size(); ++k) {
      const double d = distance(x, k);
      if (d < best) {
        best = d;
        plane = (x - closest(x, k)).dot(normals_[k]);
      }
    }
    return plane;
  }
  Vec3 normal(const Vec3& x) const override {
    double best = std::numeric_limits<double>::infinity();
    Vec3 n = normals_.front();
    for (size_t k = 0; k < tris_.size(); ++k)
      if (const double d = distance(x, k); d < best) best = d, n = normals_[k];
    return n;
  }
  bool crosses(const Vec3& a, const Vec3& b, double tolerance) const override {
    Eigen::AlignedBox3d seg(a.cwiseMin(b), a.cwiseMax(b));
    seg.extend(seg.min() - Vec3::Constant(tolerance)).extend(seg.max() + Vec3::Constant(tolerance));
    if (!seg.intersects(box_)) return false;
    for (size_t k = 0; k < tris_.size(); ++k) {
      const SweptTriangle& t = tris_[k];
      if (segment_triangle(a, b, t.v[0], t.v[1], t.v[2])) return true;
      if (distance(a, k) <= tolerance || distance(b, k) <= tolerance) return true;
    }
    return false;
  }

 private:
  std::vector<SweptTriangle> tris_;
  std::vector<Vec3> normals_;
  Eigen::AlignedBox3d box_;
};

class SphereCutSurface final : public CutSurface {
 public:
  SphereCutSurface(const Vec3& c, double r) : c_(c), r_(r) {}
  double side(const Vec3& x) const override { return (x - c_).norm() - r_; }
  Vec3 normal(const Vec3& x) const override {
    const Vec3 d = x - c_;
    return d.norm() > 0 ? Vec3(d.normalized()) : Vec3(Vec3::UnitX());
  }
  bool crosses(const Vec3& a, const Vec3& b, double tolerance) const override {
    // The distance to c along the segment ranges over [nearest, farthest]; it meets the sphere
    // when r lies in that range.
    const Vec3 d = b - a;
    const double len2 = d.squaredNorm();
    const double s = len2 > 0 ? std::clamp((c_ - a).dot(d) / len2, 0.0, 1.0) : 0.0;
    const double nearest = (a + s * d - c_).norm();
    const double farthest = std::max((a - c_).norm(), (b - c_).norm());
    return nearest <= r_ + tolerance && r_ - tolerance <= farthest;
  }

 private:
  Vec3 c_;
  double r_;
};

}  // namespace

std::unique_ptr<CutSurface> swept_cut_surface(const SweptPath& path) {
  return std::make_unique<SweptCutSurface>(swept_triangles(path));
}

std::unique_ptr<CutSurface> sphere_cut_surface(const Vec3& center, double radius) {
  if (!center.allFinite() || !std::isfinite(radius) || !(radius > 0))
    throw MeshError(fmt::format("sphere cut surface: centre must be finite and radius > 0 (got {})", radius));
  return std::make_unique<SphereCutSurface>(center, radius);
}

}  // namespace xpd
