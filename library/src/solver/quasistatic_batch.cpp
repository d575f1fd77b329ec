#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <xpd/core/error.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/quasistatic_batch.hpp>

namespace xpd {

namespace {

void check_finite(const double* p, size_t count, int frame, const char* what) {
  for (size_t k = 0; k < count; ++k)
    if (!std::isfinite(p[k]))
      throw SolverError(fmt::format("frame {}: {} contains a non-finite value (entry {})", frame, what, k));
}

}  // namespace

QuasistaticBatch::QuasistaticBatch(const Model& model, QuasistaticBatchOptions options)
    : model_(&model), options_(std::move(options)) {
  if (model.integrator() != Integrator::Quasistatic)
    throw SolverError(
        "quasistatic batch: the model integrates implicit Euler; gradients are of quasistatic equilibria");
  // |K| |X − X̄| bounds the magnitudes summed into the forces near the rest shape (centred: forces
  // depend on differences of positions, except the attachments', which are small next to it).
  const Eigen::SparseMatrix<double>& K = model.matrix();
  const Points& X = model.rest_positions();
  const Eigen::MatrixXd ax = (X.rowwise() - X.colwise().mean()).cwiseAbs();
  Eigen::MatrixXd kx = Eigen::MatrixXd::Zero(ax.rows(), 3);
  for (Eigen::Index c = 0; c < K.outerSize(); ++c)
    for (Eigen::SparseMatrix<double>::InnerIterator it(K, c); it; ++it)
      kx.row(it.row()) += std::abs(it.value()) * ax.row(it.col());
  roundoff_ = 64.0 * std::numeric_limits<double>::epsilon() * kx.norm();
}

void QuasistaticBatch::set_inputs(State& s, int i, const double* a, const double* t) const {
  const Eigen::Index u = num_actuated_tets(), k = num_attachment_targets();
  const FrameInputs& init = model_->initial_inputs();
  if (u > 0) {
    check_finite(a + static_cast<size_t>(i) * 6 * u, static_cast<size_t>(6 * u), i, "the actuation");
    s.inputs.shape_targets = Eigen::Map<const ShapeTargetParams>(a + static_cast<size_t>(i) * 6 * u, u, 6);
  }
  if (t && k > 0) {
    check_finite(t + static_cast<size_t>(i) * 3 * k, static_cast<size_t>(3 * k), i, "the attachment targets");
    s.inputs.attachment_targets = Eigen::Map<const Points>(t + static_cast<size_t>(i) * 3 * k, k, 3);
  } else {
    s.inputs.attachment_targets = init.attachment_targets;
  }
}

void QuasistaticBatch::set_warm_start(int B, const double* x) {
  if (B < 0) throw SolverError(fmt::format("quasistatic batch: batch size must be >= 0, got {}", B));
  const Eigen::Index n = model_->num_nodes();
  const size_t block = static_cast<size_t>(3 * n);
  // Checked in full before any slot changes: a refused call leaves every warm start as it was.
  for (int i = 0; i < B; ++i) check_finite(x + static_cast<size_t>(i) * block, block, i, "the warm start");
  while (static_cast<int>(states_.size()) < B) states_.push_back(make_state(*model_));
  for (int i = 0; i < B; ++i)
    states_[static_cast<size_t>(i)].x = Eigen::Map<const Points>(x + static_cast<size_t>(i) * block, n, 3);
}

std::vector<FrameStats> QuasistaticBatch::forward(int B, const double* a, const double* t, double* x) {
  if (B < 0) throw SolverError(fmt::format("quasistatic batch: batch size must be >= 0, got {}", B));
  const Eigen::Index n = model_->num_nodes();
  while (static_cast<int>(states_.size()) < B) states_.push_back(make_state(*model_));
  std::vector<FrameStats> stats(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) {
    State& s = states_[static_cast<size_t>(i)];
    set_inputs(s, i, a, t);
    // Converged relative to a cold start: ||f(x)|| ≤ tolerance · ||f(X; a, t)||, X the rest shape. The
    // frame loop's own scale is the warm start's residual, which after a small change of the inputs
    // (training epochs) is tiny, and a tolerance relative to it lies below round-off.
    const Points warm = s.x;
    s.x = model_->rest_positions();
    evaluate(*model_, s);
    const double cold = s.force.norm();
    s.x = warm;
    SolverOptions o = options_.forward;
    FrameStats& st = stats[static_cast<size_t>(i)];
    // Round-off level (constructor): reachable whatever the inputs, e.g. a = 0, whose equilibrium
    // is the rest shape and whose cold residual is itself round-off.
    o.abs_tolerance = std::max({o.abs_tolerance, o.rel_tolerance * cold, roundoff_});
    st = step(*model_, s, o);
    if (options_.newton_polish) {
      NewtonOptions no;
      no.rel_tolerance = 1e-13;
      no.max_iterations = 50;
      const NewtonResult r = newton_solve(*model_, s, no);
      st.residual = r.gradient_norm;
      st.energy = r.energy;
      st.converged = st.converged || r.converged || r.gradient_norm <= o.abs_tolerance;
    }
    Eigen::Map<Points>(x + static_cast<size_t>(i) * 3 * n, n, 3) = s.x;
  }
  return stats;
}

std::vector<AdjointStats> QuasistaticBatch::backward(int B, const double* x, const double* a, const double* t,
                                                     const double* g, double* grad_a, double* grad_t) {
  if (B < 0) throw SolverError(fmt::format("quasistatic batch: batch size must be >= 0, got {}", B));
  const Eigen::Index n = model_->num_nodes(), u = num_actuated_tets(), k = num_attachment_targets();
  while (static_cast<int>(scratch_.size()) < B) scratch_.push_back(make_state(*model_));
  std::vector<const State*> states(static_cast<size_t>(B));
  std::vector<Points> gs(static_cast<size_t>(B)), hs;
  for (int i = 0; i < B; ++i) {
    State& s = scratch_[static_cast<size_t>(i)];
    set_inputs(s, i, a, t);
    check_finite(x + static_cast<size_t>(i) * 3 * n, static_cast<size_t>(3 * n), i, "the positions");
    s.x = Eigen::Map<const Points>(x + static_cast<size_t>(i) * 3 * n, n, 3);
    gs[static_cast<size_t>(i)] = Eigen::Map<const Points>(g + static_cast<size_t>(i) * 3 * n, n, 3);
    states[static_cast<size_t>(i)] = &s;
  }
  const std::vector<AdjointStats> stats = AdjointSolver(*model_, options_.adjoint).solve(states, gs, hs);
  for (int i = 0; i < B; ++i) {
    const FrameInputs grad = input_gradient(*model_, *states[static_cast<size_t>(i)], hs[static_cast<size_t>(i)]);
    if (grad_a && u > 0)
      Eigen::Map<ShapeTargetParams>(grad_a + static_cast<size_t>(i) * 6 * u, u, 6) = grad.shape_targets;
    if (grad_t && k > 0) Eigen::Map<Points>(grad_t + static_cast<size_t>(i) * 3 * k, k, 3) = grad.attachment_targets;
  }
  return stats;
}

}  // namespace xpd
