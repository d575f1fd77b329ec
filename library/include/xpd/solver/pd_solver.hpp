#pragma once
// Projective Dynamics drivers (paper 000 §3, thesis ch. 3): local step (projections, parallel over
// elements) + global step K δx = f(x) with the prefactored constant K (one n × n factor, 3 RHS).
// Quasistatic: minimizes E(x) per frame. Implicit Euler: minimizes E(x) + 1/(2h²)||x − y||²_M.
// Energy decreases monotonically across local and global steps; Anderson acceleration is guarded
// by an energy check that falls back to the plain PD iterate.
#include <xpd/solver/model.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

struct SolverOptions {
  int max_iterations = 100;      ///< global solves per frame
  /// Converged when ||f||_F ≤ rel_tolerance · scale, scale = max(||f(x_start)||, ||loads||),
  /// loads = gravity·m + nodal forces.
  double rel_tolerance = 1e-6;
  double abs_tolerance = 0.0;    ///< or ||f||_F ≤ abs_tolerance
  /// Or relative energy decrease over one iteration ≤ energy_tolerance (0 = off).
  double energy_tolerance = 0.0;
  bool anderson = false;         ///< Anderson acceleration of the PD fixed-point map
  int anderson_window = 5;
  bool store_projections = false;  ///< keep per-term projections in State::projections
};

/// Wall time of the phases (milliseconds), like the paper's Figure 4.
struct PhaseTimings {
  double local = 0;  ///< local step: per-element projections fused with the elastic force
  double rhs = 0;    ///< springs, loads, inertia, residual and right-hand-side assembly
  double solve = 0;  ///< triangular solves with the factor (3 RHS)
  double other = 0;  ///< update, Anderson, checks
};

struct FrameStats {
  double energy = 0;           ///< objective at the end of the frame
  double residual = 0;         ///< ||f||_F at the end
  double initial_residual = 0; ///< ||f||_F at the start
  double load_scale = 0;       ///< ||gravity·m + nodal forces||_F
  int iterations = 0;          ///< global solves
  int anderson_rejections = 0;
  bool converged = false;
  double wall_ms = 0;
  PhaseTimings timings_ms;
};

/// Local step + forces at state.x: fills state.force = f(x) = −∇E(x) (including inertia for
/// implicit Euler, with y = state.inertia_target) and returns the objective value E(x).
/// Adds phase times to `timings` when given.
double evaluate(const Model& model, State& state, PhaseTimings* timings = nullptr,
                bool store_projections = false);

/// Global step for the forces in state.force: solves K δ = f for all 3 coordinates at once and
/// returns δ through state.rhs (n × 3 column-major).
void solve_global(const Model& model, State& state);

/// Solves one frame (quasistatic equilibrium, or one implicit Euler step) with the current
/// inputs, starting from state.x. Throws SolverError on non-finite values.
FrameStats step(const Model& model, State& state, const SolverOptions& options = {});

}  // namespace xpd
