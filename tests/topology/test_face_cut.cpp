// Face-separating cuts: a partial cut splits exactly the nodes inside the cut (crack-front nodes
// stay single), a complete cut separates the mesh into two node-disjoint parts, invariants hold,
// repeated cuts are no-ops and bad input leaves the mesh unchanged.
#include <gtest/gtest.h>

#include <set>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/topology/face_cut.hpp>

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
