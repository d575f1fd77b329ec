#include <gtest/gtest.h>

#include <random>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/mesh/tetrahedralize.hpp>

#include "mesh/test_mesh_util.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

// Box with interior nodes jittered by up to 0.15 h per axis (all tets stay positive).
TetMesh jittered_box(int n, unsigned seed) {
  TetMesh m = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  const double h = 1.0 / (n - 1);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.15 * h, 0.15 * h);
  for (Eigen::Index v = 0; v < m.nodes.rows(); ++v)
    for (int k = 0; k < 3; ++k)
      if (m.nodes(v, k) > 1e-12 && m.nodes(v, k) < 1 - 1e-12) m.nodes(v, k) += u(rng);
  return m;
}

// Grid and brute force follow the same selection rule, so they must agree exactly.
void expect_same_as_brute_force(const TetMesh& m, const Points& queries, double tolerance) {
  const TetLocator locator(m.nodes, m.tets);
  int found = 0, outside = 0;
  for (Eigen::Index q = 0; q < queries.rows(); ++q) {
    const Vec3 p = queries.row(q).transpose();
    const TetLocation a = locator.find_tet(p, tolerance);
    const TetLocation b = find_tet_brute_force(m.nodes, m.tets, p, tolerance);
    ASSERT_EQ(a.tet, b.tet) << "query " << q;
    if (a.found()) {
      ++found;
      EXPECT_EQ(a.weights, b.weights);
      EXPECT_GE(a.weights.minCoeff(), -tolerance);
      EXPECT_NEAR(a.weights.sum(), 1.0, 1e-14);
      Vec3 x = Vec3::Zero();
      for (int k = 0; k < 4; ++k) x += a.weights[k] * m.nodes.row(m.tets(a.tet, k)).transpose();
      EXPECT_LT((x - p).norm(), 1e-14);
    } else {
      ++outside;
      const TetLocation c = locator.nearest_tet(p, tolerance);
      const TetLocation d = nearest_tet_brute_force(m.nodes, m.tets, p, tolerance);
      ASSERT_EQ(c.tet, d.tet) << "query " << q;
      EXPECT_EQ(c.distance, d.distance);
      EXPECT_GT(c.distance, 0);
      EXPECT_NEAR(c.weights.sum(), 1.0, 1e-14);
    }
  }
  EXPECT_GT(found, 0);
  EXPECT_GT(outside, 0);
}

}  // namespace

TEST(MeshTetLocator, JitteredBoxMatchesBruteForce) {
  const TetMesh m = jittered_box(7, 11);
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.2, 1.2);
  Points q(1500, 3);
  for (Eigen::Index i = 0; i < q.rows(); ++i) q.row(i) << u(rng), u(rng), u(rng);
  expect_same_as_brute_force(m, q, 1e-9);
}

TEST(MeshTetLocator, NodesAndFacesUseTheTieBreakRule) {
  // Nodes and face centroids lie in several tets: the rule (largest min weight, then lowest
  // index) must give the same answer on the grid as by brute force.
  const TetMesh m = jittered_box(5, 3);
  Points q(m.nodes.rows() + m.tets.rows(), 3);
  q.topRows(m.nodes.rows()) = m.nodes;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t)
    q.row(m.nodes.rows() + t) = (m.nodes.row(m.tets(t, 0)) + m.nodes.row(m.tets(t, 1)) + m.nodes.row(m.tets(t, 2))) / 3;
  const TetLocator locator(m.nodes, m.tets);
  for (Eigen::Index i = 0; i < q.rows(); ++i) {
    const TetLocation a = locator.find_tet(q.row(i).transpose());
    const TetLocation b = find_tet_brute_force(m.nodes, m.tets, q.row(i).transpose());
    ASSERT_TRUE(a.found()) << i;
    ASSERT_EQ(a.tet, b.tet) << i;
  }
}

TEST(MeshTetLocator, UnstructuredTetGenMeshMatchesBruteForce) {
  const SurfaceMesh s = test::read_test_surface(test::data_path("libigl-tutorial-data/decimated-knight.off"));
  const TetMesh m = tetrahedralize(s);
  Eigen::AlignedBox3d box;
  for (Eigen::Index v = 0; v < m.nodes.rows(); ++v) box.extend(m.nodes.row(v).transpose());
  std::mt19937 rng(7);
  Points q(800, 3);
  for (Eigen::Index i = 0; i < q.rows(); ++i)
    for (int k = 0; k < 3; ++k)
      q(i, k) = std::uniform_real_distribution<double>(box.min()[k] - 0.05, box.max()[k] + 0.05)(rng);
  expect_same_as_brute_force(m, q, 1e-9);
}

TEST(MeshTetLocator, ToleranceAcceptsPointsJustOutside) {
  Points x(4, 3);
  x << 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1;
  Tets t(1, 4);
  t << 0, 1, 2, 3;
  const TetLocator locator(x, t);
  EXPECT_TRUE(locator.find_tet(Vec3(-1e-12, 0.2, 0.2)).found());
  EXPECT_FALSE(locator.find_tet(Vec3(-1e-6, 0.2, 0.2)).found());
  EXPECT_TRUE(locator.find_tet(Vec3(-1e-6, 0.2, 0.2), 1e-5).found());
  const TetLocation n = locator.nearest_tet(Vec3(-0.5, 0.2, 0.2));
  EXPECT_EQ(n.tet, 0);
  EXPECT_NEAR(n.distance, 0.5, 1e-15);
  EXPECT_NEAR(n.weights[1], -0.5, 1e-15);
  EXPECT_THROW(TetLocator(x, Tets(0, 4)), MeshError);
}

}  // namespace xpd
