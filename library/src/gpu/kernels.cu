// CUDA kernels of the backend. The solve kernels follow supernodal_plan.hpp step by step (the
// host reference solve_reference() is the same schedule on the CPU). The local step is in
// local_step.cu.
#include <xpd/gpu/supernodal_tiles.hpp>

#include "kernels.cuh"

namespace xpd::gpu::detail {

namespace {

using T = SupernodalTiles;
static_assert(T::kRows == T::kCols, "forward diagonal tiles and chunks must align");
static_assert(T::kRowChunk % T::kWarpCols == 0, "backward chunks must align with column tiles");

// ---------------------------------------------------------------------------------------------
// Permutation between the caller's column-major X (A order) and the grouped Y (L order).
template <int K>
__global__ void permute_in(SolveData d, const double* X, int k) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const int g = blockIdx.y;
  if (i >= d.n) return;
  const long long src = d.perm[i];
  double* y = d.Y + (g * d.n + i) * K;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int col = g * K + r;
    y[r] = col < k ? X[src + col * d.n] : 0.0;
  }
}

template <int K>
__global__ void permute_out(SolveData d, double* X, int k) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const int g = blockIdx.y;
  if (i >= d.n) return;
  const long long dst = d.perm[i];
  const double* y = d.Y + (g * d.n + i) * K;
#pragma unroll
  for (int r = 0; r < K; ++r) {
    const int col = g * K + r;
    if (col < k) X[dst + col * d.n] = y[r];
  }
}

// ---------------------------------------------------------------------------------------------
// F1: w_s = b_s + children's rows on s's columns; c_s = children's rows below s (children ascending).
template <int K>
__global__ void fwd_gather(SolveData d, int begin) {
  const int s = d.level_supernodes[begin + blockIdx.x];
  const int g = blockIdx.y;
  double* Y = d.Y + g * d.n * K;
  double* C = d.C + g * d.contrib_rows * K;
  const int nc = d.ncols[s], nb = d.nrows[s] - nc;
  const long long fc = d.first_col[s];
  double* cs = C + d.contrib_offset[s] * K;
  for (int t = threadIdx.x; t < nb * K; t += blockDim.x) cs[t] = 0.0;
  __syncthreads();
  for (int ci = d.child_offsets[s]; ci < d.child_offsets[s + 1]; ++ci) {
    const int c = d.children[ci];
    const int cnb = d.nrows[c] - d.ncols[c];
    const double* cc = C + d.contrib_offset[c] * K;
    const int* map = d.relmap + d.contrib_offset[c];
    for (int i = threadIdx.x; i < cnb; i += blockDim.x) {
      const int p = map[i];
      double* dst = p < nc ? Y + (fc + p) * K : cs + static_cast<long long>(p - nc) * K;
#pragma unroll
      for (int r = 0; r < K; ++r) dst[r] += cc[static_cast<long long>(i) * K + r];
    }
    __syncthreads();  // the next child may hit the same rows
  }
}

// F2 (DIAG) / F3: partial products of one row tile with one column chunk of the supernode,
// one thread per row: part[c][i] = Σ_{j in chunk c} A[i, j] y_j.
template <int K, bool DIAG>
__global__ void __launch_bounds__(T::kRows) fwd_gemv(SolveData d, const int2* tiles, int groups) {
  // Groups of right-hand sides vary fastest across blocks: the blocks that read one tile of L run
  // together, so all groups but the first find it in L2.
  const int2 tile = tiles[blockIdx.x / groups];
  const int s = tile.x, c = blockIdx.y, g = blockIdx.x % groups;
  const int nc = d.ncols[s], nr = d.nrows[s];
  const int nchunks = (nc + T::kCols - 1) / T::kCols;
  if (c >= nchunks) return;
  if (DIAG && c > tile.y / T::kRows) return;
  const int j0 = c * T::kCols, j1 = min(j0 + T::kCols, nc);
  const long long fc = d.first_col[s];
  const double* Y = d.Y + g * d.n * K;
  __shared__ double ys[T::kCols * K];
  for (int t = threadIdx.x; t < (j1 - j0) * K; t += blockDim.x) ys[t] = Y[(fc + j0) * K + t];
  __syncthreads();
  const int row0 = DIAG ? tile.y : nc + tile.y;
  const int row_end = DIAG ? min(row0 + T::kRows, nc) : min(row0 + T::kRows, nr);
  const int i = row0 + threadIdx.x;
  if (i >= row_end) return;
  const double* a = d.values + d.value_offset[s] + i;
  double acc[K];
#pragma unroll
  for (int r = 0; r < K; ++r) acc[r] = 0.0;
  for (int j = j0; j < j1; ++j) {
    const double v = a[static_cast<long long>(j) * nr];
#pragma unroll
    for (int r = 0; r < K; ++r) acc[r] += v * ys[(j - j0) * K + r];
  }
  double* part = d.P + (g * d.partial_slots + d.partial_offset[s]) * K + (static_cast<long long>(c) * nr + i) * K;
#pragma unroll
  for (int r = 0; r < K; ++r) part[r] = acc[r];
}

// F2 reduce: y_i = Σ_{c ≤ tile} part[c][i];  F3 reduce: c_s[i] −= Σ_c part[c][i].
template <int K, bool DIAG>
__global__ void fwd_reduce(SolveData d, const int2* tiles) {
  const int2 tile = tiles[blockIdx.x];
  const int s = tile.x, g = blockIdx.y;
  const int nc = d.ncols[s], nr = d.nrows[s];
  const int row0 = DIAG ? tile.y : nc + tile.y;
  const int row_end = DIAG ? min(row0 + T::kRows, nc) : min(row0 + T::kRows, nr);
  const int i = row0 + threadIdx.x;
  if (i >= row_end) return;
  const int nchunks = DIAG ? tile.y / T::kRows + 1 : (nc + T::kCols - 1) / T::kCols;
  const double* part = d.P + (g * d.partial_slots + d.partial_offset[s]) * K;
  double sum[K];
#pragma unroll
  for (int r = 0; r < K; ++r) sum[r] = part[static_cast<long long>(i) * K + r];
  for (int c = 1; c < nchunks; ++c)
#pragma unroll
    for (int r = 0; r < K; ++r) sum[r] += part[(static_cast<long long>(c) * nr + i) * K + r];
  if (DIAG) {
    double* y = d.Y + (g * d.n + d.first_col[s] + i) * K;
#pragma unroll
    for (int r = 0; r < K; ++r) y[r] = sum[r];
  } else {
    double* cs = d.C + (g * d.contrib_rows + d.contrib_offset[s] + (i - nc)) * K;
#pragma unroll
    for (int r = 0; r < K; ++r) cs[r] -= sum[r];
  }
}

// ---------------------------------------------------------------------------------------------
// B1 (!DIAG): part[c][j] = Σ_{rows i below, chunk c} L[i, j] x[row i];
// B2 (DIAG):  part[c][j] = Σ_{diagonal rows i, chunk c} L⁻¹[i, j] t_i.
// One warp per column: lanes stride the rows, then the xor butterfly (fixed order).
template <int K, bool DIAG>
__global__ void __launch_bounds__(32 * T::kWarpCols) bwd_gemv(SolveData d, const int2* tiles, int groups) {
  const int2 tile = tiles[blockIdx.x / groups];
  const int s = tile.x, c = blockIdx.y, g = blockIdx.x % groups;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int j = tile.y + warp;
  const int nc = d.ncols[s], nr = d.nrows[s], nb = nr - nc;
  int i0, i1;
  if (DIAG) {
    const int nch = (nc + T::kRowChunk - 1) / T::kRowChunk;
    if (c < tile.y / T::kRowChunk || c >= nch) return;
    i0 = c * T::kRowChunk;
    i1 = min(i0 + T::kRowChunk, nc);
  } else {
    const int nch = (nb + T::kRowChunk - 1) / T::kRowChunk;
    if (c >= nch) return;
    i0 = nc + c * T::kRowChunk;
    i1 = min(i0 + T::kRowChunk, nr);
  }
  if (j >= nc) return;
  const long long fc = d.first_col[s];
  const double* Y = d.Y + g * d.n * K;
  const double* a = d.values + d.value_offset[s] + static_cast<long long>(j) * nr;
  const int* rows = d.rows + d.row_offset[s];
  double acc[K];
#pragma unroll
  for (int r = 0; r < K; ++r) acc[r] = 0.0;
  for (int i = i0 + lane; i < i1; i += 32) {
    const double v = a[i];
    const double* x = DIAG ? Y + (fc + i) * K : Y + static_cast<long long>(rows[i]) * K;
#pragma unroll
    for (int r = 0; r < K; ++r) acc[r] += v * x[r];
  }
#pragma unroll
  for (int off = 16; off >= 1; off /= 2)
#pragma unroll
    for (int r = 0; r < K; ++r) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
  if (lane == 0) {
    double* part = d.P + (g * d.partial_slots + d.partial_offset[s]) * K + (static_cast<long long>(c) * nc + j) * K;
#pragma unroll
    for (int r = 0; r < K; ++r) part[r] = acc[r];
  }
}

// B1 reduce: t_j = y_j − Σ_c part[c][j];  B2 reduce: x_j = Σ_{c ≥ j / kRowChunk} part[c][j].
// One thread per column, over the forward diagonal tiles (128 columns each).
template <int K, bool DIAG>
__global__ void bwd_reduce(SolveData d, const int2* tiles) {
  const int2 tile = tiles[blockIdx.x];
  const int s = tile.x, g = blockIdx.y;
  const int nc = d.ncols[s], nr = d.nrows[s], nb = nr - nc;
  const int j = tile.y + threadIdx.x;
  if (j >= min(tile.y + T::kRows, nc)) return;
  const double* part = d.P + (g * d.partial_slots + d.partial_offset[s]) * K;
  double* y = d.Y + (g * d.n + d.first_col[s] + j) * K;
  if (DIAG) {
    const int nch = (nc + T::kRowChunk - 1) / T::kRowChunk;
    const int c0 = j / T::kRowChunk;
    double x[K];
#pragma unroll
    for (int r = 0; r < K; ++r) x[r] = part[(static_cast<long long>(c0) * nc + j) * K + r];
    for (int c = c0 + 1; c < nch; ++c)
#pragma unroll
      for (int r = 0; r < K; ++r) x[r] += part[(static_cast<long long>(c) * nc + j) * K + r];
#pragma unroll
    for (int r = 0; r < K; ++r) y[r] = x[r];
  } else {
    const int nch = (nb + T::kRowChunk - 1) / T::kRowChunk;
    if (nch == 0) return;
    double sum[K];
#pragma unroll
    for (int r = 0; r < K; ++r) sum[r] = part[static_cast<long long>(j) * K + r];
    for (int c = 1; c < nch; ++c)
#pragma unroll
      for (int r = 0; r < K; ++r) sum[r] += part[(static_cast<long long>(c) * nc + j) * K + r];
#pragma unroll
    for (int r = 0; r < K; ++r) y[r] -= sum[r];
  }
}

template <int K>
void forward_level(const SolveData& d, const LevelLaunch& l, int groups, cudaStream_t st) {
  fwd_gather<K><<<dim3(l.supernodes, groups), 128, 0, st>>>(d, l.supernode_begin);
  fwd_gemv<K, true><<<dim3(l.n_diag_tiles * groups, l.max_chunks_fwd), T::kRows, 0, st>>>(d, l.diag_tiles, groups);
  fwd_reduce<K, true><<<dim3(l.n_diag_tiles, groups), T::kRows, 0, st>>>(d, l.diag_tiles);
  if (l.n_below_tiles > 0) {
    fwd_gemv<K, false><<<dim3(l.n_below_tiles * groups, l.max_chunks_fwd), T::kRows, 0, st>>>(d, l.below_tiles, groups);
    fwd_reduce<K, false><<<dim3(l.n_below_tiles, groups), T::kRows, 0, st>>>(d, l.below_tiles);
  }
}

template <int K>
void backward_level(const SolveData& d, const LevelLaunch& l, int groups, cudaStream_t st) {
  if (l.n_below_tiles > 0) {
    bwd_gemv<K, false>
        <<<dim3(l.n_col_tiles * groups, l.max_chunks_bwd), 32 * T::kWarpCols, 0, st>>>(d, l.col_tiles, groups);
    bwd_reduce<K, false><<<dim3(l.n_diag_tiles, groups), T::kRows, 0, st>>>(d, l.diag_tiles);
  }
  bwd_gemv<K, true>
      <<<dim3(l.n_col_tiles * groups, l.max_chunks_bwd), 32 * T::kWarpCols, 0, st>>>(d, l.col_tiles, groups);
  bwd_reduce<K, true><<<dim3(l.n_diag_tiles, groups), T::kRows, 0, st>>>(d, l.diag_tiles);
}

// Dense helpers: each output entry is written by one thread (no two threads share a target).
__global__ void add_entries(double* H, int ld, const int* rows, const int* cols, const double* vals, int count) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < count) H[rows[t] + static_cast<long long>(cols[t]) * ld] += vals[t];
}
__global__ void gather(const double* A, int ld, const int* idx, int q, double* B) {
  const int a = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.y;
  if (a < q) B[a + static_cast<long long>(b) * q] = A[idx[a] + static_cast<long long>(idx[b]) * ld];
}
__global__ void gather_rows(const double* V, int ld, const int* idx, int q, double* out) {
  const int a = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (a < q) out[a + static_cast<long long>(c) * q] = V[idx[a] + static_cast<long long>(c) * ld];
}
__global__ void add_diagonal(double* S, int k, const double* d) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < k) S[j + static_cast<long long>(j) * k] += d[j];
}
__global__ void scatter_subtract(double* R, int ld, const int* idx, int q, const double* Z) {
  const int a = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
  if (a < q) R[idx[a] + static_cast<long long>(c) * ld] -= Z[a + static_cast<long long>(c) * q];
}

}  // namespace

void launch_add_entries(double* H, int ld, const int* rows, const int* cols, const double* vals, int count,
                        cudaStream_t st) {
  if (count > 0) add_entries<<<(count + 255) / 256, 256, 0, st>>>(H, ld, rows, cols, vals, count);
}
void launch_gather(const double* A, int ld, const int* idx, int q, double* B, cudaStream_t st) {
  if (q > 0) gather<<<dim3((q + 127) / 128, q), 128, 0, st>>>(A, ld, idx, q, B);
}
void launch_gather_rows(const double* V, int ld, const int* idx, int q, int r, double* out, cudaStream_t st) {
  if (q > 0) gather_rows<<<dim3((q + 127) / 128, r), 128, 0, st>>>(V, ld, idx, q, out);
}
void launch_add_diagonal(double* S, int k, const double* d, cudaStream_t st) {
  if (k > 0) add_diagonal<<<(k + 127) / 128, 128, 0, st>>>(S, k, d);
}
void launch_scatter_subtract(double* R, int ld, const int* idx, int q, int r, const double* Z, cudaStream_t st) {
  if (q > 0) scatter_subtract<<<dim3((q + 127) / 128, r), 128, 0, st>>>(R, ld, idx, q, Z);
}

#define XPD_DISPATCH_K(K, CALL) \
  switch (K) {                  \
    case 1:                     \
      CALL(1);                  \
      break;                    \
    case 2:                     \
      CALL(2);                  \
      break;                    \
    case 3:                     \
      CALL(3);                  \
      break;                    \
    case 4:                     \
      CALL(4);                  \
      break;                    \
    default:                    \
      CALL(8);                  \
      break;                    \
  }

void launch_permute_in(const SolveData& d, const double* X, int k, int K, int groups, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>((d.n + 255) / 256), groups);
#define XPD_CALL(KK) permute_in<KK><<<grid, 256, 0, st>>>(d, X, k)
  XPD_DISPATCH_K(K, XPD_CALL)
#undef XPD_CALL
}

void launch_permute_out(const SolveData& d, double* X, int k, int K, int groups, cudaStream_t st) {
  const dim3 grid(static_cast<unsigned>((d.n + 255) / 256), groups);
#define XPD_CALL(KK) permute_out<KK><<<grid, 256, 0, st>>>(d, X, k)
  XPD_DISPATCH_K(K, XPD_CALL)
#undef XPD_CALL
}

void launch_forward_level(const SolveData& d, const LevelLaunch& l, int K, int groups, cudaStream_t st) {
#define XPD_CALL(KK) forward_level<KK>(d, l, groups, st)
  XPD_DISPATCH_K(K, XPD_CALL)
#undef XPD_CALL
}

void launch_backward_level(const SolveData& d, const LevelLaunch& l, int K, int groups, cudaStream_t st) {
#define XPD_CALL(KK) backward_level<KK>(d, l, groups, st)
  XPD_DISPATCH_K(K, XPD_CALL)
#undef XPD_CALL
}

}  // namespace xpd::gpu::detail
