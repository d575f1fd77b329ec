#pragma once
// Internal: the fixed-order reductions of the backend's sums and dot products (kernels.cuh, SumJob
// and DotJob). Thread j of a block adds its entries j, j + T, j + 2T, ... in that order; the block
// adds its threads' sums by a fixed tree; one thread per sum adds the blocks' partial sums in block
// order. The same grid every time: bitwise repeatable.
#include "kernels.cuh"

namespace xpd::gpu::detail {

// The block's tree over its threads' sums, written to partials[sum · kSumBlocks + block].
__device__ inline void block_tree(double acc, double* partials) {
  __shared__ double sh[kSumThreads];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) sh[threadIdx.x] += sh[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.y * kSumBlocks + blockIdx.x] = sh[0];
}

// Sum k of `count`: its blocks' partial sums in block order.
__device__ inline void add_blocks(int k, int count, const double* partials, double* out) {
  if (k >= count) return;
  double acc = 0.0;
  for (int b = 0; b < kSumBlocks; ++b) acc += partials[k * kSumBlocks + b];
  out[k] = acc;
}

// First entry and stride of this thread's entries.
__device__ inline long long first_entry() { return static_cast<long long>(blockIdx.x) * kSumThreads + threadIdx.x; }
constexpr long long kSumStride = static_cast<long long>(kSumBlocks) * kSumThreads;

}  // namespace xpd::gpu::detail
