// Keyframe interpolation of rigid attachments: clamped ends, linear translation, slerp rotation,
// rotation about a pivot.
#include <gtest/gtest.h>

#include <cmath>
#include <xpd/core/keyframes.hpp>

namespace xpd {
namespace {

using Eigen::AngleAxisd;
using Eigen::Quaterniond;
using Eigen::Vector3d;

Keyframe key(double frame, Vector3d t, double angle_deg = 0, Vector3d axis = Vector3d::UnitZ(),
             Vector3d pivot = Vector3d::Zero()) {
  Keyframe k;
  k.frame = frame;
  k.translation = t;
  k.rotation = Quaterniond(AngleAxisd(angle_deg * M_PI / 180, axis));
  k.pivot = pivot;
  return k;
}

double angle_deg(const RigidTransform& t) { return AngleAxisd(t.rotation).angle() * 180 / M_PI; }

TEST(SceneKeyframes, EmptyAndSingle) {
  const RigidTransform id = evaluate({}, 3.0);
  EXPECT_TRUE(id.apply(Vector3d(1, 2, 3)).isApprox(Vector3d(1, 2, 3)));
  const std::vector<Keyframe> one{key(5, Vector3d(1, 0, 0), 90)};
  for (double f : {0.0, 5.0, 100.0})
    EXPECT_TRUE(evaluate(one, f).apply(Vector3d(1, 0, 0)).isApprox(Vector3d(1, 1, 0), 1e-14)) << f;
}

TEST(SceneKeyframes, ClampedAtEndsAndInterpolatedBetween) {
  const std::vector<Keyframe> keys{key(0, Vector3d::Zero(), 0), key(10, Vector3d(2, 4, 0), 90),
                                   key(20, Vector3d(2, 4, 6), 90)};
  // Ends hold.
  EXPECT_TRUE(evaluate(keys, -3).translation.isZero());
  EXPECT_NEAR(angle_deg(evaluate(keys, -3)), 0, 1e-12);
  EXPECT_TRUE(evaluate(keys, 25).translation.isApprox(Vector3d(2, 4, 6)));
  EXPECT_NEAR(angle_deg(evaluate(keys, 25)), 90, 1e-12);
  // Exactly on keys.
  EXPECT_TRUE(evaluate(keys, 10).translation.isApprox(Vector3d(2, 4, 0)));
  // Midpoints: translation linear, rotation by slerp (constant angular speed).
  const RigidTransform mid = evaluate(keys, 5);
  EXPECT_TRUE(mid.translation.isApprox(Vector3d(1, 2, 0)));
  EXPECT_NEAR(angle_deg(mid), 45, 1e-12);
  EXPECT_NEAR(angle_deg(evaluate(keys, 2.5)), 22.5, 1e-12);
  EXPECT_TRUE(evaluate(keys, 15).translation.isApprox(Vector3d(2, 4, 3)));
  EXPECT_NEAR(angle_deg(evaluate(keys, 15)), 90, 1e-12);
  // The point (1,0,0) at frame 5 turns 45° about z and moves by (1,2,0).
  const Vector3d p = mid.apply(Vector3d(1, 0, 0));
  EXPECT_TRUE(p.isApprox(Vector3d(1 + std::sqrt(0.5), 2 + std::sqrt(0.5), 0), 1e-14)) << p.transpose();
}

TEST(SceneKeyframes, RotationAboutPivotAndShortestArc) {
  const Vector3d pivot(1, 0, 0);
  const std::vector<Keyframe> keys{key(0, Vector3d::Zero(), 0, Vector3d::UnitZ(), pivot),
                                   key(1, Vector3d::Zero(), 180, Vector3d::UnitZ(), pivot)};
  const RigidTransform end = evaluate(keys, 1);
  EXPECT_TRUE(end.apply(pivot).isApprox(pivot, 1e-14));
  EXPECT_TRUE(end.apply(Vector3d(2, 0, 0)).isApprox(Vector3d(0, 0, 0), 1e-14) ||
              end.apply(Vector3d(2, 0, 0)).norm() < 1e-14);
  const RigidTransform half = evaluate(keys, 0.5);
  EXPECT_TRUE(half.apply(pivot).isApprox(pivot, 1e-14));
  EXPECT_TRUE(half.apply(Vector3d(2, 0, 0)).isApprox(Vector3d(1, 1, 0), 1e-14));
  // 0° -> 270° about z goes the short way (-90°): the midpoint is -45°.
  const std::vector<Keyframe> wrap{key(0, Vector3d::Zero(), 0), key(2, Vector3d::Zero(), 270)};
  const Vector3d q = evaluate(wrap, 1).apply(Vector3d(1, 0, 0));
  EXPECT_TRUE(q.isApprox(Vector3d(std::sqrt(0.5), -std::sqrt(0.5), 0), 1e-14)) << q.transpose();
}

}  // namespace
}  // namespace xpd
