#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/solver/adjoint.hpp>
#include <xpd/solver/newton.hpp>

namespace xpd {

void hessian_product(const Model& model, const State& state, const Points& h, Points& out) {
  const Eigen::Index n = model.num_nodes();
  out.setZero(n, 3);
  for (const auto& t : model.terms()) t->add_hessian_product(state.x, state.inputs, h, out);
  // The regularization of unattached components is part of K (a proximal term of the global step);
  // it enters H the same way, or H would be singular on those components' rigid motions.
  const Eigen::VectorXd& reg = model.regularization();
  if (reg.size() == n) out += reg.asDiagonal() * h;
}

HessianOperator::HessianOperator(const Model& model, const State& state) : model_(&model), state_(&state) {
  for (const auto& t : model.terms()) caches_.push_back(t->make_hessian_cache(state.x, state.inputs));
}

void HessianOperator::apply(const Points& h, Points& out) const {
  const Model& model = *model_;
  const Eigen::Index n = model.num_nodes();
  out.setZero(n, 3);
  for (size_t i = 0; i < model.terms().size(); ++i)
    model.terms()[i]->add_cached_hessian_product(caches_[i].get(), state_->x, state_->inputs, h, out);
  const Eigen::VectorXd& reg = model.regularization();
  if (reg.size() == n) out += reg.asDiagonal() * h;
}

FrameInputs input_gradient(const Model& model, const State& state, const Points& h) {
  FrameInputs g;
  g.shape_targets = ShapeTargetParams::Zero(state.inputs.shape_targets.rows(), 6);
  g.attachment_targets = Points::Zero(state.inputs.attachment_targets.rows(), 3);
  g.gravity = Vec3::Zero();
  g.nodal_forces = Points::Zero(model.num_nodes(), 3);
  for (const auto& t : model.terms()) t->add_input_gradient(state.x, state.inputs, h, g);
  return g;
}

namespace {

double dot(const Points& a, const Points& b) { return a.cwiseProduct(b).sum(); }

// Per-frame vectors of the iteration.
struct Frame {
  const State* state = nullptr;
  const Points* g = nullptr;
  Points* h = nullptr;
  size_t index = 0;                    // in the batch (error messages)
  std::unique_ptr<HessianOperator> H;  // H at the frame's state (built once per solve)
  Points r, z, p, q;
  double rz = 0.0, gnorm = 0.0, r0 = 0.0;
  bool active = true, restart = false;
  AdjointStats stats;
};

// z ← K⁻¹ r for every active frame with one multi-column solve of the shared factor.
void precondition(const Model& model, std::vector<Frame>& frames, Eigen::MatrixXd& buf) {
  const Eigen::Index n = model.num_nodes();
  std::vector<Frame*> active;
  for (Frame& f : frames)
    if (f.active) active.push_back(&f);
  if (active.empty()) return;
  const auto k = static_cast<Eigen::Index>(active.size());
  if (model.coupled()) {  // 3n × k: one column per frame, DOF 3·node + coordinate (row-major Points)
    buf.resize(3 * n, k);
    for (Eigen::Index j = 0; j < k; ++j) buf.col(j) = Eigen::Map<const Eigen::VectorXd>(active[j]->r.data(), 3 * n);
    model.factor().solve_in_place(buf);
    for (Eigen::Index j = 0; j < k; ++j) {
      active[j]->z.resize(n, 3);
      Eigen::Map<Eigen::VectorXd>(active[j]->z.data(), 3 * n) = buf.col(j);
    }
  } else {  // n × 3k: the x, y, z columns of every frame
    buf.resize(n, 3 * k);
    for (Eigen::Index j = 0; j < k; ++j) buf.middleCols(3 * j, 3) = active[j]->r;
    model.factor().solve_in_place(buf);
    for (Eigen::Index j = 0; j < k; ++j) active[j]->z = buf.middleCols(3 * j, 3);
  }
}

bool any_active(const std::vector<Frame>& frames) {
  for (const Frame& f : frames)
    if (f.active) return true;
  return false;
}

// r ← g − H h; returns ||r||.
double true_residual(const Model& model, Frame& f) {
  if (f.H)
    f.H->apply(*f.h, f.q);
  else
    hessian_product(model, *f.state, *f.h, f.q);
  f.r = *f.g - f.q;
  return f.r.norm();
}

void finish(Frame& f, double rnorm) {
  f.active = false;
  f.stats.residual = rnorm / f.gnorm;
}

void check_finite(const Frame& f, double value, const char* what) {
  if (!std::isfinite(value))
    throw SolverError(
        fmt::format("adjoint: frame {}: non-finite {} at iteration {}", f.index, what, f.stats.iterations));
}

void run_cg(const Model& model, const AdjointOptions& opt, std::vector<Frame>& frames) {
  Eigen::MatrixXd buf;
  for (Frame& f : frames) f.r = *f.g;
  precondition(model, frames, buf);
  for (Frame& f : frames)
    if (f.active) {
      f.p = f.z;
      f.rz = dot(f.r, f.z);
    }
  while (any_active(frames)) {
    for (size_t i = 0; i < frames.size(); ++i) {
      Frame& f = frames[i];
      if (!f.active) continue;
      f.H->apply(f.p, f.q);
      const double pq = dot(f.p, f.q);
      check_finite(f, pq, "curvature pᵀHp");
      if (!(pq > 0.0))
        throw SolverError(
            fmt::format("adjoint: frame {}: Hessian not positive definite (pᵀHp = {:.3e} ≤ 0 at CG iteration {}): the "
                        "equilibrium is unstable (buckled or inverted elements) and has no gradient",
                        f.index, pq, f.stats.iterations));
      const double alpha = f.rz / pq;
      *f.h += alpha * f.p;
      f.r -= alpha * f.q;
      ++f.stats.iterations;
      double rnorm = f.r.norm();
      check_finite(f, rnorm, "residual");
      f.restart = false;
      if (rnorm <= opt.tolerance * f.gnorm) {
        // The recursive residual drifts from g − H h in round-off: accept on the true one, else
        // restart CG from the current h.
        rnorm = true_residual(model, f);
        if (rnorm <= opt.tolerance * f.gnorm) {
          finish(f, rnorm);
          continue;
        }
        f.restart = true;
      }
      if (f.stats.iterations >= opt.max_iterations)
        throw SolverError(
            fmt::format("adjoint: frame {}: not converged after {} CG iterations (relative residual {:.3e} > {:.1e})",
                        f.index, f.stats.iterations, rnorm / f.gnorm, opt.tolerance));
    }
    precondition(model, frames, buf);
    for (Frame& f : frames) {
      if (!f.active) continue;
      const double rz = dot(f.r, f.z);
      if (f.restart) {
        f.p = f.z;
      } else {
        f.p = f.z + (rz / f.rz) * f.p;
      }
      f.rz = rz;
    }
  }
}

void run_fixed_point(const Model& model, const AdjointOptions& opt, std::vector<Frame>& frames) {
  Eigen::MatrixXd buf;
  for (Frame& f : frames) {
    f.r = *f.g;  // h = 0
    f.r0 = f.gnorm;
  }
  while (any_active(frames)) {
    precondition(model, frames, buf);
    for (size_t i = 0; i < frames.size(); ++i) {
      Frame& f = frames[i];
      if (!f.active) continue;
      *f.h += f.z;
      ++f.stats.iterations;
      const double rnorm = true_residual(model, f);
      check_finite(f, rnorm, "residual");
      if (rnorm <= opt.tolerance * f.gnorm) {
        finish(f, rnorm);
        continue;
      }
      if (rnorm > 1e3 * f.r0)
        throw SolverError(fmt::format(
            "adjoint: frame {}: fixed-point iteration diverged (residual grew {:.1e}× in {} iterations): the Hessian "
            "is not positive definite, or exceeds the PD matrix",
            f.index, rnorm / f.r0, f.stats.iterations));
      if (f.stats.iterations >= opt.max_iterations)
        throw SolverError(fmt::format(
            "adjoint: frame {}: not converged after {} fixed-point iterations (relative residual {:.3e} > {:.1e})",
            f.index, f.stats.iterations, rnorm / f.gnorm, opt.tolerance));
    }
  }
}

void run_direct(const Model& model, std::vector<Frame>& frames) {
  const Eigen::Index n = model.num_nodes();
  for (size_t i = 0; i < frames.size(); ++i) {
    Frame& f = frames[i];
    if (!f.active) continue;
    const Eigen::SparseMatrix<double> H = newton_hessian(model, *f.state, /*psd_project=*/false);
    SparseCholesky chol(CholeskyBackend::Cholmod);
    try {
      chol.analyze(H);
      chol.factorize(H);
    } catch (const SolverError& e) {
      throw SolverError(
          fmt::format("adjoint: frame {}: Hessian not positive definite (direct solve: {})", f.index, e.what()));
    }
    Eigen::MatrixXd b = Eigen::Map<const Eigen::VectorXd>(f.g->data(), 3 * n);
    chol.solve_in_place(b);
    Eigen::Map<Eigen::VectorXd>(f.h->data(), 3 * n) = b.col(0);
    const double rnorm = true_residual(model, f);
    check_finite(f, rnorm, "residual");
    finish(f, rnorm);
  }
}

}  // namespace

AdjointSolver::AdjointSolver(const Model& model, AdjointOptions options) : model_(&model), options_(options) {
  if (model.integrator() != Integrator::Quasistatic)
    throw SolverError("adjoint: gradients are of quasistatic equilibria; this model integrates implicit Euler");
  if (!(options_.tolerance > 0.0) || !std::isfinite(options_.tolerance))
    throw SolverError(fmt::format("adjoint: tolerance must be > 0, got {}", options_.tolerance));
  if (options_.max_iterations < 1)
    throw SolverError(fmt::format("adjoint: max_iterations must be >= 1, got {}", options_.max_iterations));
}

AdjointStats AdjointSolver::solve(const State& state, const Points& g, Points& h) const {
  std::vector<Points> gs{g}, hs(1);
  const std::vector<AdjointStats> s = solve({&state}, gs, hs);
  h = std::move(hs[0]);
  return s[0];
}

std::vector<AdjointStats> AdjointSolver::solve(const std::vector<const State*>& states, const std::vector<Points>& g,
                                               std::vector<Points>& h) const {
  const Model& model = *model_;
  const Eigen::Index n = model.num_nodes();
  if (g.size() != states.size())
    throw SolverError(fmt::format("adjoint: {} states but {} loss gradients", states.size(), g.size()));
  h.resize(states.size());
  std::vector<Frame> frames(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    Frame& f = frames[i];
    if (!states[i] || states[i]->x.rows() != n)
      throw SolverError(fmt::format("adjoint: frame {}: the state does not belong to this model", i));
    if (g[i].rows() != n)
      throw SolverError(
          fmt::format("adjoint: frame {}: loss gradient has {} rows, expected {} (one per node)", i, g[i].rows(), n));
    if (!g[i].allFinite()) throw SolverError(fmt::format("adjoint: frame {}: loss gradient is not finite", i));
    f.index = i;
    f.state = states[i];
    f.g = &g[i];
    f.h = &h[i];
    h[i].setZero(n, 3);
    f.gnorm = g[i].norm();
    if (f.gnorm == 0.0) f.active = false;  // h = 0 exactly
  }
  // Groups of at most kGroup frames, each solved to the end before the next: the linearized
  // Hessians of a group (648 bytes per tet and frame) stay in cache across its iterations.
  // Measured on the armadillo (bench_adjoint, 2.4 MB of blocks per frame): 48 or 96 frames in one
  // batch cost 1.6 times their one-at-a-time time, 16 broke even.
  constexpr size_t kGroup = 16;
  std::vector<AdjointStats> stats;
  stats.reserve(frames.size());
  for (size_t begin = 0; begin < frames.size(); begin += kGroup) {
    const size_t end = std::min(frames.size(), begin + kGroup);
    std::vector<Frame> group;
    for (size_t i = begin; i < end; ++i) group.push_back(std::move(frames[i]));
    if (options_.method != AdjointMethod::Direct)
      for (Frame& f : group)
        if (f.active) f.H = std::make_unique<HessianOperator>(model, *f.state);
    switch (options_.method) {
      case AdjointMethod::ConjugateGradient:
        run_cg(model, options_, group);
        break;
      case AdjointMethod::FixedPoint:
        run_fixed_point(model, options_, group);
        break;
      case AdjointMethod::Direct:
        run_direct(model, group);
        break;
    }
    for (const Frame& f : group) stats.push_back(f.stats);
  }
  return stats;
}

}  // namespace xpd
