#pragma once
// The small types every area shares. Matrices are row-major so that Python sees them as
// C-contiguous numpy arrays without copies.
#include <Eigen/Core>

namespace xpd {

using Vec3 = Eigen::Vector3d;
using Mat3 = Eigen::Matrix3d;
/// #V × 3 node positions (row-major).
using Points = Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor>;
/// #T × 4 tetrahedra, 0-based node indices, positively oriented:
/// det[x1-x0, x2-x0, x3-x0] > 0.
using Tets = Eigen::Matrix<int, Eigen::Dynamic, 4, Eigen::RowMajor>;
/// #F × 3 triangles, 0-based, counter-clockwise seen from outside (normal points out).
using Triangles = Eigen::Matrix<int, Eigen::Dynamic, 3, Eigen::RowMajor>;

}  // namespace xpd
