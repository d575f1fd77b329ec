#include <cholmod.h>
#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>

#include "blas.hpp"
#include "ldlt_update_kernel.hpp"

namespace xpd {

namespace {

constexpr int kPanelSolves = 8;
constexpr int kPanelColumns = 12;
using Label = std::uint64_t;
constexpr Label kLabelSpacing = Label{1} << 32;
// Columns of one numeric pass. More columns per pass share one read of their union path (Davis &
// Hager 2001's multiple-rank update) but pay r flops per entry of it, also for the columns whose own
// path is shorter. Measured on the box:32 plane cut with the scalar kernel (xpd bench cut, k = 16
// faces, 2026-11-26): 158 ms per update with 4 columns per pass, 170 ms with 8, 196 ms with 2; with
// the vector kernel, prefetch and the split columns (box:48, k = 16, 2026-11-27, two runs each):
// 300 and 547 ms with 4, 216 and 173 ms with 8.
constexpr int kMaxRank = detail::kLdltRank;
constexpr long kNoParent = -1;

}  // namespace

struct DynamicLdlt::Impl {
  // ---- factor -------------------------------------------------------------------------------
  // Column j (a DOF id) holds the strictly-lower entries of L's column for that unknown: rows (DOF
  // ids, any order) and values in arena slots [start, start + count), capacity cap.
  int n = 0;
  std::vector<Label> label;     // elimination-order label per DOF
  std::vector<int> order;       // DOFs sorted by label
  std::vector<double> d;        // D
  std::vector<int> parent;      // elimination-tree parent (DOF id) or −1
  std::vector<long> start;      // arena offset
  std::vector<int> count, cap;  // entries, capacity
  std::vector<int> arow;        // arena: row DOF ids
  std::vector<double> aval;     // arena: values
  std::vector<double> kdiag;    // K(j,j), tracked
  double pivot_tol = 1e-12;
  DynamicLdltInfo info;
  detail::LdltColumnKernel kernel = detail::ldlt_column_best();

  // ---- tree-parallel substitution schedule (rebuilt lazily after a change of the tree) ----------
  // Disjoint subtrees of the elimination tree are substituted concurrently; the "top" (every
  // column above them) serially. A task's forward updates into top rows go to its own buffer,
  // summed in task order, so results are bit-identical on any number of threads.
  mutable bool schedule_dirty = true;
  // Panels are a copy of most of L: a rebuild cost what 6 (box:32) to 14 (box:48) panel solves save
  // over column solves on the plane cuts of xpd bench cut, so after a change the first kPanelSolves − 1 solves
  // run on the columns and the kPanelSolves-th rebuilds the panels (a deterministic ski-rental
  // rule: the result depends only on the sequence of calls, never on timings). A solve of at least
  // kPanelColumns right-hand sides rebuilds them at once: its columns alone repay much of the rebuild
  // (SchurFactorization::modify's r-column solves, xpd bench cut --schur: 15–36% faster for r = 24–99
  // on box:48), and the frames after the change would rebuild them at their 8th solve anyway.
  bool panels_built = false;
  int solves_since_change = 0;
  mutable std::vector<std::vector<int>> task_cols;  // per task: its columns in elimination order
  mutable std::vector<int> top_cols;                // the top, in elimination order
  mutable std::vector<int> top_index;               // per position: index in top_cols, or −1
  // The solve works on y permuted into elimination order (position = index in `order`): a panel's
  // own rows are then one contiguous block and the rows below it are close together in memory.
  std::vector<int> posn;                     // per DOF: its position
  mutable std::vector<double> task_buffers;  // tasks × top × k
  // Dense panels for the solve (Davis & Hager 2009's dynamic supernodes, read-only copies): a chain
  // of ≥ kPanelMin consecutive columns, each the parent of the one before with the same pattern
  // below it, stored column-major as (m + |R|) × m (the chain's rows, then the common rows R). A
  // unit of a group is a column (id ≥ 0) or a panel (−1 − panel index).
  struct Panel {
    long rows = 0;  // offset into panel_rows: the m chain columns, then R
    long vals = 0;  // offset into panel_vals
    int m = 0;
    int nr = 0;
  };
  std::vector<std::vector<int>> task_units;
  std::vector<int> top_units;
  std::vector<Panel> panels;
  std::vector<int> panel_rows;
  // Panel values: storage reused across rebuilds (a rebuild writes every entry of its panels, so it
  // neither zero-fills the whole buffer nor reallocates what it already had).
  std::unique_ptr<double[]> panel_buf;
  size_t panel_cap = 0, panel_size = 0;
  const double* panel_vals() const { return panel_buf.get(); }
  double* grow_panels(size_t extra) {
    if (panel_size + extra > panel_cap) {
      const size_t cap = std::max(panel_size + extra, panel_cap + panel_cap / 2);
      std::unique_ptr<double[]> b(new double[cap]);
      if (panel_size > 0) std::copy_n(panel_buf.get(), panel_size, b.get());
      panel_buf = std::move(b);
      panel_cap = cap;
    }
    double* out = panel_buf.get() + panel_size;
    panel_size += extra;
    return out;
  }
  double panel_fraction = 0;  // share of L's entries held in panels
  void build_schedule(bool with_panels);
  void build_units(const std::vector<int>& cols, std::vector<int>& units, std::vector<int>& pos);

  // ---- workspaces (kept between calls) --------------------------------------------------------
  mutable std::vector<double> y;  // solve: n × k row-major
  // Numeric pass workspace: n × kMaxRank row-major, zero outside a pass. Rows start on 64-byte
  // boundaries (Wa), so the two halves of a split column never write one cache line.
  std::vector<double> W;
  double* Wa = nullptr;
  void size_workspace(int m) {
    const size_t need = static_cast<size_t>(m) * kMaxRank + 8;
    if (W.size() >= need) return;  // rows past n are zero and unused
    W.assign(std::max(need, W.size() + W.size() / 4), 0.0);
    const auto a = reinterpret_cast<std::uintptr_t>(W.data());
    Wa = W.data() + ((64 - a % 64) % 64) / sizeof(double);
  }
  detail::ColumnSplitter* splitter = nullptr;  // set by modify() for its passes
  std::vector<unsigned> mark;                  // stamp per DOF
  unsigned stamp = 0;
  std::vector<int> carry, path;

  // ---- undo log of one modify() ---------------------------------------------------------------
  struct Saved {
    int j;
    double d;
    int parent;
    long start;
    int count, cap;
    std::vector<int> rows;
    std::vector<double> vals;
  };
  std::vector<Saved> saved;
  std::vector<unsigned> saved_in;  // event id per DOF when saved
  unsigned event = 0;
  int n_before = 0;

  unsigned next_stamp() {
    if (++stamp == 0) {
      std::fill(mark.begin(), mark.end(), 0u);
      stamp = 1;
    }
    return stamp;
  }

  void resize_dofs(int m) {
    label.resize(static_cast<size_t>(m));
    d.resize(static_cast<size_t>(m));
    parent.resize(static_cast<size_t>(m), -1);
    start.resize(static_cast<size_t>(m));
    count.resize(static_cast<size_t>(m));
    cap.resize(static_cast<size_t>(m));
    kdiag.resize(static_cast<size_t>(m));
    mark.resize(static_cast<size_t>(m), 0u);
    saved_in.resize(static_cast<size_t>(m), 0u);
    size_workspace(m);  // zero outside a pass, so nothing to keep
  }

  void save(int j) {
    if (j >= n_before || saved_in[static_cast<size_t>(j)] == event) return;
    saved_in[static_cast<size_t>(j)] = event;
    const auto s = static_cast<size_t>(start[static_cast<size_t>(j)]);
    const auto c = static_cast<size_t>(count[static_cast<size_t>(j)]);
    saved.push_back(
        Saved{j, d[static_cast<size_t>(j)], parent[static_cast<size_t>(j)], start[static_cast<size_t>(j)],
              count[static_cast<size_t>(j)], cap[static_cast<size_t>(j)],
              std::vector<int>(arow.begin() + static_cast<long>(s), arow.begin() + static_cast<long>(s + c)),
              std::vector<double>(aval.begin() + static_cast<long>(s), aval.begin() + static_cast<long>(s + c))});
  }

  // Makes room for `extra` more entries in column j: a column that outgrows its slot moves to the
  // end of the arena with 20% + 5 slack (its old slot is left unused until the next compute()).
  void reserve(int j, int extra) {
    const auto uj = static_cast<size_t>(j);
    if (count[uj] + extra <= cap[uj]) return;
    const int need = count[uj] + extra;
    const int ncap = need + need / 5 + 5;
    const long ns = static_cast<long>(arow.size());
    arow.resize(static_cast<size_t>(ns + ncap));
    aval.resize(static_cast<size_t>(ns + ncap));
    std::copy_n(arow.begin() + start[uj], count[uj], arow.begin() + ns);
    std::copy_n(aval.begin() + start[uj], count[uj], aval.begin() + ns);
    start[uj] = ns;
    cap[uj] = ncap;
  }

  // 𝓛_j ∪= rows (rows never contain j); new entries are numerical zeros. Returns whether the
  // pattern grew; the parent is kept as the smallest-label row.
  bool merge(int j, const std::vector<int>& rows) {
    const auto uj = static_cast<size_t>(j);
    const unsigned st = next_stamp();
    const long s0 = start[uj];
    for (int e = 0; e < count[uj]; ++e) mark[static_cast<size_t>(arow[static_cast<size_t>(s0 + e)])] = st;
    int add = 0;
    for (int i : rows)
      if (mark[static_cast<size_t>(i)] != st) ++add;
    if (add == 0) return false;
    save(j);
    reserve(j, add);
    long s = start[uj] + count[uj];
    int p = parent[uj];
    for (int i : rows) {
      if (mark[static_cast<size_t>(i)] == st) continue;
      mark[static_cast<size_t>(i)] = st;
      arow[static_cast<size_t>(s)] = i;
      aval[static_cast<size_t>(s)] = 0.0;
      ++s;
      if (p < 0 || label[static_cast<size_t>(i)] < label[static_cast<size_t>(p)]) p = i;
    }
    count[uj] += add;
    parent[uj] = p;
    return true;
  }

  int first_in_order(const std::vector<int>& rows) const {
    int k = rows.front();
    for (int i : rows)
      if (label[static_cast<size_t>(i)] < label[static_cast<size_t>(k)]) k = i;
    return k;
  }

  // Symbolic update for one column (Davis & Hager 2001): the pattern spreads up the path of the new
  // elimination tree; a column whose pattern does not grow ends the walk (closure property).
  void symbolic(const SparseColumn& w) {
    int j = first_in_order(w.rows);
    carry.clear();
    for (int i : w.rows)
      if (i != j) carry.push_back(i);
    while (merge(j, carry)) {
      const int p = parent[static_cast<size_t>(j)];
      if (p < 0) break;
      carry.clear();
      const long s = start[static_cast<size_t>(j)];
      for (int e = 0; e < count[static_cast<size_t>(j)]; ++e) {
        const int i = arow[static_cast<size_t>(s + e)];
        if (i != p) carry.push_back(i);
      }
      j = p;
    }
  }

  // Numeric pass of r ≤ kMaxRank columns with sign sigma (+1 update, −1 downdate): method C1 in
  // LDLᵀ form. For each path column j in elimination order and each column c in turn:
  //   d̄ = d + α_c w_cj², β_c = α_c w_cj / d̄, α_c ← α_c d / d̄, d ← d̄,
  //   and for every row i of 𝓛_j: w_ci ← w_ci − w_cj l_ij, l_ij ← l_ij + β_c w_ci.
  // Returns false (workspace cleared) on a pivot below tolerance or a non-finite value.
  bool numeric(const SparseColumn* cols, int r, double sigma) {
    const unsigned st = next_stamp();
    path.clear();
    for (int c = 0; c < r; ++c) {
      const SparseColumn& w = cols[c];
      for (size_t e = 0; e < w.rows.size(); ++e)
        Wa[static_cast<size_t>(w.rows[e]) * kMaxRank + static_cast<size_t>(c)] = w.values[e];
      for (int j = first_in_order(w.rows); j >= 0 && mark[static_cast<size_t>(j)] != st;
           j = parent[static_cast<size_t>(j)]) {
        mark[static_cast<size_t>(j)] = st;
        path.push_back(j);
      }
    }
    std::sort(path.begin(), path.end(),
              [&](int a, int b) { return label[static_cast<size_t>(a)] < label[static_cast<size_t>(b)]; });
    info.last_path_columns += static_cast<long>(path.size());
    ++info.last_passes;
    double alpha[kMaxRank], beta[kMaxRank] = {};
    for (int c = 0; c < r; ++c) alpha[c] = sigma;
    bool ok = true;
    size_t done = 0;
    for (; done < path.size(); ++done) {
      const int j = path[done];
      const auto uj = static_cast<size_t>(j);
      double* wj = Wa + uj * kMaxRank;
      double dj = d[uj];
      for (int c = 0; c < r; ++c) {
        if (wj[c] == 0.0) {
          beta[c] = 0.0;
          continue;
        }
        const double dbar = dj + alpha[c] * wj[c] * wj[c];
        if (!(dbar > pivot_tol * kdiag[uj]) || !std::isfinite(dbar)) {
          ok = false;
          break;
        }
        beta[c] = alpha[c] * wj[c] / dbar;
        alpha[c] *= dj / dbar;
        dj = dbar;
      }
      if (!ok) break;
      save(j);
      d[uj] = dj;
      const long s = start[uj];
      const int cnt = count[uj];
      info.last_path_entries += cnt;
      if (splitter != nullptr)
        splitter->apply(kernel, arow.data() + s, aval.data() + s, cnt, Wa, wj, beta);
      else
        kernel(arow.data() + s, aval.data() + s, cnt, Wa, wj, beta);
      std::fill_n(wj, kMaxRank, 0.0);
    }
    if (!ok)
      for (; done < path.size(); ++done) std::fill_n(Wa + static_cast<size_t>(path[done]) * kMaxRank, kMaxRank, 0.0);
    return ok;
  }

  // Columns of one sign: all symbolic updates first, then numeric passes of up to kMaxRank columns
  // taken in the elimination order of their first row (Davis & Hager 2001 order the columns by a
  // depth-first walk of the tree), so that the columns of one pass share most of their paths: a
  // pass costs its union path times its rank.
  std::vector<SparseColumn> sorted_cols;
  bool apply(const std::vector<SparseColumn>& cols, double sigma) {
    for (const SparseColumn& w : cols) symbolic(w);
    std::vector<std::pair<Label, size_t>> key;
    key.reserve(cols.size());
    for (size_t c = 0; c < cols.size(); ++c)
      key.emplace_back(label[static_cast<size_t>(first_in_order(cols[c].rows))], c);
    std::sort(key.begin(), key.end());
    sorted_cols.resize(cols.size());
    for (size_t c = 0; c < cols.size(); ++c) sorted_cols[c] = cols[key[c].second];
    for (size_t c0 = 0; c0 < sorted_cols.size(); c0 += kMaxRank) {
      const int r = static_cast<int>(std::min<size_t>(kMaxRank, sorted_cols.size() - c0));
      if (!numeric(sorted_cols.data() + c0, r, sigma)) return false;
    }
    return true;
  }

  // Inserts DOF j (already sized) immediately before DOF `before` in the elimination order (at the
  // end when before < 0). Labels are relabelled evenly when the gap is used up.
  void insert_before(int j, int before) {
    auto pos = order.end();
    if (before >= 0)
      pos = std::lower_bound(order.begin(), order.end(), label[static_cast<size_t>(before)],
                             [&](int a, Label l) { return label[static_cast<size_t>(a)] < l; });
    const Label lo = pos == order.begin() ? 0 : label[static_cast<size_t>(*(pos - 1))];
    const Label hi = pos == order.end() ? lo + 2 * kLabelSpacing : label[static_cast<size_t>(*pos)];
    order.insert(pos, j);
    if (hi - lo >= 2) {
      label[static_cast<size_t>(j)] = lo + (hi - lo) / 2;
      return;
    }
    for (size_t k = 0; k < order.size(); ++k) label[static_cast<size_t>(order[k])] = (k + 1) * kLabelSpacing;
  }

  void rollback(const std::vector<int>& order0, const std::vector<Label>& label0, long arena0,
                const std::vector<std::pair<int, double>>& kdiag0) {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      const auto uj = static_cast<size_t>(it->j);
      d[uj] = it->d;
      parent[uj] = it->parent;
      start[uj] = it->start;
      count[uj] = it->count;
      cap[uj] = it->cap;
      std::copy(it->rows.begin(), it->rows.end(), arow.begin() + it->start);
      std::copy(it->vals.begin(), it->vals.end(), aval.begin() + it->start);
    }
    for (const auto& [j, v] : kdiag0) kdiag[static_cast<size_t>(j)] = v;
    arow.resize(static_cast<size_t>(arena0));
    aval.resize(static_cast<size_t>(arena0));
    if (n != n_before) {
      n = n_before;
      order = order0;
      resize_dofs(n);
      label = label0;
    }
    saved.clear();
  }

  double stored_entries() const {
    double s = n;
    for (int j = 0; j < n; ++j) s += count[static_cast<size_t>(j)];
    return s;
  }
};

DynamicLdlt::DynamicLdlt() : impl_(std::make_unique<Impl>()) {}
DynamicLdlt::~DynamicLdlt() = default;
DynamicLdlt::DynamicLdlt(DynamicLdlt&&) noexcept = default;
DynamicLdlt& DynamicLdlt::operator=(DynamicLdlt&&) noexcept = default;

int DynamicLdlt::rows() const { return impl_->n; }
const DynamicLdltInfo& DynamicLdlt::info() const { return impl_->info; }
void DynamicLdlt::set_pivot_tolerance(double tol) { impl_->pivot_tol = tol; }
bool DynamicLdlt::use_vector_kernel(bool enabled) {
  impl_->kernel = enabled ? detail::ldlt_column_best() : detail::ldlt_column_scalar;
  return impl_->kernel != detail::ldlt_column_scalar;
}
std::vector<int> DynamicLdlt::elimination_order() const { return impl_->order; }
double DynamicLdlt::matrix_diagonal(int j) const { return impl_->kdiag.at(static_cast<size_t>(j)); }

namespace {

struct CholmodCommon {
  cholmod_common c;
  CholmodCommon() { cholmod_l_start(&c); }
  ~CholmodCommon() { cholmod_l_finish(&c); }
};

// Entries of L (diagonal included) that the conversion below stores for a symbolic factor: the
// column counts, or for a supernodal factor every column's rows within its supernode.
double symbolic_entries(const cholmod_factor* L) {
  double e = 0;
  if (L->is_super) {
    const auto* super = static_cast<const SuiteSparse_long*>(L->super);
    const auto* pi = static_cast<const SuiteSparse_long*>(L->pi);
    for (size_t s = 0; s < L->nsuper; ++s) {
      const double ncols = static_cast<double>(super[s + 1] - super[s]);
      const double nrows = static_cast<double>(pi[s + 1] - pi[s]);
      e += ncols * nrows - ncols * (ncols - 1) / 2;
    }
  } else {
    const auto* cc = static_cast<const SuiteSparse_long*>(L->ColCount);
    for (size_t k = 0; k < L->n; ++k) e += static_cast<double>(cc[k]);
  }
  return e;
}

}  // namespace

void DynamicLdlt::compute(const Eigen::SparseMatrix<double>& A) { (void)compute_impl(A, nullptr, nullptr); }

RefillResult DynamicLdlt::refill(const Eigen::SparseMatrix<double>& A, const FillPolicy& policy) {
  if (impl_->n == 0) throw SolverError("DynamicLdlt::refill called before compute");
  if (A.rows() != impl_->n)
    throw SolverError(fmt::format("DynamicLdlt::refill: the matrix has order {}, the factor {}", A.rows(), impl_->n));
  if (!(policy.nnz_ratio >= 1.0) || policy.max_modifications < 0)
    throw SolverError("DynamicLdlt::refill: the policy needs nnz_ratio >= 1 and max_modifications >= 0");
  RefillResult r;
  (void)compute_impl(A, &policy, &r);
  return r;
}

bool DynamicLdlt::compute_impl(const Eigen::SparseMatrix<double>& A, const FillPolicy* policy, RefillResult* result) {
  if (A.rows() != A.cols() || A.rows() == 0)
    throw SolverError(fmt::format("DynamicLdlt: matrix must be square and non-empty, got {}x{}", A.rows(), A.cols()));
  Impl& m = *impl_;
  const long n = static_cast<long>(A.rows());
  Timer t;
  CholmodCommon cc;
  cholmod_common& c = cc.c;
  c.print = 0;
  c.supernodal = XPD_CHOLMOD_LGPL_ONLY ? CHOLMOD_SIMPLICIAL : CHOLMOD_SUPERNODAL;
  c.final_ll = 1;
  c.nmethods = 1;
  c.method[0].ordering = CHOLMOD_METIS;
  c.postorder = 1;
  // Lower triangle of A in CHOLMOD's packed, sorted form.
  long nnz = 0;
  for (int j = 0; j < A.outerSize(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(A, j); it; ++it)
      if (it.row() >= j) ++nnz;
  cholmod_sparse* S = cholmod_l_allocate_sparse(static_cast<size_t>(n), static_cast<size_t>(n),
                                                static_cast<size_t>(nnz), 1, 1, -1, CHOLMOD_REAL, &c);
  if (!S) throw SolverError("DynamicLdlt: out of memory");
  auto* Sp = static_cast<SuiteSparse_long*>(S->p);
  auto* Si = static_cast<SuiteSparse_long*>(S->i);
  auto* Sx = static_cast<double*>(S->x);
  std::vector<double> diag(static_cast<size_t>(n), 0.0);
  long q = 0;
  for (int j = 0; j < A.outerSize(); ++j) {
    Sp[j] = q;
    std::vector<std::pair<long, double>> col;
    for (Eigen::SparseMatrix<double>::InnerIterator it(A, j); it; ++it)
      if (it.row() >= j) col.emplace_back(static_cast<long>(it.row()), it.value());
    std::sort(col.begin(), col.end());
    for (const auto& [i, v] : col) {
      Si[q] = i;
      Sx[q] = v;
      ++q;
      if (i == j) diag[static_cast<size_t>(j)] += v;
    }
  }
  Sp[n] = q;
  cholmod_factor* L = cholmod_l_analyze(S, &c);
  if (!L) {
    cholmod_l_free_sparse(&S, &c);
    throw SolverError("DynamicLdlt: cholmod_l_analyze failed (out of memory?)");
  }
  const double analyze_ms = t.elapsed_ms();
  if (policy) {
    const long mods = m.info.modifications;
    result->nnz_L = m.info.nnz_L;
    result->nnz_L_fresh = symbolic_entries(L);
    result->analyze_ms = analyze_ms;
    result->reason = m.info.nnz_L > policy->nnz_ratio * result->nnz_L_fresh                 ? "fill"
                     : (policy->max_modifications > 0 && mods >= policy->max_modifications) ? "modifications"
                                                                                            : "";
    if (result->reason[0] == '\0') {
      cholmod_l_free_factor(&L, &c);
      cholmod_l_free_sparse(&S, &c);
      return false;
    }
  }
  t.restart();
  cholmod_l_factorize(S, L, &c);
  cholmod_l_free_sparse(&S, &c);
  if (c.status == CHOLMOD_NOT_POSDEF || L->minor < L->n || c.status < 0) {
    const long k = static_cast<long>(L->minor);
    const auto* perm = static_cast<const SuiteSparse_long*>(L->Perm);
    const long col = (perm && k < n) ? static_cast<long>(perm[k]) : k;
    cholmod_l_free_factor(&L, &c);
    throw SolverError(fmt::format("DynamicLdlt: matrix is not positive definite (failed at column {} of {})", col, n));
  }

  // Convert LLᵀ to LDLᵀ in DOF numbering: D_k = L_kk², l_ik = L_ik / L_kk.
  const auto* perm = static_cast<const SuiteSparse_long*>(L->Perm);
  m.n = static_cast<int>(n);
  m.n_before = m.n;
  m.order.assign(static_cast<size_t>(n), 0);
  m.arow.clear();
  m.aval.clear();
  m.label.assign(static_cast<size_t>(n), 0);
  m.parent.assign(static_cast<size_t>(n), -1);
  m.mark.assign(static_cast<size_t>(n), 0u);
  m.saved_in.assign(static_cast<size_t>(n), 0u);
  m.size_workspace(n);
  std::fill(m.W.begin(), m.W.end(), 0.0);  // zero outside a pass, whatever happened before
  m.resize_dofs(m.n);
  m.kdiag = diag;
  for (long k = 0; k < n; ++k) {
    m.order[static_cast<size_t>(k)] = static_cast<int>(perm[k]);
    m.label[static_cast<size_t>(perm[k])] = static_cast<Label>(k + 1) * kLabelSpacing;
  }
  auto add_column = [&](long k, const SuiteSparse_long* rows, const double* vals, long len) {
    // rows[0] = k (the diagonal), then the strictly lower rows in increasing order.
    const double lkk = vals[0];
    const auto j = static_cast<size_t>(perm[k]);
    m.d[j] = lkk * lkk;
    const int cnt = static_cast<int>(len - 1);
    const int cp = cnt + cnt / 5 + 5;
    m.start[j] = static_cast<long>(m.arow.size());
    m.count[j] = cnt;
    m.cap[j] = cp;
    m.arow.resize(m.arow.size() + static_cast<size_t>(cp));
    m.aval.resize(m.aval.size() + static_cast<size_t>(cp));
    for (long e = 1; e < len; ++e) {
      m.arow[static_cast<size_t>(m.start[j] + e - 1)] = static_cast<int>(perm[rows[e]]);
      m.aval[static_cast<size_t>(m.start[j] + e - 1)] = vals[e] / lkk;
    }
    m.parent[j] = len > 1 ? static_cast<int>(perm[rows[1]]) : -1;
  };
  if (L->is_super) {
    const auto* super = static_cast<const SuiteSparse_long*>(L->super);
    const auto* pi = static_cast<const SuiteSparse_long*>(L->pi);
    const auto* px = static_cast<const SuiteSparse_long*>(L->px);
    const auto* ls = static_cast<const SuiteSparse_long*>(L->s);
    const auto* lx = static_cast<const double*>(L->x);
    for (size_t s = 0; s < L->nsuper; ++s) {
      const long k1 = super[s], k2 = super[s + 1];
      const long nrows = pi[s + 1] - pi[s];
      for (long k = k1; k < k2; ++k) {
        const long jj = k - k1;
        add_column(k, ls + pi[s] + jj, lx + px[s] + jj * nrows + jj, nrows - jj);
      }
    }
  } else {
    const auto* lp = static_cast<const SuiteSparse_long*>(L->p);
    const auto* li = static_cast<const SuiteSparse_long*>(L->i);
    const auto* lnz = static_cast<const SuiteSparse_long*>(L->nz);
    const auto* lx = static_cast<const double*>(L->x);
    for (long k = 0; k < n; ++k) add_column(k, li + lp[k], lx + lp[k], lnz[k]);
  }
  cholmod_l_free_factor(&L, &c);
  m.schedule_dirty = true;
  m.solves_since_change = kPanelSolves;  // a fresh factor gets its panels at the first solve
  m.info = DynamicLdltInfo{};
  m.info.n = n;
  m.info.nnz_L = m.stored_entries();
  m.info.nnz_L_build = m.info.nnz_L;
  m.info.analyze_ms = analyze_ms;
  m.info.factorize_ms = t.elapsed_ms();
  if (result) {
    result->refactored = true;
    result->factorize_ms = m.info.factorize_ms;
    result->nnz_L_fresh = m.info.nnz_L;
  }
  return true;
}

bool DynamicLdlt::modify(const FactorModification& mod) {
  Impl& m = *impl_;
  if (m.n == 0) throw SolverError("DynamicLdlt::modify called before compute");
  if (mod.new_dofs < 0) throw SolverError("DynamicLdlt::modify: new_dofs must be >= 0");
  Timer t;
  const int n_old = m.n;
  const int n_new = n_old + mod.new_dofs;
  // Validate before touching anything.
  m.mark.resize(static_cast<size_t>(n_new), 0u);
  auto check = [&](const std::vector<SparseColumn>& cols, const char* what, bool allow_new) {
    for (size_t c = 0; c < cols.size(); ++c) {
      const SparseColumn& w = cols[c];
      if (w.rows.size() != w.values.size() || w.rows.empty())
        throw SolverError(
            fmt::format("DynamicLdlt::modify: {} column {} is empty or its rows and values differ "
                        "in length",
                        what, c));
      const unsigned st = m.next_stamp();
      for (size_t e = 0; e < w.rows.size(); ++e) {
        const int i = w.rows[e];
        if (i < 0 || i >= (allow_new ? n_new : n_old))
          throw SolverError(fmt::format("DynamicLdlt::modify: {} column {} has row {} outside [0, {})", what, c, i,
                                        allow_new ? n_new : n_old));
        if (m.mark[static_cast<size_t>(i)] == st)
          throw SolverError(fmt::format("DynamicLdlt::modify: {} column {} repeats row {}", what, c, i));
        m.mark[static_cast<size_t>(i)] = st;
        if (!std::isfinite(w.values[e]))
          throw SolverError(fmt::format("DynamicLdlt::modify: {} column {} has a non-finite value", what, c));
      }
    }
  };
  check(mod.added, "added", true);
  check(mod.removed, "removed", true);
  // The entrywise change, validated and summed per unordered pair.
  std::vector<Eigen::Triplet<double>> change;
  change.reserve(mod.change.size());
  for (const auto& e : mod.change) {
    if (e.row() < 0 || e.col() < 0 || e.row() >= n_new || e.col() >= n_new)
      throw SolverError(
          fmt::format("DynamicLdlt::modify: change entry ({}, {}) is outside [0, {})", e.row(), e.col(), n_new));
    if (!std::isfinite(e.value()))
      throw SolverError(fmt::format("DynamicLdlt::modify: change entry ({}, {}) is not finite", e.row(), e.col()));
    change.emplace_back(std::min(e.row(), e.col()), std::max(e.row(), e.col()), e.value());
  }
  std::sort(change.begin(), change.end(),
            [](const auto& a, const auto& b) { return a.row() != b.row() ? a.row() < b.row() : a.col() < b.col(); });
  {
    size_t w = 0;
    for (size_t r = 0; r < change.size(); ++r) {
      if (w > 0 && change[w - 1].row() == change[r].row() && change[w - 1].col() == change[r].col())
        change[w - 1] =
            Eigen::Triplet<double>(change[r].row(), change[r].col(), change[w - 1].value() + change[r].value());
      else
        change[w++] = change[r];
    }
    change.resize(w);
  }

  // New diagonal and the insertion point of each new DOF.
  std::vector<double> delta(static_cast<size_t>(mod.new_dofs), 0.0);
  std::vector<int> before(static_cast<size_t>(mod.new_dofs), -1);
  for (const SparseColumn& w : mod.added) {
    int first_old = -1;
    for (int i : w.rows)
      if (i < n_old && (first_old < 0 || m.label[static_cast<size_t>(i)] < m.label[static_cast<size_t>(first_old)]))
        first_old = i;
    for (size_t e = 0; e < w.rows.size(); ++e) {
      const int i = w.rows[e];
      if (i < n_old) continue;
      const auto k = static_cast<size_t>(i - n_old);
      delta[k] += w.values[e] * w.values[e];
      if (first_old >= 0 &&
          (before[k] < 0 || m.label[static_cast<size_t>(first_old)] < m.label[static_cast<size_t>(before[k])]))
        before[k] = first_old;
    }
  }
  for (const auto& e : change) {
    const int i = e.row(), j = e.col();  // i ≤ j
    if (i == j) {
      if (i >= n_old) delta[static_cast<size_t>(i - n_old)] += std::abs(e.value());
      continue;
    }
    if (j >= n_old && i < n_old) {
      const auto k = static_cast<size_t>(j - n_old);
      if (before[k] < 0 || m.label[static_cast<size_t>(i)] < m.label[static_cast<size_t>(before[k])]) before[k] = i;
    }
  }
  if (!mod.place_before.empty()) {
    if (static_cast<int>(mod.place_before.size()) != mod.new_dofs)
      throw SolverError("DynamicLdlt::modify: place_before needs one entry per new DOF");
    for (int k = 0; k < mod.new_dofs; ++k) {
      const int b = mod.place_before[static_cast<size_t>(k)];
      if (b >= n_old) throw SolverError(fmt::format("DynamicLdlt::modify: place_before {} is not an old DOF", b));
      if (b >= 0) before[static_cast<size_t>(k)] = b;
    }
  }
  for (int k = 0; k < mod.new_dofs; ++k)
    if (!(delta[static_cast<size_t>(k)] > 0.0))
      throw SolverError(fmt::format(
          "DynamicLdlt::modify: new DOF {} has no positive diagonal in the added columns or the change", n_old + k));

  // Undo state.
  ++m.event;
  if (m.event == 0) {
    std::fill(m.saved_in.begin(), m.saved_in.end(), 0u);
    m.event = 1;
  }
  m.saved.clear();
  m.n_before = n_old;
  const long arena0 = static_cast<long>(m.arow.size());
  std::vector<int> order0;
  std::vector<Label> label0;
  if (mod.new_dofs > 0) {
    order0 = m.order;
    label0 = m.label;
  }
  std::vector<std::pair<int, double>> kdiag0;
  m.info.last_path_columns = 0;
  m.info.last_path_entries = 0;
  m.info.last_passes = 0;

  // 1. Islands: the new DOFs with their placeholder diagonals δ_j = K_new(j,j).
  m.n = n_new;
  m.resize_dofs(n_new);
  for (int k = 0; k < mod.new_dofs; ++k) {
    const auto j = static_cast<size_t>(n_old + k);
    m.d[j] = delta[static_cast<size_t>(k)];
    m.parent[j] = -1;
    m.start[j] = static_cast<long>(m.arow.size());
    m.count[j] = 0;
    m.cap[j] = 0;
    m.insert_before(n_old + k, before[static_cast<size_t>(k)]);
  }
  // K_new's diagonal (the pivot test's scale); new DOFs start from 0 (their rows of K are zero).
  for (int k = 0; k < mod.new_dofs; ++k) m.kdiag[static_cast<size_t>(n_old + k)] = 0.0;
  auto track = [&](const std::vector<SparseColumn>& cols, double sign) {
    for (const SparseColumn& w : cols)
      for (size_t e = 0; e < w.rows.size(); ++e) {
        if (w.rows[e] < n_old) kdiag0.emplace_back(w.rows[e], m.kdiag[static_cast<size_t>(w.rows[e])]);
        m.kdiag[static_cast<size_t>(w.rows[e])] += sign * w.values[e] * w.values[e];
      }
  };
  // The entrywise change as one rank-2 term per owner (the endpoint first in the order, known now
  // that the new DOFs have their labels).
  std::vector<SparseColumn> added = mod.added, removed = mod.removed;
  if (!change.empty()) {
    std::vector<std::tuple<int, int, double>> owned;  // (owner, row, m_owner(row))
    owned.reserve(2 * change.size());
    for (const auto& e : change) {
      const int i = e.row(), j = e.col();
      if (i == j) {
        owned.emplace_back(i, i, 0.5 * e.value());
        continue;
      }
      const bool i_first = m.label[static_cast<size_t>(i)] < m.label[static_cast<size_t>(j)];
      owned.emplace_back(i_first ? i : j, i_first ? j : i, e.value());
    }
    std::sort(owned.begin(), owned.end());
    for (size_t a = 0; a < owned.size();) {
      const int o = std::get<0>(owned[a]);
      SparseColumn mcol;
      double sq = 0;
      bool has_o = false;
      for (; a < owned.size() && std::get<0>(owned[a]) == o; ++a) {
        const int r = std::get<1>(owned[a]);
        const double v = std::get<2>(owned[a]);
        if (!mcol.rows.empty() && mcol.rows.back() == r) {
          mcol.values.back() += v;
        } else {
          mcol.rows.push_back(r);
          mcol.values.push_back(v);
        }
      }
      for (size_t e = 0; e < mcol.rows.size(); ++e) {
        sq += mcol.values[e] * mcol.values[e];
        has_o = has_o || mcol.rows[e] == o;
      }
      if (sq == 0.0) continue;
      if (!has_o) {
        mcol.rows.push_back(o);
        mcol.values.push_back(0.0);
      }
      const double sc = std::sqrt(std::sqrt(sq));  // a² = ‖m‖ balances the two parts
      SparseColumn p{mcol.rows, {}}, q{mcol.rows, {}};
      for (size_t e = 0; e < mcol.rows.size(); ++e) {
        const double ev = mcol.rows[e] == o ? sc : 0.0, mv = mcol.values[e] / sc;
        p.values.push_back((ev + mv) * std::sqrt(0.5));
        q.values.push_back((ev - mv) * std::sqrt(0.5));
      }
      added.push_back(std::move(p));
      removed.push_back(std::move(q));
    }
  }
  track(added, 1.0);
  track(removed, -1.0);
  // kdiag0 restores in reverse: keep the first value recorded per DOF by restoring in reverse order.
  std::reverse(kdiag0.begin(), kdiag0.end());

  // 2–4. Update with the added columns, downdate the removed ones, then the placeholders.
  std::vector<SparseColumn> placeholders(static_cast<size_t>(mod.new_dofs));
  for (int k = 0; k < mod.new_dofs; ++k)
    placeholders[static_cast<size_t>(k)] = SparseColumn{{n_old + k}, {std::sqrt(delta[static_cast<size_t>(k)])}};
  bool ok = false;
  {
    detail::ColumnSplitter split(/*enabled=*/true);  // long columns of a pass on two threads
    m.splitter = &split;
    try {
      ok = m.apply(added, 1.0) && m.apply(removed, -1.0) && m.apply(placeholders, -1.0);
    } catch (...) {
      // Out of memory mid-pass (the only way here): the factor as it was, the workspace zero.
      m.splitter = nullptr;
      std::fill(m.W.begin(), m.W.end(), 0.0);
      m.rollback(order0, label0, arena0, kdiag0);
      throw;
    }
    m.splitter = nullptr;
    m.info.last_split_columns = split.splits();
    m.info.last_helper_columns = split.helped();
  }
  if (!ok) {
    m.rollback(order0, label0, arena0, kdiag0);
    ++m.info.rollbacks;
    m.info.last_modify_ms = t.elapsed_ms();
    return false;
  }
  m.saved.clear();
  m.n_before = m.n;
  m.schedule_dirty = true;
  m.solves_since_change = 0;
  ++m.info.modifications;
  m.info.n = m.n;
  m.info.nnz_L = m.stored_entries();
  m.info.last_modify_ms = t.elapsed_ms();
  return true;
}

void DynamicLdlt::Impl::build_schedule(bool with_panels) {
  Timer timer;
  // Subtree weights (entries + 1): children precede parents in the elimination order.
  std::vector<double> weight(static_cast<size_t>(n), 0.0);
  std::vector<int> child_count(static_cast<size_t>(n) + 1, 0);
  for (int j : order) {
    weight[static_cast<size_t>(j)] += count[static_cast<size_t>(j)] + 1.0;
    const int p = parent[static_cast<size_t>(j)];
    if (p >= 0) {
      weight[static_cast<size_t>(p)] += weight[static_cast<size_t>(j)];
      ++child_count[static_cast<size_t>(p) + 1];
    }
  }
  std::vector<int> child_start(child_count);
  for (size_t i = 1; i < child_start.size(); ++i) child_start[i] += child_start[i - 1];
  std::vector<int> children(static_cast<size_t>(child_start.back()));
  std::vector<int> fill(child_start.begin(), child_start.end() - 1);
  double total = 0;
  std::vector<std::pair<double, int>> heap;  // candidate subtrees, heaviest first
  for (int j : order) {
    const int p = parent[static_cast<size_t>(j)];
    if (p >= 0)
      children[static_cast<size_t>(fill[static_cast<size_t>(p)]++)] = j;
    else {
      heap.emplace_back(weight[static_cast<size_t>(j)], j);
      total += weight[static_cast<size_t>(j)];
    }
  }
  // Split the heaviest subtree into its children (its root joins the top) until every subtree holds
  // at most 1/32 of the factor; the decomposition depends on the factor only.
  std::vector<char> is_top(static_cast<size_t>(n), 0);
  std::make_heap(heap.begin(), heap.end());
  while (!heap.empty() && heap.front().first > total / 32) {
    std::pop_heap(heap.begin(), heap.end());
    const int r = heap.back().second;
    heap.pop_back();
    is_top[static_cast<size_t>(r)] = 1;
    for (int c = child_start[static_cast<size_t>(r)]; c < child_start[static_cast<size_t>(r) + 1]; ++c) {
      const int ch = children[static_cast<size_t>(c)];
      heap.emplace_back(weight[static_cast<size_t>(ch)], ch);
      std::push_heap(heap.begin(), heap.end());
    }
  }
  // Task roots in elimination order (deterministic numbering), then each DOF's task from its parent.
  std::sort(heap.begin(), heap.end(), [&](const auto& a, const auto& b) {
    return label[static_cast<size_t>(a.second)] < label[static_cast<size_t>(b.second)];
  });
  std::vector<int> task_of(static_cast<size_t>(n), -1);
  for (size_t t = 0; t < heap.size(); ++t) task_of[static_cast<size_t>(heap[t].second)] = static_cast<int>(t);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto j = static_cast<size_t>(*it);
    if (is_top[j] || task_of[j] >= 0) continue;
    task_of[j] = task_of[static_cast<size_t>(parent[j])];
  }
  task_cols.assign(heap.size(), {});
  top_cols.clear();
  top_index.assign(static_cast<size_t>(n), -1);
  posn.assign(static_cast<size_t>(n), 0);
  for (size_t q = 0; q < order.size(); ++q) posn[static_cast<size_t>(order[q])] = static_cast<int>(q);
  for (int j : order) {
    if (is_top[static_cast<size_t>(j)]) {
      top_index[static_cast<size_t>(posn[static_cast<size_t>(j)])] = static_cast<int>(top_cols.size());
      top_cols.push_back(j);
    } else {
      task_cols[static_cast<size_t>(task_of[static_cast<size_t>(j)])].push_back(j);
    }
  }
  // Panels, found inside each group (a panel never straddles a task and the top).
  panels.clear();
  panel_rows.clear();
  panel_size = 0;
  std::vector<int> pos(static_cast<size_t>(n), -1);
  if (with_panels) {
    task_units.assign(task_cols.size(), {});
    for (size_t t = 0; t < task_cols.size(); ++t) build_units(task_cols[t], task_units[t], pos);
    top_units.clear();
    build_units(top_cols, top_units, pos);
  } else {
    task_units = task_cols;
    top_units = top_cols;
  }
  panels_built = with_panels;
  double in_panels = 0;
  for (const Panel& p : panels)
    in_panels += static_cast<double>(p.m) * (p.m + 1) / 2.0 + static_cast<double>(p.m) * p.nr;
  panel_fraction = total > 0 ? in_panels / total : 0.0;
  double top_weight = 0;
  for (int j : top_cols) top_weight += count[static_cast<size_t>(j)] + 1.0;
  info.solve_tasks = static_cast<long>(task_cols.size());
  info.solve_top_fraction = total > 0 ? top_weight / total : 0.0;
  info.solve_panel_fraction = panel_fraction;
  info.solve_panel_values = static_cast<double>(panel_size);
  info.solve_panels = static_cast<long>(panels.size());
  info.solve_panel_max_columns = 0;
  for (const Panel& p : panels) info.solve_panel_max_columns = std::max<long>(info.solve_panel_max_columns, p.m);
  info.last_schedule_ms = timer.elapsed_ms();
  info.solve_panels_built = with_panels;
  schedule_dirty = false;
}

namespace {
constexpr int kPanelMin = 8;
constexpr int kPanelBlas = 16;  // panels of at least this many columns go through BLAS
}  // namespace

void DynamicLdlt::Impl::build_units(const std::vector<int>& cols, std::vector<int>& units, std::vector<int>& pos) {
  const size_t nc = cols.size();
  size_t a = 0;
  while (a < nc) {
    // Extend the chain cols[a..b) while the next column is the parent with the nested pattern.
    size_t b = a + 1;
    while (b < nc) {
      const auto cur = static_cast<size_t>(cols[b - 1]);
      const int nx = cols[b];
      if (parent[cur] != nx || count[cur] != count[static_cast<size_t>(nx)] + 1) break;
      const unsigned st = next_stamp();
      const long sn = start[static_cast<size_t>(nx)];
      for (int e = 0; e < count[static_cast<size_t>(nx)]; ++e)
        mark[static_cast<size_t>(arow[static_cast<size_t>(sn + e)])] = st;
      bool nested = true;
      const long sc = start[cur];
      for (int e = 0; e < count[cur] && nested; ++e) {
        const int i = arow[static_cast<size_t>(sc + e)];
        nested = i == nx || mark[static_cast<size_t>(i)] == st;
      }
      if (!nested) break;
      ++b;
    }
    if (b - a < static_cast<size_t>(kPanelMin)) {
      for (size_t c = a; c < b; ++c) units.push_back(cols[c]);
      a = b;
      continue;
    }
    Panel p;
    p.m = static_cast<int>(b - a);
    const auto last = static_cast<size_t>(cols[b - 1]);
    p.nr = count[last];
    p.rows = static_cast<long>(panel_rows.size());
    p.vals = static_cast<long>(panel_size);
    const int rows = p.m + p.nr;
    for (size_t c = a; c < b; ++c) panel_rows.push_back(cols[c]);
    for (int e = 0; e < count[last]; ++e) panel_rows.push_back(arow[static_cast<size_t>(start[last] + e)]);
    // R in elimination order (columns store rows in any order): the panel then reads and updates
    // y front to back, as a supernodal factor does.
    std::sort(panel_rows.begin() + p.rows + p.m, panel_rows.end(),
              [&](int x, int y) { return posn[static_cast<size_t>(x)] < posn[static_cast<size_t>(y)]; });
    for (int r = 0; r < rows; ++r) pos[static_cast<size_t>(panel_rows[static_cast<size_t>(p.rows + r)])] = r;
    // (rows are DOF ids while the values are placed; turned into positions below)
    double* pv = grow_panels(static_cast<size_t>(rows) * static_cast<size_t>(p.m));
    for (int c = 0; c < p.m; ++c) {
      const auto j = static_cast<size_t>(cols[a + static_cast<size_t>(c)]);
      double* col = pv + static_cast<long>(c) * rows;
      std::fill_n(col, c, 0.0);  // the strict upper triangle: never read, but defined for any BLAS
      col[c] = 1.0;
      for (int e = 0; e < count[j]; ++e)
        col[pos[static_cast<size_t>(arow[static_cast<size_t>(start[j] + e)])]] =
            aval[static_cast<size_t>(start[j] + e)];
    }
    for (int r = 0; r < rows; ++r) {
      int& row = panel_rows[static_cast<size_t>(p.rows + r)];
      pos[static_cast<size_t>(row)] = -1;
      row = posn[static_cast<size_t>(row)];
    }
    units.push_back(-1 - static_cast<int>(panels.size()));
    panels.push_back(p);
    a = b;
  }
}

namespace {

// A panel's forward step: x = y[P] solved with its unit lower triangle, then y[R] −= L_R x (into
// the top buffer for top rows when `top` is given).
// Small panels (a BLAS-style call costs more than its arithmetic): plain loops straight on y, column
// by column (values streamed top to bottom), all k right-hand sides per entry.
template <int K>
void forward_panel_small(const DynamicLdlt::Impl& m, const DynamicLdlt::Impl::Panel& p, double* y, int k_dyn,
                         const int* top, double* buf) {
  const int k = K > 0 ? K : k_dyn;
  const auto uk = static_cast<size_t>(k);
  const int rows = p.m + p.nr;
  const int* r = m.panel_rows.data() + p.rows;
  for (int a = 0; a < p.m; ++a) {
    const double* col = m.panel_vals() + p.vals + static_cast<long>(a) * rows;
    const double* ya = y + static_cast<size_t>(r[a]) * uk;
    for (int b = a + 1; b < rows; ++b) {
      const int i = r[b];
      double* yi =
          b >= p.m && top && top[i] >= 0 ? buf + static_cast<size_t>(top[i]) * uk : y + static_cast<size_t>(i) * uk;
      for (int c = 0; c < k; ++c) yi[c] -= col[b] * ya[c];
    }
  }
}

template <int K>
void backward_panel_small(const DynamicLdlt::Impl& m, const DynamicLdlt::Impl::Panel& p, double* y, int k_dyn) {
  const int k = K > 0 ? K : k_dyn;
  const auto uk = static_cast<size_t>(k);
  const int rows = p.m + p.nr;
  const int* r = m.panel_rows.data() + p.rows;
  for (int a = p.m - 1; a >= 0; --a) {
    const double* col = m.panel_vals() + p.vals + static_cast<long>(a) * rows;
    double acc[K > 0 ? K : 64] = {};
    for (int b = a + 1; b < rows; ++b) {
      const double* yi = y + static_cast<size_t>(r[b]) * uk;
      for (int c = 0; c < k; ++c) acc[c] += col[b] * yi[c];
    }
    double* ya = y + static_cast<size_t>(r[a]) * uk;
    for (int c = 0; c < k; ++c) ya[c] -= acc[c];
  }
}

// Large panels: BLAS on a column-major copy E of the panel's rows of y (rows × k), as CHOLMOD's
// supernodal solve does (Eigen's GEMM would repack the whole panel on every call).
void forward_panel(const DynamicLdlt::Impl& m, const DynamicLdlt::Impl::Panel& p, double* y, int k, const int* top,
                   double* buf, std::vector<double>& scratch) {
  const int rows = p.m + p.nr;
  const int* r = m.panel_rows.data() + p.rows;
  const auto uk = static_cast<size_t>(k);
  const double* Lx = m.panel_vals() + p.vals;
  scratch.resize(static_cast<size_t>(rows) * uk);
  double* E = scratch.data();
  for (int a = 0; a < p.m; ++a)
    for (int c = 0; c < k; ++c) E[a + c * rows] = y[static_cast<size_t>(r[a]) * uk + static_cast<size_t>(c)];
  const double one = 1.0, zero = 0.0;
  dtrsm_("L", "L", "N", "U", &p.m, &k, &one, Lx, &rows, E, &rows);
  for (int a = 0; a < p.m; ++a)
    for (int c = 0; c < k; ++c) y[static_cast<size_t>(r[a]) * uk + static_cast<size_t>(c)] = E[a + c * rows];
  if (p.nr == 0) return;
  dgemm_("N", "N", &p.nr, &k, &p.m, &one, Lx + p.m, &rows, E, &rows, &zero, E + p.m, &rows);
  for (int b = 0; b < p.nr; ++b) {
    const int i = r[p.m + b];
    double* yi = top && top[i] >= 0 ? buf + static_cast<size_t>(top[i]) * uk : y + static_cast<size_t>(i) * uk;
    for (int c = 0; c < k; ++c) yi[c] -= E[p.m + b + c * rows];
  }
}

void backward_panel(const DynamicLdlt::Impl& m, const DynamicLdlt::Impl::Panel& p, double* y, int k,
                    std::vector<double>& scratch) {
  const int rows = p.m + p.nr;
  const int* r = m.panel_rows.data() + p.rows;
  const auto uk = static_cast<size_t>(k);
  const double* Lx = m.panel_vals() + p.vals;
  scratch.resize(static_cast<size_t>(rows) * uk);
  double* E = scratch.data();
  for (int a = 0; a < rows; ++a)
    for (int c = 0; c < k; ++c) E[a + c * rows] = y[static_cast<size_t>(r[a]) * uk + static_cast<size_t>(c)];
  const double one = 1.0, minus = -1.0;
  if (p.nr > 0) dgemm_("T", "N", &p.m, &k, &p.nr, &minus, Lx + p.m, &rows, E + p.m, &rows, &one, E, &rows);
  dtrsm_("L", "L", "T", "U", &p.m, &k, &one, Lx, &rows, E, &rows);
  for (int a = 0; a < p.m; ++a)
    for (int c = 0; c < k; ++c) y[static_cast<size_t>(r[a]) * uk + static_cast<size_t>(c)] = E[a + c * rows];
}

// Forward substitution of the columns `cols` (elimination order): y_i −= l_ij y_j. With `top`
// non-null, updates into top rows (top[i] ≥ 0) go to buf instead.
template <int K>
void forward(const DynamicLdlt::Impl& m, const std::vector<int>& units, double* y, int k_dyn, const int* top,
             double* buf) {
  const int k = K > 0 ? K : k_dyn;
  const auto uk = static_cast<size_t>(k);
  std::vector<double> scratch;
  for (int j : units) {
    if (j < 0) {
      const auto& p = m.panels[static_cast<size_t>(-1 - j)];
      if (p.m < kPanelBlas && (K > 0 || k <= 64))
        forward_panel_small<K>(m, p, y, k, top, buf);
      else
        forward_panel(m, p, y, k, top, buf, scratch);
      continue;
    }
    const auto uj = static_cast<size_t>(j);
    const double* yj = y + static_cast<size_t>(m.posn[uj]) * uk;
    const long s = m.start[uj];
    const int* rows = m.arow.data() + s;
    const double* vals = m.aval.data() + s;
    for (int e = 0; e < m.count[uj]; ++e) {
      const int i = m.posn[static_cast<size_t>(rows[e])];
      double* yi = top && top[i] >= 0 ? buf + static_cast<size_t>(top[i]) * uk : y + static_cast<size_t>(i) * uk;
      const double l = vals[e];
      for (int c = 0; c < k; ++c) yi[c] -= l * yj[c];
    }
  }
}

// Backward substitution of `cols` in reverse: y_j −= Σ_i l_ij y_i.
template <int K>
void backward(const DynamicLdlt::Impl& m, const std::vector<int>& units, double* y, int k_dyn) {
  const int k = K > 0 ? K : k_dyn;
  const auto uk = static_cast<size_t>(k);
  std::vector<double> scratch;
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    if (*it < 0) {
      const auto& p = m.panels[static_cast<size_t>(-1 - *it)];
      if (p.m < kPanelBlas && (K > 0 || k <= 64))
        backward_panel_small<K>(m, p, y, k);
      else
        backward_panel(m, p, y, k, scratch);
      continue;
    }
    const auto uj = static_cast<size_t>(*it);
    double* yj = y + static_cast<size_t>(m.posn[uj]) * uk;
    const long s = m.start[uj];
    const int* rows = m.arow.data() + s;
    const double* vals = m.aval.data() + s;
    for (int e = 0; e < m.count[uj]; ++e) {
      const double* yi = y + static_cast<size_t>(m.posn[static_cast<size_t>(rows[e])]) * uk;
      for (int c = 0; c < k; ++c) yj[c] -= vals[e] * yi[c];
    }
  }
}

template <int K>
void substitute(const DynamicLdlt::Impl& m, double* y, int k_dyn) {
  const int k = K > 0 ? K : k_dyn;
  const auto uk = static_cast<size_t>(k);
  const size_t tasks = m.task_cols.size();
  const size_t top = m.top_cols.size();
  auto& buf = m.task_buffers;
  buf.assign(tasks * top * uk, 0.0);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks, 1), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t t = r.begin(); t < r.end(); ++t)
      forward<K>(m, m.task_units[t], y, k, m.top_index.data(), buf.data() + t * top * uk);
  });
  for (size_t i = 0; i < top; ++i) {  // the tasks' updates of the top, summed in task order
    double* yi = y + static_cast<size_t>(m.posn[static_cast<size_t>(m.top_cols[i])]) * uk;
    for (size_t t = 0; t < tasks; ++t)
      for (size_t c = 0; c < uk; ++c) yi[c] += buf[(t * top + i) * uk + c];
  }
  forward<K>(m, m.top_units, y, k, nullptr, nullptr);
  for (int q = 0; q < m.n; ++q) {
    const double inv = 1.0 / m.d[static_cast<size_t>(m.order[static_cast<size_t>(q)])];
    for (int c = 0; c < k; ++c) y[static_cast<size_t>(q) * uk + static_cast<size_t>(c)] *= inv;
  }
  backward<K>(m, m.top_units, y, k);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, tasks, 1), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t t = r.begin(); t < r.end(); ++t) backward<K>(m, m.task_units[t], y, k);
  });
}

}  // namespace

void DynamicLdlt::solve_in_place(Eigen::Ref<Eigen::MatrixXd> B) const {
  const Impl& m = *impl_;
  if (m.n == 0) throw SolverError("DynamicLdlt::solve called before compute");
  if (B.rows() != m.n) throw SolverError(fmt::format("DynamicLdlt::solve: rhs has {} rows, matrix {}", B.rows(), m.n));
  const int k = static_cast<int>(B.cols());
  if (k == 0) return;
  if (m.solves_since_change < kPanelSolves) ++impl_->solves_since_change;
  const bool want_panels = m.solves_since_change >= kPanelSolves || k >= kPanelColumns;
  if (m.schedule_dirty || (want_panels && !m.panels_built)) impl_->build_schedule(want_panels);
  auto& y = m.y;
  y.resize(static_cast<size_t>(m.n) * static_cast<size_t>(k));
  for (int c = 0; c < k; ++c)
    for (int i = 0; i < m.n; ++i)
      y[static_cast<size_t>(m.posn[static_cast<size_t>(i)]) * static_cast<size_t>(k) + static_cast<size_t>(c)] =
          B(i, c);
  if (k == 1)
    substitute<1>(m, y.data(), k);
  else if (k == 3)
    substitute<3>(m, y.data(), k);
  else
    substitute<0>(m, y.data(), k);
  for (int c = 0; c < k; ++c)
    for (int i = 0; i < m.n; ++i)
      B(i, c) =
          y[static_cast<size_t>(m.posn[static_cast<size_t>(i)]) * static_cast<size_t>(k) + static_cast<size_t>(c)];
}

Eigen::SparseMatrix<double> DynamicLdlt::product() const {
  const Impl& m = *impl_;
  using T = Eigen::Triplet<double>;
  std::vector<T> lt, dt;
  for (int j = 0; j < m.n; ++j) {
    const auto uj = static_cast<size_t>(j);
    lt.emplace_back(j, j, 1.0);
    dt.emplace_back(j, j, m.d[uj]);
    for (int e = 0; e < m.count[uj]; ++e)
      lt.emplace_back(m.arow[static_cast<size_t>(m.start[uj] + e)], j, m.aval[static_cast<size_t>(m.start[uj] + e)]);
  }
  Eigen::SparseMatrix<double> L(m.n, m.n), D(m.n, m.n);
  L.setFromTriplets(lt.begin(), lt.end());
  D.setFromTriplets(dt.begin(), dt.end());
  Eigen::SparseMatrix<double> LD = L * D;
  Eigen::SparseMatrix<double> P = LD * Eigen::SparseMatrix<double>(L.transpose());
  return P;
}

}  // namespace xpd
