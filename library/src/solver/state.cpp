#include <xpd/solver/state.hpp>

namespace xpd {

State make_state(const Model& model) {
  State s;
  const Eigen::Index n = model.num_nodes();
  s.x = model.rest_positions();
  s.x_start = s.x;
  s.velocity = Points::Zero(n, 3);
  s.inputs = model.initial_inputs();
  s.projections.resize(model.terms().size());
  for (size_t t = 0; t < model.terms().size(); ++t)
    s.projections[t].assign(static_cast<size_t>(model.terms()[t]->num_constraints()) *
                                static_cast<size_t>(model.terms()[t]->projection_size()),
                            0.0);
  s.force = Points::Zero(n, 3);
  s.inertia_target = s.x;
  s.rhs = Eigen::MatrixXd::Zero(n, 3);
  s.step = Points::Zero(n, 3);
  s.x_prev = Points::Zero(n, 3);
  if (model.coupled()) s.rhs3 = Eigen::VectorXd::Zero(3 * n);
  return s;
}

}  // namespace xpd
