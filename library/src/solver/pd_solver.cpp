#include <xpd/solver/pd_solver.hpp>

#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/energy/tet_term.hpp>

#include "anderson.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <tbb/global_control.h>

namespace xpd {

double evaluate(const Model& model, State& s, PhaseTimings* timings, bool store_projections) {
  PhaseTimer pt;
  PhaseTimings local;
  s.force.setZero();
  double energy = 0.0;
  // Local step of the tet terms, fused with their elastic forces (the expensive part).
  const auto& terms = model.terms();
  for (size_t t = 0; t < terms.size(); ++t) {
    if (!terms[t]->per_element()) continue;
    energy += terms[t]->project_add_force(s.x, s.inputs, s.force,
                                          store_projections ? s.projections[t].data() : nullptr);
  }
  pt.lap(local.local);
  // Springs and loads.
  for (size_t t = 0; t < terms.size(); ++t) {
    if (terms[t]->per_element()) continue;
    energy += terms[t]->project_add_force(s.x, s.inputs, s.force,
                                          store_projections ? s.projections[t].data() : nullptr);
  }
  // Inertia: 1/(2h²) ||x − y||²_M, force −M/h² (x − y).
  if (model.integrator() == Integrator::ImplicitEuler) {
    const double inv_h2 = 1.0 / (model.time_step() * model.time_step());
    const auto& m = model.masses();
    for (Eigen::Index i = 0; i < s.x.rows(); ++i) {
      const Eigen::RowVector3d d = s.x.row(i) - s.inertia_target.row(i);
      energy += 0.5 * inv_h2 * m(i) * d.squaredNorm();
      s.force.row(i) -= (inv_h2 * m(i)) * d;
    }
  }
  pt.lap(local.rhs);
  if (timings) {
    timings->local += local.local;
    timings->rhs += local.rhs;
  }
  return energy;
}

void solve_global(const Model& model, State& s) {
  if (model.coupled()) {
    // Row-major #V×3 force = the 3n vector in the coupled DOF order 3·node + coordinate.
    const Eigen::Index n3 = 3 * s.force.rows();
    std::copy(s.force.data(), s.force.data() + n3, s.rhs3.data());
    Eigen::Map<Eigen::MatrixXd> b(s.rhs3.data(), n3, 1);
    model.factor().solve_in_place(b);
    s.rhs = Eigen::Map<const Points>(s.rhs3.data(), s.force.rows(), 3);
    return;
  }
  s.rhs = s.force;  // row-major #V×3 → column-major n×3 (no reallocation: same size)
  model.factor().solve_in_place(s.rhs);
}

double load_norm(const Model& model, const State& s) {
  double sq = 0.0;
  const bool has_nodal = s.inputs.nodal_forces.rows() == s.x.rows();
  for (Eigen::Index i = 0; i < s.x.rows(); ++i) {
    Eigen::RowVector3d l = model.masses()(i) * s.inputs.gravity.transpose();
    if (has_nodal) l += s.inputs.nodal_forces.row(i);
    sq += l.squaredNorm();
  }
  return std::sqrt(sq);
}

namespace {

void check_finite(double energy, double residual, const State& s, int iteration) {
  if (!std::isfinite(energy) || !std::isfinite(residual))
    throw SolverError(fmt::format(
        "non-finite {} at frame {}, iteration {} (energy={}, residual={}): check inputs for NaN, "
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

}  // namespace

FrameStats step(const Model& model, State& s, const SolverOptions& opt) {
  if (opt.max_iterations < 0) throw SolverError("step: max_iterations must be >= 0");
  const Accelerator accel = opt.anderson ? Accelerator::Anderson : opt.accelerator;
  if (accel == Accelerator::Anderson && opt.anderson_window < 1)
    throw SolverError("step: anderson_window must be >= 1");
  if (accel == Accelerator::Chebyshev && model.has_volume_term())
    throw SolverError(
        "step: Chebyshev acceleration needs lambda = 0 (with the lambda volume term the global step is a "
        "line-searched quasi-Newton step); use Anderson");
  if (accel == Accelerator::Chebyshev) {
    if (!(opt.chebyshev_rho >= 0.0 && opt.chebyshev_rho < 1.0))
      throw SolverError(fmt::format("step: chebyshev_rho must be in [0, 1), got {}", opt.chebyshev_rho));
    if (opt.chebyshev_warmup < (opt.chebyshev_rho > 0.0 ? 1 : 2))
      throw SolverError(fmt::format(
          "step: chebyshev_warmup must be >= 1 (>= 2 when rho is estimated, chebyshev_rho = 0), got {}",
          opt.chebyshev_warmup));
  }
  Timer wall;
  FrameStats st;
  st.threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  PhaseTimer pt;
  const Eigen::Index n = s.x.rows();
  if (s.inputs.attachment_targets.rows() != model.initial_inputs().attachment_targets.rows() ||
      s.inputs.shape_targets.rows() != model.initial_inputs().shape_targets.rows())
    throw SolverError("step: State::inputs sizes differ from the model (attachments / shape targets)");
  if (!s.inputs.attachment_targets.allFinite() || !s.inputs.shape_targets.allFinite() ||
      !s.inputs.gravity.allFinite() || !s.inputs.nodal_forces.allFinite())
    throw SolverError(fmt::format("step: non-finite frame input at frame {}", s.frame));

  s.x_start = s.x;
  if (model.integrator() == Integrator::ImplicitEuler) {
    s.inertia_target = s.x + model.time_step() * s.velocity;
    s.x = s.inertia_target;  // initial guess: inertial position
  }
  st.load_scale = load_norm(model, s);
  pt.lap(st.timings_ms.other);

  double energy = evaluate(model, s, &st.timings_ms, opt.store_projections);
  pt.skip();
  double residual = s.force.norm();
  check_finite(energy, residual, s, 0);
  st.initial_residual = residual;
  const double scale = std::max(residual, st.load_scale);
  Eigen::Map<Eigen::VectorXd> xv(s.x.data(), 3 * n);
  bool energy_stop = false;
  bool stalled = false;  // line search found no decrease (λ volume term only)
  const bool line_search = model.has_volume_term();
  if (accel == Accelerator::Anderson) {
    s.anderson.history = s.anderson.head = 0;
    s.anderson.has_prev = false;
  }
  if (accel == Accelerator::Chebyshev) chebyshev_restart(s.chebyshev);
  auto converged = [&](double r) {
    return r <= opt.rel_tolerance * scale || r <= opt.abs_tolerance;
  };
  pt.lap(st.timings_ms.other);

  while (st.iterations < opt.max_iterations &&
         (st.iterations < opt.min_iterations || !converged(residual))) {
    // Global step.
    solve_global(model, s);
    pt.lap(st.timings_ms.solve);
    ++st.iterations;
    // λ volume term: the step is a quasi-Newton direction for the true energy; keep its origin,
    // the direction and the slope f·δ = −∇E·δ > 0 for the line search below.
    double slope = 0.0;
    if (line_search) {
      s.x_prev = s.x;
      s.delta = s.rhs;
      slope = s.force.cwiseProduct(s.delta).sum();
    }
    // δ back to row-major (reuse force as the δ buffer; f is recomputed below).
    s.force = s.rhs;
    if (!s.force.allFinite())
      throw SolverError(fmt::format("non-finite global-step solution at frame {}, iteration {}", s.frame, st.iterations));
    bool accelerated = false;
    const Eigen::Map<const Eigen::VectorXd> delta(s.force.data(), 3 * n);
    if (accel == Accelerator::Anderson) {
      detail::anderson_update(s.anderson, opt.anderson_window, xv, delta);
      accelerated = s.anderson.history > 0;
    } else if (accel == Accelerator::Chebyshev) {
      accelerated = chebyshev_update(s.chebyshev, opt, xv, delta);
      if (accelerated) st.chebyshev_rho = s.chebyshev.rho;
    } else {
      s.x += s.force;
    }
    pt.lap(st.timings_ms.other);
    double e_new = evaluate(model, s, &st.timings_ms, opt.store_projections);
    pt.skip();
    if (accelerated && !(e_new <= energy + 1e-12 * std::abs(energy))) {
      // Energy safeguard: reject the accelerated iterate, take the plain PD one (monotone).
      if (accel == Accelerator::Anderson) {
        xv = s.anderson.x_pd;
        s.anderson.history = s.anderson.head = 0;
        s.anderson.has_prev = false;
        ++st.anderson_rejections;
      } else {
        xv = s.chebyshev.x_pd;
        chebyshev_restart(s.chebyshev);
        ++st.chebyshev_rejections;
      }
      accelerated = false;
      pt.lap(st.timings_ms.other);
      e_new = evaluate(model, s, &st.timings_ms, opt.store_projections);
      pt.skip();
    }
    // An accepted accelerated iterate has already passed the non-increase test; the plain step
    // must decrease E sufficiently (Armijo).
    if (line_search && !accelerated && !(e_new <= energy - 1e-4 * slope + 1e-12 * std::abs(energy))) {
      // Backtracking along the plain direction from the previous iterate: the constant matrix is
      // not a majorizer of the volume term, so a full step may raise the energy.
      if (accel == Accelerator::Anderson) {
        s.anderson.history = s.anderson.head = 0;
        s.anderson.has_prev = false;
      }
      double alpha = 1.0;
      bool accepted = false;
      for (int ls = 0; ls < 40 && !accepted; ++ls) {
        alpha *= 0.5;
        ++st.line_search_halvings;
        s.x = s.x_prev + alpha * s.delta;
        e_new = evaluate(model, s, &st.timings_ms, opt.store_projections);
        accepted = e_new <= energy - 1e-4 * alpha * slope + 1e-12 * std::abs(energy);
      }
      if (!accepted) {  // no decrease resolvable at this precision: stay at the previous iterate
        s.x = s.x_prev;
        e_new = evaluate(model, s, &st.timings_ms, opt.store_projections);
        stalled = true;
      }
      pt.skip();
    }
    residual = s.force.norm();
    check_finite(e_new, residual, s, st.iterations);
    const double decrease = energy - e_new;
    energy = e_new;
    pt.lap(st.timings_ms.rhs);
    if (stalled) break;
    if (opt.energy_tolerance > 0.0 && st.iterations >= opt.min_iterations &&
        std::abs(decrease) <= opt.energy_tolerance * std::abs(energy)) {
      energy_stop = true;
      break;
    }
  }
  st.converged = converged(residual) || energy_stop;
  if (model.integrator() == Integrator::ImplicitEuler) s.velocity = (s.x - s.x_start) / model.time_step();
  st.energy = energy;
  st.residual = residual;
  ++s.frame;
  pt.lap(st.timings_ms.other);
  st.wall_ms = wall.elapsed_ms();
  return st;
}

}  // namespace xpd
