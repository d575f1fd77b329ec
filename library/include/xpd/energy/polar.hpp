#pragma once
// 3×3 polar decomposition and signed SVD used by every PD local step.
//
// Conventions ("signed" / rotation-variant SVD, Irving et al. 2004): F = U diag(sigma) Vᵀ with
// U, V proper rotations (det = +1), sigma sorted by decreasing magnitude, sigma(0) ≥ sigma(1) ≥
// |sigma(2)|, and sigma(2) < 0 exactly when det F < 0 (inverted element). The polar rotation is
// R = U Vᵀ ∈ SO(3), the rotation closest to F in the Frobenius norm; it is always a rotation, also
// for inverted (det F < 0) and degenerate (det F = 0) matrices.
#include <Eigen/Core>

namespace xpd {

/// Signed SVD of a 3×3 matrix (see the file comment for the sign convention).
struct SignedSvd3 {
  Eigen::Matrix3d U;      ///< rotation
  Eigen::Vector3d sigma;  ///< signed singular values, |σ0| ≥ |σ1| ≥ |σ2|, only σ2 may be < 0
  Eigen::Matrix3d V;      ///< rotation
};

/// Signed SVD via Eigen's JacobiSVD plus the sign fix-up. Robust for any finite F.
SignedSvd3 signed_svd(const Eigen::Matrix3d& F);

/// Polar rotation R = argmin_{R ∈ SO(3)} ||F − R||_F.
/// Fast path: Newton iteration X ← (ζX + ζ⁻¹X⁻ᵀ)/2 (Higham 1986; scaled first step) when F is
/// safely non-inverted (det F > 1e-6 ||F||³); converges quadratically to the orthogonal polar
/// factor, which is then a rotation (error < 1e-14). Otherwise (inverted, degenerate or
/// ill-conditioned F) it falls back to signed_svd. Matches U Vᵀ of signed_svd to round-off
/// (tests/energy/test_polar.cpp).
Eigen::Matrix3d polar_rotation(const Eigen::Matrix3d& F);

}  // namespace xpd
