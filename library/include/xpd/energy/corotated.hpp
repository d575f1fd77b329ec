#pragma once
// Corotated elasticity with λ = 0 (Wang et al. 2021, eq. 1–3): E = Σ_e μ_e Vol_e ||F_e − R_e||²,
// R_e = polar rotation of F_e (always a rotation, also for inverted elements).
#include <xpd/energy/tet_term.hpp>

namespace xpd {

class CorotatedTerm final : public TetTerm {
 public:
  explicit CorotatedTerm(TetElements elements) : TetTerm(std::move(elements)) {}
  std::string_view name() const override { return "corotated"; }
  Mat3 project_element(int k, const Mat3& F, const FrameInputs& in) const override;
  Mat9 density_hessian(int k, const Mat3& F, const FrameInputs& in) const override;
  /// Hot path with the projection inlined (no virtual call per element).
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
};

}  // namespace xpd
