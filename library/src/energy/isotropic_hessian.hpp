#pragma once
// Internal: Hessian ∂²ψ/∂F² of an isotropic density ψ(σ) of the signed singular values, in the
// eigenbasis of Teran et al. 2005 / Smith et al. 2019: scaling block ∇²ψ(σ) on u_i v_iᵀ, and for
// each pair (i, j) the flip mode (u_i v_jᵀ + u_j v_iᵀ)/√2 with eigenvalue (ψ_i − ψ_j)/(σ_i − σ_j)
// and the twist mode (u_i v_jᵀ − u_j v_iᵀ)/√2 with eigenvalue (ψ_i + ψ_j)/(σ_i + σ_j).
#include <cmath>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/tet_term.hpp>

namespace xpd::detail {

inline Eigen::Matrix<double, 9, 1> vec_rowmajor(const Mat3& A) {
  Eigen::Matrix<double, 9, 1> v;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c) v(3 * r + c) = A(r, c);
  return v;
}

/// grad = ∂ψ/∂σ, hess = ∂²ψ/∂σ² (3×3). `flip_limit[i]` is used for the flip eigenvalue when
/// σ_i ≈ σ_j (the limit ψ_ii − ψ_ij for symmetric ψ).
inline Mat9 isotropic_hessian(const SignedSvd3& s, const Vec3& grad, const Mat3& hess) {
  Mat9 H = Mat9::Zero();
  Eigen::Matrix<double, 9, 1> D[3];
  for (int i = 0; i < 3; ++i) D[i] = vec_rowmajor(s.U.col(i) * s.V.col(i).transpose());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) H += hess(i, j) * D[i] * D[j].transpose();
  const double inv_sqrt2 = 1.0 / std::sqrt(2.0);
  for (int i = 0; i < 3; ++i) {
    for (int j = i + 1; j < 3; ++j) {
      const Mat3 A = s.U.col(i) * s.V.col(j).transpose();
      const Mat3 Bm = s.U.col(j) * s.V.col(i).transpose();
      const Eigen::Matrix<double, 9, 1> flip = inv_sqrt2 * vec_rowmajor(A + Bm);
      const Eigen::Matrix<double, 9, 1> twist = inv_sqrt2 * vec_rowmajor(A - Bm);
      const double ds = s.sigma(i) - s.sigma(j);
      const double ss = s.sigma(i) + s.sigma(j);
      const double lf = std::abs(ds) > 1e-10 ? (grad(i) - grad(j)) / ds : hess(i, i) - hess(i, j);
      const double lt = (grad(i) + grad(j)) / (std::abs(ss) > 1e-10 ? ss : std::copysign(1e-10, ss));
      H += lf * flip * flip.transpose() + lt * twist * twist.transpose();
    }
  }
  return H;
}

}  // namespace xpd::detail
