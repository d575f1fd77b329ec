#pragma once
// Internal: the parallel, deterministic per-element loop shared by the tet terms.
#include <xpd/energy/tet_elements.hpp>

#include <cstring>
#include <functional>
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

namespace xpd::detail {

/// Grain of the deterministic reduction: fixed, so partitioning (and round-off) never depends on
/// the number of threads.
inline constexpr int kTetGrain = 2048;

/// For each element (colour by colour; elements of a colour share no node): F = Ds Dm⁻¹,
/// p = proj(k, F), E += w/2 ||F − p||², f −= w (F − p) ∂F/∂x. Returns Σ energy. Writes p to p_out
/// (9 doubles per element, column-major) when not null. `proj` has signature Mat3(int, const Mat3&).
template <class Proj>
double tet_project_add_force(const TetElements& e, const Points& x, Points& f, double* p_out,
                             const Proj& proj, bool add_force = true) {
  double total = 0.0;
  for (int c = 0; c < e.num_colors(); ++c) {
    const int begin = e.color_offsets[static_cast<size_t>(c)];
    const int end = e.color_offsets[static_cast<size_t>(c) + 1];
    total += tbb::parallel_deterministic_reduce(
        tbb::blocked_range<int>(begin, end, kTetGrain), 0.0,
        [&](const tbb::blocked_range<int>& r, double acc) {
          for (int k = r.begin(); k != r.end(); ++k) {
            const auto& n = e.nodes[static_cast<size_t>(k)];
            const Mat3& B = e.Dm_inv[static_cast<size_t>(k)];
            const double w = e.weight[static_cast<size_t>(k)];
            const double* x0 = x.data() + 3 * n[0];
            const double* x1 = x.data() + 3 * n[1];
            const double* x2 = x.data() + 3 * n[2];
            const double* x3 = x.data() + 3 * n[3];
            Mat3 Ds;
            for (int d = 0; d < 3; ++d) {
              Ds(d, 0) = x1[d] - x0[d];
              Ds(d, 1) = x2[d] - x0[d];
              Ds(d, 2) = x3[d] - x0[d];
            }
            const Mat3 F = Ds * B;
            const Mat3 p = proj(k, F);
            const Mat3 D = F - p;
            acc += 0.5 * w * D.squaredNorm();
            if (p_out) std::memcpy(p_out + 9 * static_cast<size_t>(k), p.data(), 9 * sizeof(double));
            if (add_force) {
              const Mat3 H = (-w) * (D * B.transpose());
              double* f0 = f.data() + 3 * n[0];
              double* f1 = f.data() + 3 * n[1];
              double* f2 = f.data() + 3 * n[2];
              double* f3 = f.data() + 3 * n[3];
              for (int d = 0; d < 3; ++d) {
                f1[d] += H(d, 0);
                f2[d] += H(d, 1);
                f3[d] += H(d, 2);
                f0[d] -= H(d, 0) + H(d, 1) + H(d, 2);
              }
            }
          }
          return acc;
        },
        std::plus<double>());
  }
  return total;
}

}  // namespace xpd::detail
