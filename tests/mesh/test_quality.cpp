#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <numbers>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/quality.hpp>

namespace xpd {

TEST(MeshQuality, RegularTet) {
  TetMesh m;
  m.nodes.resize(4, 3);
  m.nodes << 1, 1, 1, 1, -1, -1, -1, 1, -1, -1, -1, 1;  // edge 2√2
  m.tets.resize(1, 4);
  m.tets << 0, 1, 2, 3;
  if (signed_volume(m.nodes.row(0), m.nodes.row(1), m.nodes.row(2), m.nodes.row(3)) < 0)
    std::swap(m.tets(0, 2), m.tets(0, 3));
  const MeshQuality q = mesh_quality(m);
  const double dihedral = std::acos(1.0 / 3.0) * 180.0 / std::numbers::pi;  // 70.5288°
  EXPECT_NEAR(q.min_dihedral_deg, dihedral, 1e-10);
  EXPECT_NEAR(q.max_dihedral_deg, dihedral, 1e-10);
  EXPECT_NEAR(q.min_dihedral_deg, 70.5288, 1e-4);
  EXPECT_NEAR(q.max_aspect_ratio, 1.0, 1e-12);
  EXPECT_NEAR(q.total_volume, 8.0 / 3.0, 1e-12);  // a³ / (6√2)
  EXPECT_NEAR(q.mean_edge_length, 2 * std::sqrt(2.0), 1e-12);
  EXPECT_EQ(q.num_inverted, 0);
  EXPECT_EQ(q.bbox_min, Vec3(-1, -1, -1));
  EXPECT_EQ(q.bbox_max, Vec3(1, 1, 1));
}

TEST(MeshQuality, KuhnBoxAnglesAndVolume) {
  // Every Kuhn (path) simplex of a cube has dihedral angles 45°, 45°, 60°, 90°, 90°, 90°.
  const TetMesh m = make_box(5, 5, 5, Vec3::Zero(), Vec3(2, 2, 2));
  const MeshQuality q = mesh_quality(m);
  EXPECT_NEAR(q.min_dihedral_deg, 45.0, 1e-10);
  EXPECT_NEAR(q.max_dihedral_deg, 90.0, 1e-10);
  EXPECT_NEAR(q.total_volume, 8.0, 1e-12);
  EXPECT_NEAR(q.min_volume, 0.5 * 0.5 * 0.5 / 6, 1e-15);
  EXPECT_NEAR(q.max_volume, q.min_volume, 1e-15);
  EXPECT_NEAR(q.max_aspect_ratio, q.mean_aspect_ratio, 1e-12);  // all congruent
  EXPECT_GT(q.max_aspect_ratio, 1.0);
  EXPECT_EQ(q.num_nodes, 125);
  EXPECT_EQ(q.num_tets, 6 * 64);
}

TEST(MeshQuality, FlatAndInvertedTets) {
  const TetShape flat = tet_shape(Vec3(0, 0, 0), Vec3(1, 0, 0), Vec3(0, 1, 0), Vec3(1, 1, 0));
  EXPECT_EQ(flat.volume, 0);
  EXPECT_TRUE(std::isinf(flat.aspect_ratio));
  TetMesh m = make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones());
  std::swap(m.tets(0, 2), m.tets(0, 3));
  const MeshQuality q = mesh_quality(m);
  EXPECT_EQ(q.num_inverted, 1);
  EXPECT_LT(q.min_volume, 0);
  EXPECT_THROW(mesh_quality(TetMesh{}), MeshError);
}

TEST(MeshQuality, TimingOn83KTets) {
  const TetMesh m = make_box_from_spec("box:25");  // 82,944 tets
  const auto t0 = std::chrono::steady_clock::now();
  const MeshQuality q = mesh_quality(m);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] mesh_quality on %ld tets: %.1f ms\n", long(q.num_tets), 1e3 * s);
  EXPECT_EQ(q.num_tets, 82944);
  EXPECT_LT(s, 0.5);  // target 0.2 s; slack for a loaded shared machine
}

}  // namespace xpd
