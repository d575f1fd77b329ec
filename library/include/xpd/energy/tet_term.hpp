#pragma once
// Base of the per-tetrahedron PD terms: E = Σ_e w_e/2 ||F_e − p_e||², F_e = Ds Dm⁻¹ (3×3),
// w_e = 2 μ_e Vol_e, p_e = projection of F_e onto the term's constraint set (a 3×3 matrix).
// The force is the FEM force of the Piola stress P = w_e/Vol_e (F − p) (Wang et al. 2021, eq. 6):
// f_{1..3} = −w (F − p) Dm⁻ᵀ, f_0 = −(f_1 + f_2 + f_3). Projections are 9 doubles per element,
// column-major 3×3, in element (colour) order.
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <Eigen/LU>
#include <xpd/energy/term.hpp>
#include <xpd/energy/tet_elements.hpp>

namespace xpd {

class TetTerm : public Term {
 public:
  explicit TetTerm(TetElements elements) : elements_(std::move(elements)) {}

  const TetElements& elements() const { return elements_; }
  bool per_element() const override { return true; }
  int num_constraints() const override { return elements_.size(); }
  int projection_size() const override { return 9; }

  void add_matrix(std::vector<Triplet>& triplets) const override;
  void project(const Points& x, const FrameInputs& in, double* p) const override;
  double energy_given(const Points& x, const FrameInputs& in, const double* p) const override;
  void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const override;
  double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const override;
  void add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                   bool psd_project = true) const override;
  /// Per element w/2 Jᵀ ∂²ψ/∂F² : (J h), J = ∂F/∂x (no global matrix; parallel over each colour,
  /// deterministic like project_add_force).
  void add_hessian_product(const Points& x, const FrameInputs& in, const Points& h, Points& out) const override;
  /// The cache holds every element's 9×9 block w/2 ∂²ψ/∂F² at x (one SVD-based linearization per
  /// element instead of one per product).
  std::unique_ptr<HessianCache> make_hessian_cache(const Points& x, const FrameInputs& in) const override;
  void add_cached_hessian_product(const HessianCache* cache, const Points& x, const FrameInputs& in, const Points& h,
                                  Points& out) const override;

  /// Local step and force over an explicit element list (element-order indices, see elements()),
  /// serial, in list order: p_k = project_element(k, F_k), f ← f − w_k (F_k − p_k) ∂F_k/∂x.
  /// Returns Σ_k w_k/2 ||F_k − p_k||² over the list. Used by the collision solver's inner loop,
  /// which re-projects only the few elements of the collision region (Wang et al. 2021,
  /// Algorithm 1, step 4.2); the full-mesh hot path is project_add_force().
  double project_add_force_subset(const Points& x, const FrameInputs& in, Points& f,
                                  const std::vector<int>& elements) const;

  /// Projection p(F) of element k (local step for one element).
  virtual Mat3 project_element(int k, const Mat3& F, const FrameInputs& in) const = 0;
  /// Hessian ∂²ψ/∂F² of the density ψ(F) = ||F − p(F)||² (not PSD-projected), 9×9 acting on
  /// vec(F) with index 3·row + col.
  virtual Mat9 density_hessian(int k, const Mat3& F, const FrameInputs& in) const = 0;

 protected:
  TetElements elements_;
};

}  // namespace xpd
