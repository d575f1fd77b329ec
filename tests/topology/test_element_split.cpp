// Element splitting (the virtual node algorithm, Molino, Bao & Fedkiw 2004): a plane cut through a
// box splits its volume exactly (the fragments' fractions against the analytic volumes of the two
// sides), separates it into two node-disjoint parts, a blade that ends inside opens only where it
// is complete, an advancing blade equals one cut, a sphere's inside is its volume to the
// discretization, and the records follow an excision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <xpd/core/disjoint_sets.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {
namespace {

double rest_volume(const TetMesh& m, int t) {
  return signed_volume(m.nodes.row(m.tets(t, 0)), m.nodes.row(m.tets(t, 1)), m.nodes.row(m.tets(t, 2)),
                       m.nodes.row(m.tets(t, 3)));
}

// Connected components of the nodes through the tets.
int components(const TetMesh& m) {
  DisjointSets s(static_cast<int>(m.nodes.rows()));
  for (int t = 0; t < m.tets.rows(); ++t)
    for (int a = 1; a < 4; ++a) s.unite(m.tets(t, 0), m.tets(t, a));
  int n = 0;
  for (int v = 0; v < m.nodes.rows(); ++v) n += s.find(v) == v ? 1 : 0;
  return n;
}

// The centroid of a fragment's real corners.
Vec3 real_centroid(const FaceCutter& c, int t) {
  Vec3 sum = Vec3::Zero();
  int n = 0;
  for (int a = 0; a < 4; ++a)
    if (c.is_real(t, a)) {
      sum += c.mesh().nodes.row(c.mesh().tets(t, a)).transpose();
      ++n;
    }
  return sum / n;
}

// [0,1] × [0,0.6]² with spacing 0.2, and the slanted plane x = 0.47 + 0.1 y swept down through it
// (no node within the snap of it): the blade's positive side is x − 0.1 y < 0.47.
TetMesh bar() { return make_box(6, 4, 4, Vec3::Zero(), Vec3(1, 0.6, 0.6)); }
SweptPath slanted_blade(double from_z, double to_z) {
  SweptPath p;
  p.points = {Vec3(0.47 - 0.02, -0.2, from_z), Vec3(0.47 + 0.08, 0.8, from_z)};
  p.sweep = {Vec3(0, 0, to_z - from_z)};
  return p;
}

TEST(ElementSplit, PlaneCutThroughABoxSplitsItsVolumeExactly) {
  const TetMesh box = bar();
  FaceCutter cutter(box);
  const auto blade = swept_cut_surface(slanted_blade(0.8, -0.2));
  const CutEvent ev = cutter.split(*blade);
  const TetMesh& m = cutter.mesh();
  // Every source tet with corners on both sides is cut: a new tet per cut one.
  int straddling = 0;
  for (int t = 0; t < box.tets.rows(); ++t) {
    int left = 0;
    for (int a = 0; a < 4; ++a) left += box.nodes(box.tets(t, a), 0) - 0.1 * box.nodes(box.tets(t, a), 1) < 0.47;
    straddling += left > 0 && left < 4;
  }
  ASSERT_GT(straddling, 0);
  EXPECT_EQ(ev.tets_split, straddling);
  EXPECT_EQ(ev.tets_before, box.tets.rows());
  EXPECT_EQ(m.tets.rows(), box.tets.rows() + straddling);
  ASSERT_EQ(ev.tet_copy_of.size(), static_cast<size_t>(straddling));
  // Fractions: the two fragments of a tet make it whole; the left fragments' volume is the
  // analytic volume of the left side, ∫∫ (0.47 + 0.1 y) dy dz = 0.18 (the clip is exact for a plane).
  std::vector<double> sum(static_cast<size_t>(box.tets.rows()), 0.0);
  double left = 0, total = 0;
  for (int t = 0; t < m.tets.rows(); ++t) {
    const double v = cutter.fraction(t) * rest_volume(m, t);
    EXPECT_GT(cutter.fraction(t), 0.0);
    sum[static_cast<size_t>(cutter.source_tet(t))] += cutter.fraction(t);
    total += v;
    const Vec3 c = real_centroid(cutter, t);
    if (c.x() - 0.1 * c.y() < 0.47) left += v;
  }
  for (double s : sum) EXPECT_NEAR(s, 1.0, 1e-14);
  EXPECT_NEAR(total, 0.36, 1e-14);
  EXPECT_NEAR(left, 0.18, 1e-14);
  // Two node-disjoint parts: every fragment's nodes, real and virtual, belong to its side.
  EXPECT_EQ(components(m), 2);
  EXPECT_EQ(static_cast<int>(ev.copy_of.size()), static_cast<int>(m.nodes.rows() - box.nodes.rows()));
  for (size_t k = 0; k < ev.copy_of.size(); ++k)
    EXPECT_EQ(m.nodes.row(ev.nodes_before + static_cast<int>(k)), box.nodes.row(ev.copy_of[k]));
  // Old rows and fractions of the changed tets are what they were.
  for (size_t k = 0; k < ev.changed_tets.size(); ++k) {
    EXPECT_EQ(ev.old_tets[k], box.tets.row(ev.changed_tets[k]));
    EXPECT_EQ(ev.old_fraction[k], 1.0);
  }
  // The same blade again cuts nothing.
  EXPECT_EQ(cutter.split(*blade).tets_split, 0);
}

TEST(ElementSplit, ABladeThatEndsInsideOpensOnlyWhereItIsComplete) {
  const TetMesh box = bar();
  FaceCutter cutter(box);
  // From above the box down to z = 0.3 (the middle of the second cell layer).
  const CutEvent ev = cutter.split(*swept_cut_surface(slanted_blade(0.8, 0.3)));
  ASSERT_GT(ev.tets_split, 0);
  ASSERT_FALSE(ev.copy_of.empty());
  const TetMesh& m = cutter.mesh();
  EXPECT_EQ(components(m), 1);  // held together below the blade's end
  // Only nodes above the crack front split: a node with z ≤ 0.2 has a tet below the blade's end
  // around it on both sides.
  for (int v : ev.copy_of) EXPECT_GT(box.nodes(v, 2), 0.3);
  // The cut tets lie above the end (every edge between the sides crosses the blade).
  for (int k = 0; k < ev.tets_split; ++k) {
    const int t = ev.tet_copy_of[static_cast<size_t>(k)];
    for (int a = 0; a < 4; ++a) EXPECT_GE(box.nodes(box.tets(t, a), 2), 0.2 - 1e-12);
  }
  // The blade continues through the rest: the same mesh as one complete cut.
  cutter.split(*swept_cut_surface(slanted_blade(0.8, -0.2)));
  FaceCutter once(box);
  once.split(*swept_cut_surface(slanted_blade(0.8, -0.2)));
  EXPECT_EQ(components(cutter.mesh()), 2);
  EXPECT_EQ(cutter.mesh().tets.rows(), once.mesh().tets.rows());
  EXPECT_EQ(cutter.mesh().nodes.rows(), once.mesh().nodes.rows());
  std::vector<double> a = cutter.fractions(), b = once.fractions();
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-15);
}

// The ball's volume cut out of a box of n³ nodes on [0,1]³ (its inside fragments).
struct Ball {
  double inside = 0, total = 0;
  std::vector<int> inner;
};
Ball cut_ball(FaceCutter& cutter, const Vec3& c, double r) {
  cutter.split(*sphere_cut_surface(c, r));
  Ball b;
  for (int t = 0; t < cutter.mesh().tets.rows(); ++t) {
    const double v = cutter.fraction(t) * rest_volume(cutter.mesh(), t);
    b.total += v;
    if ((real_centroid(cutter, t) - c).norm() < r) {
      b.inside += v;
      b.inner.push_back(t);
    }
  }
  return b;
}

TEST(ElementSplit, SphereInsideConvergesToItsVolumeAndTheRecordsFollowAnExcision) {
  const Vec3 c(0.52, 0.47, 0.5);
  const double r = 0.3, ball = 4.0 / 3.0 * std::numbers::pi * r * r * r;
  FaceCutter coarse(make_box(11, 11, 11, Vec3::Zero(), Vec3::Ones()));
  FaceCutter fine(make_box(21, 21, 21, Vec3::Zero(), Vec3::Ones()));
  const Ball b = cut_ball(coarse, c, r), f = cut_ball(fine, c, r);
  EXPECT_EQ(components(coarse.mesh()), 2);  // a closed surface cuts the ball out
  // Sums of #T terms: round-off up to about #T · ε.
  auto sum_tol = [](const FaceCutter& m) { return 4e-16 * static_cast<double>(m.mesh().tets.rows()); };
  EXPECT_NEAR(b.total, 1.0, sum_tol(coarse));
  EXPECT_NEAR(f.total, 1.0, sum_tol(fine));
  // |x − c| is convex, so its linear interpolation in each tet lies above it and cuts a polyhedron
  // inscribed in the ball; the gap is second order in the spacing: halving it quarters the deficit.
  EXPECT_LT(b.inside, ball);
  EXPECT_LT(f.inside, ball);
  const double ratio = (ball - b.inside) / (ball - f.inside);
  EXPECT_GT(ratio, 3.0) << "deficits " << ball - b.inside << ", " << ball - f.inside;
  EXPECT_LT(ratio, 5.0) << "deficits " << ball - b.inside << ", " << ball - f.inside;
  std::printf("ball %.6f: inside %.6f (spacing 0.1), %.6f (0.05), deficit ratio %.2f\n", ball, b.inside, f.inside,
              ratio);
  // Excising the inside fragments: the outside keeps the box minus the inside, exactly.
  coarse.excise(b.inner);
  double left = 0;
  for (int t = 0; t < coarse.mesh().tets.rows(); ++t) {
    left += coarse.fraction(t) * rest_volume(coarse.mesh(), t);
    EXPECT_GE((real_centroid(coarse, t) - c).norm(), r);
  }
  EXPECT_NEAR(left, 1.0 - b.inside, sum_tol(coarse));
}

TEST(ElementSplit, FaceCutsAndElementSplitsDoNotMix) {
  FaceCutter split(bar());
  split.split(*swept_cut_surface(slanted_blade(0.8, -0.2)));
  EXPECT_THROW(split.cut(faces_across_plane(split.mesh(), Vec3::UnitX(), 0.2, Vec3::UnitZ())), MeshError);
  FaceCutter faces(bar());
  faces.cut(faces_across_plane(faces.mesh(), Vec3::UnitX(), 0.2, Vec3::UnitZ()));
  const TetMesh before = faces.mesh();
  EXPECT_THROW(faces.split(*swept_cut_surface(slanted_blade(0.8, -0.2))), MeshError);
  EXPECT_EQ(faces.mesh().tets, before.tets);
  EXPECT_THROW(sphere_cut_surface(Vec3::Zero(), 0.0), MeshError);
  EXPECT_THROW(swept_cut_surface(SweptPath{{Vec3::Zero()}, {Vec3::UnitZ()}}), MeshError);
}

}  // namespace
}  // namespace xpd
