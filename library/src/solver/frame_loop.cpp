#include <fmt/format.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "anderson.hpp"

namespace xpd {
namespace {

void check_finite(double energy, double residual, const State& s, int iteration) {
  if (!std::isfinite(energy) || !std::isfinite(residual))
    throw SolverError(
        fmt::format("non-finite {} at frame {}, iteration {} (energy={}, residual={}): check inputs for NaN, "
                    "stiffness and time-step ranges",
                    std::isfinite(energy) ? "forces" : "energy", s.frame, iteration, energy, residual));
}

// Chebyshev semi-iteration (Wang 2015) of G(x) = x + δ: returns true when the new iterate in `x`
// is accelerated (ω ≠ 1); the plain iterate is kept in c.x_pd.
bool chebyshev_update(ChebyshevScratch& c, const SolverOptions& opt, Eigen::Map<Eigen::VectorXd> x,
                      const Eigen::Map<const Eigen::VectorXd>& delta) {
  if (c.x_prev.size() != x.size()) {  // first use: size the buffers once
    c.x_prev.resize(x.size());
    c.x_pd.resize(x.size());
  }
  c.x_pd = x + delta;
  const bool estimate = !(opt.chebyshev_rho > 0.0);
  // Automatic ρ: go back to a plain warm-up every chebyshev_reestimate accelerated iterations.
  if (estimate && opt.chebyshev_reestimate > 0 && c.accelerated >= opt.chebyshev_reestimate) {
    c.plain = 0;
    c.accelerated = 0;
    c.step_prev = 0.0;
  }
  if (c.plain < opt.chebyshev_warmup) {  // warm-up: plain PD, record the contraction ratio
    const double step = delta.norm();
    if (c.plain > 0 && c.step_prev > 0.0) c.ratio = step / c.step_prev;
    c.step_prev = step;
    ++c.plain;
    c.omega = 1.0;
    c.x_prev = x;
    x = c.x_pd;
    return false;
  }
  if (c.accelerated == 0) {  // first accelerated iteration of this ω sequence
    // Re-estimates keep the largest ratio seen in the frame (after the fast modes are damped the
    // plain ratio approaches ρ from below); chebyshev_restart after a rejection forgets it.
    c.rho = estimate ? std::clamp(std::max(c.rho, c.ratio), 0.0, 0.9999) : opt.chebyshev_rho;
    c.omega = 2.0 / (2.0 - c.rho * c.rho);
  } else {
    c.omega = 4.0 / (4.0 - c.rho * c.rho * c.omega);
  }
  ++c.accelerated;
  // x_{k+1} = ω (G(x_k) − x_{k−1}) + x_{k−1}; x_prev ← x_k.
  const double w = c.omega;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double xk = x[i];
    x[i] = w * (c.x_pd[i] - c.x_prev[i]) + c.x_prev[i];
    c.x_prev[i] = xk;
  }
  return true;
}

// Start of a frame, or an accelerated iterate rejected: plain warm-up, ρ estimated afresh.
void chebyshev_restart(ChebyshevScratch& c) {
  c.plain = 0;
  c.accelerated = 0;
  c.omega = 1.0;
  c.rho = 0.0;
  c.step_prev = 0.0;
  c.ratio = 0.0;
}

void check_options(const Model& model, const State& s, const GlobalStep& step, const SolverOptions& opt,
                   Accelerator accel) {
  const char* who = step.name();
  if (opt.max_iterations < 0) throw SolverError(fmt::format("{}: max_iterations must be >= 0", who));
  if (accel != Accelerator::None && !step.supports(accel))
    throw SolverError(fmt::format("{}: {}", who, step.unsupported_reason(accel)));
  if (accel == Accelerator::Anderson && opt.anderson_window < 1)
    throw SolverError(fmt::format("{}: anderson_window must be >= 1", who));
  if (accel == Accelerator::Chebyshev) {
    if (!(opt.chebyshev_rho >= 0.0 && opt.chebyshev_rho < 1.0))
      throw SolverError(fmt::format("{}: chebyshev_rho must be in [0, 1), got {}", who, opt.chebyshev_rho));
    if (opt.chebyshev_warmup < (opt.chebyshev_rho > 0.0 ? 1 : 2))
      throw SolverError(
          fmt::format("{}: chebyshev_warmup must be >= 1 (>= 2 when rho is estimated, chebyshev_rho = 0), got {}", who,
                      opt.chebyshev_warmup));
  }
  if (step.resident()) {
    if (accel == Accelerator::Chebyshev || step.line_search())
      throw SolverError(
          fmt::format("{}: the strategy keeps its vectors on the device during a frame; Chebyshev "
                      "acceleration and the line search need them on the host (use anderson or none)",
                      who));
    if (model.integrator() != Integrator::Quasistatic)
      throw SolverError(
          fmt::format("{}: the strategy keeps its vectors on the device; implicit Euler is not "
                      "supported with it",
                      who));
  }
  if (s.x.rows() != model.num_nodes() || s.step.rows() != s.x.rows() || s.x_prev.rows() != s.x.rows())
    throw SolverError(fmt::format("{}: the state does not belong to the model (make_state)", who));
  if (s.inputs.attachment_targets.rows() != model.initial_inputs().attachment_targets.rows() ||
      s.inputs.shape_targets.rows() != model.initial_inputs().shape_targets.rows())
    throw SolverError(fmt::format("{}: State::inputs sizes differ from the model (attachments / shape targets)", who));
  if (!s.inputs.attachment_targets.allFinite() || !s.inputs.shape_targets.allFinite() ||
      !s.inputs.gravity.allFinite() || !s.inputs.nodal_forces.allFinite())
    throw SolverError(fmt::format("{}: non-finite frame input at frame {}", who, s.frame));
}

// A frame counts as stagnated only this close to its round-off estimate. Measured 2026-11-26 with
// tolerance 1e-15: the cantilever, twist, squash and a standing Armadillo13K stagnate at 0.18-0.24 of
// the estimate (Anderson, Chebyshev); the strain-limited octopus (test_real_meshes.cpp) plateaus for
// hundreds of iterations at 14x and for about a thousand at 2-4x (near 20,000 iterations) before it
// converges at 2x: the band stays well below 14, the window grows with the iterations.
constexpr double kStagnationBand = 4.0;

// ε ||(K_ii |x_i|)_i||: the cancellation error of the forces at x, dominated by the stiffest
// springs (an attachment's w (t − x) loses ε w |x|; see docs/validation.md §1).
double roundoff_estimate(const Model& model, const Points& x) {
  const Eigen::SparseMatrix<double>& K = model.matrix();
  double sq = 0.0;
  for (Eigen::Index j = 0; j < K.outerSize() && j < x.rows(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(K, j); it; ++it)
      if (it.row() == j) sq += it.value() * it.value() * x.row(j).squaredNorm();
  return std::numeric_limits<double>::epsilon() * std::sqrt(sq);
}

}  // namespace

FrameStats run_frame(const Model& model, State& s, GlobalStep& step, const SolverOptions& opt) {
  const Accelerator accel = opt.anderson ? Accelerator::Anderson : opt.accelerator;
  check_options(model, s, step, opt, accel);
  Timer wall;
  FrameStats st;
  st.threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  PhaseTimer pt;
  const Eigen::Index n = s.x.rows();

  s.x_start = s.x;
  if (model.integrator() == Integrator::ImplicitEuler) {
    s.inertia_target = s.x + model.time_step() * s.velocity;
    s.x = s.inertia_target;  // initial guess: inertial position
  }
  st.load_scale = load_norm(model, s);
  // Before begin_frame: a resident strategy need not keep state.x valid after it.
  st.roundoff_residual = roundoff_estimate(model, s.x);
  step.begin_frame(s);
  pt.lap(st.timings_ms.other);

  double energy = step.evaluate(s, st);
  pt.skip();
  const bool resident = step.resident();
  double residual = step.residual_norm(s);
  check_finite(energy, residual, s, 0);
  st.initial_residual = residual;
  double scale = std::max(residual, st.load_scale);
  // A frame that starts within the tolerance of the last converged frame's scale (nothing moved
  // since, e.g. a frame between surgical events without loads) has nothing to do: it keeps that
  // scale and converges at once. Its own scale (the residual the last frame left) would ask for
  // rel_tolerance of that residual again, which round-off does not allow: such frames ran until
  // the stagnation test stopped them unconverged (scenes/face_flap.json: about a thousand
  // iterations in each of three idle frames).
  if (s.converged_scale > scale && residual <= opt.rel_tolerance * s.converged_scale) scale = s.converged_scale;
  // The round-off floor, taken at the start of the frame: for a strategy that converges at round-off,
  // and for a frame whose scale is itself round-off (no loads, and it starts at equilibrium: an idle
  // frame between events), which cannot meet a test relative to that scale; both converge within
  // the stagnation band of the round-off estimate instead.
  const double floor = step.converges_at_roundoff() || scale <= kStagnationBand * st.roundoff_residual
                           ? kStagnationBand * st.roundoff_residual
                           : 0.0;
  auto converged = [&](double r) {
    return (r <= opt.rel_tolerance * scale || r <= opt.abs_tolerance || r <= floor) && step.at_target();
  };
  // Stagnation: the best residual and the iteration that last lowered it by 10%.
  double best = residual;
  int best_at = 0;
  Eigen::Map<Eigen::VectorXd> xv(s.x.data(), 3 * n);
  const Eigen::Map<const Eigen::VectorXd> delta(s.step.data(), 3 * n);
  const bool line_search = step.line_search();
  const bool need_delta = !resident && (accel != Accelerator::None || line_search);
  bool energy_stop = false;
  bool stalled = false;  // the line search found no decrease
  // Empties the accelerator's history (start of a frame; the strategy moved its kinematic parts).
  auto restart_accelerator = [&] {
    if (accel == Accelerator::Anderson) {
      if (resident)
        step.resident_anderson_reset();
      else
        detail::anderson_reset(s.anderson);
    }
    if (accel == Accelerator::Chebyshev) chebyshev_restart(s.chebyshev);
  };
  restart_accelerator();
  pt.lap(st.timings_ms.other);

  while (st.iterations < opt.max_iterations && (st.iterations < opt.min_iterations || !converged(residual))) {
    // The plain iterate G(x), as the step δ = G(x) − x in s.step when the accelerators or the line
    // search need it (x stays at the origin), else wherever the strategy leaves it.
    if (step.in_place()) {
      if (need_delta) s.x_prev = s.x;
      pt.lap(st.timings_ms.other);
      step.iterate(s, st);
      pt.skip();
      ++st.iterations;
      // (A resident strategy's positions are checked through its residual, below.)
      if (!resident && !s.x.allFinite())
        throw SolverError(fmt::format("non-finite positions after the global step at frame {}, iteration {}", s.frame,
                                      st.iterations));
      if (need_delta) {
        s.step = s.x - s.x_prev;
        s.x = s.x_prev;
      }
    } else {
      step.iterate(s, st);
      pt.skip();
      ++st.iterations;
      if (!s.step.allFinite())
        throw SolverError(
            fmt::format("non-finite global-step solution at frame {}, iteration {}", s.frame, st.iterations));
      if (line_search) s.x_prev = s.x;
    }
    // Slope −∇E·δ = f·δ > 0 of the line search, with f = f(x) of the origin.
    const double slope = line_search ? s.force.cwiseProduct(s.step).sum() : 0.0;
    // α: the strategy's bound on the plain step (CCD). Taken when the plain step is used: with
    // Anderson on the host, an extrapolated iterate that passes its own bound and the energy test
    // never needs it (one CCD per such iteration instead of two; on scenes/face_ipc.json frames
    // 1–8 the energy test rejected 385 extrapolations in 1,327 iterations; BENCHMARKS.md, IPC).
    double alpha = 1.0;
    bool alpha_known = !line_search;
    auto plain_alpha = [&] {
      if (!alpha_known) alpha = std::min(1.0, step.max_step_fraction(s)), alpha_known = true;
      return alpha;
    };
    const bool lazy_bound = accel == Accelerator::Anderson && !resident;
    if (!lazy_bound) (void)plain_alpha();
    bool accelerated = false;
    if (accel == Accelerator::Anderson) {
      if (resident) {
        accelerated = step.resident_anderson(opt.anderson_window);
      } else {
        detail::anderson_update(s.anderson, opt.anderson_window, xv, delta);
        accelerated = s.anderson.history > 0;
        if (accelerated && line_search) {
          // The extrapolated iterate passes the strategy's bound like the plain step (a barrier's
          // energy cannot see a path that tunnels through contact): checked along x − x_prev, then
          // δ restored from the plain iterate for the line search.
          s.step = s.x - s.x_prev;
          const double a = step.max_step_fraction(s);
          Eigen::Map<const Points> x_pd(s.anderson.x_pd.data(), n, 3);
          s.step = x_pd - s.x_prev;
          if (a < 1.0) {
            xv = s.anderson.x_pd;
            detail::anderson_reset(s.anderson);
            ++st.anderson_rejections;
            accelerated = false;
          }
        }
        if (!accelerated && plain_alpha() < 1.0) {
          // The bound cut the plain step: nothing beyond it is admissible, so no extrapolation;
          // the history restarts from the cut iterate.
          detail::anderson_reset(s.anderson);
          s.x = s.x_prev + alpha * s.step;
        }
      }
    } else if (accel == Accelerator::Chebyshev) {
      accelerated = chebyshev_update(s.chebyshev, opt, xv, delta);
      if (accelerated) st.chebyshev_rho = s.chebyshev.rho;
    } else if (!step.in_place()) {
      if (alpha < 1.0)
        s.x += alpha * s.step;
      else
        s.x += s.step;
    } else if (need_delta) {
      s.x = s.x_prev + alpha * s.step;
    }
    pt.lap(st.timings_ms.other);
    double e_new = step.evaluate(s, st);
    pt.skip();
    if (accelerated && !(e_new <= energy + 1e-12 * std::abs(energy))) {
      // Energy safeguard: reject the accelerated iterate, take the plain one (monotone).
      if (accel == Accelerator::Anderson) {
        if (resident) {
          step.resident_anderson_reject();
        } else {
          xv = s.anderson.x_pd;
          detail::anderson_reset(s.anderson);
        }
        ++st.anderson_rejections;
        // The plain iterate within its bound (lazy_bound: not taken yet).
        if (!resident && plain_alpha() < 1.0) s.x = s.x_prev + alpha * s.step;
      } else {
        xv = s.chebyshev.x_pd;
        chebyshev_restart(s.chebyshev);
        ++st.chebyshev_rejections;
      }
      accelerated = false;
      pt.lap(st.timings_ms.other);
      e_new = step.evaluate(s, st);
      pt.skip();
    }
    // An accepted accelerated iterate has already passed the non-increase test; the plain step
    // must decrease E sufficiently (Armijo).
    if (line_search && !accelerated && !(e_new <= energy - 1e-4 * plain_alpha() * slope + 1e-12 * std::abs(energy))) {
      // Backtracking along the plain direction from the previous iterate: the constant matrix does
      // not majorize the energy, so a full step may raise it.
      if (accel == Accelerator::Anderson) detail::anderson_reset(s.anderson);
      bool accepted = false;
      for (int ls = 0; ls < 40 && !accepted; ++ls) {
        alpha *= 0.5;
        ++st.line_search_halvings;
        s.x = s.x_prev + alpha * s.step;
        e_new = step.evaluate(s, st);
        accepted = e_new <= energy - 1e-4 * alpha * slope + 1e-12 * std::abs(energy);
      }
      if (!accepted) {  // no decrease resolvable at this precision: stay at the previous iterate
        s.x = s.x_prev;
        e_new = step.evaluate(s, st);
        stalled = true;
      }
      pt.skip();
    }
    residual = step.residual_norm(s);
    check_finite(e_new, residual, s, st.iterations);
    const double decrease = energy - e_new;
    energy = e_new;
    pt.lap(st.timings_ms.rhs);
    if (stalled) break;
    // The strategy's kinematic parts moved (advance), or it revised its held choices at a converged
    // iterate (revise; the frame's residual scale stays, the tolerance is the frame's): a new
    // objective from the accepted iterate.
    const bool advanced = step.advance(s);
    if (advanced || (converged(residual) && step.revise(s))) {
      pt.lap(st.timings_ms.other);
      energy = step.evaluate(s, st);
      pt.skip();
      residual = step.residual_norm(s);
      check_finite(energy, residual, s, st.iterations);
      if (advanced) scale = std::max(scale, residual);
      best = residual;
      best_at = st.iterations;
      restart_accelerator();
      continue;
    }
    if (residual < 0.9 * best) {
      best = residual;
      best_at = st.iterations;
    }
    // The window grows with the frame's effort (a quarter of the iterations so far): a run that
    // took 20,000 iterations to approach its floor may pause there for a few thousand.
    if (opt.stagnation_window > 0 && st.iterations - best_at >= std::max(opt.stagnation_window, st.iterations / 4) &&
        residual <= kStagnationBand * st.roundoff_residual && !converged(residual)) {
      st.stagnated = true;
      break;
    }
    if (opt.energy_tolerance > 0.0 && st.iterations >= opt.min_iterations && step.at_target() &&
        std::abs(decrease) <= opt.energy_tolerance * std::abs(energy)) {
      energy_stop = true;
      break;
    }
  }
  st.converged = converged(residual) || energy_stop;
  s.converged_scale = st.converged ? scale : 0.0;
  if (model.integrator() == Integrator::ImplicitEuler) s.velocity = (s.x - s.x_start) / model.time_step();
  st.energy = energy;
  st.residual = residual;
  ++s.frame;
  step.end_frame(s, st);
  pt.lap(st.timings_ms.other);
  st.wall_ms = wall.elapsed_ms();
  return st;
}

}  // namespace xpd
