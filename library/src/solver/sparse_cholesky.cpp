#include <cholmod.h>
#include <fmt/format.h>

#include <Eigen/SparseCholesky>
#include <atomic>
#include <cstring>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

#include "supernodal_solve.hpp"

namespace xpd {

namespace {
std::atomic<bool> g_default_parallel_solve{true};
}

void SparseCholesky::set_default_parallel_solve(bool on) { g_default_parallel_solve = on; }

std::string to_string(CholeskyBackend backend) { return backend == CholeskyBackend::Cholmod ? "cholmod" : "eigen"; }

struct SparseCholesky::Impl {
  virtual ~Impl() = default;
  virtual void analyze(const Eigen::SparseMatrix<double>& A) = 0;
  virtual void factorize(const Eigen::SparseMatrix<double>& A) = 0;
  virtual void solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) = 0;
  virtual CholeskyBackend backend() const = 0;
  virtual SupernodalFactorView supernodal_factor() const { return {}; }
  virtual void set_parallel_solve(bool on) { parallel_solve = on; }
  CholeskyInfo info;
  bool parallel_solve = g_default_parallel_solve;
};

namespace {

void check_square(const Eigen::SparseMatrix<double>& A) {
  if (A.rows() != A.cols() || A.rows() == 0)
    throw SolverError(
        fmt::format("sparse Cholesky: matrix must be square and non-empty, got {}x{}", A.rows(), A.cols()));
}

// ---------------------------------------------------------------------------------------------
// CHOLMOD (64-bit indices): supernodal, METIS ordering, workspaces reused across solves. With
// XPD_CHOLMOD_LGPL_ONLY the factorization is simplicial (CHOLMOD's Cholesky module, LGPL) and never
// enters the Supernodal module (GPL).
class CholmodImpl final : public SparseCholesky::Impl {
 public:
  CholmodImpl() {
    cholmod_l_start(&c_);
    c_.print = 0;  // errors are reported through SolverError, not printed
    c_.supernodal = XPD_CHOLMOD_LGPL_ONLY ? CHOLMOD_SIMPLICIAL : CHOLMOD_SUPERNODAL;
    // A simplicial factor is LDLᵀ unless asked for LLᵀ, and LDLᵀ accepts negative pivots: ask for
    // LLᵀ so that an indefinite matrix is reported as such, as it is with the supernodal factor.
    c_.final_ll = 1;
    c_.nmethods = 1;
    c_.method[0].ordering = CHOLMOD_METIS;
    c_.postorder = 1;
    check("cholmod_l_start");
  }
  ~CholmodImpl() override {
    if (X_) cholmod_l_free_dense(&X_, &c_);
    if (Y_) cholmod_l_free_dense(&Y_, &c_);
    if (E_) cholmod_l_free_dense(&E_, &c_);
    if (L_) cholmod_l_free_factor(&L_, &c_);
    if (A_) cholmod_l_free_sparse(&A_, &c_);
    cholmod_l_finish(&c_);
  }

  CholeskyBackend backend() const override { return CholeskyBackend::Cholmod; }

  void analyze(const Eigen::SparseMatrix<double>& A) override {
    Timer t;
    check_square(A);
    load_lower(A, /*pattern_changed=*/true);
    tree_.reset();
    if (L_) cholmod_l_free_factor(&L_, &c_);
    L_ = cholmod_l_analyze(A_, &c_);
    check("cholmod_l_analyze");
    if (!L_) throw SolverError("cholmod_l_analyze returned no factor (out of memory?)");
    info.n = static_cast<long>(A.rows());
    info.supernodal = L_->is_super != 0;
    info.analyze_ms = t.elapsed_ms();
  }

  void factorize(const Eigen::SparseMatrix<double>& A) override {
    if (!L_) throw SolverError("SparseCholesky::factorize called before analyze");
    if (A.rows() != info.n) throw SolverError("SparseCholesky::factorize: size differs from analyze");
    Timer t;
    load_lower(A, /*pattern_changed=*/false);
    cholmod_l_factorize(A_, L_, &c_);
    check("cholmod_l_factorize");
    if (c_.status == CHOLMOD_NOT_POSDEF || L_->minor < L_->n) {
      // L->minor is the failing pivot in the fill-reducing order; report the original column.
      const long k = static_cast<long>(L_->minor);
      const auto* perm = static_cast<const SuiteSparse_long*>(L_->Perm);
      const long col = (perm && k < info.n) ? static_cast<long>(perm[k]) : k;
      throw SolverError(
          fmt::format("matrix is not positive definite: CHOLMOD failed at column {} of {} (pivot {} in "
                      "elimination order; a free body, a zero or negative stiffness, or non-finite values)",
                      col, info.n, k));
    }
    info.nnz_L = c_.lnz;
    // The substitution schedule depends on the supernodal structure only; rebuilt here (O(n),
    // negligible beside the factorization) so that it always matches the factor it reads.
    tree_.reset();
    info.solve_tasks = 0;
    info.solve_top_fraction = 0;
    if (L_->is_super && L_->is_ll) {
      try {
        tree_ = std::make_unique<detail::SupernodalSolve>(L_);
        info.solve_tasks = tree_->num_tasks();
        info.solve_top_fraction = tree_->top_fraction();
      } catch (const SolverError&) {
        tree_.reset();  // a factor whose structure the schedule does not expect: CHOLMOD's own solve
      }
    }
    info.factor_bytes = factor_bytes();
    info.factorize_ms = t.elapsed_ms();
  }

  void solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) override {
    if (!L_) throw SolverError("SparseCholesky::solve called before factorize");
    if (B.rows() != info.n)
      throw SolverError(fmt::format("SparseCholesky::solve: rhs has {} rows, matrix {}", B.rows(), info.n));
    if (B.cols() == 0) return;
    if (tree_ && parallel_solve) {
      tree_->solve_in_place(B);
      return;
    }
    if (B.outerStride() != B.rows()) {  // CHOLMOD needs a packed column-major block
      Eigen::MatrixXd tmp = B;
      solve_in_place(tmp);
      B = tmp;
      return;
    }
    cholmod_dense b;
    std::memset(&b, 0, sizeof(b));
    b.nrow = static_cast<size_t>(B.rows());
    b.ncol = static_cast<size_t>(B.cols());
    b.nzmax = b.nrow * b.ncol;
    b.d = b.nrow;
    b.x = B.data();
    b.z = nullptr;
    b.xtype = CHOLMOD_REAL;
    b.dtype = CHOLMOD_DOUBLE;
    // solve2 reuses X, Y, E when their sizes match: no allocation after the first call.
    const int ok = cholmod_l_solve2(CHOLMOD_A, L_, &b, nullptr, &X_, nullptr, &Y_, &E_, &c_);
    check("cholmod_l_solve2");
    if (!ok || !X_) throw SolverError("cholmod_l_solve2 failed");
    std::memcpy(B.data(), X_->x, sizeof(double) * b.nzmax);
  }

  SupernodalFactorView supernodal_factor() const override {
    SupernodalFactorView v;
    if (!L_ || !L_->is_super || !L_->is_ll || L_->xtype != CHOLMOD_REAL || !L_->x) return v;
    static_assert(sizeof(SuiteSparse_long) == sizeof(long), "SuiteSparse_long is long on LP64");
    v.n = static_cast<long>(L_->n);
    v.nsuper = static_cast<long>(L_->nsuper);
    v.super = static_cast<const long*>(L_->super);
    v.pi = static_cast<const long*>(L_->pi);
    v.px = static_cast<const long*>(L_->px);
    v.s = static_cast<const long*>(L_->s);
    v.x = static_cast<const double*>(L_->x);
    v.perm = static_cast<const long*>(L_->Perm);
    return v;
  }

 private:
  // Bytes a triangular solve reads from the factor (values and row indices, once per sweep).
  double factor_bytes() const {
    if (tree_) return tree_->factor_bytes();
    return static_cast<double>(c_.lnz) * (sizeof(double) + sizeof(SuiteSparse_long));
  }

  void check(const char* what) const {
    if (c_.status < CHOLMOD_OK) throw SolverError(fmt::format("{} failed with CHOLMOD status {}", what, c_.status));
  }

  // Copies the lower triangle of A into A_ (stype = -1). The pattern is rebuilt when it changed.
  void load_lower(const Eigen::SparseMatrix<double>& A, bool pattern_changed) {
    const long n = A.rows();
    long nnz = 0;
    for (long j = 0; j < n; ++j)
      for (Eigen::SparseMatrix<double>::InnerIterator it(A, j); it; ++it)
        if (it.row() >= j) ++nnz;
    if (pattern_changed || !A_ || static_cast<long>(A_->nzmax) != nnz) {
      if (A_) cholmod_l_free_sparse(&A_, &c_);
      A_ = cholmod_l_allocate_sparse(n, n, nnz, /*sorted=*/1, /*packed=*/1, /*stype=*/-1, CHOLMOD_REAL, &c_);
      check("cholmod_l_allocate_sparse");
      if (!A_) throw SolverError("cholmod_l_allocate_sparse failed");
    }
    auto* Ap = static_cast<SuiteSparse_long*>(A_->p);
    auto* Ai = static_cast<SuiteSparse_long*>(A_->i);
    auto* Ax = static_cast<double*>(A_->x);
    long k = 0;
    for (long j = 0; j < n; ++j) {
      Ap[j] = k;
      for (Eigen::SparseMatrix<double>::InnerIterator it(A, j); it; ++it) {
        if (it.row() < j) continue;
        Ai[k] = it.row();
        Ax[k] = it.value();
        ++k;
      }
    }
    Ap[n] = k;
  }

  cholmod_common c_;
  cholmod_sparse* A_ = nullptr;
  cholmod_factor* L_ = nullptr;
  cholmod_dense* X_ = nullptr;
  cholmod_dense* Y_ = nullptr;
  cholmod_dense* E_ = nullptr;
  std::unique_ptr<detail::SupernodalSolve> tree_;  // after L_: destroyed first
};

// ---------------------------------------------------------------------------------------------
// Eigen SimplicialLLT: reference backend.
class EigenImpl final : public SparseCholesky::Impl {
 public:
  CholeskyBackend backend() const override { return CholeskyBackend::Eigen; }
  void analyze(const Eigen::SparseMatrix<double>& A) override {
    Timer t;
    check_square(A);
    llt_.analyzePattern(A);
    info.n = static_cast<long>(A.rows());
    analyzed_ = true;
    info.analyze_ms = t.elapsed_ms();
  }
  void factorize(const Eigen::SparseMatrix<double>& A) override {
    if (!analyzed_) throw SolverError("SparseCholesky::factorize called before analyze");
    Timer t;
    llt_.factorize(A);
    if (llt_.info() != Eigen::Success) {
      factored_ = false;
      throw SolverError(
          fmt::format("matrix is not positive definite: Eigen SimplicialLLT failed (order {}; the failing "
                      "column is reported by the cholmod backend)",
                      info.n));
    }
    factored_ = true;
    info.nnz_L = static_cast<double>(llt_.matrixL().nestedExpression().nonZeros());
    info.factorize_ms = t.elapsed_ms();
  }
  void solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) override {
    if (!factored_) throw SolverError("SparseCholesky::solve called before factorize");
    if (B.rows() != info.n)
      throw SolverError(fmt::format("SparseCholesky::solve: rhs has {} rows, matrix {}", B.rows(), info.n));
    for (Eigen::Index j = 0; j < B.cols(); ++j) B.col(j) = llt_.solve(B.col(j));
  }

 private:
  Eigen::SimplicialLLT<Eigen::SparseMatrix<double>, Eigen::Lower, Eigen::AMDOrdering<int>> llt_;
  bool analyzed_ = false;
  bool factored_ = false;
};

}  // namespace

SparseCholesky::SparseCholesky(CholeskyBackend backend) {
  if (backend == CholeskyBackend::Cholmod)
    impl_ = std::make_unique<CholmodImpl>();
  else
    impl_ = std::make_unique<EigenImpl>();
}
SparseCholesky::~SparseCholesky() = default;
SparseCholesky::SparseCholesky(SparseCholesky&&) noexcept = default;
SparseCholesky& SparseCholesky::operator=(SparseCholesky&&) noexcept = default;

void SparseCholesky::analyze(const Eigen::SparseMatrix<double>& A) { impl_->analyze(A); }
void SparseCholesky::factorize(const Eigen::SparseMatrix<double>& A) { impl_->factorize(A); }
void SparseCholesky::solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) const { impl_->solve_in_place(B); }
Eigen::MatrixXd SparseCholesky::solve(const Eigen::MatrixXd& B) const {
  Eigen::MatrixXd X = B;
  impl_->solve_in_place(X);
  return X;
}
CholeskyBackend SparseCholesky::backend() const { return impl_->backend(); }
const CholeskyInfo& SparseCholesky::info() const { return impl_->info; }
SupernodalFactorView SparseCholesky::supernodal_factor() const { return impl_->supernodal_factor(); }
long SparseCholesky::rows() const { return impl_->info.n; }
void SparseCholesky::set_parallel_solve(bool on) { impl_->set_parallel_solve(on); }
bool SparseCholesky::parallel_solve() const { return impl_->parallel_solve; }

}  // namespace xpd
