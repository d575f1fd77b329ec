#pragma once
// Sparse Cholesky factorization of a symmetric positive definite matrix behind a small phased
// interface: analyze (once per sparsity pattern) / factorize (values change) / solve (many columns).
// Backends: CHOLMOD supernodal with METIS ordering (default) and Eigen's SimplicialLLT (fallback,
// always available). No backend header appears here. A build with XPD_CHOLMOD_LGPL_ONLY=ON
// (xpd/config.hpp) uses CHOLMOD's simplicial factorization instead of its GPL Supernodal module.
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <memory>
#include <string>
#include <xpd/gpu/factor_view.hpp>

namespace xpd {

enum class CholeskyBackend {
  Cholmod,  ///< SuiteSparse CHOLMOD, METIS ordering; supernodal (simplicial with XPD_CHOLMOD_LGPL_ONLY)
  Eigen     ///< Eigen::SimplicialLLT with AMD ordering (slower; reference/fallback)
};

/// Name of a backend ("cholmod", "eigen").
std::string to_string(CholeskyBackend backend);

/// Statistics of the last analyze/factorize.
struct CholeskyInfo {
  long n = 0;        ///< matrix order
  double nnz_L = 0;  ///< nonzeros of the factor
  double analyze_ms = 0;
  double factorize_ms = 0;
  bool supernodal = false;        ///< CHOLMOD built a supernodal factor (false: simplicial, or Eigen)
  double factor_bytes = 0;        ///< bytes of L (values + row indices) that one triangular sweep reads
  long solve_tasks = 0;           ///< independent subtrees of the tree-parallel solve (0: not used)
  double solve_top_fraction = 0;  ///< share of L's values in the serial top of the tree-parallel solve
};

/// A = L Lᵀ for an SPD matrix A (n × n). Matrices passed in must be symmetric; only their lower
/// triangle is read. Every failure throws SolverError (non-SPD: names the failing column).
class SparseCholesky {
 public:
  explicit SparseCholesky(CholeskyBackend backend = CholeskyBackend::Cholmod);
  ~SparseCholesky();
  SparseCholesky(SparseCholesky&&) noexcept;
  SparseCholesky& operator=(SparseCholesky&&) noexcept;
  SparseCholesky(const SparseCholesky&) = delete;
  SparseCholesky& operator=(const SparseCholesky&) = delete;

  /// Symbolic analysis (fill-reducing ordering, elimination tree) of the pattern of A.
  void analyze(const Eigen::SparseMatrix<double>& A);
  /// Numeric factorization; A must have the pattern given to analyze().
  void factorize(const Eigen::SparseMatrix<double>& A);
  /// analyze() then factorize().
  void compute(const Eigen::SparseMatrix<double>& A) {
    analyze(A);
    factorize(A);
  }
  /// Solves A X = B in place: B is n × k, column-major; all k columns are solved at once (one pass
  /// over the factor). Allocation-free after the first call with a given k (workspaces are kept), so
  /// two solves with one factor must not run concurrently.
  ///
  /// A supernodal CHOLMOD factor is solved tree-parallel by default (subtrees of the supernodal
  /// elimination tree on TBB's threads, the separators above them serially; the result is
  /// bit-identical on any number of threads, and equals CHOLMOD's own serial solve to round-off).
  void solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) const;
  /// true (default): the tree-parallel substitution where the factor is supernodal; false:
  /// CHOLMOD's serial cholmod_l_solve2 (the oracle of the tests). No effect on other backends.
  void set_parallel_solve(bool on);
  bool parallel_solve() const;
  /// The parallel_solve() of factors constructed from now on (process-wide; default true). The
  /// scene regression test turns it off to compare with figures written by the serial solve.
  static void set_default_parallel_solve(bool on);
  /// Returns A⁻¹ B.
  Eigen::MatrixXd solve(const Eigen::MatrixXd& B) const;

  CholeskyBackend backend() const;
  const CholeskyInfo& info() const;
  /// The factor in CHOLMOD's supernodal layout (see SupernodalFactorView; empty for other backends
  /// and for a simplicial factor).
  SupernodalFactorView supernodal_factor() const;
  long rows() const;

  struct Impl;  // backend implementation (private)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd
