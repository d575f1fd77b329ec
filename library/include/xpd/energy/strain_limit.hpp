#pragma once
// Strain limiting (Wang et al. 2021, §5.3): E = Σ_e μ′_e Vol_e ||F_e − Q_e||²,
// Q = U clamp(Σ, σmin, σmax) Vᵀ with the signed SVD F = U Σ Vᵀ. Zero while all singular values lie
// in [σmin, σmax]; its weight adds μ′ to the constant matrix (so K is the same whether or not a
// limit is active).
#include <xpd/energy/tet_term.hpp>

namespace xpd {

class StrainLimitTerm final : public TetTerm {
 public:
  /// `limits[s]` = (σmin, σmax) for the s-th tet given to make_tet_elements (source order).
  /// Requires 0 ≤ σmin < 1 < σmax (SolverError otherwise).
  StrainLimitTerm(TetElements elements, std::vector<Eigen::Vector2d> limits);
  std::string_view name() const override { return "strain_limit"; }
  Mat3 project_element(int k, const Mat3& F, const FrameInputs& in) const override;
  Mat9 density_hessian(int k, const Mat3& F, const FrameInputs& in) const override;
  /// (σmin, σmax) of element k.
  const Eigen::Vector2d& limits(int k) const { return limits_[static_cast<size_t>(k)]; }

 private:
  std::vector<Eigen::Vector2d> limits_;  // element order
};

}  // namespace xpd
