#pragma once
// Keyframed rigid motion: the targets of "rigid" attachments (a clamp or a bone-like handle that
// moves a selection rigidly). Translation is interpolated linearly, rotation by slerp.
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <vector>

namespace xpd {

/// x ↦ rotation · x + translation.
struct RigidTransform {
  Eigen::Quaterniond rotation = Eigen::Quaterniond::Identity();  ///< unit quaternion
  Eigen::Vector3d translation = Eigen::Vector3d::Zero();

  Eigen::Vector3d apply(const Eigen::Vector3d& x) const { return rotation * x + translation; }
};

/// One key of a rigid motion: at `frame`, a rest point x maps to R (x − pivot) + pivot + translation,
/// i.e. a rotation about `pivot` followed by a translation. Frames are real numbers so that keys may
/// sit between output frames; frame 0 is the initial (rest) state.
struct Keyframe {
  double frame = 0;
  Eigen::Vector3d translation = Eigen::Vector3d::Zero();
  Eigen::Quaterniond rotation = Eigen::Quaterniond::Identity();  ///< unit quaternion
  Eigen::Vector3d pivot = Eigen::Vector3d::Zero();
};

/// The rigid transform of `keys` (sorted by strictly increasing frame, non-empty) at `frame`.
/// Before the first key the first key holds, after the last key the last key holds (clamped).
/// Between keys k and k+1 with s = (frame − f_k) / (f_{k+1} − f_k): translation and pivot are
/// interpolated linearly, the rotation by spherical linear interpolation along the shorter arc
/// (turns of 180° or more between two keys need intermediate keys), and the result is the rotation
/// about the interpolated pivot: x ↦ R(s) (x − p(s)) + p(s) + t(s).
/// An empty key list gives the identity.
RigidTransform evaluate(const std::vector<Keyframe>& keys, double frame);

/// The transform of a single key (x ↦ R (x − pivot) + pivot + translation).
RigidTransform to_transform(const Keyframe& key);

}  // namespace xpd
