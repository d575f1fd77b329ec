// Schur-complement localisation on one CHOLMOD supernodal factor; dense kernels via BLAS/LAPACK.
// With XPD_CHOLMOD_LGPL_ONLY the factor is a simplicial LLᵀ (no GPL Supernodal module): the same
// blocks, read from compressed columns instead of supernodes.
#include <cholmod.h>

#include <Eigen/LU>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/schur.hpp>

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda, double* b,
             const int* ldb, int* info);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dtrmm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m, const int* n,
            const double* alpha, const double* a, const int* lda, double* b, const int* ldb);
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
void dsymm_(const char* side, const char* uplo, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* b, const int* ldb, const double* beta, double* c, const int* ldc);
}

#include "schur_update.hpp"
#include "supernodal_solve.hpp"
#include "symmetric_kernel.hpp"

namespace xpd {
namespace {

// Supernodal (GPL module, the default) or simplicial (XPD_CHOLMOD_LGPL_ONLY) factor.
constexpr int kFactorKind = XPD_CHOLMOD_LGPL_ONLY ? CHOLMOD_SIMPLICIAL : CHOLMOD_SUPERNODAL;

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Memory-bound kernels (copies, gemv-like products, column gathers) run far below the BLAS-3 flop
// rate of dpotrf; weight them in the cost model of choose_method(). Calibrated on box:48 (m≈3900).
constexpr double kMemoryWeight = 8.0;

// out = alpha · A · x (+ out when accumulate) for a symmetric m × m A of which the lower triangle
// is read, and x, out m × 3 (x with leading dimension ldx ≥ m, out contiguous). The Woodbury
// application and its refinement residual are such products with Σ⁻¹ and Σ (m = 2,134 on the face
// scene: 36 MB per matrix), by solver/symmetric_kernel.hpp: each stored entry read once for the
// three columns, where three dsymv calls read the triangle three times (and dsymm, before them,
// packed the whole matrix on every call: 13% of a face run); BENCHMARKS.md, "IPC", gives both.
void symmetric_times3(const Eigen::MatrixXd& a, const double* x, int ldx, double alpha, double* out, bool accumulate,
                      std::vector<double>& scratch) {
  detail::symmetric_times3(static_cast<int>(a.rows()), a.data(), x, ldx, alpha, out, accumulate, scratch);
}

std::string gib(std::size_t bytes) { return std::to_string(static_cast<double>(bytes) / double(1u << 30)) + " GiB"; }

// A cholmod_dense header viewing caller memory (column-major, leading dimension = rows).
cholmod_dense dense_view(const double* data, Eigen::Index rows, Eigen::Index cols) {
  cholmod_dense d{};
  d.nrow = static_cast<size_t>(rows);
  d.ncol = static_cast<size_t>(cols);
  d.nzmax = d.nrow * d.ncol;
  d.d = d.nrow;
  d.x = const_cast<double*>(data);
  d.z = nullptr;
  d.xtype = CHOLMOD_REAL;
  d.dtype = CHOLMOD_DOUBLE;
  return d;
}

}  // namespace

// Per-state scratch of the solves: its own CHOLMOD common (cholmod_solve2 writes status and
// workspace into it) and dense blocks sized on first use, so that the factorization is read only.
struct SchurWorkspace::Impl {
  cholmod_common c{};
  cholmod_dense* X = nullptr;  // cholmod_solve2 workspace, reused across calls
  cholmod_dense* Y = nullptr;
  cholmod_dense* E = nullptr;
  SchurSolveMethod last_method = SchurSolveMethod::DenseRefactor;
  SchurSolveTimings last_timings;
  Eigen::MatrixXd fwd_b, fwd_g2f, bwd_z, bwd_t, sol_u, h;
  std::vector<SchurProxy> active;
  std::vector<char> seen;  // choose_method
  std::vector<int> wb_slot, wb_nodes;
  std::vector<std::array<int, kSchurProxySlots>> wb_local;
  Eigen::MatrixXd wb_gc, wb_vn, wb_b, wb_y, wb_s, wb_t, wb_h;
  Eigen::MatrixXd lr_b, lr_bu, lr_s, lr_res, lr_du, lr_binv;  // solve_low_rank_system
  Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor> lr_vn, lr_wq, lr_y;
  Eigen::VectorXd lr_t, lr_t2;
  std::vector<char> lr_seen;
  std::vector<double> lr_sym;                        // the slices of symmetric_times3
  std::vector<int> lr_colptr, lr_slots;              // nonzero node slots of each column of U
  detail::SupernodalSolveT<int>::Workspace tree_ws;  // tree-parallel partial sweeps

  Impl() { cholmod_start(&c); }
  ~Impl() {
    cholmod_free_dense(&X, &c);
    cholmod_free_dense(&Y, &c);
    cholmod_free_dense(&E, &c);
    cholmod_finish(&c);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
};

SchurWorkspace::SchurWorkspace() : impl_(std::make_unique<Impl>()) {}
SchurWorkspace::~SchurWorkspace() = default;
SchurWorkspace::SchurWorkspace(SchurWorkspace&&) noexcept = default;
SchurWorkspace& SchurWorkspace::operator=(SchurWorkspace&&) noexcept = default;
SchurSolveMethod SchurWorkspace::last_method() const { return impl_->last_method; }
const SchurSolveTimings& SchurWorkspace::last_timings() const { return impl_->last_timings; }

struct SchurFactorization::Impl {
  cholmod_common c{};
  cholmod_sparse* A = nullptr;  // lower triangle of K, original order (values refreshed by refactorize)
  cholmod_factor* L = nullptr;  // supernodal L of P K Pᵀ
  // Tree-parallel partial sweeps over the x1 supernodes (null: CHOLMOD's full solves).
  std::unique_ptr<detail::SupernodalSolveT<int>> tree;
  // After the first modify(): the updatable factor of K (METIS order) that every solve uses; L, A,
  // tree and l22 are then released.
  std::unique_ptr<DynamicLdlt> dyn;
  SchurWorkspace own;  // workspace of the single-user overloads

  int n = 0, m = 0, n1 = 0;
  std::vector<int> region;     // x2, region-local order
  std::vector<int> region_of;  // node -> region index or -1
  std::vector<int> perm;       // factor position -> node
  std::vector<int> fpos2;      // region-local index -> position inside the trailing block (0..m-1)
  SchurOptions options;
  SchurStats stats;

  Eigen::MatrixXd sigma;      // Σ, full symmetric
  Eigen::MatrixXd l22;        // chol(Σ) in factor order (lower): Σ(i, j) = (L22 L22ᵀ)(fpos2[i], fpos2[j])
  Eigen::MatrixXd sigma_inv;  // Σ⁻¹ in region order, full symmetric (empty unless precompute_inverse)
  Eigen::MatrixXd h_work;     // scratch of the factorization (Σ and Σ⁻¹ in factor order)

  Impl() { cholmod_start(&c); }
  ~Impl() {
    cholmod_free_factor(&L, &c);
    cholmod_free_sparse(&A, &c);
    cholmod_finish(&c);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void check_cholmod(const char* what) const {
    if (c.status < CHOLMOD_OK)
      throw SolverError(std::string("Schur factorization: CHOLMOD ") + what + " failed (status " +
                        std::to_string(c.status) + ")");
  }

  // Lower triangle of `lower` (already lower-only, compressed) as a CHOLMOD stype = −1 matrix.
  cholmod_sparse* to_cholmod(const Eigen::SparseMatrix<double>& lower) {
    const auto nz = static_cast<size_t>(lower.nonZeros());
    cholmod_sparse* s =
        cholmod_allocate_sparse(static_cast<size_t>(lower.rows()), static_cast<size_t>(lower.cols()), nz,
                                /*sorted=*/1, /*packed=*/1, /*stype=*/-1, CHOLMOD_REAL, &c);
    check_cholmod("allocate_sparse");
    std::memcpy(s->p, lower.outerIndexPtr(), sizeof(int) * static_cast<size_t>(lower.cols() + 1));
    std::memcpy(s->i, lower.innerIndexPtr(), sizeof(int) * nz);
    std::memcpy(s->x, lower.valuePtr(), sizeof(double) * nz);
    return s;
  }

  // Why not a CHOLMOD constrained ordering of the whole K: SuiteSparse 5.12 offers constraint sets
  // only through CAMD / CCOLAMD (minimum degree), and its nested dissection (NESDIS) takes none.
  // On box:48 with m = 3783, CAMD with x2 last gives nnz(L) = 105M, METIS on K11 + x2 last 59.7M,
  // unconstrained METIS 49.4M. METIS never sees x2, which is the top-level separator anyway.
  //
  // METIS on K11 (x1 only, postordered), then x2 ordered by CAMD on K22 with the interface nodes
  // (those coupled to x1 in K) constrained last. Why: Σ is dense only on the interface; the x2
  // nodes coupled to x2 alone (e.g. the top node layer) keep sparse columns in L22 when eliminated
  // first (box:48, m = 3783: nnz(L) 62.9M in region order vs 59.7M).
  void order(const Eigen::SparseMatrix<double>& k_lower) {
    std::vector<int> x1;
    x1.reserve(static_cast<size_t>(n1));
    for (int i = 0; i < n; ++i)
      if (region_of[static_cast<size_t>(i)] < 0) x1.push_back(i);
    std::vector<int> new_of(static_cast<size_t>(n), -1);
    for (int p = 0; p < n1; ++p) new_of[static_cast<size_t>(x1[static_cast<size_t>(p)])] = p;

    perm.assign(static_cast<size_t>(n), 0);
    if (n1 > 0) {
      std::vector<Eigen::Triplet<double>> trip;
      trip.reserve(static_cast<size_t>(k_lower.nonZeros()));
      for (int j = 0; j < k_lower.outerSize(); ++j)
        for (Eigen::SparseMatrix<double>::InnerIterator it(k_lower, j); it; ++it) {
          const int a = new_of[static_cast<size_t>(it.row())], b = new_of[static_cast<size_t>(it.col())];
          if (a >= 0 && b >= 0) trip.emplace_back(a, b, it.value());
        }
      Eigen::SparseMatrix<double> k11(n1, n1);
      k11.setFromTriplets(trip.begin(), trip.end());
      k11.makeCompressed();
      cholmod_sparse* k11c = to_cholmod(k11);
      std::vector<int> p11(static_cast<size_t>(n1));
      const int ok = cholmod_metis(k11c, nullptr, 0, /*postorder=*/1, p11.data(), &c);
      cholmod_free_sparse(&k11c, &c);
      if (!ok)
        throw SolverError("Schur factorization: METIS ordering of K11 failed (status " + std::to_string(c.status) +
                          ")");
      for (int p = 0; p < n1; ++p) perm[static_cast<size_t>(p)] = x1[static_cast<size_t>(p11[static_cast<size_t>(p)])];
    }
    fpos2.assign(static_cast<size_t>(m), 0);
    std::vector<int> ord(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) ord[static_cast<size_t>(i)] = i;
    if (m > 1) {
      std::vector<int> iface(static_cast<size_t>(m), 0);
      std::vector<Eigen::Triplet<double>> trip;
      for (int j = 0; j < k_lower.outerSize(); ++j)
        for (Eigen::SparseMatrix<double>::InnerIterator it(k_lower, j); it; ++it) {
          const int a = region_of[static_cast<size_t>(it.row())], b = region_of[static_cast<size_t>(j)];
          if (a >= 0 && b >= 0)
            trip.emplace_back(a, b, it.value());
          else if (a >= 0)
            iface[static_cast<size_t>(a)] = 1;
          else if (b >= 0)
            iface[static_cast<size_t>(b)] = 1;
        }
      Eigen::SparseMatrix<double> k22(m, m);
      k22.setFromTriplets(trip.begin(), trip.end());
      k22.makeCompressed();
      cholmod_sparse* k22c = to_cholmod(k22);
      const int ok = cholmod_camd(k22c, nullptr, 0, iface.data(), ord.data(), &c);
      cholmod_free_sparse(&k22c, &c);
      if (!ok)
        throw SolverError("Schur factorization: CAMD ordering of K22 failed (status " + std::to_string(c.status) + ")");
    }
    for (int q = 0; q < m; ++q) {
      const int i = ord[static_cast<size_t>(q)];
      perm[static_cast<size_t>(n1 + q)] = region[static_cast<size_t>(i)];
      fpos2[static_cast<size_t>(i)] = q;
    }
  }

  // dst(i, j) = src(fpos2[i], fpos2[j]): a factor-order m × m matrix in region order.
  void to_region_order(const Eigen::MatrixXd& src, Eigen::MatrixXd& dst) const {
    dst.resize(m, m);
    for (int j = 0; j < m; ++j) {
      const double* col = src.data() + static_cast<std::ptrdiff_t>(fpos2[static_cast<size_t>(j)]) * m;
      double* out = dst.data() + static_cast<std::ptrdiff_t>(j) * m;
      for (int i = 0; i < m; ++i) out[i] = col[fpos2[static_cast<size_t>(i)]];
    }
  }
  // Rows of a region-order m × r block into factor order, and back (out resized only when needed).
  void rows_to_factor(const Eigen::Ref<const Eigen::MatrixXd>& a, Eigen::MatrixXd& out) const {
    if (out.rows() != m || out.cols() != a.cols()) out.resize(m, a.cols());
    for (int i = 0; i < m; ++i) out.row(fpos2[static_cast<size_t>(i)]) = a.row(i);
  }
  void rows_to_region(const Eigen::Ref<const Eigen::MatrixXd>& a, Eigen::MatrixXd& out) const {
    if (out.rows() != m || out.cols() != a.cols()) out.resize(m, a.cols());
    for (int i = 0; i < m; ++i) out.row(i) = a.row(fpos2[static_cast<size_t>(i)]);
  }

  // The partial substitutions need only the x1 columns of L (L11 and L21): a supernodal factor
  // with a supernode starting at column n1 lets them run over the supernodes before it, tree-
  // parallel (solver/supernodal_solve.hpp), instead of a full CHOLMOD solve that also sweeps the
  // dense trailing block L22 (m²/2 values) and a product with L22 that undoes it. Null: the
  // CHOLMOD path (option off, simplicial factor, or no supernode boundary at n1).
  void make_partial_sweeps() {
    tree.reset();
    if (!options.partial_sweeps || !L->is_super || !L->is_ll) return;
    try {
      tree = std::make_unique<detail::SupernodalSolveT<int>>(L);
    } catch (const SolverError&) {
      return;
    }
    if (tree->supernode_starting_at(n1) < 0) tree.reset();
  }

  void numeric_factor() {
    auto t0 = Clock::now();
    cholmod_factorize(A, L, &c);
    if (c.status == CHOLMOD_NOT_POSDEF)
      throw SolverError("Schur factorization: K is not positive definite (CHOLMOD pivot failed at factor column " +
                        std::to_string(L->minor) + " of " + std::to_string(n) + ")");
    check_cholmod("factorize");
    stats.factor_ms = ms_since(t0);
    make_partial_sweeps();
    stats.partial_sweeps = tree != nullptr;
    stats.partial_sweep_tasks = tree ? tree->num_tasks() : 0;
    t0 = Clock::now();
    extract_l22();
    form_sigma();
    stats.schur_ms = ms_since(t0);
    if (options.precompute_inverse && m > 0) {
      t0 = Clock::now();
      form_inverse();
      stats.inverse_ms = ms_since(t0);
    }
  }

  // nnz of the L21 and L22 blocks from the supernodal pattern (row r of a supernode's list is
  // nonzero in every column c ≤ r of that supernode).
  void count_blocks() {
    if (!L->is_super) {
      count_blocks_simplicial();
      return;
    }
    const auto* super = static_cast<const int*>(L->super);
    const auto* pi = static_cast<const int*>(L->pi);
    const auto* ls = static_cast<const int*>(L->s);
    double l21 = 0, l22n = 0;
    for (size_t s = 0; s < L->nsuper; ++s) {
      const int k1 = super[s], k2 = super[s + 1];
      for (int ii = pi[s]; ii < pi[s + 1]; ++ii) {
        const int row = ls[ii];
        if (row < n1) continue;
        for (int j = k1; j < k2 && j <= row; ++j) (j < n1 ? l21 : l22n) += 1;
      }
    }
    stats.nnz_L21 = l21;
    stats.nnz_L22 = l22n;
  }

  // L22 = the trailing m × m block of the supernodal L. Columns j ≥ n1 of L only have rows ≥ j ≥ n1,
  // so they are copied straight out of the supernodes' dense column-major blocks: supernode s holds
  // columns Super[s]..Super[s+1]−1, rows Ls[Lpi[s]..Lpi[s+1]−1], values at Lx[Lpx[s]] with leading
  // dimension nsrow (the first nscol rows are the supernode's own columns; entries above the
  // diagonal are padding and skipped).
  void extract_l22() {
    l22.setZero(m, m);
    count_blocks();
    if (m == 0) return;
    if (!L->is_super) {
      extract_l22_simplicial();
      return;
    }
    const auto* super = static_cast<const int*>(L->super);
    const auto* pi = static_cast<const int*>(L->pi);
    const auto* px = static_cast<const int*>(L->px);
    const auto* ls = static_cast<const int*>(L->s);
    const auto* lx = static_cast<const double*>(L->x);
    for (size_t s = 0; s < L->nsuper; ++s) {
      const int k1 = super[s], k2 = super[s + 1];
      if (k2 <= n1) continue;
      const int nsrow = pi[s + 1] - pi[s];
      for (int j = std::max(k1, n1); j < k2; ++j) {
        const double* col = lx + px[s] + static_cast<std::ptrdiff_t>(j - k1) * nsrow;
        for (int ii = 0; ii < nsrow; ++ii) {
          const int row = ls[pi[s] + ii];
          if (row >= j) l22(row - n1, j - n1) = col[ii];
        }
      }
    }
  }

  // Simplicial LLᵀ (XPD_CHOLMOD_LGPL_ONLY): column j holds rows Li[Lp[j] .. Lp[j]+Lnz[j]−1]
  // (diagonal first) with values Lx at the same positions.
  void count_blocks_simplicial() {
    const auto* lp = static_cast<const int*>(L->p);
    const auto* li = static_cast<const int*>(L->i);
    const auto* lnz = static_cast<const int*>(L->nz);
    double l21 = 0, l22n = 0;
    for (int j = 0; j < n; ++j)
      for (int k = lp[j]; k < lp[j] + lnz[j]; ++k)
        if (li[k] >= n1) (j < n1 ? l21 : l22n) += 1;
    stats.nnz_L21 = l21;
    stats.nnz_L22 = l22n;
  }
  void extract_l22_simplicial() {
    const auto* lp = static_cast<const int*>(L->p);
    const auto* li = static_cast<const int*>(L->i);
    const auto* lnz = static_cast<const int*>(L->nz);
    const auto* lx = static_cast<const double*>(L->x);
    for (int j = n1; j < n; ++j)
      for (int k = lp[j]; k < lp[j] + lnz[j]; ++k)
        if (li[k] >= j) l22(li[k] - n1, j - n1) = lx[k];
  }

  // Σ = L22 L22ᵀ (dsyrk, lower, factor order; the H workspace serves as scratch), mirrored, then
  // gathered into region order.
  void form_sigma() {
    sigma.setZero(m, m);
    if (m == 0) return;
    h_work.resize(m, m);
    const double one = 1.0, zero = 0.0;
    dsyrk_("L", "N", &m, &m, &one, l22.data(), &m, &zero, h_work.data(), &m);
    detail::mirror_lower(h_work);
    to_region_order(h_work, sigma);
  }

  // Σ⁻¹ = L22⁻ᵀ L22⁻¹ (dpotri on a copy of L22), mirrored.
  void form_inverse() {
    h_work = l22;
    int info = 0;
    dpotri_("L", &m, h_work.data(), &m, &info);
    if (info != 0)
      throw SolverError("Schur factorization: inverting the Schur complement failed (dpotri info " +
                        std::to_string(info) + ")");
    detail::mirror_lower(h_work);
    to_region_order(h_work, sigma_inv);
  }

  // The switch to the updatable factor (first modify()): Σ⁻¹ formed if it was not, the DynamicLdlt
  // built from the stored lower triangle of K, the CHOLMOD factor and L22 released.
  void make_updatable() {
    if (dyn) return;
    const auto t0 = Clock::now();
    if (sigma_inv.rows() != m && m > 0) form_inverse();
    const auto* p = static_cast<const int*>(A->p);
    const Eigen::Map<const Eigen::SparseMatrix<double>> lower(n, n, p[n], p, static_cast<const int*>(A->i),
                                                              static_cast<const double*>(A->x));
    auto f = std::make_unique<DynamicLdlt>();
    f->compute(Eigen::SparseMatrix<double>(lower));
    dyn = std::move(f);
    tree.reset();
    cholmod_free_factor(&L, &c);
    cholmod_free_sparse(&A, &c);
    l22 = Eigen::MatrixXd();
    perm.clear();
    stats.updatable = true;
    stats.partial_sweeps = false;
    stats.partial_sweep_tasks = 0;
    stats.nnz_L = dyn->info().nnz_L;
    stats.updatable_ms = ms_since(t0);
  }

  // out (m × r) = a (m × r, region order) times the symmetric m × m `s` (Σ or Σ⁻¹, lower read).
  void symmetric_product(const Eigen::MatrixXd& s, const Eigen::MatrixXd& a, Eigen::MatrixXd& out) const {
    const int r = static_cast<int>(a.cols());
    if (out.rows() != m || out.cols() != r) out.resize(m, r);
    const double one = 1.0, zero = 0.0;
    int mm = m;
    if (m > 0 && r > 0) dsymm_("L", "L", &mm, &r, &one, s.data(), &mm, a.data(), &mm, &zero, out.data(), &mm);
  }

  // cholmod_solve2 of `sys` on b (n × r, already in the order `sys` expects); result in X.
  const double* cholmod_solve_into(SchurWorkspace::Impl& w, int sys, const double* b, Eigen::Index r) const {
    cholmod_dense bv = dense_view(b, n, r);
    const int ok = cholmod_solve2(sys, L, &bv, nullptr, &w.X, nullptr, &w.Y, &w.E, &w.c);
    if (!ok || w.c.status < CHOLMOD_OK)
      throw SolverError("Schur factorization: CHOLMOD solve failed (status " + std::to_string(w.c.status) + ")");
    return static_cast<const double*>(w.X->x);
  }

  // H u2 = g with H = L22 L22ᵀ = Σ (no proxies).
  void solve_sigma(SchurWorkspace::Impl& w, const Eigen::Ref<const Eigen::MatrixXd>& g, Eigen::MatrixXd& out) const {
    PhaseTimer pt;
    if (dyn) {  // no L22 kept: u2 = Σ⁻¹ g
      w.sol_u = g;
      symmetric_product(sigma_inv, w.sol_u, out);
      pt.lap(w.last_timings.solve);
      return;
    }
    Eigen::MatrixXd& sol_u = w.sol_u;
    rows_to_factor(g, sol_u);
    const int r = static_cast<int>(sol_u.cols());
    int info = 0;
    if (m > 0 && r > 0) dpotrs_("L", &m, &r, l22.data(), &m, sol_u.data(), &m, &info);
    rows_to_region(sol_u, out);
    pt.lap(w.last_timings.solve);
  }

  void solve_refactor(SchurWorkspace::Impl& w, const std::vector<SchurProxy>& proxies,
                      const Eigen::Ref<const Eigen::MatrixXd>& g, Eigen::MatrixXd& u) const {
    // H (lower) = Σ (lower) + Σ_j c_j w_j w_jᵀ, then dpotrf/dpotrs.
    PhaseTimer pt;
    Eigen::MatrixXd& h_work = w.h;
    SchurSolveTimings& last_timings = w.last_timings;
    if (h_work.rows() != m) h_work.resize(m, m);
    for (int j = 0; j < m; ++j)
      std::memcpy(h_work.data() + static_cast<std::ptrdiff_t>(j) * m + j,
                  sigma.data() + static_cast<std::ptrdiff_t>(j) * m + j, sizeof(double) * static_cast<size_t>(m - j));
    for (const SchurProxy& p : proxies)
      for (int a = 0; a < kSchurProxySlots; ++a)
        for (int b = 0; b < kSchurProxySlots; ++b) {
          const int ia = p.nodes[static_cast<size_t>(a)], ib = p.nodes[static_cast<size_t>(b)];
          if (ia >= ib)
            h_work(ia, ib) += p.stiffness * p.weights[static_cast<size_t>(a)] * p.weights[static_cast<size_t>(b)];
        }
    pt.lap(last_timings.update);
    int info = 0;
    dpotrf_("L", &m, h_work.data(), &m, &info);
    pt.lap(last_timings.factor);
    if (info != 0)
      throw SolverError("Schur collision system: H = Σ + WᵀCW is not positive definite (dpotrf failed at column " +
                        std::to_string(info) + " of m = " + std::to_string(m) + ")");
    u = g;  // no reallocation when u already has g's size
    const int r = static_cast<int>(u.cols());
    if (r > 0) dpotrs_("L", &m, &r, h_work.data(), &m, u.data(), &m, &info);
    pt.lap(last_timings.solve);
  }

  // Woodbury restricted to the q distinct nodes N touched by the proxies (W = W_N E_Nᵀ):
  //   v_N = (Σ⁻¹ g)[N] and B = Σ⁻¹[N, N]   one pass over the q columns Σ⁻¹(:, N) (symmetric),
  //   S = C⁻¹ + W_N B W_Nᵀ (k × k), s = S⁻¹ W_N v_N,
  //   u2 = Σ⁻¹ (g − Wᵀ s)                 one dsymm (reads the lower triangle of Σ⁻¹).
  // Equal to Σ⁻¹ g − Σ⁻¹Wᵀ (C⁻¹ + WΣ⁻¹Wᵀ)⁻¹ W Σ⁻¹ g; memory traffic m q + m²/2 doubles instead of
  // m²/2 + 6 m k for the explicit Z = Σ⁻¹Wᵀ.
  // Scratch: sized with resize() / assign(), which keep their storage once it is large enough.
  void solve_woodbury(SchurWorkspace::Impl& w, const std::vector<SchurProxy>& proxies,
                      const Eigen::Ref<const Eigen::MatrixXd>& g, Eigen::MatrixXd& u) const {
    PhaseTimer pt;
    SchurSolveTimings& last_timings = w.last_timings;
    Eigen::MatrixXd &wb_gc = w.wb_gc, &wb_vn = w.wb_vn, &wb_b = w.wb_b, &wb_y = w.wb_y, &wb_s = w.wb_s, &wb_t = w.wb_t,
                    &wb_h = w.wb_h;
    std::vector<int>&wb_slot = w.wb_slot, &wb_nodes = w.wb_nodes;
    std::vector<std::array<int, kSchurProxySlots>>& wb_local = w.wb_local;
    const int k = static_cast<int>(proxies.size());
    const int r = static_cast<int>(g.cols());
    Eigen::MatrixXd& gc = wb_gc;
    gc = g;  // contiguous, leading dimension m
    // N and the proxies' slots in it.
    std::vector<int>& slot = wb_slot;
    std::vector<int>& nodes_n = wb_nodes;
    std::vector<std::array<int, kSchurProxySlots>>& local = wb_local;
    slot.assign(static_cast<size_t>(m), -1);
    nodes_n.clear();
    local.resize(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i)
      for (int a = 0; a < kSchurProxySlots; ++a) {
        const int node = proxies[static_cast<size_t>(i)].nodes[static_cast<size_t>(a)];
        int& sl = slot[static_cast<size_t>(node)];
        if (sl < 0) {
          sl = static_cast<int>(nodes_n.size());
          nodes_n.push_back(node);
        }
        local[static_cast<size_t>(i)][static_cast<size_t>(a)] = sl;
      }
    const int q = static_cast<int>(nodes_n.size());
    // One pass over Σ⁻¹(:, N): v_N (q × r) and B (q × q).
    Eigen::MatrixXd& v_n = wb_vn;
    Eigen::MatrixXd& b = wb_b;
    v_n.resize(q, r);
    b.resize(q, q);
    for (int c = 0; c < q; ++c) {
      const auto col = sigma_inv.col(nodes_n[static_cast<size_t>(c)]);
      v_n.row(c).noalias() = col.transpose() * gc;
      for (int a = 0; a < q; ++a) b(a, c) = col(nodes_n[static_cast<size_t>(a)]);
    }
    // Y = B W_Nᵀ (q × k), then S = C⁻¹ + W_N Y (lower triangle; gathers stay in one column of Y).
    Eigen::MatrixXd& y = wb_y;
    y.setZero(q, k);
    for (int j = 0; j < k; ++j)
      for (int a = 0; a < kSchurProxySlots; ++a) {
        const double w = proxies[static_cast<size_t>(j)].weights[static_cast<size_t>(a)];
        if (w != 0.0) y.col(j) += w * b.col(local[static_cast<size_t>(j)][static_cast<size_t>(a)]);
      }
    Eigen::MatrixXd& s = wb_s;
    s.resize(k, k);
    for (int j = 0; j < k; ++j) {
      const double* yj = y.data() + static_cast<std::ptrdiff_t>(j) * q;
      for (int i = j; i < k; ++i) {
        double acc = 0.0;
        for (int a = 0; a < kSchurProxySlots; ++a)
          acc += proxies[static_cast<size_t>(i)].weights[static_cast<size_t>(a)] *
                 yj[local[static_cast<size_t>(i)][static_cast<size_t>(a)]];
        s(i, j) = acc;
      }
      s(j, j) += 1.0 / proxies[static_cast<size_t>(j)].stiffness;
    }
    // t = W_N v_N; s ← S⁻¹ t.
    Eigen::MatrixXd& t = wb_t;
    t.setZero(k, r);
    for (int i = 0; i < k; ++i)
      for (int a = 0; a < kSchurProxySlots; ++a)
        t.row(i) += proxies[static_cast<size_t>(i)].weights[static_cast<size_t>(a)] *
                    v_n.row(local[static_cast<size_t>(i)][static_cast<size_t>(a)]);
    pt.lap(last_timings.update);
    int info = 0;
    dpotrf_("L", &k, s.data(), &k, &info);
    pt.lap(last_timings.factor);
    if (info != 0)
      throw SolverError("Schur collision system: Woodbury capacitance C⁻¹ + WΣ⁻¹Wᵀ is not positive definite (k = " +
                        std::to_string(k) + ")");
    dpotrs_("L", &k, &r, s.data(), &k, t.data(), &k, &info);
    // u2 = Σ⁻¹ (g − Wᵀ s).
    Eigen::MatrixXd& h = wb_h;
    h = gc;
    for (int i = 0; i < k; ++i)
      for (int a = 0; a < kSchurProxySlots; ++a)
        h.row(proxies[static_cast<size_t>(i)].nodes[static_cast<size_t>(a)]) -=
            proxies[static_cast<size_t>(i)].weights[static_cast<size_t>(a)] * t.row(i);
    if (u.rows() != m || u.cols() != r) u.resize(m, r);
    const double one = 1.0, zero = 0.0;
    dsymm_("L", "L", &m, &r, &one, sigma_inv.data(), &m, h.data(), &m, &zero, u.data(), &m);
    pt.lap(last_timings.solve);
  }
};

SchurFactorization::SchurFactorization(const Eigen::SparseMatrix<double>& K, const std::vector<int>& region_nodes,
                                       const SchurOptions& options)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  if (K.rows() != K.cols())
    throw SolverError("Schur factorization: K is " + std::to_string(K.rows()) + " × " + std::to_string(K.cols()) +
                      ", not square");
  d.options = options;
  d.n = static_cast<int>(K.rows());
  d.m = static_cast<int>(region_nodes.size());
  d.n1 = d.n - d.m;
  d.region = region_nodes;
  d.region_of.assign(static_cast<size_t>(d.n), -1);
  for (int i = 0; i < d.m; ++i) {
    const int node = region_nodes[static_cast<size_t>(i)];
    if (node < 0 || node >= d.n)
      throw SolverError("Schur factorization: region node " + std::to_string(node) + " out of range [0, " +
                        std::to_string(d.n) + ")");
    if (d.region_of[static_cast<size_t>(node)] >= 0)
      throw SolverError("Schur factorization: region node " + std::to_string(node) + " listed twice");
    d.region_of[static_cast<size_t>(node)] = i;
  }
  d.stats.n = d.n;
  d.stats.m = d.m;

  // Budget check before any dense m × m allocation: Σ, L22, the H workspace (+ Σ⁻¹).
  const std::size_t copies = 3 + (options.precompute_inverse ? 1 : 0);
  const std::size_t bytes = copies * static_cast<std::size_t>(d.m) * static_cast<std::size_t>(d.m) * sizeof(double);
  if (bytes > options.dense_memory_budget_bytes)
    throw SolverError("Schur factorization: collision-prone region of m = " + std::to_string(d.m) + " nodes needs " +
                      gib(bytes) + " for " + std::to_string(copies) + " dense m × m matrices, over the budget of " +
                      gib(options.dense_memory_budget_bytes) + " (" +
                      std::to_string(options.dense_memory_budget_bytes) +
                      " bytes); shrink the region or raise dense_memory_budget_bytes");
  d.stats.dense_bytes = bytes;

  auto t0 = Clock::now();
  Eigen::SparseMatrix<double> lower = K.triangularView<Eigen::Lower>();
  lower.makeCompressed();
  d.A = d.to_cholmod(lower);

  if (options.compare_unconstrained_ordering) {
    d.c.nmethods = 1;
    d.c.method[0].ordering = CHOLMOD_METIS;
    d.c.postorder = 1;
    d.c.supernodal = kFactorKind;
    cholmod_factor* ref = cholmod_analyze(d.A, &d.c);
    d.check_cholmod("analyze (unconstrained METIS)");
    d.stats.nnz_L_unconstrained = d.c.lnz;
    cholmod_free_factor(&ref, &d.c);
  }

  d.order(lower);
  // The given ordering must survive analysis unchanged so that x2 stays last: no postorder (the x1
  // part is already postordered by cholmod_metis on K11, and the etree of L11 is that of K11).
  d.c.nmethods = 1;
  d.c.method[0].ordering = CHOLMOD_GIVEN;
  d.c.postorder = 0;
  d.c.supernodal = kFactorKind;
  if (kFactorKind == CHOLMOD_SIMPLICIAL) d.c.final_ll = 1;  // simplicial factors are LDLᵀ unless asked for LLᵀ
  d.L = cholmod_analyze_p(d.A, d.perm.data(), nullptr, 0, &d.c);
  d.check_cholmod("analyze");
  const auto* lperm = static_cast<const int*>(d.L->Perm);
  for (int p = 0; p < d.n; ++p)
    if (lperm[p] != d.perm[static_cast<size_t>(p)])
      throw SolverError("Schur factorization: CHOLMOD changed the given ordering (x2 no longer last)");
  // The H workspace doubled as scratch for Σ / Σ⁻¹ in factor order; it is reused per solve.
  d.stats.nnz_L = d.c.lnz;
  d.stats.analyze_ms = ms_since(t0);

  d.numeric_factor();
  if (bool(d.L->is_super) != (kFactorKind == CHOLMOD_SUPERNODAL) || !d.L->is_ll)
    throw SolverError("Schur factorization: CHOLMOD returned an unexpected factor type (wanted LLᵀ)");
}

SchurFactorization::~SchurFactorization() = default;
SchurFactorization::SchurFactorization(SchurFactorization&&) noexcept = default;
SchurFactorization& SchurFactorization::operator=(SchurFactorization&&) noexcept = default;

void SchurFactorization::refactorize(const Eigen::SparseMatrix<double>& K) {
  Impl& d = *impl_;
  if (d.dyn)
    throw SolverError("Schur refactorize: the factorization follows changes of K (modify()); construct a new one");
  Eigen::SparseMatrix<double> lower = K.triangularView<Eigen::Lower>();
  lower.makeCompressed();
  const auto* p = static_cast<const int*>(d.A->p);
  const auto* i = static_cast<const int*>(d.A->i);
  const bool same = lower.rows() == d.n && lower.cols() == d.n && lower.nonZeros() == p[d.n] &&
                    std::equal(lower.outerIndexPtr(), lower.outerIndexPtr() + d.n + 1, p) &&
                    std::equal(lower.innerIndexPtr(), lower.innerIndexPtr() + lower.nonZeros(), i);
  if (!same) throw SolverError("Schur refactorize: the sparsity pattern of K differs from the analyzed one");
  std::memcpy(d.A->x, lower.valuePtr(), sizeof(double) * static_cast<size_t>(lower.nonZeros()));
  d.numeric_factor();
}

int SchurFactorization::max_update_rank() const { return std::max(32, impl_->m / 8); }

SchurModifyResult SchurFactorization::modify(const FactorModification& mod, const Eigen::SparseMatrix<double>& K_new) {
  const auto t_all = Clock::now();
  SchurModifyResult res;
  {
    const Impl& d = *impl_;
    const long n_new = static_cast<long>(d.n) + mod.new_dofs;
    if (K_new.rows() != n_new || K_new.cols() != n_new)
      throw SolverError("Schur modify: K_new is " + std::to_string(K_new.rows()) + " × " +
                        std::to_string(K_new.cols()) +
                        ", expected the order n + new unknowns = " + std::to_string(n_new));
  }
  const int max_rank = max_update_rank();
  const detail::LowRankChange ch = detail::low_rank_change(mod, impl_->n, 2 * max_rank);
  const int r = ch.too_large ? static_cast<int>(ch.rows.size()) : static_cast<int>(ch.lambda.size());
  res.rank = r;
  // The factorization built anew from K_new (same region, same options), the counters carried on.
  auto rebuild = [&](const char* why) {
    SchurStats before = impl_->stats;
    SchurFactorization fresh(K_new, impl_->region, impl_->options);
    fresh.impl_->stats.modifications = before.modifications;
    fresh.impl_->stats.rebuilds = before.rebuilds + 1;
    *this = std::move(fresh);
    res.rebuilt = true;
    res.reason = why;
    res.total_ms = ms_since(t_all);
    return res;
  };
  if (ch.too_large || r > max_rank) return rebuild("rank");

  Impl& d = *impl_;
  if (!d.dyn) {
    d.make_updatable();
    res.updatable_ms = d.stats.updatable_ms;
  }
  // Y = (K ⊕ δI)⁻¹ U with the factor before the change: rows of old unknowns by r solves, rows of
  // new unknowns U/δ. C = Λ⁻¹ + Uᵀ Y (r × r), Z = Y[x2] (m × r).
  auto t0 = Clock::now();
  const int p = static_cast<int>(ch.rows.size());
  Eigen::MatrixXd y = Eigen::MatrixXd::Zero(d.n, r);
  for (int a = 0; a < p; ++a)
    if (ch.rows[static_cast<size_t>(a)] < d.n) y.row(ch.rows[static_cast<size_t>(a)]) = ch.v.row(a);
  if (r > 0) d.dyn->solve_in_place(y);
  Eigen::MatrixXd cap = Eigen::MatrixXd::Zero(r, r);
  cap.diagonal() = ch.lambda.cwiseInverse();
  for (int a = 0; a < p; ++a) {
    const int row = ch.rows[static_cast<size_t>(a)];
    if (row < d.n)
      cap.noalias() += ch.v.row(a).transpose() * y.row(row);
    else
      cap.noalias() += ch.v.row(a).transpose() * ch.v.row(a) / ch.delta[static_cast<size_t>(row - d.n)];
  }
  cap = 0.5 * (cap + cap.transpose()).eval();
  Eigen::MatrixXd z(d.m, r);
  for (int i = 0; i < d.m; ++i) z.row(i) = y.row(d.region[static_cast<size_t>(i)]);
  res.solve_ms = ms_since(t0);

  // The sparse factor (throws on malformed input: nothing has changed yet).
  t0 = Clock::now();
  const bool ok = d.dyn->modify(mod);
  res.factor_ms = ms_since(t0);
  if (!ok) return rebuild("definiteness");

  // Σ⁻¹ −= Z C⁻¹ Zᵀ and Σ += W̃ (C − ZᵀW̃)⁻¹ W̃ᵀ, W̃ = Σ Z; both prepared before either is touched.
  t0 = Clock::now();
  Eigen::MatrixXd wt;
  d.symmetric_product(d.sigma, z, wt);
  Eigen::MatrixXd e = cap;
  e.noalias() -= z.transpose() * wt;
  e = 0.5 * (e + e.transpose()).eval();
  detail::SignedSquare inv_part, sigma_part;
  if (!detail::signed_square(z, cap, inv_part) || !detail::signed_square(wt, e, sigma_part))
    return rebuild("capacitance");
  detail::add_signed_square(d.sigma_inv, inv_part, -1.0);
  detail::add_signed_square(d.sigma, sigma_part, 1.0);
  res.dense_ms = ms_since(t0);

  // New unknowns join x1.
  d.n += mod.new_dofs;
  d.n1 += mod.new_dofs;
  d.region_of.resize(static_cast<size_t>(d.n), -1);
  d.stats.n = d.n;
  d.stats.nnz_L = d.dyn->info().nnz_L;
  ++d.stats.modifications;
  res.total_ms = ms_since(t_all);
  return res;
}

int SchurFactorization::n() const { return impl_->n; }
int SchurFactorization::m() const { return impl_->m; }
const std::vector<int>& SchurFactorization::region_nodes() const { return impl_->region; }
int SchurFactorization::region_index(int node) const { return impl_->region_of.at(static_cast<size_t>(node)); }
const std::vector<int>& SchurFactorization::permutation() const { return impl_->perm; }
int SchurFactorization::factor_position(int region_index) const {
  return impl_->fpos2.at(static_cast<size_t>(region_index));
}
const SchurStats& SchurFactorization::stats() const { return impl_->stats; }

SupernodalFactorCopy SchurFactorization::supernodal_factor() const {
  SupernodalFactorCopy out;
  const cholmod_factor* L = impl_->L;
  if (!L || !L->is_super || !L->is_ll || L->xtype != CHOLMOD_REAL || !L->x) return out;
  // CHOLMOD's int interface: the device backend reads `long` indices, so they are copied once.
  auto copy = [](const void* p, size_t count) {
    const int* q = static_cast<const int*>(p);
    return std::vector<long>(q, q + count);
  };
  const size_t ns = L->nsuper;
  out.n = static_cast<long>(L->n);
  out.nsuper = static_cast<long>(ns);
  out.super = copy(L->super, ns + 1);
  out.pi = copy(L->pi, ns + 1);
  out.px = copy(L->px, ns + 1);
  out.s = copy(L->s, static_cast<size_t>(out.pi[ns]));
  out.perm = copy(L->Perm, L->n);
  out.x = static_cast<const double*>(L->x);
  return out;
}
const Eigen::MatrixXd& SchurFactorization::schur_complement() const { return impl_->sigma; }
const Eigen::MatrixXd& SchurFactorization::schur_factor() const { return impl_->l22; }
const Eigen::MatrixXd& SchurFactorization::schur_inverse() const { return impl_->sigma_inv; }
SchurSolveMethod SchurFactorization::last_method() const { return impl_->own.last_method(); }
const SchurSolveTimings& SchurFactorization::last_timings() const { return impl_->own.last_timings(); }

Eigen::MatrixXd SchurFactorization::solve(const Eigen::Ref<const Eigen::MatrixXd>& f) { return solve(impl_->own, f); }

Eigen::MatrixXd SchurFactorization::solve(SchurWorkspace& ws, const Eigen::Ref<const Eigen::MatrixXd>& f) const {
  const Impl& d = *impl_;
  if (f.rows() != d.n)
    throw SolverError("Schur solve: right-hand side has " + std::to_string(f.rows()) +
                      " rows, expected n = " + std::to_string(d.n));
  if (d.dyn) {
    Eigen::MatrixXd x = f;
    d.dyn->solve_in_place(x);
    return x;
  }
  const Eigen::MatrixXd b = f;  // contiguous, leading dimension n
  const double* x = d.cholmod_solve_into(*ws.impl_, CHOLMOD_A, b.data(), b.cols());
  return Eigen::Map<const Eigen::MatrixXd>(x, d.n, b.cols());
}

void SchurFactorization::forward(const Eigen::Ref<const Eigen::MatrixXd>& f, Eigen::MatrixXd& y1, Eigen::MatrixXd& g2) {
  forward(impl_->own, f, y1, g2);
}

void SchurFactorization::forward(SchurWorkspace& ws, const Eigen::Ref<const Eigen::MatrixXd>& f, Eigen::MatrixXd& y1,
                                 Eigen::MatrixXd& g2) const {
  const Impl& d = *impl_;
  SchurWorkspace::Impl& w = *ws.impl_;
  if (f.rows() != d.n)
    throw SolverError("Schur forward: right-hand side has " + std::to_string(f.rows()) +
                      " rows, expected n = " + std::to_string(d.n));
  const Eigen::Index r = f.cols();
  if (d.dyn) {
    // y1 = u⁰ = K⁻¹ f, g2 = Σ u⁰₂ (= f2 − K21 K11⁻¹ f1, since u⁰₂ = Σ⁻¹ g2).
    y1 = f;
    if (r > 0) d.dyn->solve_in_place(y1);
    Eigen::MatrixXd& u02 = w.fwd_g2f;
    if (u02.rows() != d.m || u02.cols() != r) u02.resize(d.m, r);
    for (int i = 0; i < d.m; ++i) u02.row(i) = y1.row(d.region[static_cast<size_t>(i)]);
    d.symmetric_product(d.sigma, u02, g2);
    return;
  }
  // b = P f, y = L⁻¹ b (full supernodal forward solve).
  Eigen::MatrixXd& b = w.fwd_b;
  if (b.rows() != d.n || b.cols() != r) b.resize(d.n, r);
  for (Eigen::Index col = 0; col < r; ++col)
    for (int p = 0; p < d.n; ++p) b(p, col) = f(d.perm[static_cast<size_t>(p)], col);
  Eigen::MatrixXd& g2f = w.fwd_g2f;
  if (d.tree) {
    // Over the x1 supernodes only: y1 = L11⁻¹ b1 and g2 = b2 − L21 y1 in place.
    if (r > 0) d.tree->forward_x1(b, d.n1, w.tree_ws);
    y1 = b.topRows(d.n1);
    g2f = b.bottomRows(d.m);
  } else {
    const double* y = d.cholmod_solve_into(w, CHOLMOD_L, b.data(), r);
    Eigen::Map<const Eigen::MatrixXd> ym(y, d.n, r);
    y1 = ym.topRows(d.n1);
    // g2 = L22 y2 = f2 − L21 y1.
    g2f = ym.bottomRows(d.m);
    const int ri = static_cast<int>(r);
    const double one = 1.0;
    int m = d.m;
    if (m > 0 && ri > 0) dtrmm_("L", "L", "N", "N", &m, &ri, &one, d.l22.data(), &m, g2f.data(), &m);
  }
  d.rows_to_region(g2f, g2);
}

Eigen::MatrixXd SchurFactorization::backward(const Eigen::MatrixXd& y1, const Eigen::Ref<const Eigen::MatrixXd>& u2) {
  Eigen::MatrixXd u;
  backward(impl_->own, y1, u2, u);
  return u;
}

void SchurFactorization::backward(const Eigen::MatrixXd& y1, const Eigen::Ref<const Eigen::MatrixXd>& u2,
                                  Eigen::MatrixXd& u) {
  backward(impl_->own, y1, u2, u);
}

void SchurFactorization::backward(SchurWorkspace& ws, const Eigen::MatrixXd& y1,
                                  const Eigen::Ref<const Eigen::MatrixXd>& u2, Eigen::MatrixXd& u) const {
  const Impl& d = *impl_;
  SchurWorkspace::Impl& w = *ws.impl_;
  // y1 holds L11⁻¹ f1 (n1 rows), or u⁰ = K⁻¹ f (n rows) once the factorization is updatable.
  const int y1_rows = d.dyn ? d.n : d.n1;
  if (y1.rows() != y1_rows || u2.rows() != d.m || y1.cols() != u2.cols())
    throw SolverError("Schur backward: y1 is " + std::to_string(y1.rows()) + " × " + std::to_string(y1.cols()) +
                      ", u2 is " + std::to_string(u2.rows()) + " × " + std::to_string(u2.cols()) + "; expected " +
                      std::to_string(y1_rows) + " and m = " + std::to_string(d.m) + " rows with equal columns");
  if (d.dyn) {
    // u = u⁰ + K⁻¹ [0; Σ (u2 − u⁰₂)], the region rows set to u2 exactly.
    const Eigen::Index r = y1.cols();
    Eigen::MatrixXd& delta = w.bwd_t;
    if (delta.rows() != d.m || delta.cols() != r) delta.resize(d.m, r);
    for (int i = 0; i < d.m; ++i) delta.row(i) = u2.row(i) - y1.row(d.region[static_cast<size_t>(i)]);
    Eigen::MatrixXd& t = w.fwd_g2f;
    d.symmetric_product(d.sigma, delta, t);
    Eigen::MatrixXd& z = w.bwd_z;
    z.setZero(d.n, r);
    for (int i = 0; i < d.m; ++i) z.row(d.region[static_cast<size_t>(i)]) = t.row(i);
    if (r > 0 && d.m > 0) d.dyn->solve_in_place(z);
    u = y1 + z;
    for (int i = 0; i < d.m; ++i) u.row(d.region[static_cast<size_t>(i)]) = u2.row(i);
    return;
  }
  const Eigen::Index r = y1.cols();
  // z = [y1; L22ᵀ u2], v = L⁻ᵀ z (full supernodal backward solve), u = Pᵀ v; or, over the x1
  // supernodes only, z = [y1; u2] and v1 = L11⁻ᵀ (y1 − L21ᵀ u2).
  Eigen::MatrixXd& z = w.bwd_z;
  if (z.rows() != d.n || z.cols() != r) z.resize(d.n, r);
  z.topRows(d.n1) = y1;
  const int ri = static_cast<int>(r);
  const double one = 1.0;
  int m = d.m;
  const bool partial = d.tree != nullptr;
  if (m > 0 && ri > 0) {
    Eigen::MatrixXd& t = w.bwd_t;
    d.rows_to_factor(u2, t);
    if (!partial) dtrmm_("L", "L", "T", "N", &m, &ri, &one, d.l22.data(), &m, t.data(), &m);
    z.bottomRows(d.m) = t;
  }
  const double* v = z.data();
  if (partial) {
    if (ri > 0) d.tree->backward_x1(z, d.n1, w.tree_ws);
  } else {
    v = d.cholmod_solve_into(w, CHOLMOD_Lt, z.data(), r);
  }
  if (u.rows() != d.n || u.cols() != r) u.resize(d.n, r);
  for (Eigen::Index col = 0; col < r; ++col)
    for (int p = 0; p < d.n1; ++p) u(d.perm[static_cast<size_t>(p)], col) = v[col * d.n + p];
  for (int i = 0; i < d.m; ++i) u.row(d.region[static_cast<size_t>(i)]) = u2.row(i);
}

Eigen::MatrixXd SchurFactorization::apply_schur(const Eigen::Ref<const Eigen::MatrixXd>& u2) const {
  const Impl& d = *impl_;
  if (u2.rows() != d.m)
    throw SolverError("Schur apply: u2 has " + std::to_string(u2.rows()) +
                      " rows, expected m = " + std::to_string(d.m));
  Eigen::MatrixXd out(d.m, u2.cols());
  const Eigen::MatrixXd in = u2;
  const int r = static_cast<int>(u2.cols());
  const double one = 1.0, zero = 0.0;
  int m = d.m;
  if (m > 0 && r > 0) dsymm_("L", "L", &m, &r, &one, d.sigma.data(), &m, in.data(), &m, &zero, out.data(), &m);
  return out;
}

SchurSolveMethod SchurFactorization::choose_method(const std::vector<SchurProxy>& proxies, int r) const {
  std::vector<char> seen;
  return choose_method(proxies, r, seen);
}

SchurSolveMethod SchurFactorization::choose_method(const std::vector<SchurProxy>& proxies, int r,
                                                   std::vector<char>& seen) const {
  const Impl& d = *impl_;
  bool woodbury_ok = d.options.precompute_inverse;
  double k = 0;
  for (const SchurProxy& p : proxies) {
    if (p.stiffness == 0.0) continue;
    if (!(p.stiffness > 0.0)) woodbury_ok = false;
    k += 1;
  }
  if (!woodbury_ok) return SchurSolveMethod::DenseRefactor;
  // q = distinct nodes touched by the proxies.
  seen.assign(static_cast<size_t>(d.m), 0);
  double q = 0;
  for (const SchurProxy& p : proxies)
    for (int a = 0; a < kSchurProxySlots; ++a) {
      const int node = p.nodes[static_cast<size_t>(a)];
      if (p.stiffness != 0.0 && p.weights[static_cast<size_t>(a)] != 0.0 && node >= 0 && node < d.m &&
          !seen[static_cast<size_t>(node)]) {
        seen[static_cast<size_t>(node)] = 1;
        q += 1;
      }
    }
  const double m = d.m;
  const double refactor = m * m * m / 3.0 + kMemoryWeight * (m * m / 2.0 + m * m * r);
  const double woodbury = k * k * k / 3.0 + kMemoryWeight * (m * q + m * m / 2.0 + 4.0 * q * k + 4.0 * k * k);
  return woodbury <= refactor ? SchurSolveMethod::Woodbury : SchurSolveMethod::DenseRefactor;
}

Eigen::MatrixXd SchurFactorization::solve_collision_system(const std::vector<SchurProxy>& proxies,
                                                           const Eigen::Ref<const Eigen::MatrixXd>& g,
                                                           SchurSolveMethod method) {
  Eigen::MatrixXd u2;
  solve_collision_system(impl_->own, proxies, g, method, u2);
  return u2;
}

void SchurFactorization::solve_collision_system(const std::vector<SchurProxy>& proxies,
                                                const Eigen::Ref<const Eigen::MatrixXd>& g, SchurSolveMethod method,
                                                Eigen::MatrixXd& u2) {
  solve_collision_system(impl_->own, proxies, g, method, u2);
}

void SchurFactorization::solve_collision_system(SchurWorkspace& ws, const std::vector<SchurProxy>& proxies,
                                                const Eigen::Ref<const Eigen::MatrixXd>& g, SchurSolveMethod method,
                                                Eigen::MatrixXd& u2) const {
  const Impl& d = *impl_;
  SchurWorkspace::Impl& w = *ws.impl_;
  w.last_timings = {};
  if (g.rows() != d.m)
    throw SolverError("Schur collision system: g has " + std::to_string(g.rows()) +
                      " rows, expected m = " + std::to_string(d.m));
  // Zero-stiffness proxies contribute nothing; negative or non-finite ones are errors.
  std::vector<SchurProxy>& active = w.active;
  active.clear();
  for (size_t j = 0; j < proxies.size(); ++j) {
    const SchurProxy& p = proxies[j];
    if (!(p.stiffness >= 0.0) || !std::isfinite(p.stiffness))
      throw SolverError("Schur collision system: proxy " + std::to_string(j) + " has invalid stiffness " +
                        std::to_string(p.stiffness));
    for (int a = 0; a < kSchurProxySlots; ++a) {
      const int node = p.nodes[static_cast<size_t>(a)];
      if (p.weights[static_cast<size_t>(a)] != 0.0 && (node < 0 || node >= d.m))
        throw SolverError("Schur collision system: proxy " + std::to_string(j) + " refers to region index " +
                          std::to_string(node) + ", outside [0, m = " + std::to_string(d.m) + ")");
    }
    if (p.stiffness > 0.0) {
      active.push_back(p);
      for (int a = 0; a < kSchurProxySlots; ++a)  // unused slots: point at node 0 with weight 0
        if (active.back().weights[static_cast<size_t>(a)] == 0.0) active.back().nodes[static_cast<size_t>(a)] = 0;
    }
  }
  if (method == SchurSolveMethod::Automatic) method = choose_method(active, static_cast<int>(g.cols()), w.seen);
  if (method == SchurSolveMethod::Woodbury && d.sigma_inv.rows() != d.m)
    throw SolverError("Schur collision system: Woodbury needs Σ⁻¹ (SchurOptions::precompute_inverse)");
  w.last_method = method;
  if (active.empty() || d.m == 0)
    d.solve_sigma(w, g, u2);
  else if (method == SchurSolveMethod::Woodbury)
    d.solve_woodbury(w, active, g, u2);
  else
    d.solve_refactor(w, active, g, u2);
}

void SchurFactorization::solve_low_rank_system(const SchurLowRank& term, const Eigen::Ref<const Eigen::MatrixXd>& g,
                                               Eigen::MatrixXd& u2, int refinement_steps) {
  solve_low_rank_system(impl_->own, term, g, u2, refinement_steps);
}

// Relative residual ‖g − Σ̂ u2‖∞ / ‖g‖∞ below which iterative refinement stops.
constexpr double kRefinementSkip = 1e-12;

// Woodbury on the node-major 3m unknowns with Σ ⊗ I₃: every product with Σ or Σ⁻¹ acts on the
// m × 3 layout (one column per coordinate), so the dense m × m matrices serve x, y and z at once.
void SchurFactorization::solve_low_rank_system(SchurWorkspace& ws, const SchurLowRank& term,
                                               const Eigen::Ref<const Eigen::MatrixXd>& g, Eigen::MatrixXd& u2,
                                               int refinement_steps) const {
  const Impl& d = *impl_;
  SchurWorkspace::Impl& w = *ws.impl_;
  w.last_timings = {};
  const int m = d.m, q = static_cast<int>(term.nodes.size());
  const bool block = term.block.size() > 0;
  const int r = block ? 0 : static_cast<int>(term.u.cols());
  if (d.sigma_inv.rows() != m)
    throw SolverError("Schur low-rank system: Woodbury needs Σ⁻¹ (SchurOptions::precompute_inverse)");
  if (g.rows() != m || g.cols() != 3)
    throw SolverError("Schur low-rank system: g is " + std::to_string(g.rows()) + " × " + std::to_string(g.cols()) +
                      ", expected m × 3 = " + std::to_string(m) + " × 3");
  if (block && (term.block.rows() != 3 * q || term.block.cols() != 3 * q || term.u.size() > 0))
    throw SolverError("Schur low-rank system: the block is " + std::to_string(term.block.rows()) + " × " +
                      std::to_string(term.block.cols()) + ", expected 3q × 3q = " + std::to_string(3 * q) +
                      " square, with U empty");
  if (!block && term.u.rows() != 3 * q)
    throw SolverError("Schur low-rank system: U has " + std::to_string(term.u.rows()) + " rows, expected 3 × " +
                      std::to_string(q) + " nodes");
  if (refinement_steps < 0) throw SolverError("Schur low-rank system: refinement_steps must be >= 0");
  w.lr_seen.assign(static_cast<std::size_t>(m), 0);
  for (const int node : term.nodes) {
    if (node < 0 || node >= m)
      throw SolverError("Schur low-rank system: region index " + std::to_string(node) +
                        " outside [0, m = " + std::to_string(m) + ")");
    if (w.lr_seen[static_cast<std::size_t>(node)]++)
      throw SolverError("Schur low-rank system: region index " + std::to_string(node) + " listed twice");
  }
  if (!(block ? term.block.allFinite() : term.u.allFinite()))
    throw SolverError("Schur low-rank system: the term has a non-finite entry");
  PhaseTimer pt;
  using RowMajor3 = Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor>;
  // B = Σ⁻¹[N, N].
  Eigen::MatrixXd& b = w.lr_b;
  b.resize(q, q);
  for (int c = 0; c < q; ++c)
    for (int a = 0; a < q; ++a)
      b(a, c) = d.sigma_inv(term.nodes[static_cast<std::size_t>(a)], term.nodes[static_cast<std::size_t>(c)]);
  Eigen::MatrixXd& s = w.lr_s;
  if (block) {
    // X = (ℬ_N⁻¹ + B ⊗ I₃)⁻¹ without ℬ_N⁻¹ (ℬ_N is singular): X = B̃ − B̃ C⁻¹ B̃ with B̃ = B⁻¹ ⊗ I₃
    // and C = ℬ_N + B̃, which is SPD (B̃ SPD, ℬ_N PSD): a Cholesky of 3q × 3q (9q³ flops) and an
    // inverse of q × q (about q³), where the push-through form I + ℬ_N (B ⊗ I₃) needed a 3q × q × q
    // product per coordinate and an LU of 3q × 3q (about 36q³ flops). B⁻¹ = the Schur complement of Σ on N, well
    // conditioned like Σ.
    Eigen::MatrixXd& binv = w.lr_binv;
    binv = b;
    int info = 0;
    if (q > 0) dpotrf_("L", &q, binv.data(), &q, &info);
    if (info == 0 && q > 0) dpotri_("L", &q, binv.data(), &q, &info);
    if (info != 0)
      throw SolverError("Schur low-rank system: Σ⁻¹[N, N] is not positive definite (q = " + std::to_string(q) + ")");
    detail::mirror_lower(binv);
    s = term.block;
    for (int bb = 0; bb < q; ++bb)
      for (int a = 0; a < q; ++a) {
        const double v = binv(a, bb);
        for (int c = 0; c < 3; ++c) s(3 * a + c, 3 * bb + c) += v;
      }
    pt.lap(w.last_timings.update);
    const int n3 = 3 * q;
    if (q > 0) dpotrf_("L", &n3, s.data(), &n3, &info);
    pt.lap(w.last_timings.factor);
    if (info != 0)
      throw SolverError(
          "Schur low-rank system: ℬ_N + Σ⁻¹[N, N]⁻¹ ⊗ I₃ is not positive definite (q = " + std::to_string(q) + ")");
  } else {
    // BU = (B ⊗ I₃) U and S = I + Uᵀ BU. A column of U is one pair's Hessian factor column spread
    // over the ≤ 16 nodes of its 4 vertices' tets, so with the column's nonzero node slots the
    // products cost q·3·16 per column of BU and 3·16 per entry of S instead of 3q² and 3q
    // (25× less at q = 261, r = 466 on the face scene).
    std::vector<int>& colptr = w.lr_colptr;
    std::vector<int>& slots = w.lr_slots;
    colptr.assign(static_cast<std::size_t>(r) + 1, 0);
    slots.clear();
    for (int j = 0; j < r; ++j) {
      const double* uj = term.u.col(j).data();
      for (int a = 0; a < q; ++a)
        if (uj[3 * a] != 0.0 || uj[3 * a + 1] != 0.0 || uj[3 * a + 2] != 0.0) slots.push_back(a);
      colptr[static_cast<std::size_t>(j) + 1] = static_cast<int>(slots.size());
    }
    Eigen::MatrixXd& bu = w.lr_bu;
    bu.resize(3 * q, r);
    for (int j = 0; j < r; ++j) {
      Eigen::Map<RowMajor3> out(bu.col(j).data(), q, 3);
      out.setZero();
      const double* uj = term.u.col(j).data();
      for (int k = colptr[static_cast<std::size_t>(j)]; k < colptr[static_cast<std::size_t>(j) + 1]; ++k) {
        const int a = slots[static_cast<std::size_t>(k)];
        out.noalias() += b.col(a) * Eigen::Map<const Eigen::RowVector3d>(uj + 3 * a);
      }
    }
    s.resize(r, r);
    for (int i = 0; i < r; ++i) {  // lower triangle: dpotrf reads nothing else
      const double* ui = term.u.col(i).data();
      for (int j = 0; j <= i; ++j) {
        const double* buj = bu.col(j).data();
        double sum = 0.0;
        for (int k = colptr[static_cast<std::size_t>(i)]; k < colptr[static_cast<std::size_t>(i) + 1]; ++k) {
          const int a = 3 * slots[static_cast<std::size_t>(k)];
          sum += ui[a] * buj[a] + ui[a + 1] * buj[a + 1] + ui[a + 2] * buj[a + 2];
        }
        s(i, j) = sum;
      }
    }
    s.diagonal().array() += 1.0;
    pt.lap(w.last_timings.update);
    int info = 0;
    if (r > 0) dpotrf_("L", &r, s.data(), &r, &info);
    pt.lap(w.last_timings.factor);
    if (info != 0)
      throw SolverError("Schur low-rank system: capacitance I + Uᵀ(Σ⁻¹ ⊗ I₃)U is not positive definite (r = " +
                        std::to_string(r) + ")");
  }

  // One Woodbury application: out = (Σ̂)⁻¹ rhs.
  auto apply = [&](const Eigen::Ref<const Eigen::MatrixXd>& rhs, Eigen::MatrixXd& out) {
    out.resize(m, 3);
    symmetric_times3(d.sigma_inv, rhs.data(), static_cast<int>(rhs.outerStride()), 1.0, out.data(), false, w.lr_sym);
    if (q == 0 || (!block && r == 0)) return;
    RowMajor3& vn = w.lr_vn;  // v[N], node-major when flattened
    vn.resize(q, 3);
    for (int a = 0; a < q; ++a) vn.row(a) = out.row(term.nodes[static_cast<std::size_t>(a)]);
    RowMajor3& wq = w.lr_wq;
    wq.resize(q, 3);
    Eigen::Map<Eigen::VectorXd> wflat(wq.data(), 3 * q);
    const Eigen::Map<const Eigen::VectorXd> vflat(vn.data(), 3 * q);
    if (block) {
      // w = X v[N] = y − B̃ C⁻¹ y, y = B̃ v[N] (per coordinate: B⁻¹ times the q × 3 block).
      RowMajor3& y = w.lr_y;
      y.noalias() = w.lr_binv * vn;
      Eigen::VectorXd& t = w.lr_t;
      t = Eigen::Map<const Eigen::VectorXd>(y.data(), 3 * q);
      const int n3 = 3 * q, one = 1;
      int inf = 0;
      dpotrs_("L", &n3, &one, s.data(), &n3, t.data(), &n3, &inf);
      const Eigen::Map<const RowMajor3> z(t.data(), q, 3);
      wq.noalias() = w.lr_binv * z;
      wq = y - wq;
    } else {
      Eigen::VectorXd& t = w.lr_t;
      t.noalias() = term.u.transpose() * vflat;
      int one = 1, inf = 0;
      dpotrs_("L", &r, &one, s.data(), &r, t.data(), &r, &inf);
      wflat.noalias() = term.u * t;
    }
    // out −= Σ⁻¹[:, N] W, by blocks of rows so that the block of out stays in cache while the q
    // columns pass (one rank-1 update of all of out per column would stream out q times).
    constexpr int kRows = 256;
    for (int r0 = 0; r0 < m; r0 += kRows) {
      const int rows = std::min(kRows, m - r0);
      auto ob = out.middleRows(r0, rows);
      for (int a = 0; a < q; ++a)
        ob.noalias() -= d.sigma_inv.col(term.nodes[static_cast<std::size_t>(a)]).segment(r0, rows) * wq.row(a);
    }
  };
  apply(g, u2);
  for (int step = 0; step < refinement_steps; ++step) {
    // res = g − Σ u2 − E_N ℬ_N u2[N].
    Eigen::MatrixXd& res = w.lr_res;
    res = g;
    symmetric_times3(d.sigma, u2.data(), m, -1.0, res.data(), true, w.lr_sym);
    RowMajor3& un = w.lr_vn;
    un.resize(q, 3);
    for (int a = 0; a < q; ++a) un.row(a) = u2.row(term.nodes[static_cast<std::size_t>(a)]);
    const Eigen::Map<const Eigen::VectorXd> uflat(un.data(), 3 * q);
    Eigen::VectorXd& bu2 = w.lr_t2;
    if (block) {
      bu2.noalias() = term.block * uflat;
    } else {
      w.lr_t.noalias() = term.u.transpose() * uflat;
      bu2.noalias() = term.u * w.lr_t;
    }
    for (int a = 0; a < q; ++a) res.row(term.nodes[static_cast<std::size_t>(a)]) -= bu2.segment<3>(3 * a).transpose();
    // A residual at rounding level cannot be improved by the same operator: skip its Σ⁻¹ product.
    // (The face of scenes/face_ipc.json, jaw at 21°, frame 8: 2e-15 … 3e-14 of ‖g‖, corrections
    // ≤ 4e-14 of ‖u2‖; the stiff barriers of LowRankWoodburyEquals… leave up to 9e-9, corrections
    // up to 2e-9.)
    if (res.cwiseAbs().maxCoeff() <= kRefinementSkip * g.cwiseAbs().maxCoeff()) break;
    apply(res, w.lr_du);
    u2 += w.lr_du;
  }
  pt.lap(w.last_timings.solve);
}

Eigen::SparseMatrix<double> collision_matrix(int m, const std::vector<SchurProxy>& proxies) {
  std::vector<Eigen::Triplet<double>> trip;
  trip.reserve(16 * proxies.size());  // one-sided springs; two-sided ones grow it
  for (const SchurProxy& p : proxies)
    for (int a = 0; a < kSchurProxySlots; ++a)
      for (int b = 0; b < kSchurProxySlots; ++b) {
        const double v = p.stiffness * p.weights[static_cast<size_t>(a)] * p.weights[static_cast<size_t>(b)];
        if (v != 0.0) trip.emplace_back(p.nodes[static_cast<size_t>(a)], p.nodes[static_cast<size_t>(b)], v);
      }
  Eigen::SparseMatrix<double> c(m, m);
  c.setFromTriplets(trip.begin(), trip.end());
  return c;
}

}  // namespace xpd
