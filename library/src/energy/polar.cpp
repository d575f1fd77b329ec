#include <Eigen/Geometry>
#include <Eigen/LU>
#include <Eigen/SVD>
#include <cmath>
#include <xpd/energy/polar.hpp>

#include "polar_kernel.hpp"

namespace xpd {

SignedSvd3 signed_svd(const Eigen::Matrix3d& F) {
  Eigen::JacobiSVD<Eigen::Matrix3d> svd(F, Eigen::ComputeFullU | Eigen::ComputeFullV);
  SignedSvd3 out{svd.matrixU(), svd.singularValues(), svd.matrixV()};
  // JacobiSVD returns orthogonal U, V (det ±1) and σ ≥ 0 sorted decreasingly. Move every
  // reflection into the smallest singular value so that U, V become rotations.
  if (out.U.determinant() < 0.0) {
    out.U.col(2) *= -1.0;
    out.sigma(2) *= -1.0;
  }
  if (out.V.determinant() < 0.0) {
    out.V.col(2) *= -1.0;
    out.sigma(2) *= -1.0;
  }
  return out;
}

Eigen::Matrix3d polar_rotation(const Eigen::Matrix3d& F) {
  Eigen::Matrix3d R;
  if (detail::polar_rotation_newton(F.data(), R.data())) return R;
  // Inverted, degenerate or ill-conditioned: the signed SVD gives the closest rotation.
  const SignedSvd3 s = signed_svd(F);
  return s.U * s.V.transpose();
}

}  // namespace xpd
