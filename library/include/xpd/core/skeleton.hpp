#pragma once
// A bone skeleton (libigl's convention): joint rest positions and the bones connecting them. Read
// from .tgf files by io/skeleton.hpp, posed by core/skeleton_pose.hpp.
#include <xpd/core/types.hpp>

namespace xpd {

/// #B × 2 bones as 0-based (parent joint, child joint) index pairs.
using Bones = Eigen::Matrix<int, Eigen::Dynamic, 2, Eigen::RowMajor>;

/// A skeleton: joint rest positions and the bones connecting them.
struct Skeleton {
  Points joints;  ///< #J × 3 rest positions
  Bones bones;    ///< #B × 2, 0-based joint indices, in file order (bone b is row b)
};

}  // namespace xpd
