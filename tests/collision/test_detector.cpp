// CollisionDetector: obstacles over the region proxies (against find_contacts), keyframes at the
// given frame, margin contacts, the deepest-of-two merge with self-collision (against the two
// sources run separately), max_penetration, errors, and a box:48 timing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/surface.hpp>

#include "collision/collision_fixtures.hpp"

namespace xpd {
namespace {

TEST(CollisionDetector, ObstaclesMatchFindContactsOnRegionProxies) {
  const TetMesh m = make_box(6, 6, 6, Vec3(0, 0, 0), Vec3(1, 1, 1));
  const std::vector<int> nodes = boundary_nodes(m.tets);
  const ProxySet proxies = proxies_from_nodes(m, nodes);
  std::vector<int> which;
  for (int p = 0; p < proxies.size(); p += 2) which.push_back(p);
  Keyframe k0, k1;
  k0.frame = 0;
  k1.frame = 10;
  k1.translation = Vec3(0, 0, -0.3);
  const std::vector<Obstacle> obstacles{Obstacle{Sphere{Vec3(0.5, 0.5, 1.35), 0.5}, {k0, k1}},
                                        Obstacle{Plane{Vec3(0, 0, 0.08), Vec3(0, 0, 1)}, {}}};
  CollisionDetectorOptions o;
  o.margin = 0.02;
  CollisionDetector det(m, proxies, which, obstacles, nullptr, o);
  EXPECT_FALSE(det.self_collision_enabled());
  for (double frame : {0.0, 5.0, 10.0}) {
    std::vector<ProxyContact> got;
    det.detect(m.nodes, frame, got);
    const std::vector<Contact> want =
        find_contacts(obstacles, frame, proxy_positions(proxies, m.tets, m.nodes, which), o.margin);
    ASSERT_EQ(got.size(), want.size()) << "frame " << frame;
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].proxy, which[std::size_t(want[i].proxy)]);
      EXPECT_EQ(got[i].other, want[i].obstacle);
      EXPECT_EQ(got[i].target, want[i].target);
      EXPECT_EQ(got[i].normal, want[i].normal);
      EXPECT_EQ(got[i].depth, std::max(0.0, want[i].depth));
      EXPECT_EQ(got[i].source, ProxyContact::Source::Obstacle);
      if (i > 0) {
        EXPECT_LT(got[i - 1].proxy, got[i].proxy);
      }
    }
    double deepest = 0;
    for (const Contact& c : want) deepest = std::max(deepest, c.depth);
    EXPECT_EQ(max_penetration(got), deepest);
    if (frame == 10.0) {
      EXPECT_GT(max_penetration(got), 0.3);  // the sphere's bottom went down to z = 0.55
    }
  }
}

TEST(CollisionDetector, MergesSelfAndObstacleKeepingTheDeeper) {
  const TetMesh mesh = test::u_block();
  SdfGridOptions so;
  so.cell_size = 0.1;
  const auto sdf = rest_surface_sdf(mesh, so);
  const std::vector<int> nodes = boundary_nodes(mesh.tets);
  const ProxySet proxies = proxies_from_nodes(mesh, nodes);
  std::vector<int> all(std::size_t(mesh.tets.rows()));
  std::iota(all.begin(), all.end(), 0);
  // A sphere that covers part of the overlap zone: some proxies have both candidates.
  const std::vector<Obstacle> obstacles{Obstacle{Sphere{Vec3(3.0, 1.5, 5.0), 1.2}, {}}};
  CollisionDetectorOptions o;
  o.self_region = all;
  CollisionDetector det(mesh, proxies, {}, obstacles, sdf, o);
  ASSERT_TRUE(det.self_collision_enabled());
  const Points x = test::close_u(mesh.nodes, 1.3);
  std::vector<ProxyContact> got;
  det.detect(x, 0, got);
  // Oracle: the two sources separately, merged per proxy by larger penetration.
  SelfCollision self(mesh.nodes, mesh.tets, sdf, all, proxies);
  std::vector<ProxyContact> selfc;
  self.detect_brute_force(x, selfc);
  const std::vector<Contact> obst = find_contacts(obstacles, 0, proxy_positions(proxies, mesh.tets, x));
  std::vector<const ProxyContact*> by_self(std::size_t(proxies.size()), nullptr);
  std::vector<const Contact*> by_obst(std::size_t(proxies.size()), nullptr);
  for (const auto& c : selfc) by_self[std::size_t(c.proxy)] = &c;
  for (const auto& c : obst) by_obst[std::size_t(c.proxy)] = &c;
  std::size_t expected = 0, both = 0, self_won = 0;
  for (int p = 0; p < proxies.size(); ++p) expected += by_self[std::size_t(p)] || by_obst[std::size_t(p)];
  ASSERT_EQ(got.size(), expected);
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (i > 0) {
      ASSERT_LT(got[i - 1].proxy, got[i].proxy);
    }
    const ProxyContact* s = by_self[std::size_t(got[i].proxy)];
    const Contact* b = by_obst[std::size_t(got[i].proxy)];
    const bool self_wins = s && (!b || s->depth > b->depth);
    both += s && b;
    self_won += s && b && self_wins;
    if (self_wins) {
      EXPECT_EQ(got[i].source, ProxyContact::Source::Self);
      EXPECT_EQ(got[i].target, s->target);
      EXPECT_EQ(got[i].other, s->other);
    } else {
      ASSERT_TRUE(b);
      EXPECT_EQ(got[i].source, ProxyContact::Source::Obstacle);
      EXPECT_EQ(got[i].target, b->target);
      EXPECT_EQ(got[i].depth, b->depth);
    }
  }
  EXPECT_GT(both, 0u);        // the fixture does exercise the merge
  EXPECT_GT(both, self_won);  // and both outcomes
  EXPECT_GT(self_won, 0u);
  EXPECT_EQ(max_penetration({}), 0.0);
}

TEST(CollisionDetector, DefaultSelfRegionIsTheProxyTets) {
  const TetMesh mesh = test::u_block();
  SdfGridOptions so;
  so.cell_size = 0.1;
  const auto sdf = rest_surface_sdf(mesh, so);
  const ProxySet proxies = proxies_from_nodes(mesh, boundary_nodes(mesh.tets));
  CollisionDetector det(mesh, proxies, {}, {}, sdf);
  EXPECT_EQ(det.self_collision()->region(), proxy_region_tets(mesh.tets, proxies));
  std::vector<ProxyContact> got;
  det.detect(mesh.nodes, 0, got);
  EXPECT_TRUE(got.empty());
}

TEST(CollisionDetector, RejectsBadInput) {
  const TetMesh m = make_box(3, 3, 3, Vec3(0, 0, 0), Vec3(1, 1, 1));
  const ProxySet p = proxies_from_nodes(m, boundary_nodes(m.tets));
  CollisionDetectorOptions o;
  o.margin = -1;
  EXPECT_THROW(CollisionDetector(m, p, {}, {}, nullptr, o), Error);
  EXPECT_THROW(CollisionDetector(m, p, {}, {Obstacle{Sphere{Vec3::Zero(), -1}, {}}}), Error);
  EXPECT_THROW(CollisionDetector(m, p, {p.size()}, {}), Error);
  CollisionDetector det(m, p, {}, {Obstacle{Plane{}, {}}});
  std::vector<ProxyContact> c;
  EXPECT_THROW(det.detect(Points::Zero(2, 3), 0, c), Error);
}

// box:48 (110,592 nodes, 622,938 tets), proxies = top-face nodes in the central 42×42 patch
// (1,764), a sphere pressing into the top, self-collision on over the proxies' tets. Reports ms.
TEST(CollisionDetector, TimingBox48) {
  const TetMesh m = make_box_from_spec("box:48");
  const int n = 48;
  std::vector<int> top;
  for (int j = 3; j < 45; ++j)
    for (int i = 3; i < 45; ++i) top.push_back(i + n * (j + n * (n - 1)));
  const ProxySet proxies = proxies_from_nodes(m, top);
  ASSERT_EQ(proxies.size(), 1764);
  const auto t0 = std::chrono::steady_clock::now();
  SdfGridOptions so;
  so.resolution = 64;
  const auto sdf = rest_surface_sdf(m, so);
  const auto t1 = std::chrono::steady_clock::now();
  // Press the top in under the sphere (the body conforms, the proxies stay slightly inside).
  const Vec3 c(0.5, 0.5, 1.25);
  const double r = 0.3;
  Points x = m.nodes;
  for (Eigen::Index v = 0; v < x.rows(); ++v) {
    const Vec3 X = m.nodes.row(v).transpose();
    const double d2 = (X.head<2>() - c.head<2>()).squaredNorm();
    if (d2 < r * r) x(v, 2) -= 0.8 * std::max(0.0, X.z() - (c.z() - std::sqrt(r * r - d2))) * X.z();
  }
  CollisionDetector det(m, proxies, {}, {Obstacle{Sphere{c, r}, {}}}, sdf);
  std::vector<ProxyContact> contacts;
  det.detect(x, 0, contacts);  // warm-up (scratch allocation)
  const int reps = 20;
  const auto t2 = std::chrono::steady_clock::now();
  for (int k = 0; k < reps; ++k) det.detect(x, 0, contacts);
  const auto t3 = std::chrono::steady_clock::now();
  const double ms_sdf = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double ms = std::chrono::duration<double, std::milli>(t3 - t2).count() / reps;
  std::printf(
      "[ timing ] box:48 rest SDF (res 64) %.1f ms; detect (1764 proxies, %d region tets, sphere + self): "
      "%.3f ms, %zu contacts, max depth %.4f\n",
      ms_sdf, int(det.self_collision()->region().size()), ms, contacts.size(), max_penetration(contacts));
  RecordProperty("detect_ms", std::to_string(ms));
  EXPECT_GT(contacts.size(), 100u);
  for (const ProxyContact& ct : contacts) EXPECT_EQ(ct.source, ProxyContact::Source::Obstacle);

  // A thicker self-collision region: every tet within the top two cell layers under the patch
  // (margin of one cell around it), the kind of layer a solver would search.
  CollisionDetectorOptions thick;
  const double h = 1.0 / (n - 1);
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t) {
    bool in = true;
    for (int a = 0; a < 4; ++a) {
      const Vec3 X = m.nodes.row(m.tets(t, a)).transpose();
      in = in && X.z() >= 1 - 2 * h - 1e-9 && X.x() >= 2 * h - 1e-9 && X.x() <= 1 - 2 * h + 1e-9 &&
           X.y() >= 2 * h - 1e-9 && X.y() <= 1 - 2 * h + 1e-9;
    }
    if (in) thick.self_region.push_back(int(t));
  }
  CollisionDetector det2(m, proxies, {}, {Obstacle{Sphere{c, r}, {}}}, sdf, thick);
  std::vector<ProxyContact> contacts2;
  det2.detect(x, 0, contacts2);
  const auto t4 = std::chrono::steady_clock::now();
  for (int k = 0; k < reps; ++k) det2.detect(x, 0, contacts2);
  const auto t5 = std::chrono::steady_clock::now();
  const double ms2 = std::chrono::duration<double, std::milli>(t5 - t4).count() / reps;
  std::printf("[ timing ] box:48 detect with a %zu-tet self region: %.3f ms, %zu contacts\n", thick.self_region.size(),
              ms2, contacts2.size());
  RecordProperty("detect_thick_ms", std::to_string(ms2));
  EXPECT_EQ(contacts2.size(), contacts.size());
}

}  // namespace
}  // namespace xpd
