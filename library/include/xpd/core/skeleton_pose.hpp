#pragma once
// Forward kinematics of a bone skeleton (libigl's convention, as in its hand/arm tutorial data):
// each bone b carries a rotation dQ_b relative to its parent, applied about the bone's start
// joint r_b (rest position). Absolute transforms x ↦ Q_b x + T_b follow from the root down:
//   Q_b = Q_p dQ_b,   T_b = T_p + Q_p r_b − Q_b r_b     (p = parent bone, identity for roots)
// so that the start joint of b moves with its parent and b turns about it.
#include <vector>
#include <xpd/core/keyframes.hpp>
#include <xpd/core/skeleton.hpp>

namespace xpd {

/// Parent bone of every bone (−1 for roots): the bone whose end joint is b's start joint.
std::vector<int> bone_parents(const Skeleton& skeleton);

/// Absolute rigid transforms of all bones for relative rotations `relative` (one per bone, unit
/// quaternions). Throws Error when the sizes disagree or the bone graph has a cycle.
std::vector<RigidTransform> forward_kinematics(const Skeleton& skeleton,
                                               const std::vector<Eigen::Quaterniond>& relative);

/// Relative rotations read from a libigl pose matrix: #B unit quaternions stored as (x, y, z, w)
/// per bone, either as one column of 4·#B values or as a #B × 4 matrix. Quaternions are normalized.
/// Throws Error when the size does not match the skeleton.
std::vector<Eigen::Quaterniond> pose_rotations(const Eigen::MatrixXd& pose, int num_bones);

/// Distance from point p to the segment [a, b].
double point_segment_distance(const Vec3& p, const Vec3& a, const Vec3& b);

}  // namespace xpd
