#pragma once
// DynamicLdlt: a sparse LDLᵀ factor of an SPD matrix that follows changes of the matrix and of its
// size without refactorization — the "progressive Cholesky" of Li, Liu, Kavan & Chen (2021, ACM TOG
// 40(4)), whose kernels are Davis & Hager's (1999, 2001) sparse update/downdate:
//
//   P K Pᵀ = L D Lᵀ          (L unit lower triangular, D diagonal, P the elimination order)
//   K_new  = K + Σ w⁺ w⁺ᵀ − Σ w⁻ w⁻ᵀ,  with new unknowns whose rows of K were zero.
//
// A PD matrix is a sum of low-rank element blocks, K = Σ_e W_e W_eᵀ (Li et al. 2021, eq. 3; for a
// tet W_e = √w_e G_eᵀ, 4 nodes × 3), so a topology change (a tet re-indexed to duplicated nodes,
// a spring added) is a short list of sparse columns to add and to remove, or an entrywise
// symmetric change that the factor splits into rank-2 terms itself: `FactorModification`.
//
// How one modification is applied (why this order: shapes/formulas in dynamic_ldlt.cpp):
//   1. every new unknown j enters as an island with a placeholder diagonal δ_j > 0 (Σ of its added
//      entries squared), placed in the elimination order immediately before the earliest-ordered
//      old unknown it is coupled to (Li et al. 2021, §4.2, Fig. 4: the elimination tree only gains
//      a leaf, little new fill) or before an old unknown the caller names;
//   2. update with the added columns, 3. downdate the removed columns, 4. downdate the
//      placeholders. After 2 the matrix is K_new + (removed part) + Δ, after 3 K_new + Δ, after 4
//      K_new: every intermediate dominates K_new in the Loewner order, so it is SPD whenever K_new
//      is — also in quasistatic scenes without a mass term, where the paper's order (downdate
//      first) would pass through singular matrices.
//   A pivot d_j ≤ pivot_tolerance · K_new(j,j) or a non-finite value at any point restores the
//   factor to its state before the call (undo log of touched columns) and returns false, so the
//   caller refactors; the factor is never left half-updated.
//
// Symbolic rule (Davis & Hager 2001): adding w with pattern 𝒲, k = min 𝒲 in the elimination order,
// changes only the columns on the path from k to the root of the *new* elimination tree:
// 𝓛_k ∪= 𝒲, then 𝓛_π(j) ∪= 𝓛_j ∖ {π(j)} up the path, π(j) = min(𝓛_j ∖ {j}). Patterns only grow
// (downdates leave numerical zeros). Numeric rule: Gill, Golub, Murray & Saunders (1974) method C1
// in LDLᵀ form, r ≤ 8 columns per pass over each path column (Davis & Hager 2001, multiple-rank);
// the entries of a column are updated 4 at a time with AVX2 + FMA where the CPU has them (the W
// rows of 4 entries transposed in registers), long columns in two halves on two threads.
//
// The elimination order is kept as order-maintenance labels (64-bit, spaced 2³² apart at build,
// relabelled when a gap closes), so an insertion never renumbers row indices: rows are stored by
// unknown (DOF) id and compared by label. Columns live in one arena with slack; a column that
// outgrows its slot moves to the end of the arena (CHOLMOD's dynamic simplicial layout).
//
// Written by the project (MPL-2.0). CHOLMOD (with METIS) provides only the initial ordering and
// numeric factorization; none of its GPL Modify module is used.
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <cstdint>
#include <memory>
#include <vector>

namespace xpd {

/// One sparse column w of a low-rank modification: distinct DOF ids and their values.
struct SparseColumn {
  std::vector<int> rows;
  std::vector<double> values;
};

/// K_new = K + Σ_{w ∈ added} w wᵀ − Σ_{w ∈ removed} w wᵀ, and `new_dofs` unknowns appended with ids
/// rows() … rows() + new_dofs − 1 (their rows of K are zero). A new unknown must appear in some
/// added column or on the diagonal of `change`; its placeholder diagonal is the sum of those
/// squares and |diagonal| (> 0). `removed` may be any columns to downdate (not only blocks of K):
/// the result is SPD whenever K_new is.
struct FactorModification {
  int new_dofs = 0;
  /// Optional, one per new DOF: the old DOF it is inserted immediately before in the elimination
  /// order (e.g. the node a cut duplicated); −1 or empty: before the earliest-ordered old DOF that
  /// shares an added column with it (Li et al. 2021, §4.2).
  std::vector<int> place_before;
  std::vector<SparseColumn> added;
  std::vector<SparseColumn> removed;
  /// A further symmetric change ΔK given entrywise, each off-diagonal pair once (either triangle;
  /// repeated entries are summed). The factor writes it as Σ_o (e_o m_oᵀ + m_o e_oᵀ), each entry
  /// owned by its endpoint that comes first in the elimination order, and applies each owner's
  /// term as one update and one downdate (p pᵀ − q qᵀ, p, q = (a e_o ± m_o/a)/√2, a² = ‖m_o‖). An
  /// owner's column then holds only unknowns after it in the order, so no fill arises beyond ΔK's
  /// own pattern, with one rank-2 term per owner instead of one per entry.
  std::vector<Eigen::Triplet<double>> change;
};

/// Figures of a DynamicLdlt (for stats and benchmarks).
struct DynamicLdltInfo {
  long n = 0;               ///< current order (DOFs, including ones inserted since the build)
  double nnz_L = 0;         ///< stored entries of L, diagonal included (numerical zeros counted)
  double nnz_L_build = 0;   ///< nnz_L right after the last compute()
  double analyze_ms = 0;    ///< last compute(): ordering + symbolic analysis
  double factorize_ms = 0;  ///< last compute(): numeric factorization + conversion to LDLᵀ
  long modifications = 0;   ///< successful modify() calls since the last compute()
  long rollbacks = 0;       ///< modify() calls that failed and restored the factor
  double last_modify_ms = 0;
  long last_path_columns = 0;       ///< columns visited by the numeric passes of the last modify()
  double last_path_entries = 0;     ///< entries of L those passes visited
  long last_passes = 0;             ///< numeric passes of the last modify()
  long last_split_columns = 0;      ///< columns of those passes split between two threads
  long last_helper_columns = 0;     ///< of those, the halves the helper thread ran (the caller ran the rest)
  long solve_tasks = 0;             ///< independent subtrees of the tree-parallel solve (last schedule)
  double solve_top_fraction = 0;    ///< share of L's entries in the serial top of that schedule
  double solve_panel_fraction = 0;  ///< share of L's entries solved as dense panels
  double solve_panel_values = 0;    ///< values stored in the panels (their upper triangles included)
  long solve_panels = 0;            ///< number of panels; the largest has solve_panel_max_columns
  long solve_panel_max_columns = 0;
  bool solve_panels_built = false;  ///< whether the last schedule has the panels
  /// Time of the last rebuild of the solve's schedule and panels (done by the first solve after a
  /// compute() or a modify(); part of what a topology change costs besides last_modify_ms).
  double last_schedule_ms = 0;
};

/// When a factor kept current by modify() is rebuilt from a fresh ordering instead (Li et al. 2021
/// give no rule; the patterns of a DynamicLdlt only grow, and the order its insertions chose drifts
/// from a good one as cuts separate the mesh). Checked by DynamicLdlt::refill() between
/// interactions, where an analysis (METIS ordering, symbolic only) is affordable.
struct FillPolicy {
  /// Refactor when nnz(L) > nnz_ratio × the nnz(L) of a fresh METIS ordering of the current matrix.
  double nnz_ratio = 1.15;
  /// Or when this many modify() calls have accumulated since the last compute() (round-off of
  /// long update/downdate chains); 0 = no limit.
  long max_modifications = 10000;
};

/// What one DynamicLdlt::refill() found and did.
struct RefillResult {
  bool refactored = false;
  double nnz_L = 0;         ///< before the call
  double nnz_L_fresh = 0;   ///< of the fresh METIS ordering (after the call when refactored)
  double analyze_ms = 0;    ///< the analysis (always run)
  double factorize_ms = 0;  ///< the numeric factorization (0 when not refactored)
  const char* reason = "";  ///< "fill", "modifications" or "" (kept)
};

class DynamicLdlt {
 public:
  DynamicLdlt();
  ~DynamicLdlt();
  DynamicLdlt(DynamicLdlt&&) noexcept;
  DynamicLdlt& operator=(DynamicLdlt&&) noexcept;
  DynamicLdlt(const DynamicLdlt&) = delete;
  DynamicLdlt& operator=(const DynamicLdlt&) = delete;

  /// Orders (METIS, through CHOLMOD) and factors the SPD matrix A (only its lower triangle is
  /// read). Throws SolverError when A is not square or not positive definite (naming the column).
  void compute(const Eigen::SparseMatrix<double>& A);

  /// The fill policy's check: analyzes A (which must be the matrix the factor currently holds, of
  /// order rows(); a fresh METIS ordering, symbolic only) and, when nnz(L) exceeds
  /// policy.nnz_ratio × that ordering's nnz or too many modifications have accumulated, factors A
  /// with that ordering (the analysis is not repeated). Throws SolverError like compute() (factor
  /// unchanged when A's order differs or A is not positive definite).
  RefillResult refill(const Eigen::SparseMatrix<double>& A, const FillPolicy& policy);

  /// Applies a modification (order of steps in the header comment). Columns of ≥ 384 entries are
  /// split between the caller and one TBB helper (the pass is sequential over columns; a column's
  /// entries are independent), bitwise the same result as on one thread. Returns true on success. On a
  /// loss of definiteness (pivot ≤ pivot_tolerance · K_new(j,j), or non-finite) the factor is
  /// restored exactly to its state before the call and false is returned: refactor K_new then.
  /// Throws SolverError (factor unchanged) for malformed input: a row out of range, a repeated row
  /// in one column, a non-finite value, a new DOF with no added entry.
  bool modify(const FactorModification& m);

  /// Solves K X = B in place for an n × k column-major block (k ≥ 1): forward substitution in
  /// elimination order, diagonal, backward substitution. Chains of ≥ 8 columns with nested
  /// patterns (supernodes) are solved as dense panels (BLAS from 16 columns), disjoint subtrees of
  /// the elimination tree concurrently; the result is bit-identical on any number of threads. The
  /// panels are read-only copies of L: after a modify() the first 7 solves run on the columns and
  /// the 8th rebuilds the panels (a rebuild cost what 6–14 panel solves save over column solves on
  /// the box:32/48 cuts of xpd bench cut), or the first solve of ≥ 12 right-hand sides does (the
  /// r-column solves of SchurFactorization::modify: 15–36% faster for r = 24–99 on box:48), so results
  /// depend only on the sequence of calls. Not concurrent with itself (workspace).
  void solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) const;

  int rows() const;
  const DynamicLdltInfo& info() const;

  /// Relative pivot threshold of modify() (default 1e-12).
  void set_pivot_tolerance(double tol);

  /// The inner loop of modify()'s numeric passes: the CPU's vector kernel (AVX2 + FMA, 4 entries
  /// of a column at a time; the default where the CPU has them) or the plain scalar loop. The two
  /// round differently in the last bit (fused steps); tests compare them. Returns whether the
  /// vector kernel is in use after the call (false on a CPU without AVX2 and FMA).
  bool use_vector_kernel(bool enabled);

  /// The DOF ids in elimination order (a permutation of 0 … rows() − 1).
  std::vector<int> elimination_order() const;
  /// L D Lᵀ assembled explicitly in DOF numbering (equals K; for tests on small matrices).
  Eigen::SparseMatrix<double> product() const;
  /// K(j,j) as tracked through the modifications (K_build(j,j) + Σ ± w_j²).
  double matrix_diagonal(int j) const;

  struct Impl;

 private:
  bool compute_impl(const Eigen::SparseMatrix<double>& A, const FillPolicy* policy, RefillResult* result);
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd
