#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <xpd/energy/polar.hpp>
#include <xpd/energy/shape_target.hpp>

#include "isotropic_hessian.hpp"

namespace xpd {

namespace {
// (row, col) of the entry b_i sets in S (and its mirror), eq. 6.3.
constexpr int kTargetEntries[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};

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

void ShapeTargetTerm::add_input_gradient(const Points& x, const FrameInputs& in, const Points& h,
                                         FrameInputs& grad) const {
  // Each element writes its own row (sources are unique), so elements run in parallel.
  const auto& e = elements_;
  tbb::parallel_for(tbb::blocked_range<int>(0, e.size(), 256), [&](const tbb::blocked_range<int>& range) {
    for (int k = range.begin(); k != range.end(); ++k) {
      const Mat3 F = deformation_gradient(e, k, x);
      const Mat3 dF = deformation_gradient(e, k, h);
      const Mat3 S = target_of(e, k, in);
      const SignedSvd3 s = signed_svd(F * S);
      const Mat3 R = s.U * s.V.transpose();
      const Mat9 dR_dG = detail::isotropic_hessian(s, Vec3::Ones(), Mat3::Zero());
      const double w = e.weight[static_cast<size_t>(k)];
      const int row = e.source[static_cast<size_t>(k)];
      for (int i = 0; i < 6; ++i) {
        Mat3 Ei = Mat3::Zero();  // ∂S/∂b_i (shape_target_matrix's layout)
        const int r = kTargetEntries[i][0], c = kTargetEntries[i][1];
        Ei(r, c) = 1.0;
        Ei(c, r) = 1.0;
        const Eigen::Matrix<double, 9, 1> dR = dR_dG * detail::vec_rowmajor(F * Ei);
        Mat3 dRm;
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b < 3; ++b) dRm(a, b) = dR(3 * a + b);
        grad.shape_targets(row, i) += w * dF.cwiseProduct(dRm * S + R * Ei).sum();
      }
    }
  });
}

}  // namespace xpd
