#pragma once
// The inner loop of DynamicLdlt's numeric pass (private to solver/): one column j of L under a
// rank-R update/downdate (method C1 of Gill, Golub, Murray & Saunders 1974 in LDLᵀ form, Davis &
// Hager 2001's multiple-rank form), R = kLdltRank. For every stored entry e of the column, row
// i = rows[e]:
//
//   for c = 0 … R − 1:   w_ci ← w_ci − w_cj l_ij,   l_ij ← l_ij + β_c w_ci
//
// W is the n × R row-major workspace (row i at W + R i), wj and beta the column's R pivoting
// coefficients (0 in unused slots: those steps are exact identities). Entries are independent, so
// the loop can run several at once; the 2R steps of one entry stay in this order.
namespace xpd::detail {

/// Columns per numeric pass (the workspace's row length).
inline constexpr int kLdltRank = 8;

using LdltColumnKernel = void (*)(const int* rows, double* vals, int count, double* W, const double* wj,
                                  const double* beta);

/// Plain C++ (the compiler's baseline instruction set; no FMA contraction at -O2 on x86-64).
void ldlt_column_scalar(const int* rows, double* vals, int count, double* W, const double* wj, const double* beta);

/// The fastest kernel this CPU runs: AVX2 + FMA (4 entries per step, two such blocks interleaved,
/// W rows transposed in registers and prefetched ahead; each step fused, so its rounding differs
/// from the scalar kernel's in the last bit) where the CPU has them, else the scalar one.
LdltColumnKernel ldlt_column_best();

/// Whether ldlt_column_best() is the vector kernel.
bool ldlt_column_vector_available();

}  // namespace xpd::detail

#include <atomic>
#include <memory>

namespace xpd::detail {

/// Splits long columns of a numeric pass between the calling thread and one helper task (TBB):
/// the pass is sequential over its columns, but a column's entries are independent, so the caller
/// applies the kernel to the first half while the helper applies it to the second, and waits for
/// it before the next column (whose pivot reads a W row either half may have written). Both
/// halves run the same kernel on the same entries as one call would, so results are bitwise the
/// same with or without the helper. Never waits on a thread that is not there: a half the helper
/// has not claimed by the time the caller finishes its own is done by the caller (so it also works
/// when TBB runs the helper late, or never).
class ColumnSplitter {
 public:
  /// Uses a helper when `enabled` and TBB may run ≥ 2 threads here (started on the first column
  /// long enough to split).
  explicit ColumnSplitter(bool enabled);
  ~ColumnSplitter();  ///< stops the helper and waits for it
  ColumnSplitter(const ColumnSplitter&) = delete;
  ColumnSplitter& operator=(const ColumnSplitter&) = delete;

  /// kernel(rows, vals, count, W, wj, beta), split in two when the helper runs and count is long.
  void apply(LdltColumnKernel kernel, const int* rows, double* vals, int count, double* W, const double* wj,
             const double* beta);

  /// Columns handed to the helper (taken by it or, when it did not come, by the caller).
  long splits() const;
  /// Of those, the ones the helper ran.
  long helped() const;

  /// Columns shorter than this run whole on the caller (a hand-over costs about a cache-line round
  /// trip each way).
  static constexpr int kMinSplit = 384;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd::detail
