#pragma once
// Shared by the two-way tests of the CPU projector (collision/test_two_way.cpp) and of the device
// one (gpu/test_device_two_way.cpp): two icospheres, and the auditor of every projection step.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <set>
#include <xpd/collision/proximity.hpp>
#include <xpd/collision/surface_ccd.hpp>
#include <xpd/collision/two_way.hpp>
#include <xpd/mesh/surface.hpp>

#include "collision/collision_fixtures.hpp"
#include "test_util.hpp"  // verbose()

namespace xpd::test {

struct Bodies {
  Points x;
  Triangles faces;
};

// Two icospheres of radius 1, the second at `centre`.
inline Bodies two_spheres(int levels, const Vec3& centre) {
  const SurfaceMesh a = test::icosphere(levels), b = test::icosphere(levels, centre, 1.0);
  Bodies s;
  s.x.resize(a.nodes.rows() + b.nodes.rows(), 3);
  s.x << a.nodes, b.nodes;
  s.faces.resize(a.triangles.rows() + b.triangles.rows(), 3);
  s.faces << a.triangles, b.triangles.array() + static_cast<int>(a.nodes.rows());
  return s;
}

// A unit icosphere (4 levels of subdivision: 2) centred 1.1 above a kinematic plate of two triangles
// at z = 0 spanning [−h, h]²; the plate's 4 vertices come last, with inverse mass 0.
struct SphereOverPlate {
  Points x;
  Triangles faces;
  Edges sphere_edges;
  Eigen::VectorXd inverse_mass;
  int n0 = 0;  ///< the sphere's vertices
};
inline SphereOverPlate sphere_over_plate(double h) {
  const SurfaceMesh sphere = test::icosphere(2, Vec3(0, 0, 1.1), 1.0);
  SphereOverPlate s;
  s.n0 = static_cast<int>(sphere.nodes.rows());
  const int n0 = s.n0;
  s.x.resize(n0 + 4, 3);
  s.x.topRows(n0) = sphere.nodes;
  s.x.bottomRows(4) << -h, -h, 0, h, -h, 0, h, h, 0, -h, h, 0;
  s.faces.resize(sphere.triangles.rows() + 2, 3);
  s.faces << sphere.triangles, Eigen::RowVector3i(n0, n0 + 1, n0 + 2), Eigen::RowVector3i(n0, n0 + 2, n0 + 3);
  s.sphere_edges = unique_edges(sphere.triangles);
  s.inverse_mass = Eigen::VectorXd::Ones(s.x.rows());
  s.inverse_mass.tail(4).setZero();
  return s;
}

// Checks the invariants and the CCD audit of every step; counts steps. Invariants: D_i ≤ D⁽ˡ⁾; no
// surface vertex moves more than γD⁽ˡ⁾/2 (pairs outside P); every brute-force pair closer than D⁽ˡ⁾
// is in P; with impact zones or the paper's rule, for each such pair of distance d, the displacement
// of any of its vertices relative to any vertex of the other side is ≤ γ d (the condition under
// which it cannot meet: implied by the paper's per-vertex |Δx_i| ≤ γ D_i / 2, which is checked too
// for that rule). The separating-plane rule allows larger relative motion (sliding, separating):
// for it the conservative CCD of every sub-step is the check that no pair meets.
struct Auditor {
  const TwoWayProjector& projector;
  int steps = 0, searches = 0, ccd_hits = 0, move_violations = 0, cap_violations = 0, missing_pairs = 0,
      relative_violations = 0;
  void operator()(const TwoWayStepInfo& s) {
    ++steps;
    searches += s.searched;
    const double gamma = projector.options().gamma;
    const bool zones = projector.options().forward != TwoWayForward::Planes;
    const Points& x0 = *s.s_before;  // contact points (the nodes when W = I)
    const Points d = *s.s_after - x0;
    for (Eigen::Index i = 0; i < x0.rows(); ++i) {
      const double Di = (*s.safe_distance)[static_cast<std::size_t>(i)];
      if (!std::isfinite(Di)) continue;  // not on the contact surface
      if (Di > s.D) ++cap_violations;
      const double move = d.row(i).norm();
      if (move > 0.5 * gamma * s.D * (1 + 1e-12)) ++cap_violations;
      if (projector.options().forward == TwoWayForward::Vertex && move > 0.5 * gamma * Di * (1 + 1e-12))
        ++move_violations;
    }
    const ProximityPairs brute = brute_force_proximity(x0, projector.faces(), projector.contact_edges(), s.D);
    const Triangles& f = projector.faces();
    const Edges& e = projector.contact_edges();
    auto relative = [&](const int* v, int na) {
      double rel = 0;
      for (int i = 0; i < na; ++i)
        for (int k = na; k < 4; ++k) rel = std::max(rel, (d.row(v[i]) - d.row(v[k])).norm());
      return rel;
    };
    for (std::size_t q = 0; q < brute.vertex_triangle.size(); ++q) {
      const auto& p = brute.vertex_triangle[q];
      const int v[4] = {p[0], f(p[1], 0), f(p[1], 1), f(p[1], 2)};
      if (zones && relative(v, 1) > gamma * brute.vertex_triangle_distance[q] * (1 + 1e-9)) ++relative_violations;
    }
    for (std::size_t q = 0; q < brute.edge_edge.size(); ++q) {
      const auto& p = brute.edge_edge[q];
      const int v[4] = {e(p[0], 0), e(p[0], 1), e(p[1], 0), e(p[1], 1)};
      if (zones && relative(v, 2) > gamma * brute.edge_edge_distance[q] * (1 + 1e-9)) ++relative_violations;
    }
    const std::set<std::array<int, 2>> vt(s.pairs->vertex_triangle.begin(), s.pairs->vertex_triangle.end()),
        ee(s.pairs->edge_edge.begin(), s.pairs->edge_edge.end());
    for (const auto& p : brute.vertex_triangle) missing_pairs += vt.count(p) == 0;
    for (const auto& p : brute.edge_edge) missing_pairs += ee.count(p) == 0;
    // Conservative CCD of the linear sub-step x⁽ˡ⁾ → x⁽ˡ⁺¹⁾.
    CcdOptions o;
    o.tolerance = 1e-7;
    const SurfaceCcdResult ccd = surface_ccd(x0, *s.s_after, projector.faces(), projector.contact_edges(), o);
    ccd_hits += ccd.hit;
  }
};

inline Eigen::VectorXd unit_inverse_masses(Eigen::Index n) { return Eigen::VectorXd::Ones(n); }

/// Every invariant the auditor checks held at every step, and it saw every step of `st`.
inline void expect_clean_audit(const Auditor& audit, const TwoWayStats& st) {
  EXPECT_EQ(audit.ccd_hits, 0);
  EXPECT_EQ(audit.move_violations, 0);
  EXPECT_EQ(audit.cap_violations, 0);
  EXPECT_EQ(audit.missing_pairs, 0);
  EXPECT_EQ(audit.relative_violations, 0);
  EXPECT_EQ(audit.steps, st.steps);
}

}  // namespace xpd::test
