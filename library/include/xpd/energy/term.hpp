#pragma once
// The one interface every Projective Dynamics energy term implements.
//
// A PD term is E_i(x) = min_{p ∈ C_i} w_i/2 ||G_i x − p||² (Bouaziz et al. 2014; Wang et al. 2021,
// §3): G_i is a constant linear operator per coordinate (a deformation gradient row, a spring
// difference), p its projection onto the constraint set (local step), w_i > 0 a weight. With p
// frozen the term is quadratic in x with the constant Hessian w_i G_iᵀ G_i: identical for x, y, z
// (Wang 2025, App. A), so each term contributes to ONE n × n matrix (`add_matrix`). Linear terms
// (gravity, nodal loads) have no projection and no matrix.
//
// Shapes: positions x are #V × 3 row-major (`Points`); forces and gradients likewise. Projections
// are stored flat, `projection_size()` doubles per constraint, in the term's element order.
#include <Eigen/SparseCore>
#include <memory>
#include <string_view>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

using Triplet = Eigen::Triplet<double>;
/// Per shape-targeted tet the 6 parameters b of the symmetric target
/// S_t = [[1+b0, b1, b2], [b1, 1+b3, b4], [b2, b4, 1+b5]] (Wang 2025, eq. 6.3, 0-based).
using ShapeTargetParams = Eigen::Matrix<double, Eigen::Dynamic, 6, Eigen::RowMajor>;

/// Inputs that may change every frame without refactorization (they live in the State).
struct FrameInputs {
  Points attachment_targets;        ///< #attachments × 3 target positions t_j
  ShapeTargetParams shape_targets;  ///< #shape-targeted tets × 6
  Vec3 gravity = Vec3::Zero();      ///< acceleration (m/s²), applied with the lumped masses
  Points nodal_forces;              ///< #V × 3 external forces, or empty (= zero)
};

/// Builds S_t from the 6 parameters b (Wang 2025, eq. 6.3).
inline Mat3 shape_target_matrix(const double* b) {
  Mat3 S;
  S << 1.0 + b[0], b[1], b[2], b[1], 1.0 + b[3], b[4], b[2], b[4], 1.0 + b[5];
  return S;
}

/// A PD energy term. Implementations are immutable after construction (they belong to the Model)
/// and thread-safe for concurrent const calls.
class Term {
 public:
  virtual ~Term() = default;

  /// Short identifier ("corotated", "strain_limit", ...).
  virtual std::string_view name() const = 0;
  /// True for per-element terms (a 3×3 polar or SVD per tet): their local step is the expensive
  /// phase, timed as `local` (the tet terms and the volume term).
  virtual bool per_element() const { return false; }
  /// Number of constraints (elements, springs); 0 for linear terms.
  virtual int num_constraints() const = 0;
  /// Doubles per constraint in a projection buffer (9 for tets, 3 for springs, 0 if none).
  virtual int projection_size() const = 0;

  /// Adds w Gᵀ G (the n × n scalar block of the constant PD matrix) as triplets.
  virtual void add_matrix(std::vector<Triplet>& triplets) const = 0;

  /// True for a term whose constant matrix couples x, y and z (the λ volume term, Wang 2025, §7.2):
  /// a model with such a term assembles and factors one 3n × 3n matrix (add_matrix3) instead of
  /// the n × n one.
  virtual bool couples_coordinates() const { return false; }
  /// Adds the term's part of the constant 3n × 3n matrix (DOF index 3·node + coordinate).
  /// Default: add_matrix()'s entries on each coordinate's diagonal block (K ⊗ I₃), which is the
  /// Hessian of Ê(·, p) with p frozen. Coupling terms override it.
  virtual void add_matrix3(std::vector<Triplet>& triplets) const;

  /// Local step: p ← argmin_{p ∈ C} w/2 ||G x − p||² for every constraint.
  /// `p` has num_constraints() × projection_size() entries.
  virtual void project(const Points& x, const FrameInputs& in, double* p) const = 0;

  /// Ê(x, p) = Σ w/2 ||G x − p||² with p frozen (the PD surrogate energy).
  virtual double energy_given(const Points& x, const FrameInputs& in, const double* p) const = 0;

  /// f ← f − ∇ₓÊ(x, p) with p frozen.
  virtual void add_force_given(const Points& x, const FrameInputs& in, const double* p, Points& f) const = 0;

  /// Fused hot path: local step at x, then f ← f − ∇ₓÊ(x, p(x)) = f − ∇E(x). Returns E(x).
  /// Writes the projections to `p_out` when it is not null. Parallel over elements and
  /// deterministic: the result does not depend on the thread schedule.
  virtual double project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const = 0;

  /// E(x) = min_p Ê(x, p).
  double energy(const Points& x, const FrameInputs& in) const;
  /// g ← g + ∇E(x) (envelope theorem: equals ∇ₓÊ at the optimal p).
  void add_gradient(const Points& x, const FrameInputs& in, Points& g) const;

  /// Newton oracle: adds the Hessian of E at x as 3n × 3n triplets (DOF index 3·node +
  /// coordinate); with `psd_project` each element's block is projected to be positive
  /// semidefinite (negative eigenvalues clamped to 0).
  virtual void add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                           bool psd_project = true) const = 0;

  /// Adjoint operator: out ← out + ∇²E(x) h (the exact Hessian, not PSD-projected), h and out
  /// #V × 3. Default: the term's add_hessian(x, in, ·, false) entries applied to h without
  /// assembling a matrix; the tet terms override it with a per-element product.
  virtual void add_hessian_product(const Points& x, const FrameInputs& in, const Points& h, Points& out) const;

  /// What a term precomputes at one x so that many Hessian products there (the adjoint's CG
  /// iterations) cost a product each, not a re-linearization: the tet terms keep each element's
  /// 9×9 block w/2 ∂²ψ/∂F² (648 bytes per tet), the default keeps the add_hessian triplets.
  class HessianCache {
   public:
    virtual ~HessianCache() = default;
  };
  /// The cache of add_cached_hessian_product at (x, in); null when a term's product needs none.
  virtual std::unique_ptr<HessianCache> make_hessian_cache(const Points& x, const FrameInputs& in) const;
  /// out ← out + ∇²E(x) h with a cache made by make_hessian_cache at the same x and inputs (equal
  /// to add_hessian_product up to the order of additions). `cache` may be null when
  /// make_hessian_cache returned null.
  virtual void add_cached_hessian_product(const HessianCache* cache, const Points& x, const FrameInputs& in,
                                          const Points& h, Points& out) const;

  /// Parameter gradients of the adjoint method (Wang 2025, §6.4, eq. 6.12): adds hᵀ ∂f/∂q for every
  /// frame input q the term reads, f = −∇E(x), into the input-shaped `grad` (rows sized like
  /// `in`'s): shape targets (∂/∂b, 6 per shape-targeted tet), attachment targets (c_j W_j h),
  /// gravity (Σ m_i h_i) and nodal forces (h). With H h = ∂L/∂x at an equilibrium x*(q) these are
  /// dL/dq. Default: the term reads no input (nothing added).
  virtual void add_input_gradient(const Points& x, const FrameInputs& in, const Points& h, FrameInputs& grad) const;
};

}  // namespace xpd
