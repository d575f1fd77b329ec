#pragma once
// Gradients of the quasistatic equilibrium by the adjoint method (Wang 2025, ch. 6, §6.3–6.4).
//
// A quasistatic frame computes x*(q) = argmin_x E(x; q), q its frame inputs (shape targets b,
// attachment targets t, gravity, nodal forces), so f(x*, q) = −∇ₓE = 0. Differentiating,
// H dx*/dq = ∂f/∂q with H = ∇²ₓE(x*) (3n × 3n, symmetric, positive definite at a stable
// equilibrium; the thesis writes ∂f/∂x = −H). For a loss L(x*) with g = ∂L/∂x:
//   dL/dq = hᵀ ∂f/∂q,   H h = g                                    (eqs. 6.10–6.12)
// hessian_product() applies H without assembling it (per element, Term::add_hessian_product, plus
// the model's regularization diagonal, which enters H exactly as it enters the PD matrix K);
// input_gradient() forms hᵀ ∂f/∂q (Term::add_input_gradient); AdjointSolver solves H h = g.
//
// Solving H h = g reuses the prefactored PD matrix K (Model::factor(), no new factorization):
//  - ConjugateGradient (default): CG on H preconditioned by K⁻¹. Every element block satisfies
//    H_e ⪯ K_e, so eig(K⁻¹H) ⊂ (0, 1] when H ≻ 0. A direction with pᵀHp ≤ 0 proves H is not
//    positive definite (a buckled or inverted equilibrium has no well-defined gradient): the solve
//    throws instead of returning a gradient.
//  - FixedPoint: the thesis's Algorithm 2, h ← h + K⁻¹(g − H h) (Richardson, rate
//    1 − λ_min(K⁻¹H)); diverges when H is indefinite, which it reports by throwing.
//  - Direct: the assembled Hessian (newton_hessian, not PSD-projected) factored by CHOLMOD; throws
//    when it is not positive definite. For small models and as the oracle of the other two.
// Batched: the frames of a batch (one State each, one shared Model) advance together, in groups
// of 16, and their preconditioner solves go through one multi-column solve with the shared factor
// (n × 3B, or 3n × B for a coupled model); frames that converge drop out of the batch. Each frame's
// Hessian is linearized once (HessianOperator); groups keep those blocks in cache (BENCHMARKS.md).
//
// Shapes: g, h are #V × 3 (row-major Points, like positions). Quasistatic models only.
#include <memory>
#include <vector>
#include <xpd/solver/model.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

enum class AdjointMethod {
  ConjugateGradient,  ///< preconditioned CG (K⁻¹), detects an indefinite Hessian (default)
  FixedPoint,         ///< Algorithm 2 of Wang 2025 (preconditioned Richardson)
  Direct              ///< assembled Hessian + sparse Cholesky (oracle, small models)
};

struct AdjointOptions {
  AdjointMethod method = AdjointMethod::ConjugateGradient;
  /// Converged when ||g − H h|| ≤ tolerance · ||g|| (the true residual, recomputed at the end).
  double tolerance = 1e-10;
  /// Iteration limit per frame (CG and fixed point); reaching it throws SolverError.
  int max_iterations = 5000;
};

struct AdjointStats {
  int iterations = 0;     ///< CG / fixed-point iterations (0 for Direct)
  double residual = 0.0;  ///< ||g − H h|| / ||g|| at the end (true residual)
};

/// out ← H h, H = ∇²ₓE(state.x) of the quasistatic model (not PSD-projected) plus the model's
/// regularization diagonal. `out` is resized to #V × 3.
void hessian_product(const Model& model, const State& state, const Points& h, Points& out);

/// H at one state, linearized once for many products (the adjoint's iterations): each term's
/// Term::make_hessian_cache (per-tet 9×9 blocks: one SVD-based linearization per element and
/// state instead of one per product). apply() equals hessian_product() up to round-off.
/// Memory: 648 bytes per tet. The model and state are borrowed and must outlive the operator.
class HessianOperator {
 public:
  HessianOperator(const Model& model, const State& state);
  /// out ← H h (out resized to #V × 3).
  void apply(const Points& h, Points& out) const;

 private:
  const Model* model_;
  const State* state_;
  std::vector<std::unique_ptr<Term::HessianCache>> caches_;  // one per model term
};

/// hᵀ ∂f/∂q for every frame input q, shaped like the inputs: shape_targets (#shape targets × 6),
/// attachment_targets (#attachments × 3), gravity, nodal_forces (#V × 3, always sized).
FrameInputs input_gradient(const Model& model, const State& state, const Points& h);

/// Solves H h = g for one frame or a batch of frames of one model (see the file comment).
class AdjointSolver {
 public:
  /// Throws SolverError for an implicit-Euler model (gradients are of quasistatic equilibria).
  explicit AdjointSolver(const Model& model, AdjointOptions options = {});

  const AdjointOptions& options() const { return options_; }

  /// One frame: h ← H⁻¹ g at state.x. Throws SolverError (non-finite or mis-shaped g, Hessian not
  /// positive definite, divergence, no convergence within max_iterations).
  AdjointStats solve(const State& state, const Points& g, Points& h) const;

  /// A batch: h[i] ← H_i⁻¹ g[i] at states[i]->x. Errors name the frame (its index in the batch).
  std::vector<AdjointStats> solve(const std::vector<const State*>& states, const std::vector<Points>& g,
                                  std::vector<Points>& h) const;

 private:
  const Model* model_;
  AdjointOptions options_;
};

}  // namespace xpd
