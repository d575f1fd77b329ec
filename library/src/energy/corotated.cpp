#include <xpd/energy/corotated.hpp>

#include <xpd/energy/polar.hpp>

#include "isotropic_hessian.hpp"
#include "polar_kernel.hpp"
#include "tet_kernel.hpp"

namespace xpd {

Mat3 CorotatedTerm::project_element(int, const Mat3& F, const FrameInputs&) const {
  return polar_rotation(F);
}

Mat9 CorotatedTerm::density_hessian(int, const Mat3& F, const FrameInputs&) const {
  // ψ = Σ (σ_i − 1)²: ψ_i = 2(σ_i − 1), ψ_ii = 2.
  const SignedSvd3 s = signed_svd(F);
  return detail::isotropic_hessian(s, 2.0 * (s.sigma.array() - 1.0).matrix(), 2.0 * Mat3::Identity());
}

namespace {

double corotated_range_baseline(const TetElements& e, const double* x, double* f, double* p_out, int begin,
                                int end, double acc) {
  return detail::corotated_range_scalar(e, x, f, p_out, begin, end, acc);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// Same source compiled for AVX2 (4 lanes in one register). No FMA (GCC contracts a·b + c in C++
// whenever FMA is enabled, and AVX-512F enables it): the baseline and AVX2 variants round
// identically, so results do not depend on the machine's instruction set. An AVX-512VL variant
// (32 registers) measured no faster on box:48 and would round differently.
__attribute__((target("avx2"))) double corotated_range_avx2(const TetElements& e, const double* x, double* f,
                                                            double* p_out, int begin, int end, double acc) {
  return detail::corotated_range(e, x, f, p_out, begin, end, acc);
}
detail::CorotatedRangeFn pick_range() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") ? &corotated_range_avx2 : &corotated_range_baseline;
}
#else
detail::CorotatedRangeFn pick_range() { return &corotated_range_baseline; }
#endif

}  // namespace

namespace detail {
CorotatedRangeFn corotated_range_variant(int which) {
  if (which == 0) return &corotated_range_baseline;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (which == 1 && __builtin_cpu_supports("avx2")) return &corotated_range_avx2;
#endif
  return nullptr;
}
}  // namespace detail

double CorotatedTerm::project_add_force(const Points& x, const FrameInputs&, Points& f,
                                        double* p_out) const {
  static const detail::CorotatedRangeFn range = pick_range();
  return detail::corotated_project_add_force(elements_, x, f, p_out, range);
}

}  // namespace xpd
