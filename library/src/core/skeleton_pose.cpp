#include <fmt/format.h>

#include <xpd/core/error.hpp>
#include <xpd/core/skeleton_pose.hpp>

namespace xpd {

std::vector<int> bone_parents(const Skeleton& skeleton) {
  const int nb = static_cast<int>(skeleton.bones.rows());
  std::vector<int> parent(static_cast<std::size_t>(nb), -1);
  for (int b = 0; b < nb; ++b)
    for (int p = 0; p < nb; ++p)
      if (p != b && skeleton.bones(p, 1) == skeleton.bones(b, 0)) {
        parent[static_cast<std::size_t>(b)] = p;
        break;
      }
  return parent;
}

std::vector<RigidTransform> forward_kinematics(const Skeleton& skeleton,
                                               const std::vector<Eigen::Quaterniond>& relative) {
  const int nb = static_cast<int>(skeleton.bones.rows());
  if (static_cast<int>(relative.size()) != nb)
    throw Error(fmt::format("forward kinematics: {} rotations for {} bones", relative.size(), nb));
  const std::vector<int> parent = bone_parents(skeleton);
  std::vector<RigidTransform> abs(static_cast<std::size_t>(nb));
  std::vector<char> done(static_cast<std::size_t>(nb), 0);
  // Resolve parents first; a chain longer than #B means a cycle.
  const auto solve = [&](auto&& self, int b, int depth) -> void {
    if (done[static_cast<std::size_t>(b)]) return;
    if (depth > nb) throw Error("forward kinematics: the bone graph has a cycle");
    const int p = parent[static_cast<std::size_t>(b)];
    RigidTransform tp;
    if (p >= 0) {
      self(self, p, depth + 1);
      tp = abs[static_cast<std::size_t>(p)];
    }
    const Vec3 r = skeleton.joints.row(skeleton.bones(b, 0)).transpose();
    RigidTransform& t = abs[static_cast<std::size_t>(b)];
    t.rotation = (tp.rotation * relative[static_cast<std::size_t>(b)]).normalized();
    t.translation = tp.translation + tp.rotation * r - t.rotation * r;
    done[static_cast<std::size_t>(b)] = 1;
  };
  for (int b = 0; b < nb; ++b) solve(solve, b, 0);
  return abs;
}

std::vector<Eigen::Quaterniond> pose_rotations(const Eigen::MatrixXd& pose, int num_bones) {
  Eigen::MatrixXd q;
  if (pose.size() == 4 * num_bones && (pose.cols() == 1 || pose.rows() == 1)) {
    q = Eigen::Map<const Eigen::MatrixXd>(pose.data(), 4, num_bones).transpose();
  } else if (pose.rows() == num_bones && pose.cols() == 4) {
    q = pose;
  } else {
    throw Error(fmt::format("pose has {}x{} values; expected {} quaternions (x, y, z, w) for {} bones", pose.rows(),
                            pose.cols(), num_bones, num_bones));
  }
  std::vector<Eigen::Quaterniond> out;
  for (int b = 0; b < num_bones; ++b) {
    Eigen::Quaterniond r(q(b, 3), q(b, 0), q(b, 1), q(b, 2));
    if (!(r.norm() > 1e-12)) throw Error(fmt::format("pose quaternion of bone {} is zero", b));
    out.push_back(r.normalized());
  }
  return out;
}

double point_segment_distance(const Vec3& p, const Vec3& a, const Vec3& b) {
  const Vec3 ab = b - a;
  const double len2 = ab.squaredNorm();
  const double t = len2 > 0 ? std::clamp((p - a).dot(ab) / len2, 0.0, 1.0) : 0.0;
  return (p - (a + t * ab)).norm();
}

}  // namespace xpd
