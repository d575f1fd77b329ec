#include <xpd/energy/term.hpp>

namespace xpd {

double Term::energy(const Points& x, const FrameInputs& in) const {
  std::vector<double> p(static_cast<size_t>(num_constraints()) * static_cast<size_t>(projection_size()));
  project(x, in, p.data());
  return energy_given(x, in, p.data());
}

void Term::add_gradient(const Points& x, const FrameInputs& in, Points& g) const {
  Points f = Points::Zero(x.rows(), 3);
  project_add_force(x, in, f, nullptr);
  g -= f;
}

}  // namespace xpd
