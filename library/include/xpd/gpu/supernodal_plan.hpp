#pragma once
// Schedule of the GPU's supernodal triangular solve and its host reference.
//
// Solves A X = B with a supernodal factor P A Pᵀ = L Lᵀ (CHOLMOD's layout, SupernodalFactorView),
// following the supernodal SpTRSV with partitioned inverse of Yamazaki, Rajamanickam & Ellingwood
// (ICPP 2020): every supernode's dense diagonal triangle L_ss is replaced by its inverse once per
// factorization, so each step inside a supernode is a matrix–vector product instead of a serial
// substitution, and the supernodes are processed by levels of the supernodal elimination tree
// (level 0: leaves; a parent's level exceeds its children's), all supernodes of a level at once.
//
//   forward  L y = P b, levels upward, per supernode s with rows R_s = [columns of s; rows below]:
//     F1  w_s = b_s + Σ_children (their contribution rows that fall on s's columns),
//         c_s = Σ_children (their contribution rows that fall on s's rows below)   (children ascending)
//     F2  y_s = L_ss⁻¹ w_s                      (row tiles × column chunks, partial sums)
//     F3  c_s ← c_s − L_rs y_s                  (row tiles × column chunks, partial sums)
//     c_s is s's contribution buffer, read once by its parent (multifrontal extend-add: the rows
//     below a child are a subset of its parent's rows, checked when the plan is built);
//   backward Lᵀ x = y, levels downward (a supernode reads only its ancestors' final x):
//     B1  t_s = y_s − L_rsᵀ x[rows below s]     (one warp per column, row chunks, partial sums)
//     B2  x_s = L_ss⁻ᵀ t_s                      (one warp per column, row chunks, partial sums)
//   then x is scattered back through P.
//
// Every partial sum is written to its own slot and the slots are added in a fixed order (chunk 0,
// 1, ...), so the result does not depend on the thread schedule: two GPU runs are bitwise equal,
// and solve_reference() below runs the same tiles and sums on the host (it is the test oracle of
// the schedule; the GPU kernels differ from it only by fused multiply–adds).
#include <vector>
#include <xpd/gpu/factor_view.hpp>
#include <xpd/gpu/supernodal_tiles.hpp>

namespace xpd::gpu {

/// A row tile (forward) or column tile (backward) of one supernode.
struct PlanTile {
  int super = 0;  ///< supernode
  int first = 0;  ///< first row (forward) or column (backward) of the tile, local to the supernode
};

struct SupernodalPlan {
  long n = 0;
  int nsuper = 0;
  int levels = 0;
  // Per supernode.
  std::vector<long> first_col;  ///< first column (L order)
  std::vector<int> ncols, nrows;
  std::vector<long> value_offset;    ///< into values
  std::vector<long> row_offset;      ///< into rows
  std::vector<long> contrib_offset;  ///< first row of its contribution buffer (nrows − ncols rows)
  std::vector<long> partial_offset;  ///< first slot of its partial sums (slots × k doubles each)
  std::vector<int> parent;           ///< −1 at a root
  std::vector<int> child_offsets;    ///< nsuper + 1 offsets into children
  std::vector<int> children;         ///< ascending within each supernode
  /// For supernode s as a child: for each of its rows below (nrows − ncols), the position of that
  /// row among its parent's rows (0 .. nrows(parent) − 1); at contrib_offset[s].
  std::vector<int> relmap;
  std::vector<long> rows;      ///< L-order row indices (CHOLMOD's s)
  std::vector<double> values;  ///< CHOLMOD's values, each diagonal block replaced by L_ss⁻¹ (upper part 0)
  std::vector<long> perm;      ///< row i of L is row perm[i] of A
  long contrib_rows = 0;       ///< total rows of the contribution buffers
  long partial_slots = 0;      ///< total partial-sum slots

  // Per level (index ℓ = 0 .. levels − 1; the backward sweep runs them in reverse).
  std::vector<int> level_offsets;  ///< levels + 1 offsets into level_supernodes
  std::vector<int> level_supernodes;
  std::vector<int> diag_tile_offsets, below_tile_offsets, col_tile_offsets;  ///< levels + 1 each
  std::vector<PlanTile> diag_tiles;       ///< forward row tiles of the diagonal blocks
  std::vector<PlanTile> below_tiles;      ///< forward row tiles of the rows below (first counts from ncols)
  std::vector<PlanTile> col_tiles;        ///< backward column tiles
  std::vector<int> level_max_chunks_fwd;  ///< per level: most column chunks of a supernode (kCols)
  std::vector<int> level_max_chunks_bwd;  ///< per level: most row chunks of a supernode (kRowChunk)

  double stored_values() const { return static_cast<double>(values.size()); }
  /// Bytes of the device copy: values, row indices, maps, tiles (what upload moves).
  double device_bytes() const;
};

/// Builds the plan from a supernodal factor (inverting every diagonal block with LAPACK's dtrtri).
/// Throws SolverError for an empty view, a non-postordered tree, a child row that its parent lacks,
/// or a singular diagonal block.
SupernodalPlan make_supernodal_plan(const SupernodalFactorView& L);

/// Host reference of the GPU solve: B (n × k, column-major) := A⁻¹ B with the plan's tiles,
/// partial sums and fixed summation order. Single-threaded; for tests and for checking a schedule
/// without a device.
void solve_reference(const SupernodalPlan& plan, double* B, int k);

}  // namespace xpd::gpu
