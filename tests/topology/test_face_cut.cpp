// Face-separating cuts: a partial cut splits exactly the nodes inside the cut (crack-front nodes
// stay single), a complete cut separates the mesh into two node-disjoint parts, invariants hold,
// repeated cuts are no-ops and bad input leaves the mesh unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/topology/face_cut.hpp>

#include "../solver/pd_fixtures.hpp"

namespace xpd {
namespace {

// 5³ nodes on [0,1]³ (spacing 0.25), cut plane x = 0.5.
TetMesh box5() { return make_box(5, 5, 5, Vec3::Zero(), Vec3::Ones()); }

TEST(FaceCut, PartialCutSplitsInteriorNodesAndKeepsTheCrackFrontSingle) {
  const TetMesh box = box5();
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ());
  ASSERT_EQ(faces.size(), 2u * 4u * 4u);  // two triangles per cell face of the plane
  // The faces whose centroid has z < 0.5: the lower half of the plane.
  std::vector<TetPair> lower;
  for (const auto& f : faces) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(f.first, a)).transpose() / 4.0;
    Vec3 d = Vec3::Zero();
    for (int a = 0; a < 4; ++a) d += box.nodes.row(box.tets(f.second, a)).transpose() / 4.0;
    if ((c.z() + d.z()) / 2 < 0.5) lower.push_back(f);
  }
  ASSERT_EQ(lower.size(), 16u);
  FaceCutter cutter(box);
  const CutEvent ev = cutter.cut(lower);
  EXPECT_EQ(ev.faces_cut, 16);
  EXPECT_EQ(ev.nodes_before, 125);
  // Split: the plane's nodes with z in {0, 0.25} (5 × 2); the nodes at z = 0.5 are the crack front.
  ASSERT_EQ(ev.copy_of.size(), 10u);
  for (size_t k = 0; k < ev.copy_of.size(); ++k) {
    const int v = ev.copy_of[k];
    EXPECT_NEAR(box.nodes(v, 0), 0.5, 1e-12);
    EXPECT_LT(box.nodes(v, 2), 0.5 - 1e-9);
    EXPECT_EQ(cutter.mesh().nodes.row(125 + static_cast<int>(k)), box.nodes.row(v));  // same rest position
  }
  EXPECT_EQ(check_cut_mesh(cutter.mesh()), "");
  EXPECT_EQ(ev.changed_tets.size(), ev.old_tets.size());
  for (size_t k = 0; k < ev.changed_tets.size(); ++k) EXPECT_EQ(ev.old_tets[k], box.tets.row(ev.changed_tets[k]));
  // Every changed tet lies on one side of the plane and is the copy's side.
  for (int t : ev.changed_tets) {
    double cx = 0;
    for (int a = 0; a < 4; ++a) cx += cutter.mesh().nodes(cutter.mesh().tets(t, a), 0) / 4.0;
    EXPECT_GT(cx, 0.5);  // the lowest tet id (x = 0 corner) keeps the originals: the x < 0.5 side
  }
  // Cutting the same faces again changes nothing.
  const CutEvent again = cutter.cut(lower);
  EXPECT_EQ(again.faces_cut, 0);
  EXPECT_TRUE(again.copy_of.empty());
  EXPECT_EQ(cutter.num_cut_faces(), 16);
}

TEST(FaceCut, CompleteCutSeparatesTheMeshIntoTwoNodeDisjointParts) {
  const TetMesh box = box5();
  FaceCutter cutter(box);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ());
  // Advance the cut in four events; the result does not depend on the steps.
  for (size_t i = 0; i < faces.size(); i += 8)
    cutter.cut(std::vector<TetPair>(faces.begin() + long(i), faces.begin() + long(i + 8)));
  const TetMesh& m = cutter.mesh();
  EXPECT_EQ(m.nodes.rows(), 125 + 25);  // every node of the plane split once
  EXPECT_EQ(check_cut_mesh(m), "");
  std::set<int> left, right;
  for (int t = 0; t < m.tets.rows(); ++t) {
    double cx = 0;
    for (int a = 0; a < 4; ++a) cx += m.nodes(m.tets(t, a), 0) / 4.0;
    for (int a = 0; a < 4; ++a) (cx < 0.5 ? left : right).insert(m.tets(t, a));
  }
  for (int v : left) EXPECT_EQ(right.count(v), 0u) << "node " << v << " on both sides";
}

TEST(FaceCut, BadInputIsRefusedWithTheMeshUnchanged) {
  FaceCutter cutter(box5());
  const auto faces = faces_across_plane(cutter.mesh(), Vec3::UnitX(), 0.5, Vec3::UnitZ());
  // Tets 0 and 200 do not share a face; a valid face in the same call is not cut either.
  EXPECT_THROW(cutter.cut({faces[0], TetPair{0, 200}}), MeshError);
  EXPECT_THROW(cutter.cut({TetPair{3, 3}}), MeshError);
  EXPECT_THROW(cutter.cut({TetPair{-1, 3}}), MeshError);
  EXPECT_EQ(cutter.num_cut_faces(), 0);
  EXPECT_EQ(cutter.mesh().nodes.rows(), 125);
  // A cut of no faces (a cut surface that misses the mesh) is a no-op.
  EXPECT_EQ(cutter.cut({}).faces_cut, 0);
  EXPECT_TRUE(faces_across_plane(cutter.mesh(), Vec3::UnitX(), 3.0, Vec3::UnitZ()).empty());
  TetMesh bad = box5();
  bad.tets.conservativeResize(bad.tets.rows() + 1, Eigen::NoChange);
  bad.tets.row(bad.tets.rows() - 1) = bad.tets.row(0);  // a duplicate tet: its faces are shared thrice
  EXPECT_THROW(FaceCutter{bad}, MeshError);
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// An incision (a partial cut from the top face, 0.5 long in y and 0.5 deep) in a 9³ block pulled
// apart in x by its attached end faces: solved to equilibrium with PD on the cut mesh, the wound
// opens at every split node, widest at the middle of the top edge and narrowing towards the ends,
// and the plane's nodes beyond the ends were never split.
TEST(FaceCut, IncisionUnderLateralTensionOpensAtEveryInteriorNodeAndNotPastItsEnds) {
  const TetMesh box = make_box(9, 9, 9, Vec3::Zero(), Vec3::Ones());
  std::vector<TetPair> incision;
  for (const auto& f : faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ())) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        if (box.tets(f.first, a) == box.tets(f.second, b)) c += box.nodes.row(box.tets(f.first, a)).transpose() / 3.0;
    if (c.z() > 0.5 && c.y() > 0.25 && c.y() < 0.75) incision.push_back(f);
  }
  FaceCutter cutter(box);
  const CutEvent ev = cutter.cut(incision);
  // Split: the plane's nodes strictly inside the incision (y in (0.25, 0.75), z in (0.5, 1]).
  ASSERT_EQ(ev.copy_of.size(), 3u * 4u);
  for (int v : ev.copy_of) {
    EXPECT_GT(box.nodes(v, 1), 0.25 + 1e-9);
    EXPECT_LT(box.nodes(v, 1), 0.75 - 1e-9);
    EXPECT_GT(box.nodes(v, 2), 0.5 + 1e-9);
  }
  ModelDesc d;
  d.mesh = cutter.mesh();
  d.mu = {1e4};
  const double pull = 0.05;
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i) {
    const double x = d.mesh.nodes(i, 0);
    if (x < 1e-9 || x > 1 - 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e7,
                               d.mesh.nodes.row(i).transpose() + Vec3((x < 0.5 ? -1 : 1) * pull, 0, 0)});
  }
  const Model model = build_model(d);
  State s = make_state(model);
  const FrameStats st = step(model, s, test::anderson_options(2000, 1e-9));
  ASSERT_TRUE(st.converged) << st.iterations << " iterations, residual " << st.residual;
  auto gap = [&](size_t k) {
    const int v = ev.copy_of[k], c = ev.nodes_before + static_cast<int>(k);
    return (s.x.row(c) - s.x.row(v)).norm();
  };
  auto copy_at = [&](double y, double z) {
    for (size_t k = 0; k < ev.copy_of.size(); ++k)
      if (std::abs(box.nodes(ev.copy_of[k], 1) - y) < 1e-9 && std::abs(box.nodes(ev.copy_of[k], 2) - z) < 1e-9)
        return k;
    ADD_FAILURE() << "no copy at y = " << y << ", z = " << z;
    return size_t{0};
  };
  double min_gap = 1e300;
  for (size_t k = 0; k < ev.copy_of.size(); ++k) min_gap = std::min(min_gap, gap(k));
  const double mid_top = gap(copy_at(0.5, 1.0)), end_top = gap(copy_at(0.375, 1.0)),
               mid_deep = gap(copy_at(0.5, 0.625));
  if (test::verbose())
    std::printf("  gaps: min %.3e, top middle %.3e, top near end %.3e, middle deep %.3e (pull %.2f each side)\n",
                min_gap, mid_top, end_top, mid_deep, pull);
  EXPECT_GT(min_gap, 1e-3 * pull);  // every split node opened
  EXPECT_GT(mid_top, end_top);      // widest in the middle of the incision ...
  EXPECT_GT(mid_top, mid_deep);     // ... and at the skin, narrowing towards the wound's floor
  EXPECT_LT(mid_top, 2 * pull);     // never wider than the whole imposed stretch
  // The plane beyond the incision stays closed: its nodes are single (shared by both sides).
  for (Eigen::Index i = 0; i < box.nodes.rows(); ++i) {
    if (std::abs(box.nodes(i, 0) - 0.5) < 1e-9 && (box.nodes(i, 1) < 0.25 + 1e-9 || box.nodes(i, 1) > 0.75 - 1e-9)) {
      EXPECT_EQ(std::count(ev.copy_of.begin(), ev.copy_of.end(), static_cast<int>(i)), 0);
    }
  }
}

// A box with its nodes jittered (no face lies in any of the planes below), 9 × 8 × 8 nodes on
// [0, 1.1] × [0, 1] × [0, 1].
TetMesh jittered_box() {
  TetMesh m = make_box(9, 8, 8, Vec3::Zero(), Vec3(1.1, 1.0, 1.0));
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-0.012, 0.012);
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
    for (int c = 0; c < 3; ++c) m.nodes(i, c) += u(rng);
  return m;
}

// Where the dual segment of face f (centroid to centroid) crosses the plane coordinate[axis] = v,
// or nothing when both centroids lie on one side.
std::optional<Vec3> dual_crossing(const TetMesh& m, const TetPair& f, int axis, double v) {
  auto centroid = [&](int t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += m.nodes.row(m.tets(t, a)).transpose() / 4.0;
    return c;
  };
  const Vec3 a = centroid(f.first), b = centroid(f.second);
  if ((a[axis] - v) * (b[axis] - v) >= 0) return std::nullopt;
  return Vec3(a + (v - a[axis]) / (b[axis] - a[axis]) * (b - a));
}

// Every interior face of a mesh, as tet pairs.
std::vector<TetPair> interior_faces(const TetMesh& m) {
  std::vector<TetPair> out;
  std::map<std::array<int, 3>, int> first;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t)
    for (int skip = 0; skip < 4; ++skip) {
      std::array<int, 3> k{};
      for (int a = 0, j = 0; a < 4; ++a)
        if (a != skip) k[static_cast<size_t>(j++)] = m.tets(t, a);
      std::sort(k.begin(), k.end());
      const auto [it, fresh] = first.emplace(k, static_cast<int>(t));
      if (!fresh)
        out.emplace_back(std::min(it->second, static_cast<int>(t)), std::max(it->second, static_cast<int>(t)));
    }
  return out;
}

TEST(FaceCut, SweptPathsCutTheFacesTheirSurfaceCrosses) {
  const TetMesh m = jittered_box();
  const double x0 = 0.47;
  const std::vector<TetPair> all = interior_faces(m);
  auto as_set = [](const std::vector<TetPair>& v) { return std::set<TetPair>(v.begin(), v.end()); };
  auto expected = [&](auto keep) {
    std::set<TetPair> out;
    for (const TetPair& f : all)
      if (keep(f)) out.insert(f);
    return out;
  };

  // A straight path swept through the whole mesh: the faces of the plane x = x0, in the order of
  // their crossings along the path (y).
  SweptPath full{{Vec3(x0, -0.1, 1.1), Vec3(x0, 1.1, 1.1)}, {Vec3(0, 0, -1.3)}};
  const auto cut_full = faces_across_swept_path(m, full);
  const auto plane = faces_across_plane(m, Vec3::UnitX(), x0, Vec3::UnitY());
  ASSERT_GT(plane.size(), 100u);
  EXPECT_EQ(as_set(cut_full), as_set(plane));
  EXPECT_EQ(as_set(cut_full), expected([&](const TetPair& f) { return dual_crossing(m, f, 0, x0).has_value(); }));
  for (size_t i = 1; i < cut_full.size(); ++i)
    EXPECT_LE((*dual_crossing(m, cut_full[i - 1], 0, x0))[1], (*dual_crossing(m, cut_full[i], 0, x0))[1] + 1e-12)
        << "order along the path at " << i;

  // A shallow incision: swept 0.45 down from z = 1.1, so only crossings with z ≥ 0.65.
  SweptPath shallow{{Vec3(x0, -0.1, 1.1), Vec3(x0, 1.1, 1.1)}, {Vec3(0, 0, -0.45)}};
  const auto cut_shallow = as_set(faces_across_swept_path(m, shallow));
  EXPECT_EQ(cut_shallow, expected([&](const TetPair& f) {
              const auto c = dual_crossing(m, f, 0, x0);
              return c && (*c)[2] >= 0.65;
            }));
  EXPECT_LT(cut_shallow.size(), plane.size());
  EXPECT_GT(cut_shallow.size(), 0u);

  // A bent path with one sweep vector per point: along x = x0 up to y = 0.5, then along y = 0.5
  // to x = 0.8; full depth.
  SweptPath bent{{Vec3(x0, -0.1, 1.1), Vec3(x0, 0.5, 1.1), Vec3(0.8, 0.5, 1.1)},
                 {Vec3(0, 0, -1.3), Vec3(0, 0, -1.3), Vec3(0, 0, -1.3)}};
  EXPECT_EQ(as_set(faces_across_swept_path(m, bent)), expected([&](const TetPair& f) {
              const auto c = dual_crossing(m, f, 0, x0), d = dual_crossing(m, f, 1, 0.5);
              return (c && (*c)[1] <= 0.5) || (d && (*d)[0] >= x0 && (*d)[0] <= 0.8);
            }));

  // A path beside the mesh crosses nothing; malformed paths are refused.
  EXPECT_TRUE(faces_across_swept_path(m, SweptPath{{Vec3(3, 0, 0), Vec3(3, 1, 0)}, {Vec3(0, 0, 1)}}).empty());
  EXPECT_THROW((void)faces_across_swept_path(m, SweptPath{{Vec3(0, 0, 0)}, {Vec3(0, 0, 1)}}), MeshError);
  EXPECT_THROW((void)faces_across_swept_path(
                   m, SweptPath{{Vec3(0, 0, 0), Vec3(1, 0, 0), Vec3(1, 1, 0)}, {Vec3(0, 0, 1), Vec3(0, 0, 1)}}),
               MeshError);
  EXPECT_THROW((void)faces_across_swept_path(m, SweptPath{{Vec3(0, 0, 0), Vec3(1, 0, std::nan(""))}, {Vec3(0, 0, 1)}}),
               MeshError);
}

}  // namespace
}  // namespace xpd
