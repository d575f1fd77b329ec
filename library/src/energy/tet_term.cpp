#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <xpd/energy/tet_term.hpp>

#include "tet_kernel.hpp"

namespace xpd {

namespace {
struct ElementHessians : Term::HessianCache {
  std::vector<Mat9, Eigen::aligned_allocator<Mat9>> blocks;  // element order, scaled by w/2
};

// Adds the element products Jᵀ B_k (J h) with B_k given per element (see add_hessian_product).
template <class Block>
void element_products(const TetElements& e, const Points& x, const Points& h, Points& out, Block&& block) {
  detail::tet_element_loop(e, x, out, nullptr, [&](int k, const Mat3& F, Mat3&, Mat3& D, double& s) {
    const Mat3 dF = deformation_gradient(e, k, h);
    Eigen::Matrix<double, 9, 1> v;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) v(3 * r + c) = dF(r, c);
    const Eigen::Matrix<double, 9, 1> Hv = block(k, F) * v;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) D(r, c) = Hv(3 * r + c);
    s = -1.0;
    return 0.0;
  });
}
}  // namespace

void TetTerm::add_matrix(std::vector<Triplet>& triplets) const { detail::tet_add_gram(elements_, 1.0, triplets); }

void TetTerm::project(const Points& x, const FrameInputs& in, double* p) const {
  Points unused;
  detail::tet_project_add_force(
      elements_, x, unused, p, [&](int k, const Mat3& F) { return project_element(k, F, in); },
      /*add_force=*/false);
}

double TetTerm::energy_given(const Points& x, const FrameInputs&, const double* p) const {
  Points unused;
  return detail::tet_project_add_force(
      elements_, x, unused, nullptr,
      [&](int k, const Mat3&) { return Mat3(Eigen::Map<const Mat3>(p + 9 * static_cast<size_t>(k))); },
      /*add_force=*/false);
}

void TetTerm::add_force_given(const Points& x, const FrameInputs&, const double* p, Points& f) const {
  detail::tet_project_add_force(elements_, x, f, nullptr, [&](int k, const Mat3&) {
    return Mat3(Eigen::Map<const Mat3>(p + 9 * static_cast<size_t>(k)));
  });
}

double TetTerm::project_add_force(const Points& x, const FrameInputs& in, Points& f, double* p_out) const {
  return detail::tet_project_add_force(elements_, x, f, p_out,
                                       [&](int k, const Mat3& F) { return project_element(k, F, in); });
}

double TetTerm::project_add_force_subset(const Points& x, const FrameInputs& in, Points& f,
                                         const std::vector<int>& elements) const {
  const auto& e = elements_;
  double total = 0.0;
  for (const int k : elements) {
    const Mat3 F = deformation_gradient(e, k, x);
    const Mat3 D = F - project_element(k, F, in);
    const double w = e.weight[static_cast<size_t>(k)];
    total += 0.5 * w * D.squaredNorm();
    const Mat3 H = (-w) * (D * e.Dm_inv[static_cast<size_t>(k)].transpose());
    const auto& n = e.nodes[static_cast<size_t>(k)];
    for (int d = 0; d < 3; ++d) {
      f(n[1], d) += H(d, 0);
      f(n[2], d) += H(d, 1);
      f(n[3], d) += H(d, 2);
      f(n[0], d) -= H(d, 0) + H(d, 1) + H(d, 2);
    }
  }
  return total;
}

void TetTerm::add_hessian(const Points& x, const FrameInputs& in, std::vector<Triplet>& triplets,
                          bool psd_project) const {
  detail::tet_add_hessians(
      elements_, x, [&](int k, const Mat3& F) { return density_hessian(k, F, in); }, psd_project, triplets);
}

void TetTerm::add_hessian_product(const Points& x, const FrameInputs& in, const Points& h, Points& out) const {
  // The loop adds −s Jᵀ vec(D) per element; with s = −1 and D = w/2 ∂²ψ/∂F² : dF, dF = J h (the
  // deformation gradient of h, linear in h), that is the element's Hessian block times h.
  element_products(elements_, x, h, out, [&](int k, const Mat3& F) -> Mat9 {
    return (0.5 * elements_.weight[static_cast<size_t>(k)]) * density_hessian(k, F, in);
  });
}

std::unique_ptr<Term::HessianCache> TetTerm::make_hessian_cache(const Points& x, const FrameInputs& in) const {
  auto c = std::make_unique<ElementHessians>();
  const int m = elements_.size();
  c->blocks.resize(static_cast<size_t>(m));
  tbb::parallel_for(tbb::blocked_range<int>(0, m, 256), [&](const tbb::blocked_range<int>& r) {
    for (int k = r.begin(); k < r.end(); ++k)
      c->blocks[static_cast<size_t>(k)] = (0.5 * elements_.weight[static_cast<size_t>(k)]) *
                                          density_hessian(k, deformation_gradient(elements_, k, x), in);
  });
  return c;
}

void TetTerm::add_cached_hessian_product(const HessianCache* cache, const Points& x, const FrameInputs& in,
                                         const Points& h, Points& out) const {
  const auto* c = dynamic_cast<const ElementHessians*>(cache);
  if (!c || c->blocks.size() != static_cast<size_t>(elements_.size())) {
    add_hessian_product(x, in, h, out);
    return;
  }
  element_products(elements_, x, h, out,
                   [&](int k, const Mat3&) -> const Mat9& { return c->blocks[static_cast<size_t>(k)]; });
}

}  // namespace xpd
