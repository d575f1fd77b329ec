#include <xpd/energy/polar.hpp>

#include <Eigen/Geometry>
#include <Eigen/LU>
#include <Eigen/SVD>
#include <cmath>

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

namespace {

// X⁻ᵀ = [c1×c2, c2×c0, c0×c1] / det X for X = [c0 c1 c2]; returns det X.
inline double inverse_transpose(const Eigen::Matrix3d& X, Eigen::Matrix3d& Xit) {
  Xit.col(0) = X.col(1).cross(X.col(2));
  Xit.col(1) = X.col(2).cross(X.col(0));
  Xit.col(2) = X.col(0).cross(X.col(1));
  const double det = X.col(0).dot(Xit.col(0));
  Xit /= det;
  return det;
}

}  // namespace

Eigen::Matrix3d polar_rotation(const Eigen::Matrix3d& F) {
  const double norm2 = F.squaredNorm();
  const double det = F.determinant();
  // Newton only where F is safely orientation-preserving: the iteration keeps sign(det X) and would
  // converge to a reflection for det F < 0.
  if (!(det > 1e-6 * norm2 * std::sqrt(norm2))) {
    const SignedSvd3 s = signed_svd(F);
    return s.U * s.V.transpose();
  }
  Eigen::Matrix3d X = F, Xit;
  bool scaled = true;
  for (int it = 0; it < 40; ++it) {
    inverse_transpose(X, Xit);
    Eigen::Matrix3d Xn;
    if (scaled) {
      // Frobenius-norm scaling (Higham): ζ = sqrt(||X⁻¹|| / ||X||); brings σ near 1 quickly.
      const double zeta = std::sqrt(std::sqrt(Xit.squaredNorm() / X.squaredNorm()));
      Xn = 0.5 * (zeta * X + Xit / zeta);
    } else {
      Xn = 0.5 * (X + Xit);
    }
    const double diff2 = (Xn - X).squaredNorm();
    X = Xn;
    if (diff2 < 1e-4) scaled = false;  // near convergence plain Newton is quadratic
    // Quadratic convergence: the error of the new iterate is about diff² / 2.
    if (diff2 < 1e-16) return X;
  }
  const SignedSvd3 s = signed_svd(F);
  return s.U * s.V.transpose();
}

}  // namespace xpd
