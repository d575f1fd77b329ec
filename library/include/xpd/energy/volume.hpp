#pragma once
// The λ (volume) part of corotated elasticity (Wang et al. 2021, eq. 1; Wang 2025, §7.2):
//   E = Σ_e λ_e Vol_e / 2 · tr²(R_eᵀ F_e − I) = Σ_e w_e / 2 · (Σ_i σ_i(F_e) − 3)²,
// with R_e the polar rotation of F_e (signed singular values σ, so R_e is a rotation also for
// inverted elements) and w_e = λ_e Vol_e. ∂E_e/∂F = w_e (R:F − 3) R (R is the maximizer of R:F over
// SO(3), so its own variation drops out).
//
// This is not a PD projection term: with R frozen, Ê(x, R) = w/2 (R:F(x) − 3)² is quadratic in x
// but its Hessian w vec(R) vec(R)ᵀ couples the coordinates and changes with R, and Ê does not bound
// E from above. The model therefore uses a constant 3n × 3n matrix — the PD matrix ⊗ I₃ plus the
// volume term's rest Hessian (couples_coordinates) — and the PD driver turns the global step into a quasi-Newton step
// on the true energy with a backtracking line search (see pd_solver.hpp). The projection stored by
// the local step is R (9 doubles, column-major).
#include <xpd/energy/term.hpp>
#include <xpd/energy/tet_elements.hpp>

namespace xpd {

/// Constant matrix of the global step when the model has the λ volume term (λ > 0 somewhere).
enum class VolumeMatrix {
  /// The PD matrix ⊗ I₃ plus the volume term's rest Hessian λ Vol (∂ tr F/∂x)(∂ tr F/∂x)ᵀ: one
  /// 3n × 3n matrix coupling x, y and z (Wang 2025, §7.2), exact for the volume term's small
  /// strains.
  Coupled,
  /// (λ/3) Vol g_a · g_b added to the n × n matrix (the rest Hessian's volume block averaged over
  /// all rotations, λ/3 I₉): keeps one n × n factor for three right-hand sides, and does not
  /// depend on how far elements have rotated.
  Isotropic
};

class VolumeTerm final : public Term {
 public:
  /// `elements` built by make_tet_elements with stiffness λ/2 (so that w = λ Vol); `matrix` says
  /// which constant matrix the term contributes (see VolumeMatrix).
  VolumeTerm(TetElements elements, VolumeMatrix matrix) : elements_(std::move(elements)), matrix_(matrix) {}

  const TetElements& elements() const { return elements_; }
  std::string_view name() const override { return "volume"; }
  bool per_element() const override { return true; }
  int num_constraints() const override { return elements_.size(); }
  int projection_size() const override { return 9; }

  /// VolumeMatrix::Isotropic: (w/3) g_a · g_b, the rest Hessian's volume block averaged over
  /// rotations (λ/3 I₉); VolumeMatrix::Coupled: nothing (the term lives in add_matrix3).
  void add_matrix(std::vector<Triplet>& triplets) const override;
  bool couples_coordinates() const override { return matrix_ == VolumeMatrix::Coupled; }
  /// Rest Hessian (R = I): w (∂ tr F/∂x)(∂ tr F/∂x)ᵀ, entries w g_a[d] g_b[c] at (3a + d, 3b + c).
  void add_matrix3(std::vector<Triplet>& triplets) const override;

  void project(const Points& x, const FrameInputs& in, double* p) const override;
  double energy_given(const Points& x, const FrameInputs& in, const double* p) const override;
  void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const override;
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
  /// ∂²ψ/∂F² of ψ = (Σσ − 3)² through the singular-value eigensystem (includes dR/dF).
  void add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                   bool psd_project = true) const override;

 private:
  TetElements elements_;
  VolumeMatrix matrix_;
};

}  // namespace xpd
