#include <xpd/energy/loads.hpp>

namespace xpd {

double LoadTerm::energy_given(const Points& x, const FrameInputs& in, const double*) const {
  double e = -(masses_.transpose() * x).dot(in.gravity.transpose());
  if (in.nodal_forces.rows() == x.rows()) e -= in.nodal_forces.cwiseProduct(x).sum();
  return e;
}

void LoadTerm::add_force_given(const Points& x, const FrameInputs& in, const double*, Points& f) const {
  for (Eigen::Index i = 0; i < x.rows(); ++i) f.row(i) += masses_(i) * in.gravity.transpose();
  if (in.nodal_forces.rows() == x.rows()) f += in.nodal_forces;
}

double LoadTerm::project_add_force(const Points& x, const FrameInputs& in, Points& f, double*) const {
  add_force_given(x, in, nullptr, f);
  return energy_given(x, in, nullptr);
}

void LoadTerm::add_input_gradient(const Points&, const FrameInputs&, const Points& h, FrameInputs& grad) const {
  grad.gravity += (h.transpose() * masses_);
  if (grad.nodal_forces.rows() == h.rows()) grad.nodal_forces += h;
}

}  // namespace xpd
