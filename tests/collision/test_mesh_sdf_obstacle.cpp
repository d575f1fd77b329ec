// MeshSdf obstacles: the signed distance grid of a sphere mesh against the analytic Sphere
// obstacle (value, normal, target; at rest and keyframed), contacts, and validation.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <xpd/collision/obstacles.hpp>
#include <xpd/core/error.hpp>

#include "collision/collision_fixtures.hpp"

namespace xpd {
namespace {

struct SpherePair {
  Obstacle analytic, mesh;
  double tol = 0;  // value tolerance: O(h²) interpolation + chord error of the mesh
};

SpherePair make_pair(std::vector<Keyframe> keys) {
  const Vec3 c(0.2, -0.1, 0.4);
  const double r = 0.8;
  SdfGridOptions o;
  o.resolution = 40;
  auto grid = std::make_shared<const SdfGrid>(test::icosphere(5, c, r), o);
  SpherePair p;
  p.analytic = Obstacle{Sphere{c, r}, keys};
  p.mesh = Obstacle{MeshSdf{grid}, keys};
  const double h = grid->cell_size();
  p.tol = h * h / (4 * (r - grid->band_width())) + 3e-4 * r;
  return p;
}

void compare(const SpherePair& p, double frame, const Vec3& center_at_frame) {
  std::mt19937 rng(23);
  std::normal_distribution<double> n(0, 1);
  std::uniform_real_distribution<double> u(-0.1, 0.1);  // inside the exact band (3h = 0.12)
  for (int k = 0; k < 1000; ++k) {
    const Vec3 dir = Vec3(n(rng), n(rng), n(rng)).normalized();
    const Vec3 x = center_at_frame + (0.8 + u(rng)) * dir;
    const ObstacleQuery a = query(p.analytic, frame, x);
    const ObstacleQuery m = query(p.mesh, frame, x);
    ASSERT_NEAR(m.signed_distance, a.signed_distance, p.tol);
    ASSERT_GT(m.normal.dot(a.normal), 0.995);
    ASSERT_NEAR(m.normal.norm(), 1.0, 1e-12);
    // t = x − sd n: error from sd (tol) and from the normal's direction (|sd| · angle).
    ASSERT_LT((m.closest_surface_point - a.closest_surface_point).norm(), p.tol + 0.1 * 0.1);
    ASSERT_NEAR((m.closest_surface_point - x).norm(), std::abs(m.signed_distance), 1e-12);
  }
}

TEST(CollisionMeshSdf, MatchesAnalyticSphereAtRest) {
  const SpherePair p = make_pair({});
  compare(p, 0, Vec3(0.2, -0.1, 0.4));
}

TEST(CollisionMeshSdf, FollowsKeyframesLikeTheAnalyticSphere) {
  Keyframe k0, k1;
  k0.frame = 0;
  k1.frame = 10;
  k1.translation = Vec3(1.0, -0.5, 0.25);
  k1.rotation = Eigen::Quaterniond(Eigen::AngleAxisd(0.9, Vec3(1, 2, 3).normalized()));
  const SpherePair p = make_pair({k0, k1});
  const RigidTransform T = evaluate(p.analytic.keyframes, 4.0);
  compare(p, 4.0, T.apply(Vec3(0.2, -0.1, 0.4)));
}

TEST(CollisionMeshSdf, ContactsAgreeWithAnalyticSphere) {
  const SpherePair p = make_pair({});
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> u(-1.2, 1.2);
  Points x(400, 3);
  for (Eigen::Index i = 0; i < x.rows(); ++i) x.row(i) << u(rng), u(rng), u(rng);
  const double margin = 0.05;
  const auto ca = find_contacts({p.analytic}, 0, x, margin);
  const auto cm = find_contacts({p.mesh}, 0, x, margin);
  std::vector<int> in_a, in_m;
  for (const auto& c : ca) in_a.push_back(c.proxy);
  for (const auto& c : cm) in_m.push_back(c.proxy);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double sd = query(p.analytic, 0, x.row(i).transpose()).signed_distance;
    if (std::abs(sd - margin) < p.tol) continue;  // too close to the margin to decide
    const bool a = std::find(in_a.begin(), in_a.end(), int(i)) != in_a.end();
    const bool m = std::find(in_m.begin(), in_m.end(), int(i)) != in_m.end();
    ASSERT_EQ(a, m) << "point " << i << " sd " << sd;
  }
  EXPECT_GT(cm.size(), 20u);
}

TEST(CollisionMeshSdf, NullGridIsRejected) {
  const Obstacle o{MeshSdf{}, {}};
  EXPECT_THROW(validate(o), Error);
  EXPECT_THROW(query_local(MeshSdf{}, Vec3::Zero()), Error);
  EXPECT_THROW(find_contacts({o}, 0, Points::Zero(1, 3)), Error);
}

}  // namespace
}  // namespace xpd
