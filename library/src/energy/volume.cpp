#include <xpd/energy/polar.hpp>
#include <xpd/energy/volume.hpp>

#include "isotropic_hessian.hpp"
#include "tet_kernel.hpp"

namespace xpd {

namespace {

// Element energy and stress for a given rotation R: E = w/2 c², ∂E/∂F = (w c) R, c = R:F − 3.
inline double volume_element(double w, const Mat3& F, const Mat3& R, Mat3& D, double& s) {
  const double c = R.cwiseProduct(F).sum() - 3.0;
  D = R;
  s = w * c;
  return 0.5 * w * c * c;
}

}  // namespace

void VolumeTerm::add_matrix(std::vector<Triplet>& triplets) const {
  if (matrix_ == VolumeMatrix::Isotropic) detail::tet_add_gram(elements_, 1.0 / 3.0, triplets);
}

void VolumeTerm::add_matrix3(std::vector<Triplet>& triplets) const {
  const auto& e = elements_;
  triplets.reserve(triplets.size() + 144 * static_cast<size_t>(e.size()));
  for (int k = 0; k < e.size(); ++k) {
    Vec3 g[4];
    shape_gradients(e.Dm_inv[static_cast<size_t>(k)], g);
    const double w = e.weight[static_cast<size_t>(k)];
    const auto& n = e.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        for (int d = 0; d < 3; ++d)
          for (int c = 0; c < 3; ++c) triplets.emplace_back(3 * n[a] + d, 3 * n[b] + c, w * g[a](d) * g[b](c));
  }
}

void VolumeTerm::project(const Points& x, const FrameInputs&, double* p) const {
  Points unused;
  detail::tet_element_loop(
      elements_, x, unused, p,
      [&](int, const Mat3& F, Mat3& R, Mat3& D, double& s) {
        R = polar_rotation(F);
        D.setZero();
        s = 0.0;
        return 0.0;
      },
      /*add_force=*/false);
}

double VolumeTerm::energy_given(const Points& x, const FrameInputs&, const double* p) const {
  Points unused;
  return detail::tet_element_loop(
      elements_, x, unused, nullptr,
      [&](int k, const Mat3& F, Mat3& R, Mat3& D, double& s) {
        R = Eigen::Map<const Mat3>(p + 9 * static_cast<size_t>(k));
        return volume_element(elements_.weight[static_cast<size_t>(k)], F, R, D, s);
      },
      /*add_force=*/false);
}

void VolumeTerm::add_force_given(const Points& x, const FrameInputs&, const double* p, Points& f) const {
  detail::tet_element_loop(elements_, x, f, nullptr, [&](int k, const Mat3& F, Mat3& R, Mat3& D, double& s) {
    R = Eigen::Map<const Mat3>(p + 9 * static_cast<size_t>(k));
    return volume_element(elements_.weight[static_cast<size_t>(k)], F, R, D, s);
  });
}

namespace detail {
CorotatedRangeFn volume_range_variant(int which) { return polar_range_variant<VolumePhysics>(which); }
}  // namespace detail

double VolumeTerm::project_add_force(const Points& x, const FrameInputs&, Points& f, double* p_out) const {
  // Hot path: the corotated term's batched polar kernel with the volume term's physics.
  static const detail::CorotatedRangeFn range = detail::best_polar_range<detail::VolumePhysics>();
  return detail::corotated_project_add_force(elements_, x, f, p_out, range);
}

void VolumeTerm::add_hessian(const Points& x, const FrameInputs&, std::vector<Triplet>& triplets,
                             bool psd_project) const {
  // ψ = (Σσ − 3)²: ψ_i = 2 (Σσ − 3) for every i, ψ_ij = 2 for every i, j.
  detail::tet_add_hessians(
      elements_, x,
      [](int, const Mat3& F) {
        const SignedSvd3 s = signed_svd(F);
        const double c = s.sigma.sum() - 3.0;
        return detail::isotropic_hessian(s, Vec3::Constant(2.0 * c), Mat3::Constant(2.0));
      },
      psd_project, triplets);
}

}  // namespace xpd
