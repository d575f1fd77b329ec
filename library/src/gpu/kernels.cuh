#pragma once
// Internal: the CUDA kernels of the backend behind plain launch functions (kernels.cu), so that the
// host code (cuda_backend.cpp) is compiled by the C++ compiler and never sees device code.
#include <cuda_runtime.h>

namespace xpd::gpu::detail {

/// Device copy of a SupernodalPlan (every pointer is device memory).
struct SolveData {
  const double* values;
  const int* rows;    // L-order row indices
  const int* relmap;  // per child row below: position among the parent's rows
  const long long* first_col;
  const int* ncols;
  const int* nrows;
  const long long* value_offset;
  const long long* row_offset;
  const long long* contrib_offset;
  const long long* partial_offset;
  const int* child_offsets;
  const int* children;
  const int* level_supernodes;
  const int* perm;
  long long n;
  long long contrib_rows;
  long long partial_slots;
  // Work arrays, one slab per right-hand-side group: Y (n × K), C (contrib_rows × K), P (slots × K).
  double* Y;
  double* C;
  double* P;
};

/// Tiles of one level (device arrays of {supernode, first}).
struct LevelLaunch {
  int supernode_begin, supernodes;  // into level_supernodes
  const int2* diag_tiles;
  int n_diag_tiles;
  const int2* below_tiles;
  int n_below_tiles;
  const int2* col_tiles;
  int n_col_tiles;
  int max_chunks_fwd, max_chunks_bwd;
};

/// X (n × k column-major, A order) → Y groups (L order, K per group, zero padding).
void launch_permute_in(const SolveData& d, const double* X, int k, int K, int groups, cudaStream_t st);
void launch_permute_out(const SolveData& d, double* X, int k, int K, int groups, cudaStream_t st);
void launch_forward_level(const SolveData& d, const LevelLaunch& l, int K, int groups, cudaStream_t st);
void launch_backward_level(const SolveData& d, const LevelLaunch& l, int K, int groups, cudaStream_t st);

/// Corotated local step with forces (DevicePd).
struct PdData {
  int num_tets;
  int num_nodes;
  const int4* tets;
  const double* dm_inv;  // 9 × num_tets, entry-major (entry e of tet t at e·num_tets + t), column-major 3×3
  const double* weight;
  const int* inc_offsets;  // node → incidences (tet·4 + local vertex), ascending
  const int* incidences;
  const int* att_offsets;  // node → its attachments (list order)
  double* attachments;     // 4 per attachment: k, target (targets replaced by DevicePd::set_inputs)
  const double* mass;      // lumped masses
  double* gravity;         // 3
  const double* nodal;     // num_nodes × 3 row-major nodal forces, or null
  double* x;               // num_nodes × 3 row-major
  double* H;               // 9 × num_tets block forces
  double* f;               // num_nodes × 3 column-major (the solve's right-hand side)
  int* status;             // bit 0: an element was inverted or degenerate
  double* tet_energy;      // num_tets: w/2 ||F − R||² (0 where the polar iteration failed)
  double* node_energy;     // num_nodes: attachments' k/2 ||x − t||² − m g·x − f_ext·x
  double* node_force_sq;   // num_nodes: ||f_i||²
};
void launch_forces(const PdData& d, cudaStream_t st);
void launch_add_step(const PdData& d, cudaStream_t st);

/// Threads of the fixed-order sum (kSumBlocks blocks × kSumThreads threads): thread j sums the
/// entries j, j + T, j + 2T, ... in that order, each block adds its threads' sums by a fixed tree,
/// one thread adds the blocks' sums in block order. The same grid every time: bitwise repeatable.
constexpr int kSumBlocks = 160;
constexpr int kSumThreads = 256;
/// out[k] = Σ_i arrays[k][i] (i < sizes[k]) for k < count (≤ 4); `partials` holds kSumBlocks × count.
struct SumJob {
  const double* arrays[4];
  long long sizes[4];
  int count;
};
void launch_sums(const SumJob& job, double* partials, double* out, cudaStream_t st);

/// out[k] = Σ_i a[k][i] b[k][i] (i < n) for k < count, with launch_sums' fixed order.
constexpr int kMaxDots = 44;  // the Gram matrix and right-hand side of a window of 8
struct DotJob {
  const double* a[kMaxDots];
  const double* b[kMaxDots];
  long long n;
  int count;
};
void launch_dots(const DotJob& job, double* partials, double* out, cudaStream_t st);

/// Anderson acceleration of DevicePd (anderson.cu). x and the G-type vectors are node-major
/// (3i + r), f and the F-type vectors column-major (i + r n) like the solve's right-hand side.
constexpr int kMaxAndersonWindow = 8;
struct AndersonData {
  int num_nodes;
  double* x;        // G(x_k) after the step; the extrapolation is written here
  const double* f;  // δ = G(x_k) − x_k
  double* x_pd;     // G(x_k), kept for a rejection
  double* F_prev;
  double* G_prev;
  double* dF;      // window columns of 3n (F layout)
  double* dG;      // window columns of 3n (G layout)
  double* dF_col;  // the ring's column written by this record
  double* dG_col;
};
struct AndersonGamma {
  double g[kMaxAndersonWindow];
  int k;
};
void launch_anderson_record(const AndersonData& a, bool has_prev, cudaStream_t st);
void launch_anderson_combine(const AndersonData& a, const AndersonGamma& gamma, cudaStream_t st);

/// Dense helpers of DeviceSchurSystem (column-major matrices).
void launch_add_entries(double* H, int ld, const int* rows, const int* cols, const double* vals, int count,
                        cudaStream_t st);
void launch_gather(const double* A, int ld, const int* idx, int q, double* B, cudaStream_t st);
void launch_gather_rows(const double* V, int ld, const int* idx, int q, int r, double* out, cudaStream_t st);
void launch_add_diagonal(double* S, int k, const double* d, cudaStream_t st);
void launch_scatter_subtract(double* R, int ld, const int* idx, int q, int r, const double* Z, cudaStream_t st);

}  // namespace xpd::gpu::detail
