#include <xpd/energy/polar.hpp>
#include <xpd/energy/shape_target.hpp>

#include "isotropic_hessian.hpp"

namespace xpd {

namespace {
inline Mat3 target_of(const TetElements& e, int k, const FrameInputs& in) {
  return shape_target_matrix(in.shape_targets.row(e.source[static_cast<size_t>(k)]).data());
}
}  // namespace

Mat3 ShapeTargetTerm::project_element(int k, const Mat3& F, const FrameInputs& in) const {
  const Mat3 S = target_of(elements_, k, in);
  return polar_rotation(F * S) * S;
}

Mat9 ShapeTargetTerm::density_hessian(int k, const Mat3& F, const FrameInputs& in) const {
  // ψ = ||F||² + ||S||² − 2 φ(F S), φ(G) = Σ σ̂_i(G) = max_R tr(Rᵀ G). ∇²φ (isotropic, φ_i = 1,
  // φ_ii = 0) has only twist modes 2/(σ_i + σ_j). Chain rule through dF ↦ dF S.
  const Mat3 S = target_of(elements_, k, in);
  const SignedSvd3 s = signed_svd(F * S);
  const Mat9 Hphi = detail::isotropic_hessian(s, Vec3::Ones(), Mat3::Zero());
  Mat9 M = Mat9::Zero();  // vec(dF S) = M vec(dF), row-major vec: (dF S)(r,c) = Σ_j dF(r,j) S(j,c)
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 3; ++c)
      for (int j = 0; j < 3; ++j) M(3 * r + c, 3 * r + j) = S(j, c);
  return 2.0 * Mat9::Identity() - 2.0 * M.transpose() * Hphi * M;
}

}  // namespace xpd
