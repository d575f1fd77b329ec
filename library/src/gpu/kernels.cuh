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
/// The per-tet blocks only (d.H, d.tet_energy; d.status on failure): DeviceCollisionPd's E_β step.
void launch_tet_forces(const PdData& d, cudaStream_t st);
/// out (num_region × 3 column-major) = per region node the blocks of its incidences (4 t + a into
/// H of num_tets tets), in list order; with sub non-null, sub −= out.
void launch_beta_gather(int num_region, const int* offsets, const int* incidences, const double* H, int num_tets,
                        double* out, double* sub, cudaStream_t st);

/// Algorithm 1's region bookkeeping on the device (collision.cu). Region vectors are m × 3
/// column-major in FACTOR order (p = position inside the factor's trailing block).
struct RegionData {
  int m;
  long long n1;      // factor row of p = 0
  const int* gnode;  // p → global node
  double* x;         // global positions, node-major
  // Springs: k of them, 8 slots each (factor positions, weights), stiffness, offset (3).
  int k;
  const int* spring_nodes;
  const double* spring_w;
  const double* spring_c;
  const double* spring_o;
  double* spring_t;       // 3 per spring (scratch)
  const int* sp_offsets;  // m + 1: per node its (spring, slot) incidences, spring order
  const int* sp_inc;      // 8 s + a
  // A22^(β), CSR in factor order.
  const int* a_offsets;
  const int* a_cols;
  const double* a_vals;
  double* g_alpha;
  double* fbeta;
  double* G;        // the Schur system's right-hand side
  const double* U;  // its solution
  double* Utot;
};
/// Y2 = rows n1.. of the forward sweep's work array (node-interleaved, 3 columns).
void launch_y2_gather(const RegionData& d, const double* Y, double* Y2, cudaStream_t st);
/// Rows n1.. of the work array = Z2.
void launch_z2_scatter(const RegionData& d, double* Y, const double* Z2, cudaStream_t st);
/// t_s = c_s (W_s x − o_s) (from_x) or t_s = c_s W_s U.
void launch_spring_eval(const RegionData& d, bool from_x, cudaStream_t st);
/// G = g_α + f_β − Σ_s W_sᵀ t_s (t at x).
void launch_compose_g(const RegionData& d, cudaStream_t st);
/// x2 += U, Utot += U.
void launch_apply_u2(const RegionData& d, cudaStream_t st);
/// g_α −= G − Σ_s W_sᵀ t_s − A22^(β) U (t of U).
void launch_update_g_alpha(const RegionData& d, cudaStream_t st);
/// x_i += step[i + r n] for the nodes with mask[i] == 0 (x1).
void launch_add_x1(double* x, const double* step, const unsigned char* mask, long long n, cudaStream_t st);

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
