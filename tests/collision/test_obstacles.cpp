// Kinematic obstacles: signed distance against independent oracles, projection targets, normals as
// finite-difference gradients, rigid-motion invariance, keyframed motion, contact selection, errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <xpd/collision/obstacles.hpp>
#include <xpd/core/error.hpp>

namespace xpd {
namespace {

constexpr double kTol = 1e-12;  // relative to the scene scale (~ 1–3 units)
constexpr int kSamples = 400;

Vec3 random_point(std::mt19937& rng, double extent) {
  std::uniform_real_distribution<double> u(-extent, extent);
  return {u(rng), u(rng), u(rng)};
}

Eigen::Quaterniond random_rotation(std::mt19937& rng) {
  std::normal_distribution<double> n(0, 1);
  return Eigen::Quaterniond(n(rng), n(rng), n(rng), n(rng)).normalized();
}

// ---- Oracles, written without the library's formulas ----------------------------------------

double plane_oracle(const Plane& p, const Vec3& x) { return (x - p.point).dot(p.normal) / p.normal.norm(); }

double sphere_oracle(const Sphere& s, const Vec3& x) { return (x - s.center).norm() - s.radius; }

// Distance to the segment by ternary search on the convex f(s) = |x − a − s(b − a)|, s ∈ [0, 1].
double capsule_oracle(const Capsule& c, const Vec3& x) {
  auto f = [&](double s) { return (x - c.a - s * (c.b - c.a)).norm(); };
  double lo = 0, hi = 1;
  for (int i = 0; i < 200; ++i) {
    const double m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
    if (f(m1) < f(m2))
      hi = m2;
    else
      lo = m1;
  }
  const double d = std::min({f(0), f(1), f(0.5 * (lo + hi))});
  return d - c.radius;
}

// Box surface = 6 face rectangles: unsigned distance = min over faces of the distance to the
// rectangle (projection onto the face plane, clamped inside the face); sign from containment.
double box_oracle(const Box& b, const Vec3& x) {
  const Vec3& h = b.half_extents;
  double best = std::numeric_limits<double>::infinity();
  for (int axis = 0; axis < 3; ++axis) {
    for (double side : {-1.0, 1.0}) {
      Vec3 y = x;
      y[axis] = side * h[axis];
      for (int k = 0; k < 3; ++k)
        if (k != axis) y[k] = std::max(-h[k], std::min(h[k], y[k]));
      best = std::min(best, (x - y).norm());
    }
  }
  const bool inside = std::abs(x.x()) < h.x() && std::abs(x.y()) < h.y() && std::abs(x.z()) < h.z();
  return inside ? -best : best;
}

// ---- Shared checks ------------------------------------------------------------------------

Obstacle still(const ObstacleShape& s) { return Obstacle{s, {}}; }

// Projection target lies on the surface, t = x − sd · n, |n| = 1.
void check_projection(const Obstacle& o, const Vec3& x, const ObstacleQuery& q) {
  EXPECT_NEAR(q.normal.norm(), 1.0, kTol);
  EXPECT_LT(std::abs(query(o, 0, q.closest_surface_point).signed_distance), 10 * kTol) << x.transpose();
  EXPECT_LT((q.closest_surface_point - (x - q.signed_distance * q.normal)).norm(), 10 * kTol) << x.transpose();
  EXPECT_NEAR((q.closest_surface_point - x).norm(), std::abs(q.signed_distance), 10 * kTol);
  if (q.signed_distance < 0) {
    // Inside: the target is reached by moving along +n (x − t points along −n).
    EXPECT_GT((q.closest_surface_point - x).dot(q.normal), 0.0);
  }
}

// Central finite differences of sd equal the normal (caller skips points near medial axes).
void check_gradient(const Obstacle& o, const Vec3& x, const ObstacleQuery& q) {
  constexpr double h = 1e-6;
  Vec3 g;
  for (int k = 0; k < 3; ++k) {
    const Vec3 e = Vec3::Unit(k) * h;
    g[k] = (query(o, 0, x + e).signed_distance - query(o, 0, x - e).signed_distance) / (2 * h);
  }
  EXPECT_LT((g - q.normal).norm(), 1e-6) << "x = " << x.transpose() << " fd = " << g.transpose()
                                         << " n = " << q.normal.transpose();
}

// ---- Per-shape tests ------------------------------------------------------------------------

TEST(CollisionObstacles, PlaneMatchesClosedForm) {
  std::mt19937 rng(1);
  const Plane p{{0.3, -0.2, 0.5}, {1.0, 2.0, -0.5}};  // not unit on purpose
  const Obstacle o = still(p);
  for (int i = 0; i < kSamples; ++i) {
    const Vec3 x = random_point(rng, 3);
    const ObstacleQuery q = query(o, 0, x);
    EXPECT_NEAR(q.signed_distance, plane_oracle(p, x), kTol);
    EXPECT_LT((q.normal - p.normal.normalized()).norm(), kTol);
    check_projection(o, x, q);
    check_gradient(o, x, q);
  }
  // Below the plane is inside.
  EXPECT_LT(query(o, 0, p.point - 0.1 * p.normal).signed_distance, 0);
}

TEST(CollisionObstacles, SphereMatchesClosedForm) {
  std::mt19937 rng(2);
  const Sphere s{{0.2, -0.1, 0.4}, 1.3};
  const Obstacle o = still(s);
  int inside = 0;
  for (int i = 0; i < kSamples; ++i) {
    const Vec3 x = random_point(rng, 2.5);
    const ObstacleQuery q = query(o, 0, x);
    EXPECT_NEAR(q.signed_distance, sphere_oracle(s, x), kTol);
    check_projection(o, x, q);
    if ((x - s.center).norm() > 1e-3) check_gradient(o, x, q);
    inside += q.signed_distance < 0;
  }
  EXPECT_GT(inside, 20);
  // The center: any unit normal, sd = −r, target on the surface.
  const ObstacleQuery c = query(o, 0, s.center);
  EXPECT_NEAR(c.signed_distance, -s.radius, kTol);
  check_projection(o, s.center, c);
}

TEST(CollisionObstacles, CapsuleMatchesTernarySearchOracle) {
  std::mt19937 rng(3);
  for (const Capsule& c :
       {Capsule{{-0.7, 0.1, 0.2}, {0.9, -0.4, 0.5}, 0.6}, Capsule{{0.1, 0.1, 0.1}, {0.1, 0.1, 0.1}, 0.8}}) {
    const Obstacle o = still(c);
    int inside = 0;
    for (int i = 0; i < kSamples; ++i) {
      const Vec3 x = random_point(rng, 2);
      const ObstacleQuery q = query(o, 0, x);
      EXPECT_NEAR(q.signed_distance, capsule_oracle(c, x), 1e-9) << x.transpose();
      check_projection(o, x, q);
      if (q.signed_distance + c.radius > 1e-3) check_gradient(o, x, q);
      inside += q.signed_distance < 0;
    }
    EXPECT_GT(inside, 10);
    // A point on the axis: sd = −r, normal perpendicular to the axis, target on the surface.
    const Vec3 mid = 0.5 * (c.a + c.b);
    const ObstacleQuery m = query(o, 0, mid);
    EXPECT_NEAR(m.signed_distance, -c.radius, kTol);
    EXPECT_NEAR(m.normal.dot(c.b - c.a), 0.0, kTol);
    check_projection(o, mid, m);
  }
}

TEST(CollisionObstacles, BoxMatchesFaceRectangleOracle) {
  std::mt19937 rng(4);
  const Box b{{0.5, 1.0, 0.8}};
  const Obstacle o = still(b);
  int inside = 0;
  for (int i = 0; i < kSamples; ++i) {
    const Vec3 x = random_point(rng, 1.6);
    const ObstacleQuery q = query(o, 0, x);
    EXPECT_NEAR(q.signed_distance, box_oracle(b, x), kTol) << x.transpose();
    check_projection(o, x, q);
    // Medial axes: inside where the two nearest faces tie; the surface (edges/corners) itself.
    std::array<double, 3> gaps{};
    for (int k = 0; k < 3; ++k) gaps[k] = b.half_extents[k] - std::abs(x[k]);
    std::sort(gaps.begin(), gaps.end());
    const bool near_medial = q.signed_distance < 0 && gaps[1] - gaps[0] < 1e-3;
    if (!near_medial && std::abs(q.signed_distance) > 1e-3) check_gradient(o, x, q);
    inside += q.signed_distance < 0;
  }
  EXPECT_GT(inside, 15);  // box volume ≈ 8% of the sampling cube
  // Inside: target on the nearest face, normal along that face's axis.
  const ObstacleQuery q = query(o, 0, Vec3(0.1, -0.9, 0.0));
  EXPECT_NEAR(q.signed_distance, -0.1, kTol);
  EXPECT_LT((q.normal - Vec3(0, -1, 0)).norm(), kTol);
  EXPECT_LT((q.closest_surface_point - Vec3(0.1, -1.0, 0.0)).norm(), kTol);
  // Outside near a corner: target is the corner.
  const ObstacleQuery c = query(o, 0, Vec3(0.6, 1.1, 0.9));
  EXPECT_NEAR(c.signed_distance, std::sqrt(0.03), kTol);
  EXPECT_LT((c.closest_surface_point - b.half_extents).norm(), kTol);
}

// ---- Motion -----------------------------------------------------------------------------

TEST(CollisionObstacles, RigidMotionInvariance) {
  std::mt19937 rng(5);
  const std::array<ObstacleShape, 4> shapes{Plane{{0.1, 0.2, 0.3}, {0.0, 1.0, 1.0}}, Sphere{{0.3, 0.0, -0.2}, 0.9},
                                            Capsule{{-0.5, 0.0, 0.0}, {0.5, 0.3, 0.1}, 0.4}, Box{{0.4, 0.7, 0.5}}};
  for (const ObstacleShape& shape : shapes) {
    for (int trial = 0; trial < 5; ++trial) {
      Keyframe key;
      key.rotation = random_rotation(rng);
      key.translation = random_point(rng, 2);
      key.pivot = random_point(rng, 1);
      const RigidTransform T = to_transform(key);
      const Obstacle moved{shape, {key}};
      const Obstacle rest = still(shape);
      for (int i = 0; i < 100; ++i) {
        const Vec3 x = random_point(rng, 1.5);
        const ObstacleQuery q0 = query(rest, 0, x);
        const ObstacleQuery q1 = query(moved, 3.5, T.apply(x));
        EXPECT_NEAR(q1.signed_distance, q0.signed_distance, 1e-12);
        EXPECT_LT((q1.closest_surface_point - T.apply(q0.closest_surface_point)).norm(), 1e-12);
        EXPECT_LT((q1.normal - T.rotation * q0.normal).norm(), 1e-12);
      }
    }
  }
}

TEST(CollisionObstacles, KeyframedMotionMovesObstacle) {
  Keyframe k0, k1;
  k0.frame = 0;
  k1.frame = 10;
  k1.translation = Vec3(2, 0, 0);
  const Obstacle sphere{Sphere{Vec3::Zero(), 0.5}, {k0, k1}};
  EXPECT_NEAR(query(sphere, 0, Vec3::Zero()).signed_distance, -0.5, kTol);
  EXPECT_NEAR(query(sphere, 5, Vec3(1, 0, 0)).signed_distance, -0.5, kTol);
  EXPECT_NEAR(query(sphere, 5, Vec3::Zero()).signed_distance, 0.5, kTol);
  EXPECT_NEAR(query(sphere, 20, Vec3(2, 0, 0)).signed_distance, -0.5, kTol);  // clamped after last key

  // A box turning 90° about z: its long x side becomes the y side.
  Keyframe r1;
  r1.frame = 4;
  r1.rotation = Eigen::Quaterniond(Eigen::AngleAxisd(M_PI / 2, Vec3::UnitZ()));
  const Obstacle box{Box{{2.0, 1.0, 1.0}}, {k0, r1}};
  EXPECT_LT(query(box, 0, Vec3(1.8, 0, 0)).signed_distance, 0);
  EXPECT_GT(query(box, 0, Vec3(0, 1.8, 0)).signed_distance, 0);
  EXPECT_GT(query(box, 4, Vec3(1.8, 0, 0)).signed_distance, 0);
  // Halfway (45°): (1.8, 0, 0) sits at local (1.8/√2, −1.8/√2, 0), just outside the y face.
  EXPECT_NEAR(query(box, 2, Vec3(1.8, 0, 0)).signed_distance, 1.8 / std::sqrt(2.0) - 1.0, 1e-12);
  const ObstacleQuery q = query(box, 4, Vec3(0, 1.8, 0));
  EXPECT_NEAR(q.signed_distance, -0.2, 1e-12);
  EXPECT_LT((q.normal - Vec3(0, 1, 0)).norm(), 1e-12);
  EXPECT_LT((q.closest_surface_point - Vec3(0, 2, 0)).norm(), 1e-12);
}

// ---- Contacts ---------------------------------------------------------------------------

TEST(CollisionObstacles, FindContactsPicksDeepestAndRespectsMargin) {
  const std::vector<Obstacle> obstacles{still(Sphere{Vec3(0, 0, 0), 1.0}), still(Sphere{Vec3(1, 0, 0), 1.0}),
                                        still(Plane{Vec3(0, 0, -2), Vec3(0, 0, 1)})};
  Points proxies(5, 3);
  proxies << 0.2, 0, 0,  // in both spheres: sd −0.8 (sphere 0), −0.2 (sphere 1) → sphere 0
      0.9, 0, 0,         // sd −0.1 vs −0.9 → sphere 1
      0, 0, -2.3,        // below the plane only: depth 0.3
      0, 3, 0,           // free
      0, 0, 1.05;        // 0.05 above sphere 0: only within a margin
  const std::vector<Contact> c = find_contacts(obstacles, 0, proxies);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].proxy, 0);
  EXPECT_EQ(c[0].obstacle, 0);
  EXPECT_NEAR(c[0].depth, 0.8, kTol);
  EXPECT_LT((c[0].target - Vec3(1, 0, 0)).norm(), kTol);
  EXPECT_EQ(c[1].proxy, 1);
  EXPECT_EQ(c[1].obstacle, 1);
  EXPECT_NEAR(c[1].depth, 0.9, kTol);
  EXPECT_LT((c[1].target - Vec3(0, 0, 0)).norm(), kTol);
  EXPECT_EQ(c[2].proxy, 2);
  EXPECT_EQ(c[2].obstacle, 2);
  EXPECT_NEAR(c[2].depth, 0.3, kTol);
  EXPECT_LT((c[2].target - Vec3(0, 0, -2)).norm(), kTol);

  const std::vector<Contact> small = find_contacts(obstacles, 0, proxies, 0.04);
  EXPECT_EQ(small.size(), 3u);
  const std::vector<Contact> wide = find_contacts(obstacles, 0, proxies, 0.1);
  ASSERT_EQ(wide.size(), 4u);
  EXPECT_EQ(wide[3].proxy, 4);
  EXPECT_EQ(wide[3].obstacle, 0);
  EXPECT_NEAR(wide[3].depth, -0.05, kTol);
  EXPECT_LT((wide[3].target - Vec3(0, 0, 1)).norm(), kTol);

  EXPECT_TRUE(find_contacts({}, 0, proxies).empty());
  EXPECT_TRUE(find_contacts(obstacles, 0, Points(0, 3)).empty());
}

TEST(CollisionObstacles, FindContactsFollowsKeyframes) {
  Keyframe k0, k1;
  k1.frame = 1;
  k1.translation = Vec3(0, 0, 1);
  const std::vector<Obstacle> obstacles{Obstacle{Plane{Vec3::Zero(), Vec3::UnitZ()}, {k0, k1}}};
  Points proxies(1, 3);
  proxies << 0, 0, 0.5;
  EXPECT_TRUE(find_contacts(obstacles, 0, proxies).empty());
  const std::vector<Contact> c = find_contacts(obstacles, 0.75, proxies);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NEAR(c[0].depth, 0.25, kTol);
  EXPECT_LT((c[0].target - Vec3(0, 0, 0.75)).norm(), kTol);
}

// ---- Errors -----------------------------------------------------------------------------

void expect_error(const Obstacle& o, const std::string& needle) {
  try {
    query(o, 0, Vec3::Zero());
    ADD_FAILURE() << "no error, expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(CollisionObstacles, BadParametersThrow) {
  expect_error(still(Sphere{Vec3::Zero(), 0.0}), "radius");
  expect_error(still(Sphere{Vec3::Zero(), -1.0}), "radius");
  expect_error(still(Sphere{Vec3::Zero(), std::nan("")}), "radius");
  expect_error(still(Capsule{Vec3::Zero(), Vec3::UnitX(), 0.0}), "radius");
  expect_error(still(Plane{Vec3::Zero(), Vec3::Zero()}), "normal");
  expect_error(still(Box{Vec3(1, 0, 1)}), "half extents");
  expect_error(still(Box{Vec3(1, -1, 1)}), "half extents");
  Keyframe a, b;
  a.frame = 2;
  b.frame = 1;
  expect_error(Obstacle{Sphere{}, {a, b}}, "increasing");
  EXPECT_THROW(query_local(Sphere{Vec3::Zero(), 0.0}, Vec3::Zero()), Error);
  Points p(1, 3);
  p << 0, 0, 0;
  EXPECT_THROW(find_contacts({still(Sphere{})}, 0, p, -0.1), Error);
  try {
    find_contacts({still(Sphere{}), still(Box{Vec3(1, 1, 0)})}, 0, p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("obstacle 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xpd
