#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <xpd/core/error.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {
namespace {

constexpr double kRadToDeg = 180.0 / std::numbers::pi;
const double kRegularEdgeToInradius = 2.0 * std::sqrt(6.0);

struct Accumulator {
  double min_dihedral = std::numeric_limits<double>::infinity();
  double max_dihedral = -std::numeric_limits<double>::infinity();
  double max_aspect = 0, sum_aspect = 0;
  double min_volume = std::numeric_limits<double>::infinity();
  double max_volume = -std::numeric_limits<double>::infinity();
  double total_volume = 0;
  int inverted = 0;
  void join(const Accumulator& o) {
    min_dihedral = std::min(min_dihedral, o.min_dihedral);
    max_dihedral = std::max(max_dihedral, o.max_dihedral);
    max_aspect = std::max(max_aspect, o.max_aspect);
    sum_aspect += o.sum_aspect;
    min_volume = std::min(min_volume, o.min_volume);
    max_volume = std::max(max_volume, o.max_volume);
    total_volume += o.total_volume;
    inverted += o.inverted;
  }
};

}  // namespace

TetShape tet_shape(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  TetShape s;
  s.volume = signed_volume(a, b, c, d);
  // Area-weighted face normals, outward for a positive tet (face f omits node f).
  const double sign = s.volume >= 0 ? 1.0 : -1.0;
  const std::array<Vec3, 4> n{sign * (c - b).cross(d - b), sign * (d - a).cross(c - a), sign * (b - a).cross(d - a),
                              sign * (c - a).cross(b - a)};
  double area = 0;
  for (const Vec3& v : n) area += 0.5 * v.norm();
  s.min_dihedral_deg = std::numeric_limits<double>::infinity();
  s.max_dihedral_deg = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) {
      const double ni = n[i].norm(), nj = n[j].norm();
      const double cosine = ni > 0 && nj > 0 ? std::clamp(-n[i].dot(n[j]) / (ni * nj), -1.0, 1.0) : 1.0;
      const double theta = std::acos(cosine) * kRadToDeg;
      s.min_dihedral_deg = std::min(s.min_dihedral_deg, theta);
      s.max_dihedral_deg = std::max(s.max_dihedral_deg, theta);
    }
  s.longest_edge = std::sqrt(std::max({(b - a).squaredNorm(), (c - a).squaredNorm(), (d - a).squaredNorm(),
                                       (c - b).squaredNorm(), (d - b).squaredNorm(), (d - c).squaredNorm()}));
  const double inradius = area > 0 ? 3.0 * std::abs(s.volume) / area : 0.0;
  s.aspect_ratio =
      inradius > 0 ? s.longest_edge / (kRegularEdgeToInradius * inradius) : std::numeric_limits<double>::infinity();
  return s;
}

double tet_aspect_ratio(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  return tet_shape(a, b, c, d).aspect_ratio;
}

MeshQuality mesh_quality(const TetMesh& mesh) {
  const Eigen::Index nt = mesh.tets.rows(), nv = mesh.nodes.rows();
  if (nt == 0) throw MeshError("mesh_quality: mesh has no tets");
  if (mesh.tets.minCoeff() < 0 || mesh.tets.maxCoeff() >= nv)
    throw MeshError(fmt::format("mesh_quality: tet node index out of range [0, {})", nv));

  const Accumulator acc = tbb::parallel_reduce(
      tbb::blocked_range<Eigen::Index>(0, nt, 4096), Accumulator{},
      [&](const tbb::blocked_range<Eigen::Index>& r, Accumulator local) {
        for (Eigen::Index t = r.begin(); t < r.end(); ++t) {
          const TetShape s = tet_shape(mesh.nodes.row(mesh.tets(t, 0)), mesh.nodes.row(mesh.tets(t, 1)),
                                       mesh.nodes.row(mesh.tets(t, 2)), mesh.nodes.row(mesh.tets(t, 3)));
          local.min_dihedral = std::min(local.min_dihedral, s.min_dihedral_deg);
          local.max_dihedral = std::max(local.max_dihedral, s.max_dihedral_deg);
          local.max_aspect = std::max(local.max_aspect, s.aspect_ratio);
          local.sum_aspect += s.aspect_ratio;
          local.min_volume = std::min(local.min_volume, s.volume);
          local.max_volume = std::max(local.max_volume, s.volume);
          local.total_volume += s.volume;
          local.inverted += s.volume <= 0 ? 1 : 0;
        }
        return local;
      },
      [](Accumulator a, const Accumulator& b) {
        a.join(b);
        return a;
      });

  MeshQuality q;
  q.num_nodes = nv;
  q.num_tets = nt;
  q.min_dihedral_deg = acc.min_dihedral;
  q.max_dihedral_deg = acc.max_dihedral;
  q.max_aspect_ratio = acc.max_aspect;
  q.mean_aspect_ratio = acc.sum_aspect / double(nt);
  q.min_volume = acc.min_volume;
  q.max_volume = acc.max_volume;
  q.total_volume = acc.total_volume;
  q.num_inverted = acc.inverted;
  q.mean_edge_length = mean_edge_length(mesh.nodes, mesh.tets);
  // Bounding box of the referenced nodes only (files may carry unused nodes).
  std::vector<char> used(static_cast<std::size_t>(nv), 0);
  for (Eigen::Index i = 0; i < mesh.tets.size(); ++i) used[std::size_t(mesh.tets.data()[i])] = 1;
  q.bbox_min = Vec3::Constant(std::numeric_limits<double>::infinity());
  q.bbox_max = Vec3::Constant(-std::numeric_limits<double>::infinity());
  for (Eigen::Index v = 0; v < nv; ++v)
    if (used[std::size_t(v)]) {
      q.bbox_min = q.bbox_min.cwiseMin(mesh.nodes.row(v).transpose());
      q.bbox_max = q.bbox_max.cwiseMax(mesh.nodes.row(v).transpose());
    }
  return q;
}

}  // namespace xpd
