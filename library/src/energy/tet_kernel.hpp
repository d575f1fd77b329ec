#pragma once
// Internal: the parallel, deterministic per-element loop shared by the tet terms.
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cstring>
#include <functional>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/term.hpp>
#include <xpd/energy/tet_elements.hpp>

#include "polar_kernel.hpp"

namespace xpd::detail {

/// Grain of the deterministic reduction: fixed, so partitioning (and round-off) never depends on
/// the number of threads.
inline constexpr int kTetGrain = 256;

/// The element loop of every tet term (colour by colour; elements of a colour share no node):
/// F = Ds Dm⁻¹, then `elem(k, F, p, D, s)` returns the element energy E_k and fills the 3×3
/// projection p (written to p_out, 9 doubles per element, column-major, when not null) and D, s
/// with ∂E_k/∂F = s·D; f −= s D ∂F/∂x. Returns Σ E_k. Signature of elem:
/// double(int k, const Mat3& F, Mat3& p, Mat3& D, double& s).
template <class Elem>
double tet_element_loop(const TetElements& e, const Points& x, Points& f, double* p_out, const Elem& elem,
                        bool add_force = true) {
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
            Mat3 p, D;
            double s = 0.0;
            acc += elem(k, F, p, D, s);
            if (p_out) std::memcpy(p_out + 9 * static_cast<size_t>(k), p.data(), 9 * sizeof(double));
            // D = 0 exactly (an element whose projection is F itself, e.g. inside its strain limits)
            // adds nothing: skip the four scattered writes.
            if (add_force && (s != 0.0 && !(D.array() == 0.0).all())) {
              const Mat3 H = (-s) * (D * B.transpose());
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

/// The PD tet terms' loop: p = proj(k, F), E += w/2 ||F − p||², f −= w (F − p) ∂F/∂x. Returns Σ
/// energy. `proj` has signature Mat3(int, const Mat3&).
template <class Proj>
double tet_project_add_force(const TetElements& e, const Points& x, Points& f, double* p_out, const Proj& proj,
                             bool add_force = true) {
  return tet_element_loop(
      e, x, f, p_out,
      [&](int k, const Mat3& F, Mat3& p, Mat3& D, double& s) {
        p = proj(k, F);
        D = F - p;
        s = e.weight[static_cast<size_t>(k)];
        return 0.5 * s * D.squaredNorm();
      },
      add_force);
}

/// Adds scale · w_k g_a · g_b at (node a, node b) for every element (the n × n PD matrix entries of
/// a tet term, scale = 1; see shape_gradients).
inline void tet_add_gram(const TetElements& e, double scale, std::vector<Triplet>& triplets) {
  triplets.reserve(triplets.size() + 16 * static_cast<size_t>(e.size()));
  for (int k = 0; k < e.size(); ++k) {
    Vec3 g[4];
    shape_gradients(e.Dm_inv[static_cast<size_t>(k)], g);
    const double w = scale * e.weight[static_cast<size_t>(k)];
    const auto& n = e.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) triplets.emplace_back(n[a], n[b], w * g[a].dot(g[b]));
  }
}

/// Newton oracle: adds w_k/2 Jᵀ H_k J per element as 3n × 3n triplets (DOF 3·node + coordinate),
/// H_k = hess(k, F) the 9×9 Hessian of the density ψ (E_k = w_k/2 ψ(F)) on vec(F) with index
/// 3·row + col, clamped to PSD when `psd_project`. Signature of hess: Mat9(int k, const Mat3& F).
template <class DensityHessian>
void tet_add_hessians(const TetElements& e, const Points& x, const DensityHessian& hess, bool psd_project,
                      std::vector<Triplet>& triplets) {
  for (int k = 0; k < e.size(); ++k) {
    const Mat3 F = deformation_gradient(e, k, x);
    Mat9 H = hess(k, F);
    if (psd_project) {  // clamp negative eigenvalues (projected Newton)
      Eigen::SelfAdjointEigenSolver<Mat9> eig(0.5 * (H + H.transpose()));
      const Eigen::Matrix<double, 9, 1> lam = eig.eigenvalues().cwiseMax(0.0);
      H = eig.eigenvectors() * lam.asDiagonal() * eig.eigenvectors().transpose();
    }
    // J: vec(F)[3d + j] = Σ_a x_{a,d} g_a[j]  →  J(3d + j, 3a + d) = g_a[j].
    Vec3 g[4];
    shape_gradients(e.Dm_inv[static_cast<size_t>(k)], g);
    Eigen::Matrix<double, 9, 12> J = Eigen::Matrix<double, 9, 12>::Zero();
    for (int a = 0; a < 4; ++a)
      for (int d = 0; d < 3; ++d)
        for (int j = 0; j < 3; ++j) J(3 * d + j, 3 * a + d) = g[a](j);
    const Eigen::Matrix<double, 12, 12> Hx = (0.5 * e.weight[static_cast<size_t>(k)]) * J.transpose() * H * J;
    const auto& n = e.nodes[static_cast<size_t>(k)];
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        for (int d = 0; d < 3; ++d)
          for (int c = 0; c < 3; ++c) triplets.emplace_back(3 * n[a] + d, 3 * n[b] + c, Hx(3 * a + d, 3 * b + c));
  }
}

/// Element physics of the polar kernels below, given F and its polar rotation R (9 values each,
/// column-major) and the weight w: ∂E/∂F = s·D and E = w/2 · q. T is double or Lanes4.
/// Corotated (μ part): D = F − R, s = w, q = ||F − R||².
struct CorotatedPhysics {
  template <class T>
  [[gnu::always_inline]] static void apply(const T* F, const T* R, const T& w, T* D, T& s, T& q) {
    q = T{};
    for (int i = 0; i < 9; ++i) {
      D[i] = F[i] - R[i];
      q += D[i] * D[i];
    }
    s = w;
  }
};
/// Corotated volume (λ part, energy/volume.hpp): c = R:F − 3, D = R, s = w c, q = c².
struct VolumePhysics {
  template <class T>
  [[gnu::always_inline]] static void apply(const T* F, const T* R, const T& w, T* D, T& s, T& q) {
    T c = R[0] * F[0];
    for (int i = 1; i < 9; ++i) c += R[i] * F[i];
    c -= 3.0;
    for (int i = 0; i < 9; ++i) D[i] = R[i];
    s = w * c;
    q = c * c;
  }
};

/// Local step (polar rotation) + force of a rotation-based tet term on the element range
/// [begin, end) of ONE colour, four elements at a time (polar_rotation_newton4; SVD fallback per
/// lane for inverted / ill-conditioned F). Energy is added to `acc` element by element in element
/// order. Per element the arithmetic is that of polar_range_scalar, up to the association of the
/// sums in F = Ds B and D Bᵀ, which is fixed here: results do not depend on the build target.
template <class Physics>
[[gnu::always_inline]] inline double polar_range(const TetElements& e, const double* x, double* f, double* p_out,
                                                 int begin, int end, double acc) {
  for (int k0 = begin; k0 < end; k0 += 4) {
    const int nl = std::min(4, end - k0);
    const std::array<int, 4>* nodes[4];
    const double* b[4];
    double w[4];
    for (int l = 0; l < 4; ++l) {
      const size_t k = static_cast<size_t>(k0 + (l < nl ? l : 0));  // padding lanes repeat the first element
      nodes[l] = &e.nodes[k];
      w[l] = e.weight[k];
      b[l] = e.Dm_inv[k].data();
    }
    Lanes4 F[9] = {}, B[9] = {};
    for (int i = 0; i < 9; ++i) B[i] = Lanes4{b[0][i], b[1][i], b[2][i], b[3][i]};
    {
      const double* xs[4][4];  // [lane][element node]
      for (int l = 0; l < 4; ++l)
        for (int a = 0; a < 4; ++a) xs[l][a] = x + 3 * static_cast<size_t>((*nodes[l])[static_cast<size_t>(a)]);
      Lanes4 Ds[9];  // column-major: Ds[3 j + d] = x_{j+1}[d] − x_0[d]
      for (int j = 0; j < 3; ++j)
        for (int d = 0; d < 3; ++d)
          Ds[3 * j + d] = Lanes4{xs[0][j + 1][d], xs[1][j + 1][d], xs[2][j + 1][d], xs[3][j + 1][d]} -
                          Lanes4{xs[0][0][d], xs[1][0][d], xs[2][0][d], xs[3][0][d]};
      for (int j = 0; j < 3; ++j)
        for (int d = 0; d < 3; ++d)
          F[3 * j + d] = Ds[d] * B[3 * j] + Ds[3 + d] * B[3 * j + 1] + Ds[6 + d] * B[3 * j + 2];
    }
    Lanes4 R[9];
    const int ok = polar_rotation_newton4(F, R);
    if (ok != 0xF) {
      for (int l = 0; l < nl; ++l) {
        if (ok >> l & 1) continue;
        Mat3 Fl;
        for (int i = 0; i < 9; ++i) Fl.data()[i] = F[i][l];
        const Mat3 Rl = polar_rotation(Fl);
        for (int i = 0; i < 9; ++i) R[i][l] = Rl.data()[i];
      }
    }
    Lanes4 D[9], s, sq;
    Physics::apply(F, R, Lanes4{w[0], w[1], w[2], w[3]}, D, s, sq);
    // H = −s D Bᵀ: force on node j+1 is column j; node 0 gets minus their sum.
    const Lanes4 mw = -s;
    Lanes4 H[9];
    for (int j = 0; j < 3; ++j)
      for (int d = 0; d < 3; ++d) H[3 * j + d] = mw * (D[d] * B[j] + D[3 + d] * B[3 + j] + D[6 + d] * B[6 + j]);
    Lanes4 H0[3];
    for (int d = 0; d < 3; ++d) H0[d] = H[d] + H[3 + d] + H[6 + d];
    for (int l = 0; l < nl; ++l) {
      acc += 0.5 * w[l] * sq[l];
      if (p_out) {
        double* p = p_out + 9 * static_cast<size_t>(k0 + l);
        for (int i = 0; i < 9; ++i) p[i] = R[i][l];
      }
      const auto& n = *nodes[l];
      double* f0 = f + 3 * static_cast<size_t>(n[0]);
      double* f1 = f + 3 * static_cast<size_t>(n[1]);
      double* f2 = f + 3 * static_cast<size_t>(n[2]);
      double* f3 = f + 3 * static_cast<size_t>(n[3]);
      for (int d = 0; d < 3; ++d) {
        f1[d] += H[d][l];
        f2[d] += H[3 + d][l];
        f3[d] += H[6 + d][l];
        f0[d] -= H0[d][l];
      }
    }
  }
  return acc;
}

/// polar_range one element at a time with the scalar Newton kernel: the same operations in the
/// same order per element (bitwise identical results), for builds without wide vectors, where
/// the four-lane version (two SSE2 registers, iteration count = slowest lane) is slower.
template <class Physics>
inline double polar_range_scalar(const TetElements& e, const double* x, double* f, double* p_out, int begin, int end,
                                 double acc) {
  for (int k = begin; k < end; ++k) {
    const auto& n = e.nodes[static_cast<size_t>(k)];
    const double w = e.weight[static_cast<size_t>(k)];
    const double* B = e.Dm_inv[static_cast<size_t>(k)].data();
    const double* xs[4];
    for (int a = 0; a < 4; ++a) xs[a] = x + 3 * static_cast<size_t>(n[static_cast<size_t>(a)]);
    double Ds[9], F[9], R[9], D[9], H[9];
    for (int j = 0; j < 3; ++j)
      for (int d = 0; d < 3; ++d) Ds[3 * j + d] = xs[j + 1][d] - xs[0][d];
    for (int j = 0; j < 3; ++j)
      for (int d = 0; d < 3; ++d) F[3 * j + d] = Ds[d] * B[3 * j] + Ds[3 + d] * B[3 * j + 1] + Ds[6 + d] * B[3 * j + 2];
    if (!polar_rotation_newton(F, R)) {
      const Mat3 Rl = polar_rotation(Eigen::Map<const Mat3>(F));
      for (int i = 0; i < 9; ++i) R[i] = Rl.data()[i];
    }
    double sq = 0.0, sc = 0.0;
    Physics::apply(F, R, w, D, sc, sq);
    const double mw = -sc;
    for (int j = 0; j < 3; ++j)
      for (int d = 0; d < 3; ++d) H[3 * j + d] = mw * (D[d] * B[j] + D[3 + d] * B[3 + j] + D[6 + d] * B[6 + j]);
    acc += 0.5 * w * sq;
    if (p_out) std::memcpy(p_out + 9 * static_cast<size_t>(k), R, sizeof(R));
    double* f0 = f + 3 * static_cast<size_t>(n[0]);
    double* f1 = f + 3 * static_cast<size_t>(n[1]);
    double* f2 = f + 3 * static_cast<size_t>(n[2]);
    double* f3 = f + 3 * static_cast<size_t>(n[3]);
    for (int d = 0; d < 3; ++d) {
      f1[d] += H[d];
      f2[d] += H[3 + d];
      f3[d] += H[6 + d];
      f0[d] -= H[d] + H[3 + d] + H[6 + d];
    }
  }
  return acc;
}

/// Signature of a compiled variant of polar_range (see corotated.cpp: AVX2 or baseline).
using CorotatedRangeFn = double (*)(const TetElements&, const double*, double*, double*, int, int, double);

/// The compiled variants of polar_range<CorotatedPhysics> (corotated.cpp): 0 = baseline
/// (polar_range_scalar), 1 = AVX2 (polar_range, four lanes); nullptr if the CPU lacks it. They
/// agree bitwise. For tests; the hot path picks the best one once.
CorotatedRangeFn corotated_range_variant(int which);
/// The same for polar_range<VolumePhysics> (volume.cpp).
CorotatedRangeFn volume_range_variant(int which);

/// The baseline build of polar_range (the scalar kernel).
template <class Physics>
double polar_range_baseline(const TetElements& e, const double* x, double* f, double* p_out, int begin, int end,
                            double acc) {
  return polar_range_scalar<Physics>(e, x, f, p_out, begin, end, acc);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// polar_range compiled for AVX2 (4 lanes in one register). No FMA (GCC contracts a·b + c in C++
/// whenever FMA is enabled, and AVX-512F enables it): the baseline and AVX2 variants round
/// identically, so results do not depend on the machine's instruction set. An AVX-512VL variant
/// (32 registers) measured no faster on box:48 and would round differently.
template <class Physics>
__attribute__((target("avx2"))) double polar_range_avx2(const TetElements& e, const double* x, double* f, double* p_out,
                                                        int begin, int end, double acc) {
  return polar_range<Physics>(e, x, f, p_out, begin, end, acc);
}
#endif

/// Variant `which` of polar_range<Physics>: 0 = baseline, 1 = AVX2 (nullptr if the CPU lacks it).
template <class Physics>
CorotatedRangeFn polar_range_variant(int which) {
  if (which == 0) return &polar_range_baseline<Physics>;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (which == 1 && __builtin_cpu_supports("avx2")) return &polar_range_avx2<Physics>;
#endif
  return nullptr;
}

/// The fastest variant this CPU runs.
template <class Physics>
CorotatedRangeFn best_polar_range() {
  const CorotatedRangeFn avx2 = polar_range_variant<Physics>(1);
  return avx2 ? avx2 : polar_range_variant<Physics>(0);
}

/// Colour loop of the polar hot paths: the same deterministic partition as tet_element_loop
/// (fixed grain, colours in order), each chunk handled by `range`.
inline double corotated_project_add_force(const TetElements& e, const Points& x, Points& f, double* p_out,
                                          CorotatedRangeFn range) {
  double total = 0.0;
  const double* xd = x.data();
  double* fd = f.data();
  for (int c = 0; c < e.num_colors(); ++c) {
    const int begin = e.color_offsets[static_cast<size_t>(c)];
    const int end = e.color_offsets[static_cast<size_t>(c) + 1];
    total += tbb::parallel_deterministic_reduce(
        tbb::blocked_range<int>(begin, end, kTetGrain), 0.0,
        [&](const tbb::blocked_range<int>& r, double acc) { return range(e, xd, fd, p_out, r.begin(), r.end(), acc); },
        std::plus<double>());
  }
  return total;
}

}  // namespace xpd::detail
