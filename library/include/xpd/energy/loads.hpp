#pragma once
// Linear terms: gravity on lumped masses and nodal forces, E = −Σ_i (m_i g + f_i) · x_i.
// No projection, no matrix; g and f_i come from FrameInputs (changeable per frame).
#include <xpd/energy/term.hpp>

namespace xpd {

class LoadTerm final : public Term {
 public:
  /// `masses`: lumped nodal masses (#V).
  explicit LoadTerm(Eigen::VectorXd masses) : masses_(std::move(masses)) {}
  std::string_view name() const override { return "loads"; }
  int num_constraints() const override { return 0; }
  int projection_size() const override { return 0; }
  void add_matrix(std::vector<Triplet>&) const override {}
  void project(const Points&, const FrameInputs&, double*) const override {}
  double energy_given(const Points& x, const FrameInputs& in, const double* p) const override;
  void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const override;
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
  void add_hessian(const Points&, const FrameInputs&, std::vector<Triplet>&, bool) const override {}
  void add_hessian_product(const Points&, const FrameInputs&, const Points&, Points&) const override {}
  /// grad.gravity += Σ m_i h_i; grad.nodal_forces += h (when sized #V × 3).
  void add_input_gradient(const Points& x, const FrameInputs& in, const Points& h, FrameInputs& grad) const override;

 private:
  Eigen::VectorXd masses_;
};

}  // namespace xpd
