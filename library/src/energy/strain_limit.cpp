#include <fmt/format.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <xpd/core/error.hpp>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/strain_limit.hpp>

#include "isotropic_hessian.hpp"

namespace xpd {

StrainLimitTerm::StrainLimitTerm(TetElements elements, std::vector<Eigen::Vector2d> limits)
    : TetTerm(std::move(elements)) {
  if (limits.size() != static_cast<size_t>(elements_.size()))
    throw SolverError("StrainLimitTerm: one (sigma_min, sigma_max) pair per element is required");
  limits_.resize(limits.size());
  for (int k = 0; k < elements_.size(); ++k) {
    const Eigen::Vector2d& l = limits[static_cast<size_t>(elements_.source[static_cast<size_t>(k)])];
    if (!(l(0) >= 0.0 && l(0) < 1.0 && l(1) > 1.0 && std::isfinite(l(1))))
      throw SolverError(
          fmt::format("strain limit #{}: need 0 <= sigma_min < 1 < sigma_max, got sigma_min={} sigma_max={}",
                      elements_.source[static_cast<size_t>(k)], l(0), l(1)));
    limits_[static_cast<size_t>(k)] = l;
  }
}

Mat3 StrainLimitTerm::project_element(int k, const Mat3& F, const FrameInputs&) const {
  const Eigen::Vector2d& l = limits_[static_cast<size_t>(k)];
  // Fast path for the common case of an element inside its limits (projection = F, no stress):
  // the closed-form eigenvalues of FᵀF are σ², decided with a relative margin of 1e-8 (their
  // round-off is far smaller); elements near a limit, inverted or degenerate take the SVD below,
  // so the result is the same as without the fast path.
  if (F.determinant() > 0.0) {
    // First a bound without trigonometry: every eigenvalue σ² − 1 of C = FᵀF − I is at most ‖C‖_F
    // in magnitude, so ‖C‖_F within both margins puts every σ inside (most elements of a skin
    // under moderate strain; the closed form below costs an atan2 and a sincos per element).
    const Mat3 ftf = F.transpose() * F;
    const double bound = std::min(1.0 - l(0) * l(0) * (1.0 + 1e-8), l(1) * l(1) * (1.0 - 1e-8) - 1.0);
    if (bound > 0.0 && (ftf - Mat3::Identity()).squaredNorm() <= bound * bound) return F;
    Eigen::SelfAdjointEigenSolver<Mat3> eig;
    eig.computeDirect(ftf, Eigen::EigenvaluesOnly);
    const Vec3& s2 = eig.eigenvalues();  // increasing
    if (s2(0) >= l(0) * l(0) * (1.0 + 1e-8) && s2(2) <= l(1) * l(1) * (1.0 - 1e-8)) return F;
  }
  const SignedSvd3 s = signed_svd(F);
  const Vec3 c = s.sigma.cwiseMax(l(0)).cwiseMin(l(1));
  if (c == s.sigma) return F;  // inside the limits: no stress
  return s.U * c.asDiagonal() * s.V.transpose();
}

Mat9 StrainLimitTerm::density_hessian(int k, const Mat3& F, const FrameInputs&) const {
  // ψ = Σ (σ_i − clamp(σ_i))²: ψ_i = 2(σ_i − clamp σ_i), ψ_ii = 2 outside the limits, 0 inside.
  const Eigen::Vector2d& l = limits_[static_cast<size_t>(k)];
  const SignedSvd3 s = signed_svd(F);
  Vec3 grad;
  Mat3 hess = Mat3::Zero();
  for (int i = 0; i < 3; ++i) {
    const double c = std::clamp(s.sigma(i), l(0), l(1));
    grad(i) = 2.0 * (s.sigma(i) - c);
    hess(i, i) = (s.sigma(i) < l(0) || s.sigma(i) > l(1)) ? 2.0 : 0.0;
  }
  return detail::isotropic_hessian(s, grad, hess);
}

}  // namespace xpd
