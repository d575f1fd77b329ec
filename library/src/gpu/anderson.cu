// Anderson acceleration of DevicePd on the device (the loop's formulas, solver/anderson.hpp): the
// secant pairs, their Gram matrix by fixed-order sums, and the extrapolation. F-type vectors (δ, its
// differences) keep the solve's column-major layout, G-type ones (x, its differences) the
// positions' node-major layout, so that every dot product pairs vectors of one layout.
#include "kernels.cuh"
#include "reduce.cuh"

namespace xpd::gpu::detail {

namespace {

__global__ void anderson_record_kernel(AndersonData a, int has_prev) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= a.num_nodes) return;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const long long ix = 3LL * i + r, jf = i + static_cast<long long>(r) * a.num_nodes;
    const double g = a.x[ix], f = a.f[jf];
    a.x_pd[ix] = g;
    if (has_prev) {
      a.dF_col[jf] = f - a.F_prev[jf];
      a.dG_col[ix] = g - a.G_prev[ix];
    }
    a.F_prev[jf] = f;
    a.G_prev[ix] = g;
  }
}

__global__ void anderson_combine_kernel(AndersonData a, AndersonGamma gamma) {
  const long long n3 = 3LL * a.num_nodes;
  const long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n3) return;
  double s = 0.0;
  for (int c = 0; c < gamma.k; ++c) s += a.dG[c * n3 + i] * gamma.g[c];
  a.x[i] = a.x_pd[i] - s;
}

// Fixed-order dot products (reduce.cuh, DotJob): blockIdx.y picks the pair.
__global__ void block_dots(DotJob job, double* partials) {
  const double* u = job.a[blockIdx.y];
  const double* v = job.b[blockIdx.y];
  double acc = 0.0;
  for (long long i = first_entry(); i < job.n; i += kSumStride) acc += u[i] * v[i];
  block_tree(acc, partials);
}

__global__ void final_dots(int count, const double* partials, double* out) {
  add_blocks(static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x), count, partials, out);
}

}  // namespace

void launch_anderson_record(const AndersonData& a, bool has_prev, cudaStream_t st) {
  anderson_record_kernel<<<(a.num_nodes + 255) / 256, 256, 0, st>>>(a, has_prev ? 1 : 0);
}

void launch_anderson_combine(const AndersonData& a, const AndersonGamma& gamma, cudaStream_t st) {
  const long long n3 = 3LL * a.num_nodes;
  anderson_combine_kernel<<<static_cast<unsigned>((n3 + 255) / 256), 256, 0, st>>>(a, gamma);
}

void launch_dots(const DotJob& job, double* partials, double* out, cudaStream_t st) {
  block_dots<<<dim3(kSumBlocks, job.count), kSumThreads, 0, st>>>(job, partials);
  final_dots<<<(job.count + 63) / 64, 64, 0, st>>>(job.count, partials, out);
}

}  // namespace xpd::gpu::detail
