#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tetrahedralize.hpp>
#include <xpd/mesh/validate.hpp>

#include "mesh/test_mesh_util.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

std::vector<std::array<int, 3>> canonical(const Triangles& f) {
  // Rotate each triangle so its smallest index comes first (keeps orientation), then sort.
  std::vector<std::array<int, 3>> out;
  for (Eigen::Index i = 0; i < f.rows(); ++i) {
    std::array<int, 3> t{f(i, 0), f(i, 1), f(i, 2)};
    std::rotate(t.begin(), std::min_element(t.begin(), t.end()), t.end());
    out.push_back(t);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

class MeshTetrahedralize : public ::testing::TestWithParam<const char*> {};

// Volume check tolerance: with preserve_surface the tets' boundary is the input surface itself,
// so Σ tet volumes and the divergence-theorem volume are two round-off-level evaluations of the
// same quantity (#T terms of relative error ~1e-16 each): 1e-10 relative leaves a wide margin.
TEST_P(MeshTetrahedralize, PositiveTetsFillTheSurfaceVolume) {
  const SurfaceMesh s = test::read_test_surface(test::data_path(GetParam()));
  const auto t0 = std::chrono::steady_clock::now();
  TetMesh m = tetrahedralize(s);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const MeshQuality q = mesh_quality(m);
  std::printf(
      "[ timing   ] tetrahedralize %s (%ld tris): %ld nodes, %ld tets, %.0f ms; dihedral [%.1f, %.1f], max aspect "
      "%.2f\n",
      GetParam(), long(s.triangles.rows()), long(m.nodes.rows()), long(m.tets.rows()), 1e3 * secs, q.min_dihedral_deg,
      q.max_dihedral_deg, q.max_aspect_ratio);
  EXPECT_EQ(q.num_inverted, 0);
  EXPECT_GT(q.min_volume, 0);
  const double enclosed = enclosed_volume(s.nodes, s.triangles);
  EXPECT_TRUE(test::near_rel(q.total_volume, enclosed, 1e-10)) << q.total_volume << " vs " << enclosed;
  // Input vertices come first, unchanged; the boundary is exactly the input surface.
  ASSERT_GE(m.nodes.rows(), s.nodes.rows());
  EXPECT_EQ(m.nodes.topRows(s.nodes.rows()), s.nodes);
  EXPECT_EQ(canonical(m.boundary), canonical(s.triangles));
  EXPECT_NO_THROW(validate_tet_mesh(m, {}, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(MeshReal, MeshTetrahedralize,
                         ::testing::Values("libigl-tutorial-data/decimated-knight.off", "libigl-tutorial-data/arm.obj",
                                           "diffpd-assets/bunny_watertight_simplified.obj"));

TEST(MeshTetrahedralizeOptions, SwitchesAndVolumeBound) {
  TetrahedralizeOptions o;
  EXPECT_EQ(tetgen_switches(o), "pzQq1.414Y");
  o.max_volume = 0.001;
  o.min_dihedral_deg = 10;
  o.preserve_surface = false;
  EXPECT_EQ(tetgen_switches(o), "pzQq1.414/10a0.001");
  const TetMesh box = make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones());
  const SurfaceMesh s{box.nodes, boundary_faces(box.tets)};
  const TetMesh m = tetrahedralize(s, o);
  const MeshQuality q = mesh_quality(m);
  EXPECT_LE(q.max_volume, 0.001 * (1 + 1e-9));
  EXPECT_GT(q.min_volume, 0);
  EXPECT_NEAR(q.total_volume, 1.0, 1e-10);  // Steiner points lie on the cube's faces to round-off
  EXPECT_GT(m.tets.rows(), 1000);
}

TEST(MeshTetrahedralizeOptions, RejectsBadInput) {
  const TetMesh box = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  SurfaceMesh s{box.nodes, boundary_faces(box.tets)};
  EXPECT_THROW(tetrahedralize(SurfaceMesh{}), MeshError);
  SurfaceMesh open = s;
  open.triangles = s.triangles.topRows(s.triangles.rows() - 1);
  EXPECT_THROW(tetrahedralize(open), MeshError);
  // Two interpenetrating closed cubes in one mesh (shifted by 0.37, off the other cube's grid
  // lines, so the intersection is transversal): found by the detection pass.
  SurfaceMesh two;
  two.nodes.resize(2 * s.nodes.rows(), 3);
  two.nodes << s.nodes, (s.nodes.array() + 0.37).matrix();
  two.triangles.resize(2 * s.triangles.rows(), 3);
  two.triangles << s.triangles, (s.triangles.array() + int(s.nodes.rows())).matrix();
  ASSERT_TRUE(is_closed_manifold(two.triangles));
  TetrahedralizeOptions detect;
  detect.detect_self_intersections = true;
  try {
    tetrahedralize(two, detect);
    ADD_FAILURE() << "expected MeshError";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("self-intersects"), std::string::npos) << e.what();
  }
}

// sofa-meshes/liver-smooth.obj is closed but has 8 self-intersecting triangles. TetGen 1.5 dies
// with SIGSEGV on it; the process isolation must turn that into a MeshError.
TEST(MeshTetrahedralizeOptions, SelfIntersectingRealSurfaceIsAnError) {
  if (!tetrahedralize_isolates_process())
    GTEST_SKIP() << "TetGen runs in-process in this (sanitized) build; its crash on this surface is "
                    "caught only by the process isolation, tested in the plain build";
  const SurfaceMesh s = test::read_test_surface(test::data_path("sofa-meshes/liver-smooth.obj"));
  ASSERT_TRUE(is_closed_manifold(s.triangles));
  EXPECT_THROW(tetrahedralize(s), MeshError);
  TetrahedralizeOptions detect;
  detect.detect_self_intersections = true;
  try {
    tetrahedralize(s, detect);
    ADD_FAILURE() << "expected MeshError";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("self-intersects"), std::string::npos) << e.what();
  }
}

}  // namespace xpd
