// Collision proxies: node proxies bound to the lowest incident tet, embedded proxies validated,
// the collision region (tets, nodes) against set-based oracles.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {
namespace {

TEST(CollisionProxies, FromNodesBindsLowestIncidentTetWithUnitWeight) {
  const TetMesh m = make_box(4, 3, 3, Vec3(0, 0, 0), Vec3(3, 2, 2));
  const std::vector<int> nodes = boundary_nodes(m.tets);
  const ProxySet p = proxies_from_nodes(m, nodes);
  ASSERT_EQ(p.size(), int(nodes.size()));
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  Points x = m.nodes;
  for (Eigen::Index i = 0; i < x.rows(); ++i) x.row(i) += Eigen::RowVector3d(u(rng), u(rng), u(rng));
  const Points xp = proxy_positions(p, m.tets, x);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    int first = -1;  // oracle: linear scan for the lowest tet using the node
    for (Eigen::Index t = 0; t < m.tets.rows() && first < 0; ++t)
      for (int a = 0; a < 4; ++a)
        if (m.tets(t, a) == nodes[i]) first = int(t);
    EXPECT_EQ(p.tet[i], first);
    EXPECT_EQ(p.weights.row(Eigen::Index(i)).sum(), 1.0);
    EXPECT_EQ(p.weights.row(Eigen::Index(i)).maxCoeff(), 1.0);
    EXPECT_EQ((p.rest.row(Eigen::Index(i)) - m.nodes.row(nodes[i])).norm(), 0.0);
    EXPECT_EQ((xp.row(Eigen::Index(i)) - x.row(nodes[i])).norm(), 0.0);  // exact: weights 1 and 0
  }
}

TEST(CollisionProxies, FromNodesRejectsBadNodes) {
  TetMesh m = make_box(2, 2, 2, Vec3(0, 0, 0), Vec3(1, 1, 1));
  EXPECT_THROW(proxies_from_nodes(m, {8}), MeshError);
  EXPECT_THROW(proxies_from_nodes(m, {-1}), MeshError);
  m.nodes.conservativeResize(9, 3);
  m.nodes.row(8) << 5, 5, 5;  // present but used by no tet
  EXPECT_THROW(proxies_from_nodes(m, {0, 8}), MeshError);
  EXPECT_NO_THROW(proxies_from_nodes(m, {0, 7}));
}

TEST(CollisionProxies, FromEmbeddingReproducesPointsAndValidates) {
  const TetMesh m = make_box(4, 4, 4, Vec3(0, 0, 0), Vec3(1, 1, 1));
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.01, 0.99);
  Points pts(50, 3);
  for (Eigen::Index i = 0; i < pts.rows(); ++i) pts.row(i) << u(rng), u(rng), u(rng);
  const PointEmbedding e = embed_points(m, pts);
  ASSERT_TRUE(e.all_inside());
  const ProxySet p = proxies_from_embedding(m, e.tet_of_point, e.weights);
  EXPECT_LT((p.rest - pts).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((proxy_positions(p, m.tets, m.nodes) - pts).cwiseAbs().maxCoeff(), 1e-12);

  std::vector<int> bad_tet = e.tet_of_point;
  bad_tet[3] = -1;
  EXPECT_THROW(proxies_from_embedding(m, bad_tet, e.weights), MeshError);
  bad_tet[3] = int(m.tets.rows());
  EXPECT_THROW(proxies_from_embedding(m, bad_tet, e.weights), MeshError);
  BarycentricWeights w = e.weights;
  w(2, 0) += 0.1;  // no longer sums to 1
  EXPECT_THROW(proxies_from_embedding(m, e.tet_of_point, w), MeshError);
  w = e.weights;
  w(2, 1) = std::nan("");
  EXPECT_THROW(proxies_from_embedding(m, e.tet_of_point, w), MeshError);
  EXPECT_THROW(proxies_from_embedding(m, std::vector<int>(e.tet_of_point.begin(), e.tet_of_point.end() - 1), e.weights),
               MeshError);
}

TEST(CollisionProxies, RegionTetsAndNodesMatchSetOracle) {
  const TetMesh m = make_box(5, 5, 5, Vec3(0, 0, 0), Vec3(1, 1, 1));
  std::vector<int> top;
  for (int v = 0; v < m.nodes.rows(); ++v)
    if (m.nodes(v, 2) == 1.0) top.push_back(v);
  const ProxySet p = proxies_from_nodes(m, top);
  const std::vector<int> which{7, 2, 2, 11, 0};
  std::set<int> tets, nodes;
  for (int i : which) {
    tets.insert(p.tet[std::size_t(i)]);
    for (int a = 0; a < 4; ++a) nodes.insert(m.tets(p.tet[std::size_t(i)], a));
  }
  EXPECT_EQ(proxy_region_tets(m.tets, p, which), std::vector<int>(tets.begin(), tets.end()));
  EXPECT_EQ(proxy_region_nodes(m.tets, p, which), std::vector<int>(nodes.begin(), nodes.end()));
  // Empty `which` means all proxies.
  std::set<int> all;
  for (int t : p.tet) all.insert(t);
  EXPECT_EQ(proxy_region_tets(m.tets, p), std::vector<int>(all.begin(), all.end()));
  // Every proxy's node is in the region nodes.
  const std::vector<int> rn = proxy_region_nodes(m.tets, p);
  for (int v : top) EXPECT_TRUE(std::binary_search(rn.begin(), rn.end(), v));
  EXPECT_THROW(proxy_region_tets(m.tets, p, {int(top.size())}), Error);
  EXPECT_THROW(proxy_region_nodes(m.tets, p, {-1}), Error);
}

}  // namespace
}  // namespace xpd
