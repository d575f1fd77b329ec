#pragma once
// The one frame loop of xpd. Every solver (plain PD, the Schur-complement collision solver of
// Wang et al. 2021 and its baselines, and the solvers to come) is a GlobalStep strategy run by
// run_frame(); nothing else in the tree iterates a frame.
//
// One frame (quasistatic equilibrium, or one implicit Euler step) of the fixed-point iteration
// x ← G(x), G the strategy's global step:
//   1. input checks (sizes, finite inputs), x_start = x; implicit Euler: y = x + h v, x = y;
//   2. step.begin_frame(); E = step.evaluate() (f(x) into state.force); scale = max(||f||, ||loads||);
//   3. while iterations < max_iterations and (iterations < min_iterations or not converged):
//        plain iterate G(x): step.iterate(), either as a step δ = G(x) − x (state.step, x kept) or
//        by moving x in place (step.in_place()); the loop converts between the two forms when an
//        accelerator or the line search needs δ;
//        Anderson (Walker & Ni 2011) or Chebyshev (Wang 2015) extrapolation of the iterate, when the
//        strategy supports it; E_new = step.evaluate(); an accelerated iterate with E_new > E
//        (relative 1e-12) is replaced by the plain one and the accelerator restarts (monotone E);
//        with step.line_search(): a plain step must satisfy Armijo, E_new ≤ E − 1e-4 α f·δ,
//        else α halves (up to 40 times; no decrease resolvable → stop at the previous iterate);
//        step.max_step_fraction() caps α before the first trial (continuous collision detection
//        bounds of barrier methods); an extrapolated iterate is checked by it along its own path
//        from x, and the plain step's bound is then taken only if the plain step is used (the
//        extrapolation rejected by the bound or the energy, or no history yet); finite checks of
//        E and ||f||;
//        energy test: |E − E_new| ≤ energy_tolerance · |E_new| stops the frame;
//   3a. step.advance() after each iteration: kinematic parts of the strategy move (IPC obstacles), E
//      and f are evaluated afresh, the accelerator restarts; a frame converges only with
//      step.at_target();
//   4. converged: ||f|| ≤ rel_tolerance · scale (scale = max(||f_start||, ||loads||), or the last
//      converged frame's scale, State::converged_scale, when ||f_start|| is already within
//      rel_tolerance of that: a frame where nothing moved), or ≤ abs_tolerance, or ≤ 4 × the round-off estimate
//      taken at the start of the frame (FrameStats::roundoff_residual) when the strategy
//      converges_at_roundoff() or when the scale itself is within 4 × that estimate (a frame without
//      loads that starts at equilibrium); step.revise() may then change the objective (held contact
//      pairings made afresh), and the loop evaluates afresh, restarts the accelerator and goes on;
//   5. implicit Euler: v = (x − x_start)/h; statistics; ++state.frame; step.end_frame().
//
// Strategies to come plug in here: an IPC barrier step (line_search() with a CCD-bounded
// max_step_fraction), a step whose factor changes with the topology between frames (the strategy
// owns or borrows the factor; the loop never sees it), and adjoint (backward) solves that reuse the
// forward factor through GlobalStep::solve_with_matrix().
#include <xpd/solver/model.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

/// A global step of PD: what changes between solvers. Strategies are per-state objects (they may
/// keep per-state scratch); the Model and any factorization they use are shared and constant.
class GlobalStep {
 public:
  virtual ~GlobalStep() = default;
  /// Short name for messages ("pd", "collision").
  virtual const char* name() const = 0;
  /// Whether the strategy can be accelerated by `accelerator`; run_frame() refuses the others.
  virtual bool supports(Accelerator accelerator) const = 0;
  /// Why an accelerator is refused (shown in the error).
  virtual const char* unsupported_reason(Accelerator) const { return ""; }
  /// true: iterate() moves state.x to G(x) in place; false: it writes δ = G(x) − x into state.step
  /// and leaves state.x unchanged.
  virtual bool in_place() const = 0;
  /// true: plain steps are line-searched (Armijo) on the objective (non-PD energies such as the λ
  /// volume term, barriers).
  virtual bool line_search() const { return false; }

  /// Start of a frame, after x_start and the inertia target are set (resets per-frame sets).
  virtual void begin_frame(State&) {}
  /// Objective E(x) at state.x, with f(x) = −∇E(x) into state.force (every term of the strategy:
  /// elastic, springs, loads, inertia, contacts). Adds phase times to stats.timings_ms.
  virtual double evaluate(State& state, FrameStats& stats) = 0;
  /// The plain global step from state.x, with state.force = f(x) of the last evaluate() at x.
  virtual void iterate(State& state, FrameStats& stats) = 0;
  /// true: a frame converges once ||f|| is within 4 × the round-off estimate of its start
  /// (FrameStats::roundoff_residual, ε ||(K_ii |x_i|)_i||) whatever its relative tolerance. The
  /// collision step says so: its frames can start at equilibrium with a residual of pure round-off
  /// (an idle frame between events) or ask for more than double precision resolves under stiff
  /// attachments and contact springs. false (plain PD): only a frame whose scale is itself round-off
  /// converges there (step 4 above).
  virtual bool converges_at_roundoff() const { return false; }
  /// Largest admissible fraction of the step δ from state.x_prev (CCD for barriers); 1 = none.
  virtual double max_step_fraction(const State&) { return 1.0; }
  /// End of a frame (final statistics of the strategy, e.g. contacts).
  virtual void end_frame(State&, FrameStats&) {}

  /// Kinematic parts that the strategy moves itself within a frame (IPC obstacles, which advance
  /// toward their keyframed pose only as far as continuous collision detection allows, and may
  /// carry state.x along by a predicted response). Called after every iteration's accepted iterate;
  /// returns true when the objective (or x) changed: the loop then evaluates E and f afresh, raises its residual scale
  /// to the new residual if larger, and restarts the accelerator and the stagnation window.
  virtual bool advance(State&) { return false; }
  /// Whether the kinematic parts stand at their target: a frame converges only then (a blocked part
  /// lags, and the frame reports not converged when it runs out of iterations).
  virtual bool at_target() const { return true; }
  /// Called when the frame's residual meets its tolerance (step 4): a strategy whose objective holds
  /// discrete choices made from earlier iterates (contact pairings held for the frame) may revise
  /// them at the converged x. Returns true when it did: the loop then evaluates E and f afresh,
  /// restarts the accelerator and the stagnation window, and goes on. It must return true only
  /// finitely often per frame.
  virtual bool revise(State&) { return false; }

  /// true: the strategy keeps the positions and forces in its own memory during a frame (a device,
  /// solver/device_pd.hpp): begin_frame() takes state.x and the inputs, evaluate() and iterate()
  /// (in place) leave state.x and state.force untouched, and end_frame() writes both back. The loop
  /// then reads the residual through residual_norm(), runs Anderson through the resident_anderson
  /// calls below, and refuses what needs host vectors mid-frame (Chebyshev, the line search,
  /// implicit Euler's velocity).
  virtual bool resident() const { return false; }
  /// ||f(x)||_F of the last evaluate() (resident strategies override it).
  virtual double residual_norm(const State& state) const { return state.force.norm(); }
  /// Anderson acceleration where a resident strategy's vectors live, with the loop's own formulas
  /// (Walker & Ni 2011; the mixing coefficients by detail::anderson_coefficients). Called after
  /// iterate() moved x to G(x_k): records this iteration's secant pair and replaces x by the
  /// extrapolation G(x_k) − dG γ; returns whether it did (false while the history is empty).
  virtual bool resident_anderson(int /*window*/) { return false; }
  /// Back to the plain iterate G(x_k) of the last resident_anderson(), history emptied (the
  /// accelerated iterate failed the energy check).
  virtual void resident_anderson_reject() {}
  /// Empties the history (start of a frame).
  virtual void resident_anderson_reset() {}

  /// Solves A u = b in place with the constant matrix A of the strategy's step (n × r, or 3n × 1
  /// for a coupled model): the solve adjoint (backward) passes reuse instead of refactoring.
  virtual void solve_with_matrix(Eigen::MatrixXd& b) const = 0;
};

/// Runs one frame of `step` on `state` (see the header comment). Throws SolverError on bad inputs,
/// an unsupported accelerator, and non-finite energies, forces or steps (naming frame and iteration).
FrameStats run_frame(const Model& model, State& state, GlobalStep& step, const SolverOptions& options);

}  // namespace xpd
