#include <fmt/format.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/solver/pd_solver.hpp>

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
    energy +=
        terms[t]->project_add_force(s.x, s.inputs, s.force, store_projections ? s.projections[t].data() : nullptr);
  }
  pt.lap(local.local);
  // Springs and loads.
  for (size_t t = 0; t < terms.size(); ++t) {
    if (terms[t]->per_element()) continue;
    energy +=
        terms[t]->project_add_force(s.x, s.inputs, s.force, store_projections ? s.projections[t].data() : nullptr);
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

bool PdStep::supports(Accelerator a) const { return a != Accelerator::Chebyshev || !model_->has_volume_term(); }

const char* PdStep::unsupported_reason(Accelerator) const {
  return "Chebyshev acceleration needs lambda = 0 (with the lambda volume term the global step is a "
         "line-searched quasi-Newton step); use Anderson";
}

double PdStep::evaluate(State& s, FrameStats& st) {
  return xpd::evaluate(*model_, s, &st.timings_ms, store_projections_);
}

PdStep::PdStep(const Model& model, const DynamicLdlt& factor, bool store_projections)
    : model_(&model), dynamic_(&factor), store_projections_(store_projections) {
  if (model.coupled())
    throw SolverError(
        "PdStep: a DynamicLdlt factors the n x n matrix; this model's global step is the coupled "
        "3n x 3n matrix (lambda volume term with the coupled volume matrix)");
  if (factor.rows() != model.num_nodes())
    throw SolverError(
        fmt::format("PdStep: the DynamicLdlt has order {}, the model {} nodes", factor.rows(), model.num_nodes()));
}

void PdStep::iterate(State& s, FrameStats& st) {
  PhaseTimer pt;
  if (dynamic_) {
    s.rhs = s.force;  // row-major #V×3 → column-major n×3 (no reallocation: same size)
    dynamic_->solve_in_place(s.rhs);
  } else {
    solve_global(*model_, s);
  }
  s.step = s.rhs;  // column-major n × 3 → row-major #V × 3 (same size: no allocation)
  pt.lap(st.timings_ms.solve);
}

void PdStep::solve_with_matrix(Eigen::MatrixXd& b) const {
  if (dynamic_)
    dynamic_->solve_in_place(b);
  else
    model_->factor().solve_in_place(b);
}

FrameStats step(const Model& model, State& s, const SolverOptions& opt) {
  PdStep pd(model, opt.store_projections);
  return run_frame(model, s, pd, opt);
}

}  // namespace xpd
