#pragma once
// Shape targeting (Wang 2025, §6.3; Klár et al. 2020):
// E = Σ_e μ_e Vol_e min_{R ∈ SO(3)} ||F_e − R S_e||² with a symmetric target S_e (6 parameters per
// tet, FrameInputs::shape_targets, changeable per frame). The minimizer is R* = polar rotation of
// F S (tr(Rᵀ F S) is maximal there), so the projection is p = R* S; the matrix equals the
// corotated one (same weight 2 μ Vol). S = I gives the corotated energy.
#include <xpd/energy/tet_term.hpp>

namespace xpd {

class ShapeTargetTerm final : public TetTerm {
 public:
  /// Element k reads row elements.source[k] of FrameInputs::shape_targets.
  explicit ShapeTargetTerm(TetElements elements) : TetTerm(std::move(elements)) {}
  std::string_view name() const override { return "shape_target"; }
  Mat3 project_element(int k, const Mat3& F, const FrameInputs& in) const override;
  Mat9 density_hessian(int k, const Mat3& F, const FrameInputs& in) const override;
  /// grad.shape_targets(row, i) += hᵀ ∂f/∂b_i = w ⟨J h, δR S + R E_i⟩ per element (Wang 2025,
  /// §6.4): f = −w Jᵀ(F − R S), R = polar(F S), E_i = ∂S/∂b_i, δR = ∂²φ/∂G² : (F E_i) the polar
  /// rotation's derivative (twist modes 2/(σ_j + σ_k) of G = F S, as in density_hessian).
  void add_input_gradient(const Points& x, const FrameInputs& in, const Points& h, FrameInputs& grad) const override;
};

}  // namespace xpd
