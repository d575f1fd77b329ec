#include <xpd/energy/corotated.hpp>
#include <xpd/energy/polar.hpp>

#include "isotropic_hessian.hpp"
#include "polar_kernel.hpp"
#include "tet_kernel.hpp"

namespace xpd {

Mat3 CorotatedTerm::project_element(int, const Mat3& F, const FrameInputs&) const { return polar_rotation(F); }

Mat9 CorotatedTerm::density_hessian(int, const Mat3& F, const FrameInputs&) const {
  // ψ = Σ (σ_i − 1)²: ψ_i = 2(σ_i − 1), ψ_ii = 2.
  const SignedSvd3 s = signed_svd(F);
  return detail::isotropic_hessian(s, 2.0 * (s.sigma.array() - 1.0).matrix(), 2.0 * Mat3::Identity());
}

namespace detail {
CorotatedRangeFn corotated_range_variant(int which) { return polar_range_variant<CorotatedPhysics>(which); }
}  // namespace detail

double CorotatedTerm::project_add_force(const Points& x, const FrameInputs&, Points& f, double* p_out) const {
  static const detail::CorotatedRangeFn range = detail::best_polar_range<detail::CorotatedPhysics>();
  return detail::corotated_project_add_force(elements_, x, f, p_out, range);
}

}  // namespace xpd
