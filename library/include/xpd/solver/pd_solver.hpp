#pragma once
// Projective Dynamics drivers (Wang et al. 2021, §3; Wang 2025, ch. 3): local step (projections, parallel over
// elements) + global step K δx = f(x) with the prefactored constant K (one n × n factor, 3 RHS).
// Quasistatic: minimizes E(x) per frame. Implicit Euler: minimizes E(x) + 1/(2h²)||x − y||²_M.
// Energy decreases monotonically across local and global steps; both accelerators (Anderson,
// Chebyshev) are guarded by an energy check that falls back to the plain PD iterate.
//
// With the λ volume term (Model::has_volume_term, energy/volume.hpp) E is no longer a PD energy:
// the constant matrix (the coupled 3n × 3n rest Hessian, or the isotropic n × n one) does not bound
// it from above. The global step then yields a quasi-Newton direction δ = K⁻¹ f(x) for the true
// energy (f = −∇E; for λ = 0 this is exactly the PD step), and a backtracking line search (Armijo,
// step halving from α = 1) keeps the energy monotone. Anderson works on top; Chebyshev is refused.
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

/// Local step + forces at state.x: fills state.force = f(x) = −∇E(x) (including inertia for
/// implicit Euler, with y = state.inertia_target) and returns the objective value E(x).
/// Adds phase times to `timings` when given.
double evaluate(const Model& model, State& state, PhaseTimings* timings = nullptr, bool store_projections = false);

/// ||gravity·m + nodal forces||_F at the current inputs: the load scale of the convergence test.
double load_norm(const Model& model, const State& state);

/// Global step for the forces in state.force: solves K δ = f for all 3 coordinates at once (one
/// 3n right-hand side of the coupled matrix when Model::coupled()) and returns δ through state.rhs
/// (n × 3 column-major).
void solve_global(const Model& model, State& state);

/// The plain PD global step as a frame-loop strategy: δ = K⁻¹ f(x) with the model's one factor
/// (solve_global); with the λ volume term the same direction, line-searched by the loop. Supports
/// every accelerator except Chebyshev with the volume term. Holds only a reference to the model.
///
/// The second constructor solves with a DynamicLdlt instead of the model's factor: the factor of a
/// model whose topology changes (cuts, sutures, hooks; Li, Liu, Kavan & Chen 2021), kept equal to
/// model.matrix() by DynamicLdlt::modify() while the model itself may be built without a
/// factorization (ModelDesc::factorize = false). The caller keeps the factor alive and unchanged
/// during a frame. Throws SolverError when the model is coupled (λ volume term: 3n × 3n matrix) or
/// the factor's order is not model.num_nodes().
class PdStep final : public GlobalStep {
 public:
  explicit PdStep(const Model& model, bool store_projections = false)
      : model_(&model), store_projections_(store_projections) {}
  PdStep(const Model& model, const DynamicLdlt& factor, bool store_projections = false);
  const char* name() const override { return "step"; }
  bool supports(Accelerator a) const override;
  const char* unsupported_reason(Accelerator a) const override;
  bool in_place() const override { return false; }
  bool line_search() const override { return model_->has_volume_term(); }
  double evaluate(State& state, FrameStats& stats) override;
  void iterate(State& state, FrameStats& stats) override;
  void solve_with_matrix(Eigen::MatrixXd& b) const override;

 private:
  const Model* model_;
  const DynamicLdlt* dynamic_ = nullptr;
  bool store_projections_;
};

/// Solves one frame (quasistatic equilibrium, or one implicit Euler step) with the current
/// inputs, starting from state.x: run_frame() with a PdStep. Throws SolverError on non-finite values.
FrameStats step(const Model& model, State& state, const SolverOptions& options = {});

}  // namespace xpd
