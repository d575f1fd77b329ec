// The corotated local step with forces on the device (DevicePd). Compiled without fused
// multiply–adds (-fmad=false, library/CMakeLists.txt): every operation is that of the CPU's kernel
// (energy/tet_kernel.hpp polar_range, energy/polar_newton.hpp, springs.cpp, loads.cpp) in the
// same order, so the device forces equal the CPU's bit for bit.
#include "energy/polar_newton.hpp"
#include "kernels.cuh"

namespace xpd::gpu::detail {

namespace {

// One thread per tet: H = −w (F − R) Dm⁻ᵀ (column-major 3×3; column a is node a+1's force).
__global__ void tet_forces(PdData d) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= d.num_tets) return;
  const int4 n = d.tets[t];
  const int m = d.num_tets;
  double B[9];  // Dm⁻¹, column-major
#pragma unroll
  for (int e = 0; e < 9; ++e) B[e] = d.dm_inv[e * m + t];
  const double* x0 = d.x + 3LL * n.x;
  const double* xs[3] = {d.x + 3LL * n.y, d.x + 3LL * n.z, d.x + 3LL * n.w};
  double Ds[9];
#pragma unroll
  for (int c = 0; c < 3; ++c)
#pragma unroll
    for (int r = 0; r < 3; ++r) Ds[c * 3 + r] = xs[c][r] - x0[r];
  double F[9];
#pragma unroll
  for (int c = 0; c < 3; ++c)
#pragma unroll
    for (int r = 0; r < 3; ++r) F[c * 3 + r] = Ds[r] * B[c * 3] + Ds[3 + r] * B[c * 3 + 1] + Ds[6 + r] * B[c * 3 + 2];
  double R[9];
  const double w = d.weight[t];
  double H[9];
  if (!::xpd::detail::polar_rotation_newton(F, R)) {
    atomicOr(d.status, 1);
#pragma unroll
    for (int e = 0; e < 9; ++e) H[e] = 0.0;
  } else {
    double D[9];
#pragma unroll
    for (int e = 0; e < 9; ++e) D[e] = F[e] - R[e];
      // H = −w D Bᵀ: H(r, c) = −w Σ_q D(r, q) B(c, q).
#pragma unroll
    for (int c = 0; c < 3; ++c)
#pragma unroll
      for (int r = 0; r < 3; ++r) H[c * 3 + r] = -w * (D[r] * B[c] + D[3 + r] * B[3 + c] + D[6 + r] * B[6 + c]);
  }
#pragma unroll
  for (int e = 0; e < 9; ++e) d.H[e * m + t] = H[e];
}

// One thread per node: its tets' blocks in ascending order, then loads and attachments; writes
// the column-major right-hand side of the solve.
__global__ void node_forces(PdData d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.num_nodes) return;
  const int m = d.num_tets;
  double f[3] = {0.0, 0.0, 0.0};
  for (int q = d.inc_offsets[i]; q < d.inc_offsets[i + 1]; ++q) {
    const int code = d.incidences[q];
    const int t = code >> 2, a = code & 3;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      if (a == 0)
        f[r] -= d.H[r * m + t] + d.H[(3 + r) * m + t] + d.H[(6 + r) * m + t];
      else
        f[r] += d.H[(3 * (a - 1) + r) * m + t];
    }
  }
  // Then the terms in the CPU's order: attachments (−k (x − t), in list order), gravity, nodal forces.
  for (int q = d.att_offsets[i]; q < d.att_offsets[i + 1]; ++q) {
    const double* a = d.attachments + 4LL * q;  // k, t
    const double mk = -a[0] * 1.0;
#pragma unroll
    for (int r = 0; r < 3; ++r) f[r] += mk * (d.x[3LL * i + r] - a[1 + r]);
  }
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    f[r] += d.mass[i] * d.gravity[r];
    if (d.nodal) f[r] += d.nodal[3LL * i + r];
    d.f[i + static_cast<long long>(r) * d.num_nodes] = f[r];
  }
}

__global__ void add_step(PdData d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.num_nodes) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) d.x[3LL * i + r] += d.f[i + static_cast<long long>(r) * d.num_nodes];
}

}  // namespace

void launch_forces(const PdData& d, cudaStream_t st) {
  tet_forces<<<(d.num_tets + 127) / 128, 128, 0, st>>>(d);
  node_forces<<<(d.num_nodes + 127) / 128, 128, 0, st>>>(d);
}

void launch_add_step(const PdData& d, cudaStream_t st) { add_step<<<(d.num_nodes + 255) / 256, 256, 0, st>>>(d); }

}  // namespace xpd::gpu::detail
