// Algorithm 1's region bookkeeping on the device (DeviceCollisionPd, cuda_backend.hpp): one
// thread per region node or per spring; every node gathers its springs' terms in spring order, so
// no floating-point atomics and two runs are bitwise equal.
#include "kernels.cuh"

namespace xpd::gpu::detail {

namespace {

__global__ void y2_gather(RegionData d, const double* Y, double* Y2) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.m) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) Y2[p + static_cast<long long>(r) * d.m] = Y[(d.n1 + p) * 3 + r];
}

__global__ void z2_scatter(RegionData d, double* Y, const double* Z2) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.m) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) Y[(d.n1 + p) * 3 + r] = Z2[p + static_cast<long long>(r) * d.m];
}

__global__ void spring_eval(RegionData d, bool from_x) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= d.k) return;
  double v[3] = {0.0, 0.0, 0.0};
  for (int a = 0; a < 8; ++a) {
    const double w = d.spring_w[8 * s + a];
    if (w == 0.0) continue;
    const int p = d.spring_nodes[8 * s + a];
#pragma unroll
    for (int r = 0; r < 3; ++r)
      v[r] += w * (from_x ? d.x[3LL * d.gnode[p] + r] : d.U[p + static_cast<long long>(r) * d.m]);
  }
  const double c = d.spring_c[s];
#pragma unroll
  for (int r = 0; r < 3; ++r) d.spring_t[3 * s + r] = c * (from_x ? v[r] - d.spring_o[3 * s + r] : v[r]);
}

// Σ_s W_sᵀ t_s at node p, springs in order.
__device__ inline void springs_at(const RegionData& d, int p, double out[3]) {
  out[0] = out[1] = out[2] = 0.0;
  for (int q = d.sp_offsets[p]; q < d.sp_offsets[p + 1]; ++q) {
    const int code = d.sp_inc[q];
    const int s = code >> 3;
    const double w = d.spring_w[code];
#pragma unroll
    for (int r = 0; r < 3; ++r) out[r] += w * d.spring_t[3 * s + r];
  }
}

__global__ void compose_g(RegionData d) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.m) return;
  double wt[3];
  springs_at(d, p, wt);
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const long long e = p + static_cast<long long>(r) * d.m;
    d.G[e] = d.g_alpha[e] + d.fbeta[e] - wt[r];
  }
}

__global__ void apply_u2(RegionData d) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.m) return;
  const long long node = d.gnode[p];
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const long long e = p + static_cast<long long>(r) * d.m;
    d.x[3 * node + r] += d.U[e];
    d.Utot[e] += d.U[e];
  }
}

__global__ void update_g_alpha(RegionData d) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= d.m) return;
  double wt[3];
  springs_at(d, p, wt);
  double au[3] = {0.0, 0.0, 0.0};
  for (int q = d.a_offsets[p]; q < d.a_offsets[p + 1]; ++q) {
    const long long j = d.a_cols[q];
    const double a = d.a_vals[q];
#pragma unroll
    for (int r = 0; r < 3; ++r) au[r] += a * d.U[j + static_cast<long long>(r) * d.m];
  }
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const long long e = p + static_cast<long long>(r) * d.m;
    d.g_alpha[e] -= (d.G[e] - wt[r]) - au[r];
  }
}

__global__ void add_x1(double* x, const double* step, const unsigned char* mask, long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n || mask[i]) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) x[3 * i + r] += step[i + r * n];
}

unsigned blocks(long long count, int threads) { return static_cast<unsigned>((count + threads - 1) / threads); }

}  // namespace

void launch_y2_gather(const RegionData& d, const double* Y, double* Y2, cudaStream_t st) {
  y2_gather<<<blocks(d.m, 128), 128, 0, st>>>(d, Y, Y2);
}
void launch_z2_scatter(const RegionData& d, double* Y, const double* Z2, cudaStream_t st) {
  z2_scatter<<<blocks(d.m, 128), 128, 0, st>>>(d, Y, Z2);
}
void launch_spring_eval(const RegionData& d, bool from_x, cudaStream_t st) {
  if (d.k > 0) spring_eval<<<blocks(d.k, 128), 128, 0, st>>>(d, from_x);
}
void launch_compose_g(const RegionData& d, cudaStream_t st) { compose_g<<<blocks(d.m, 128), 128, 0, st>>>(d); }
void launch_apply_u2(const RegionData& d, cudaStream_t st) { apply_u2<<<blocks(d.m, 128), 128, 0, st>>>(d); }
void launch_update_g_alpha(const RegionData& d, cudaStream_t st) {
  update_g_alpha<<<blocks(d.m, 128), 128, 0, st>>>(d);
}
void launch_add_x1(double* x, const double* step, const unsigned char* mask, long long n, cudaStream_t st) {
  add_x1<<<blocks(n, 256), 256, 0, st>>>(x, step, mask, n);
}

}  // namespace xpd::gpu::detail
