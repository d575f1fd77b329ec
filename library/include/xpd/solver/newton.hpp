#pragma once
// Newton oracle: minimizes the same objective as step() (quasistatic E(x), or the implicit Euler
// incremental potential with y = state.inertia_target) with the full Hessian: per element the
// analytic Hessian of the density (corotated / strain limit via the singular-value eigensystem,
// shape target by the chain rule). Each iteration first tries the exact Hessian (quadratic
// convergence near a minimum) and falls back to the per-element PSD-projected one when the exact
// one is not positive definite; backtracking (Armijo) line search. Slow; used to check PD equilibria.
#include <xpd/solver/model.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

struct NewtonOptions {
  int max_iterations = 100;
  /// Converged when ||∇E||_F ≤ rel_tolerance · max(||∇E(x_0)||, ||loads||) or ≤ abs_tolerance.
  double rel_tolerance = 1e-12;
  double abs_tolerance = 0.0;
};

struct NewtonResult {
  int iterations = 0;
  double energy = 0;
  double gradient_norm = 0;
  bool converged = false;
};

/// Runs Newton from state.x (updated in place). Throws SolverError on non-finite values.
NewtonResult newton_solve(const Model& model, State& state, const NewtonOptions& options = {});

/// The full 3n × 3n Hessian at state.x (DOF 3·node + coordinate), inertia included; element
/// blocks PSD-projected when `psd_project`.
Eigen::SparseMatrix<double> newton_hessian(const Model& model, const State& state, bool psd_project = true);

}  // namespace xpd
