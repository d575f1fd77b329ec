// The corotated local step with forces on the device (DevicePd). Compiled without fused
// multiply–adds (-fmad=false, library/CMakeLists.txt): every operation is that of the CPU's kernel
// (energy/tet_kernel.hpp polar_range, energy/polar_newton.hpp, springs.cpp, loads.cpp) in the
// same order, so the device forces equal the CPU's bit for bit.
#include "energy/polar_newton.hpp"
#include "kernels.cuh"
#include "reduce.cuh"

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
  double energy = 0.0;
  if (!::xpd::detail::polar_rotation_newton(F, R)) {
    atomicOr(d.status, 1);
#pragma unroll
    for (int e = 0; e < 9; ++e) H[e] = 0.0;
  } else {
    double D[9];
    double sq = 0.0;
#pragma unroll
    for (int e = 0; e < 9; ++e) {
      D[e] = F[e] - R[e];
      sq += D[e] * D[e];
    }
    energy = 0.5 * w * sq;
    // H = −w D Bᵀ: H(r, c) = −w Σ_q D(r, q) B(c, q).
#pragma unroll
    for (int c = 0; c < 3; ++c)
#pragma unroll
      for (int r = 0; r < 3; ++r) H[c * 3 + r] = -w * (D[r] * B[c] + D[3 + r] * B[3 + c] + D[6 + r] * B[6 + c]);
  }
#pragma unroll
  for (int e = 0; e < 9; ++e) d.H[e * m + t] = H[e];
  d.tet_energy[t] = energy;
}

// Adds vertex a's force from tet t's block (code = 4 t + a): −(sum of the columns) for vertex 0,
// column a − 1 otherwise.
__device__ inline void add_block(const double* H, int m, int code, double f[3]) {
  const int t = code >> 2, a = code & 3;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    if (a == 0)
      f[r] -= H[r * m + t] + H[(3 + r) * m + t] + H[(6 + r) * m + t];
    else
      f[r] += H[(3 * (a - 1) + r) * m + t];
  }
}

// One thread per node: its tets' blocks in ascending order, then loads and attachments; writes
// the column-major right-hand side of the solve.
__global__ void node_forces(PdData d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.num_nodes) return;
  const int m = d.num_tets;
  double f[3] = {0.0, 0.0, 0.0};
  for (int q = d.inc_offsets[i]; q < d.inc_offsets[i + 1]; ++q) add_block(d.H, m, d.incidences[q], f);
  // Then the terms in the CPU's order: attachments (−k (x − t), in list order), gravity, nodal forces.
  // The node's energy: the attachments' k/2 ||x − t||², the loads' −(m g + f_ext)·x.
  double energy = 0.0;
  for (int q = d.att_offsets[i]; q < d.att_offsets[i + 1]; ++q) {
    const double* a = d.attachments + 4LL * q;  // k, t
    const double mk = -a[0] * 1.0;
    double sq = 0.0;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
      const double dr = d.x[3LL * i + r] - a[1 + r];
      f[r] += mk * dr;
      sq += dr * dr;
    }
    energy += 0.5 * a[0] * sq;
  }
  double f_sq = 0.0;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const double load = d.mass[i] * d.gravity[r];
    f[r] += load;
    energy -= load * d.x[3LL * i + r];
    if (d.nodal) {
      f[r] += d.nodal[3LL * i + r];
      energy -= d.nodal[3LL * i + r] * d.x[3LL * i + r];
    }
    d.f[i + static_cast<long long>(r) * d.num_nodes] = f[r];
    f_sq += f[r] * f[r];
  }
  d.node_energy[i] = energy;
  d.node_force_sq[i] = f_sq;
}

// One thread per region node p (factor order): the E_β blocks of its tets in ascending order
// (DeviceCollisionPd); out is m × 3 column-major; with sub, sub −= out as well.
__global__ void beta_gather(int num_region, const int* offsets, const int* incidences, const double* H, int num_tets,
                            double* out, double* sub) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= num_region) return;
  double f[3] = {0.0, 0.0, 0.0};
  for (int q = offsets[p]; q < offsets[p + 1]; ++q) add_block(H, num_tets, incidences[q], f);
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    out[p + static_cast<long long>(r) * num_region] = f[r];
    if (sub) sub[p + static_cast<long long>(r) * num_region] -= f[r];
  }
}

__global__ void add_step(PdData d) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.num_nodes) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) d.x[3LL * i + r] += d.f[i + static_cast<long long>(r) * d.num_nodes];
}

// Fixed-order sums (reduce.cuh, SumJob): blockIdx.y picks the array.
__global__ void block_sums(SumJob job, double* partials) {
  const double* a = job.arrays[blockIdx.y];
  const long long n = job.sizes[blockIdx.y];
  double acc = 0.0;
  for (long long i = first_entry(); i < n; i += kSumStride) acc += a[i];
  block_tree(acc, partials);
}

__global__ void final_sums(int count, const double* partials, double* out) {
  add_blocks(static_cast<int>(threadIdx.x), count, partials, out);
}

}  // namespace

void launch_sums(const SumJob& job, double* partials, double* out, cudaStream_t st) {
  block_sums<<<dim3(kSumBlocks, job.count), kSumThreads, 0, st>>>(job, partials);
  final_sums<<<1, 32, 0, st>>>(job.count, partials, out);
}

void launch_forces(const PdData& d, cudaStream_t st) {
  tet_forces<<<(d.num_tets + 127) / 128, 128, 0, st>>>(d);
  node_forces<<<(d.num_nodes + 127) / 128, 128, 0, st>>>(d);
}

void launch_tet_forces(const PdData& d, cudaStream_t st) {
  if (d.num_tets > 0) tet_forces<<<(d.num_tets + 127) / 128, 128, 0, st>>>(d);
}

void launch_beta_gather(int num_region, const int* offsets, const int* incidences, const double* H, int num_tets,
                        double* out, double* sub, cudaStream_t st) {
  beta_gather<<<(num_region + 127) / 128, 128, 0, st>>>(num_region, offsets, incidences, H, num_tets, out, sub);
}

void launch_add_step(const PdData& d, cudaStream_t st) { add_step<<<(d.num_nodes + 255) / 256, 256, 0, st>>>(d); }

}  // namespace xpd::gpu::detail
