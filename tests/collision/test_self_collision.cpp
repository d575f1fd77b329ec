// Rest-pose level-set self-collision: a U-shaped block whose lobes are pushed into each other
// (proxies inside the other lobe, targets on its surface), no contacts at rest / under rigid motions
// / under a moderate smooth deformation, the spatial hash against the brute-force oracle, options
// and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <xpd/collision/proxies.hpp>
#include <xpd/collision/self_collision.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/surface.hpp>

#include "collision/collision_fixtures.hpp"

namespace xpd {
namespace {

struct Body {
  TetMesh mesh;
  std::shared_ptr<const SdfGrid> sdf;
  std::vector<int> nodes;  // proxy i sits at node nodes[i]
  ProxySet proxies;
  std::vector<int> all_tets;
};

Body make_body(const TetMesh& mesh, double cell) {
  Body b;
  b.mesh = mesh;
  SdfGridOptions o;
  o.cell_size = cell;
  b.sdf = rest_surface_sdf(mesh, o);
  b.nodes = boundary_nodes(mesh.tets);
  b.proxies = proxies_from_nodes(mesh, b.nodes);
  b.all_tets.resize(std::size_t(mesh.tets.rows()));
  std::iota(b.all_tets.begin(), b.all_tets.end(), 0);
  return b;
}

void expect_same(const std::vector<ProxyContact>& a, const std::vector<ProxyContact>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].proxy, b[i].proxy);
    EXPECT_EQ(a[i].other, b[i].other);
    EXPECT_EQ(a[i].depth, b[i].depth);
    EXPECT_EQ(a[i].target, b[i].target);
    EXPECT_EQ(a[i].normal, b[i].normal);
    EXPECT_EQ(a[i].source, ProxyContact::Source::Self);
  }
}

// `count` proxies embedded (not at nodes) on the left lobe's inner face x = 2 of the U block, away
// from its edges, with the block's rest SDF (cell 0.1) and all its tets as the region.
struct InnerFace {
  TetMesh mesh;
  std::shared_ptr<const SdfGrid> sdf;
  Points pts;
  ProxySet proxies;
  std::vector<int> all;
};

InnerFace inner_face_proxies(int count, unsigned seed) {
  InnerFace f;
  f.mesh = test::u_block();
  SdfGridOptions so;
  so.cell_size = 0.1;
  f.sdf = rest_surface_sdf(f.mesh, so);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uy(1.05, 1.95), uz(2.05, 3.95);
  f.pts.resize(count, 3);
  for (Eigen::Index i = 0; i < f.pts.rows(); ++i) f.pts.row(i) << 2.0, uy(rng), uz(rng);
  const PointEmbedding e = embed_points(f.mesh, f.pts);
  EXPECT_TRUE(e.all_inside());
  f.proxies = proxies_from_embedding(f.mesh, e.tet_of_point, e.weights);
  f.all.resize(std::size_t(f.mesh.tets.rows()));
  std::iota(f.all.begin(), f.all.end(), 0);
  return f;
}

TEST(CollisionSelf, ClosedUBlockFindsProxiesInsideTheOtherLobe) {
  const Body b = make_body(test::u_block(), 0.1);
  SelfCollision sc(b.mesh.nodes, b.mesh.tets, b.sdf, b.all_tets, b.proxies);
  const double shift = 1.3;  // inner faces move from x = 2 and 4 to 3.3 and 2.7: overlap 0.6
  const Points x = test::close_u(b.mesh.nodes, shift);
  std::vector<ProxyContact> contacts, oracle;
  sc.detect(x, contacts);
  sc.detect_brute_force(x, oracle);
  expect_same(contacts, oracle);
  for (std::size_t i = 1; i < contacts.size(); ++i) EXPECT_LT(contacts[i - 1].proxy, contacts[i].proxy);

  std::set<int> found;
  for (const ProxyContact& c : contacts) {
    const Vec3 X = b.mesh.nodes.row(b.nodes[std::size_t(c.proxy)]).transpose();
    found.insert(c.proxy);
    // Only boundary nodes of the overlapping slabs (rest x ∈ [1.4, 2] or [4, 4.6], z ≥ 2) collide.
    const bool left = X.x() == 1.5 || X.x() == 2, right = X.x() == 4 || X.x() == 4.5;
    ASSERT_TRUE((left || right) && X.z() >= 2) << "unexpected contact at rest node " << X.transpose();
    // The penetrated tet belongs to the other lobe.
    Vec3 c_rest = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c_rest += b.mesh.nodes.row(b.mesh.tets(c.other, a)).transpose() / 4;
    EXPECT_EQ(c_rest.x() > 3, left);
    const Vec3 xp = x.row(b.nodes[std::size_t(c.proxy)]).transpose();
    EXPECT_NEAR((c.target - xp).norm(), c.depth, 1e-12);
    EXPECT_GT(c.depth, 0) << "rest " << X.transpose();
    EXPECT_NEAR(c.normal.dot(c.target - xp), c.depth, 1e-12);
  }
  // Strict set: inner-face nodes away from the lobes' other faces. Their rest image in the other
  // lobe is 0.6 behind its inner face, which is nearer than any other face, so the target is the
  // inner face of the other lobe (deformed x = 2.7 resp. 3.3) straight across.
  int strict = 0;
  for (std::size_t i = 0; i < b.nodes.size(); ++i) {
    const Vec3 X = b.mesh.nodes.row(b.nodes[i]).transpose();
    if (!((X.x() == 2 || X.x() == 4) && X.y() >= 1 && X.y() <= 2 && X.z() >= 2 && X.z() <= 4)) continue;
    ++strict;
    ASSERT_TRUE(found.count(int(i))) << "missed proxy at rest " << X.transpose();
    const auto it =
        std::find_if(contacts.begin(), contacts.end(), [&](const ProxyContact& c) { return c.proxy == int(i); });
    const double side = X.x() == 2 ? -1 : 1;
    EXPECT_LT((it->target - Vec3(X.x() == 2 ? 2.7 : 3.3, X.y(), X.z())).norm(), 1e-9) << X.transpose();
    EXPECT_NEAR(it->depth, 0.6, 1e-9);
    EXPECT_LT((it->normal - Vec3(side, 0, 0)).norm(), 1e-9);
  }
  EXPECT_EQ(strict, 30);

  // The rest-space exclusion: with a radius above the rest distance of the inner faces (≥ 2.6 for
  // the strict set: 2 across the gap + 0.6 deep), those contacts count as "own material".
  SelfCollisionOptions wide;
  wide.exclusion_radius = 2.7;
  SelfCollision sc_wide(b.mesh.nodes, b.mesh.tets, b.sdf, b.all_tets, b.proxies, {}, wide);
  std::vector<ProxyContact> few;
  sc_wide.detect(x, few);
  for (const ProxyContact& c : few) {
    const Vec3 X = b.mesh.nodes.row(b.nodes[std::size_t(c.proxy)]).transpose();
    EXPECT_FALSE((X.x() == 2 || X.x() == 4) && X.y() >= 1 && X.y() <= 2 && X.z() >= 2 && X.z() <= 4);
  }
  EXPECT_LT(few.size(), contacts.size());
}

TEST(CollisionSelf, EmbeddedProxiesOnTheInnerFaceGetTargetsAcross) {
  const InnerFace f = inner_face_proxies(40, 37);
  const TetMesh& mesh = f.mesh;
  const Points& pts = f.pts;
  SelfCollision sc(mesh.nodes, mesh.tets, f.sdf, f.all, f.proxies);
  std::vector<ProxyContact> contacts, oracle;
  const Points x = test::close_u(mesh.nodes, 1.3);
  sc.detect(x, contacts);
  sc.detect_brute_force(x, oracle);
  expect_same(contacts, oracle);
  ASSERT_EQ(contacts.size(), std::size_t(pts.rows()));
  for (const ProxyContact& c : contacts) {
    const Vec3 P = pts.row(c.proxy).transpose();
    EXPECT_LT((c.target - Vec3(2.7, P.y(), P.z())).norm(), 1e-9);
    EXPECT_NEAR(c.depth, 0.6, 1e-9);
  }
  sc.detect(mesh.nodes, contacts);
  EXPECT_TRUE(contacts.empty());
}

// The contact margin δ: lobes that just touch (shift 1: the left lobe's inner face lies on the right
// lobe's) give no contact without a margin, and with δ = 0.05 every embedded proxy of the face is a
// contact whose target is δ across, on the offset surface φ = δ of the other lobe, with depth 0
// (it does not penetrate); lobes overlapping by 0.6 keep their depth 0.6, the targets moved δ out.
TEST(CollisionSelf, MarginMakesTouchingProxiesContactsWithTargetsOnTheOffsetSurface) {
  const InnerFace f = inner_face_proxies(30, 41);
  const TetMesh& mesh = f.mesh;
  const Points& pts = f.pts;
  SelfCollisionOptions with_margin;
  with_margin.margin = 0.05;
  SelfCollision plain(mesh.nodes, mesh.tets, f.sdf, f.all, f.proxies);
  SelfCollision sc(mesh.nodes, mesh.tets, f.sdf, f.all, f.proxies, {}, with_margin);
  EXPECT_EQ(sc.margin(), 0.05);
  std::vector<ProxyContact> contacts, oracle;
  const Points touching = test::close_u(mesh.nodes, 1.0);
  plain.detect(touching, contacts);
  EXPECT_TRUE(contacts.empty());
  sc.detect(touching, contacts);
  sc.detect_brute_force(touching, oracle);
  expect_same(contacts, oracle);
  ASSERT_EQ(contacts.size(), std::size_t(pts.rows()));
  for (const ProxyContact& c : contacts) {
    const Vec3 P = pts.row(c.proxy).transpose();
    EXPECT_LT((c.target - Vec3(2.95, P.y(), P.z())).norm(), 1e-9) << P.transpose();
    EXPECT_NEAR(c.depth, 0.0, 1e-9);
    EXPECT_LT((c.normal - Vec3(-1, 0, 0)).norm(), 1e-9);
  }
  const Points overlapping = test::close_u(mesh.nodes, 1.3);
  sc.detect(overlapping, contacts);
  ASSERT_EQ(contacts.size(), std::size_t(pts.rows()));
  for (const ProxyContact& c : contacts) {
    const Vec3 P = pts.row(c.proxy).transpose();
    EXPECT_LT((c.target - Vec3(2.65, P.y(), P.z())).norm(), 1e-9);
    EXPECT_NEAR(c.depth, 0.6, 1e-9);
  }
  sc.detect(mesh.nodes, contacts);
  EXPECT_TRUE(contacts.empty());
  SelfCollisionOptions bad;
  bad.margin = -1e-3;
  EXPECT_THROW(SelfCollision(mesh.nodes, mesh.tets, f.sdf, f.all, f.proxies, {}, bad), Error);
}

TEST(CollisionSelf, NoContactsAtRestUnderRigidMotionOrBeforeTouching) {
  const Body b = make_body(test::u_block(), 0.1);
  SelfCollision sc(b.mesh.nodes, b.mesh.tets, b.sdf, b.all_tets, b.proxies);
  std::vector<ProxyContact> contacts;
  sc.detect(b.mesh.nodes, contacts);
  EXPECT_TRUE(contacts.empty());
  const Eigen::Matrix3d R = Eigen::AngleAxisd(2.1, Vec3(0.3, -1, 0.5).normalized()).toRotationMatrix();
  Points x = b.mesh.nodes;
  for (Eigen::Index v = 0; v < x.rows(); ++v)
    x.row(v) = (R * b.mesh.nodes.row(v).transpose() + Vec3(5, -3, 2)).transpose();
  sc.detect(x, contacts);
  EXPECT_TRUE(contacts.empty());
  sc.detect(test::close_u(b.mesh.nodes, 0.6), contacts);  // gap 2 − 1.2 = 0.8: not touching
  EXPECT_TRUE(contacts.empty());
  sc.detect(test::close_u(b.mesh.nodes, 1.3), contacts);  // sanity: the same detector does see overlap
  EXPECT_FALSE(contacts.empty());
}

TEST(CollisionSelf, NoContactsFromOwnNeighbourhoodUnderSmoothDeformation) {
  for (const TetMesh& mesh : {test::u_block(), make_box(9, 9, 9, Vec3(0, 0, 0), Vec3(2, 2, 2))}) {
    const Body b = make_body(mesh, 0.1);
    SelfCollision sc(b.mesh.nodes, b.mesh.tets, b.sdf, b.all_tets, b.proxies);
    for (double amp : {0.05, 0.1, 0.15}) {
      Points x = b.mesh.nodes;
      for (Eigen::Index v = 0; v < x.rows(); ++v) {
        const Vec3 X = b.mesh.nodes.row(v).transpose();
        x.row(v) +=
            amp * Eigen::RowVector3d(std::sin(1.1 * X.y() + 0.3), std::sin(0.9 * X.z() - 0.2), std::sin(1.3 * X.x()));
      }
      std::vector<ProxyContact> contacts;
      sc.detect(x, contacts);
      EXPECT_TRUE(contacts.empty()) << contacts.size() << " contacts at amplitude " << amp;
    }
  }
}

TEST(CollisionSelf, SpatialHashMatchesBruteForce) {
  const Body b = make_body(test::u_block(), 0.1);
  // Only part of the mesh as region and part of the proxies, to exercise both filters.
  std::vector<int> region, which;
  for (int t = 0; t < b.mesh.tets.rows(); ++t)
    if (t % 3 != 0) region.push_back(t);
  for (int p = 0; p < b.proxies.size(); ++p)
    if (p % 4 != 1) which.push_back(p);
  SelfCollision sc(b.mesh.nodes, b.mesh.tets, b.sdf, region, b.proxies, which);
  std::mt19937 rng(31);
  std::normal_distribution<double> n(0, 0.06);
  std::size_t total = 0;
  for (int trial = 0; trial < 6; ++trial) {
    Points x = test::close_u(b.mesh.nodes, 1.0 + 0.1 * trial);
    for (Eigen::Index v = 0; v < x.rows(); ++v) x.row(v) += Eigen::RowVector3d(n(rng), n(rng), n(rng));
    std::vector<ProxyContact> fast, slow;
    sc.detect(x, fast);
    sc.detect_brute_force(x, slow);
    expect_same(fast, slow);
    for (const ProxyContact& c : fast) EXPECT_TRUE(std::binary_search(which.begin(), which.end(), c.proxy));
    total += fast.size();
  }
  EXPECT_GT(total, 50u);
}

TEST(CollisionSelf, DefaultExclusionRadiusIsOneAndAHalfMeanRestEdge) {
  const Body b = make_body(test::u_block(), 0.1);
  const std::vector<int> region{0, 5, 17, 40};
  std::set<std::pair<int, int>> edges;
  for (int t : region)
    for (int a = 0; a < 4; ++a)
      for (int c = a + 1; c < 4; ++c) edges.insert(std::minmax(b.mesh.tets(t, a), b.mesh.tets(t, c)));
  double sum = 0;
  for (const auto& [i, j] : edges) sum += (b.mesh.nodes.row(i) - b.mesh.nodes.row(j)).norm();
  SelfCollision sc(b.mesh.nodes, b.mesh.tets, b.sdf, region, b.proxies);
  EXPECT_NEAR(sc.exclusion_radius(), 1.5 * sum / double(edges.size()), 1e-12);
  SelfCollisionOptions o;
  o.exclusion_radius = 0.25;
  EXPECT_EQ(SelfCollision(b.mesh.nodes, b.mesh.tets, b.sdf, region, b.proxies, {}, o).exclusion_radius(), 0.25);
}

TEST(CollisionSelf, RejectsBadInput) {
  const Body b = make_body(make_box(3, 3, 3, Vec3(0, 0, 0), Vec3(1, 1, 1)), 0.1);
  const Points& X = b.mesh.nodes;
  const Tets& T = b.mesh.tets;
  EXPECT_THROW(SelfCollision(X, T, nullptr, b.all_tets, b.proxies), Error);
  EXPECT_THROW(SelfCollision(X, T, b.sdf, {int(T.rows())}, b.proxies), Error);
  EXPECT_THROW(SelfCollision(X, T, b.sdf, b.all_tets, b.proxies, {b.proxies.size()}), Error);
  SelfCollisionOptions o;
  o.projection_iterations = 0;
  EXPECT_THROW(SelfCollision(X, T, b.sdf, b.all_tets, b.proxies, {}, o), Error);
  SelfCollision sc(X, T, b.sdf, b.all_tets, b.proxies);
  std::vector<ProxyContact> c;
  EXPECT_THROW(sc.detect(Points::Zero(3, 3), c), Error);
  Points bad = X;
  bad(0, 0) = std::nan("");
  EXPECT_THROW(sc.detect(bad, c), Error);
}

}  // namespace
}  // namespace xpd
