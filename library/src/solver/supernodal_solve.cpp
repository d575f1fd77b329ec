#include "supernodal_solve.hpp"

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <queue>
#include <type_traits>
#include <xpd/core/error.hpp>

#include "blas.hpp"

namespace xpd::detail {

namespace {

// Supernodes with at least this many columns go through BLAS (blocked, vectorized kernels); smaller
// ones through the plain loops, where a BLAS call costs more than its arithmetic, unless there are
// many right-hand sides (the adjoint's batches: 48 columns), which BLAS handles at any size.
constexpr long kBlasColumns = 16;
constexpr long kBlasRightHandSides = 8;

// Subtrees lighter than total / kTaskSplit become tasks. Fixed (not derived from the thread count)
// so that the decomposition, and with it every rounding, is the same on any number of threads; 32
// leaves enough tasks for a dynamic schedule to balance 2 to 8 threads.
constexpr double kTaskSplit = 32.0;
}  // namespace

template <class I>
SupernodalSolveT<I>::SupernodalSolveT(const cholmod_factor* L) : L_(L) {
  constexpr int itype = std::is_same_v<I, int> ? CHOLMOD_INT : CHOLMOD_LONG;
  if (!L || !L->is_super || !L->is_ll || L->xtype != CHOLMOD_REAL || L->itype != itype)
    throw SolverError("supernodal solve: needs a real supernodal LL' factor with the solver's index type");
  n_ = static_cast<long>(L->n);
  const long ns = static_cast<long>(L->nsuper);
  nsuper_ = ns;
  const auto* super = static_cast<const I*>(L->super);
  const auto* pi = static_cast<const I*>(L->pi);
  const auto* sidx = static_cast<const I*>(L->s);

  std::vector<long> col_super(n_);
  for (long s = 0; s < ns; ++s)
    for (I c = super[s]; c < super[s + 1]; ++c) col_super[c] = s;
  std::vector<long> parent(ns, -1), first(ns), count(ns, 1);
  std::vector<double> weight(ns), subtree(ns);
  double total = 0;
  for (long s = 0; s < ns; ++s) {
    const long nscol = super[s + 1] - super[s], nsrow = pi[s + 1] - pi[s];
    if (nsrow > nscol) parent[s] = col_super[sidx[pi[s] + nscol]];
    if (parent[s] >= 0 && parent[s] <= s)
      throw SolverError(fmt::format("supernodal solve: supernode {} has parent {} (not postordered)", s, parent[s]));
    weight[s] = static_cast<double>(nsrow) * static_cast<double>(nscol);
    total += weight[s];
    factor_bytes_ += weight[s] * sizeof(double) + static_cast<double>(nsrow) * sizeof(I);
    first[s] = s;
  }
  for (long s = 0; s < ns; ++s) {  // children precede parents: one ascending pass accumulates
    subtree[s] += weight[s];
    if (parent[s] >= 0) {
      subtree[parent[s]] += subtree[s];
      count[parent[s]] += count[s];
      first[parent[s]] = std::min(first[parent[s]], first[s]);
    }
  }
  std::vector<std::vector<long>> children(ns);
  for (long s = 0; s < ns; ++s)
    if (parent[s] >= 0) children[parent[s]].push_back(s);

  // Split the heaviest subtree until every remaining one is light (or a single supernode).
  auto lighter = [&](long a, long b) { return subtree[a] < subtree[b] || (subtree[a] == subtree[b] && a > b); };
  std::priority_queue<long, std::vector<long>, decltype(lighter)> heap(lighter);
  for (long s = 0; s < ns; ++s)
    if (parent[s] < 0) heap.push(s);
  std::vector<long> roots;
  const double threshold = total / kTaskSplit;
  while (!heap.empty()) {
    const long s = heap.top();
    heap.pop();
    if (subtree[s] > threshold && !children[s].empty()) {
      top_.push_back(s);
      for (long c : children[s]) heap.push(c);
    } else {
      roots.push_back(s);
    }
  }
  std::sort(top_.begin(), top_.end());
  // Heaviest first, so that a dynamic schedule ends with the small tasks.
  std::sort(roots.begin(), roots.end(), [&](long a, long b) { return lighter(b, a); });
  double top_weight = 0;
  for (long s : top_) top_weight += weight[s];
  top_fraction_ = total > 0 ? top_weight / total : 0.0;

  top_pos_.assign(ns, -1);
  for (size_t i = 0; i < top_.size(); ++i) top_pos_[top_[i]] = static_cast<long>(i);
  col_super_ = std::move(col_super);
  const long nt = static_cast<long>(top_.size());
  for (long r : roots) {
    if (r - first[r] + 1 != count[r])
      throw SolverError(fmt::format("supernodal solve: subtree of supernode {} is not contiguous", r));
    Task t;
    t.first = first[r];
    t.last = r;
    // Buffer layout: the columns of every top ancestor of r, nearest first.
    t.slot.assign(nt, -1);
    for (long a = parent[r]; a >= 0; a = parent[a]) {
      t.slot[top_pos_[a]] = t.path_cols;
      t.path_cols += super[a + 1] - super[a];
    }
    tasks_.push_back(std::move(t));
  }
}

template <class I>
typename SupernodalSolveT<I>::Supernode SupernodalSolveT<I>::supernode(long s) const {
  const auto* super = static_cast<const I*>(L_->super);
  const auto* pi = static_cast<const I*>(L_->pi);
  const auto* px = static_cast<const I*>(L_->px);
  Supernode b;
  b.first = super[s];
  b.nscol = super[s + 1] - b.first;
  b.nsrow = pi[s + 1] - pi[s];
  b.values = static_cast<const double*>(L_->x) + px[s];
  b.rows = static_cast<const I*>(L_->s) + pi[s] + b.nscol;
  return b;
}

// Both sweeps stream each column of L once, top to bottom (column-major values). Small supernodes
// (most of a tet mesh's factor: a few columns, where a BLAS call costs more than its arithmetic):
// the diagonal block by substitution, the rows below it as axpy (forward) or dot products
// (backward) into a small row-major work block, so that one pass serves all k right-hand sides.
// Large ones, or many right-hand sides: dtrsm / dgemm on a column-major copy. Y is row-major n × k.
template <class I>
template <int K>
void SupernodalSolveT<I>::forward_supernode(long s, double* Y, long k, const Task* task, double* buffer,
                                            std::vector<double>& work) const {
  const long kk = K > 0 ? K : k;
  const auto* super = static_cast<const I*>(L_->super);
  const Supernode b = supernode(s);
  const long k1 = b.first, nscol = b.nscol, nsrow = b.nsrow, m = nsrow - nscol;
  const double* Lx = b.values;
  const I* rows = b.rows;
  double* Yd = Y + k1 * kk;
  // t: the update of the rows below the diagonal block, row-major m × kk.
  const double* t;
  if (nscol >= kBlasColumns || kk >= kBlasRightHandSides) {
    // Column-major E (nsrow × kk) as CHOLMOD lays it out: E₁ := L_dd⁻¹ E₁, E₂ := L_off E₁.
    work.resize(static_cast<size_t>((nsrow + m) * kk));  // E, then T (row-major m × kk)
    double* E = work.data();
    for (long c = 0; c < nscol; ++c)
      for (long j = 0; j < kk; ++j) E[c + j * nsrow] = Yd[c * kk + j];
    const int bk = static_cast<int>(kk), bn = static_cast<int>(nscol), bm = static_cast<int>(m),
              ld = static_cast<int>(nsrow);
    const double one = 1.0, zero = 0.0;
    dtrsm_("L", "L", "N", "N", &bn, &bk, &one, Lx, &ld, E, &ld);
    for (long c = 0; c < nscol; ++c)
      for (long j = 0; j < kk; ++j) Yd[c * kk + j] = E[c + j * nsrow];
    if (m == 0) return;
    dgemm_("N", "N", &bm, &bk, &bn, &one, Lx + nscol, &ld, E, &ld, &zero, E + nscol, &ld);
    double* T = E + nsrow * kk;
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < kk; ++j) T[i * kk + j] = E[nscol + i + j * nsrow];
    t = T;
  } else {
    for (long c = 0; c < nscol; ++c) {
      const double* Lc = Lx + c * nsrow;
      double* yc = Yd + c * kk;
      for (long j = 0; j < kk; ++j) yc[j] /= Lc[c];
      for (long i = c + 1; i < nscol; ++i) {
        double* yi = Yd + i * kk;
        const double l = Lc[i];
        for (long j = 0; j < kk; ++j) yi[j] -= l * yc[j];
      }
    }
    if (m == 0) return;
    work.assign(static_cast<size_t>(m * kk), 0.0);
    double* T = work.data();
    for (long c = 0; c < nscol; ++c) {
      const double* Lc = Lx + c * nsrow + nscol;
      const double* yc = Yd + c * kk;
      for (long i = 0; i < m; ++i)
        for (long j = 0; j < kk; ++j) T[i * kk + j] += Lc[i] * yc[j];
    }
    t = T;
  }
  // Rows of the task's own subtree precede (in postorder) every top row: ancestors of the task root
  // that are outside the task have larger column indices than any column of the task.
  const long top_from = task ? super[task->last + 1] : n_;
  for (long i = 0; i < m; ++i) {
    const long r = rows[i];
    double* dst;
    long stride = 1;
    if (r < top_from) {
      dst = Y + r * kk;
    } else {
      const long a = col_super_[r];
      dst = buffer + task->slot[top_pos_[a]] + (r - super[a]);
      stride = task->path_cols;
    }
    for (long j = 0; j < kk; ++j) dst[j * stride] -= t[i * kk + j];
  }
}

template <class I>
template <int K>
void SupernodalSolveT<I>::backward_supernode(long s, double* Y, long k, std::vector<double>& work) const {
  const long kk = K > 0 ? K : k;
  const Supernode b = supernode(s);
  const long k1 = b.first, nscol = b.nscol, nsrow = b.nsrow, m = nsrow - nscol;
  const double* Lx = b.values;
  const I* rows = b.rows;
  double* Yd = Y + k1 * kk;
  if (nscol >= kBlasColumns || kk >= kBlasRightHandSides) {
    // Column-major E (nsrow × kk): E₁ −= L_offᵀ E₂, E₁ := L_dd⁻ᵀ E₁.
    work.resize(static_cast<size_t>(nsrow * kk));
    double* E = work.data();
    for (long c = 0; c < nscol; ++c)
      for (long j = 0; j < kk; ++j) E[c + j * nsrow] = Yd[c * kk + j];
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < kk; ++j) E[nscol + i + j * nsrow] = Y[rows[i] * kk + j];
    const int bk = static_cast<int>(kk), bn = static_cast<int>(nscol), bm = static_cast<int>(m),
              ld = static_cast<int>(nsrow);
    const double one = 1.0, minus = -1.0;
    if (m > 0) dgemm_("T", "N", &bn, &bk, &bm, &minus, Lx + nscol, &ld, E + nscol, &ld, &one, E, &ld);
    dtrsm_("L", "L", "T", "N", &bn, &bk, &one, Lx, &ld, E, &ld);
    for (long c = 0; c < nscol; ++c)
      for (long j = 0; j < kk; ++j) Yd[c * kk + j] = E[c + j * nsrow];
    return;
  }
  if (m > 0) {
    work.resize(static_cast<size_t>(m * kk));
    double* g = work.data();
    for (long i = 0; i < m; ++i)
      for (long j = 0; j < kk; ++j) g[i * kk + j] = Y[rows[i] * kk + j];
    for (long c = 0; c < nscol; ++c) {
      const double* Lc = Lx + c * nsrow + nscol;
      double acc[K > 0 ? K : 16];
      for (long j0 = 0; j0 < kk; j0 += 16) {  // runtime k: blocks of 16 columns
        const long nj = std::min<long>(kk - j0, K > 0 ? K : 16);
        for (long j = 0; j < nj; ++j) acc[j] = 0.0;
        for (long i = 0; i < m; ++i)
          for (long j = 0; j < nj; ++j) acc[j] += Lc[i] * g[i * kk + j0 + j];
        for (long j = 0; j < nj; ++j) Yd[c * kk + j0 + j] -= acc[j];
      }
    }
  }
  for (long c = nscol - 1; c >= 0; --c) {
    const double* Lc = Lx + c * nsrow;
    double* yc = Yd + c * kk;
    for (long i = c + 1; i < nscol; ++i) {
      const double* yi = Yd + i * kk;
      const double l = Lc[i];
      for (long j = 0; j < kk; ++j) yc[j] -= l * yi[j];
    }
    for (long j = 0; j < kk; ++j) yc[j] /= Lc[c];
  }
}

template <class I>
void SupernodalSolveT<I>::solve_in_place(Eigen::Ref<Eigen::MatrixXd> X) const {
  if (X.rows() != n_) throw SolverError(fmt::format("supernodal solve: rhs has {} rows, factor {}", X.rows(), n_));
  const long k = X.cols();
  if (k == 0) return;
  if (k == 1)
    sweep<1>(X);
  else if (k == 3)
    sweep<3>(X);
  else
    sweep<0>(X);
}

template <class I>
template <int K>
void SupernodalSolveT<I>::sweep(Eigen::Ref<Eigen::MatrixXd> X) const {
  const long k = X.cols();
  const auto* perm = static_cast<const I*>(L_->Perm);
  own_.Y.resize(static_cast<size_t>(n_ * k));
  double* Y = own_.Y.data();
  for (long i = 0; i < n_; ++i)
    for (long j = 0; j < k; ++j) Y[i * k + j] = X(perm ? perm[i] : i, j);
  forward_sweep<K>(Y, k, nsuper_, own_);
  backward_sweep<K>(Y, k, nsuper_, own_);
  for (long i = 0; i < n_; ++i)
    for (long j = 0; j < k; ++j) X(perm ? perm[i] : i, j) = Y[i * k + j];
}

// Forward over the supernodes s < s_end: the subtrees concurrently, their updates of the top in
// per-task buffers, merged in task order (fixed rounding), then the top serially. Rows of skipped
// supernodes (s ≥ s_end) receive every update and are left unsolved.
template <class I>
template <int K>
void SupernodalSolveT<I>::forward_sweep(double* Y, long k, long s_end, Workspace& ws) const {
  const long nt = static_cast<long>(tasks_.size());
  ws.offsets.resize(static_cast<size_t>(nt + 1));
  ws.offsets[0] = 0;
  for (long t = 0; t < nt; ++t) ws.offsets[t + 1] = ws.offsets[t] + tasks_[t].path_cols * k;
  ws.buffers.assign(static_cast<size_t>(ws.offsets[nt]), 0.0);
  auto& work = ws.work;
  tbb::parallel_for(
      tbb::blocked_range<long>(0, nt, 1),
      [&](const tbb::blocked_range<long>& range) {
        std::vector<double>& w = work.local();
        for (long t = range.begin(); t < range.end(); ++t)
          for (long s = tasks_[t].first; s <= tasks_[t].last && s < s_end; ++s)
            forward_supernode<K>(s, Y, k, &tasks_[t], ws.buffers.data() + ws.offsets[t], w);
      },
      tbb::simple_partitioner());
  const auto* super = static_cast<const I*>(L_->super);
  for (long t = 0; t < nt; ++t) {
    const Task& task = tasks_[t];
    const double* b = ws.buffers.data() + ws.offsets[t];
    for (size_t p = 0; p < top_.size(); ++p) {
      const long off = task.slot[p];
      if (off < 0) continue;
      const long a = top_[p], c0 = super[a], nc = super[a + 1] - c0;
      for (long c = 0; c < nc; ++c)
        for (long j = 0; j < k; ++j) Y[(c0 + c) * k + j] += b[off + c + j * task.path_cols];
    }
  }
  std::vector<double>& w0 = work.local();
  for (long s : top_)
    if (s < s_end) forward_supernode<K>(s, Y, k, nullptr, nullptr, w0);
}

// Backward over the supernodes s < s_end: the top serially (parents first), then the subtrees
// concurrently; rows of skipped supernodes are read as they are (the known solution there).
template <class I>
template <int K>
void SupernodalSolveT<I>::backward_sweep(double* Y, long k, long s_end, Workspace& ws) const {
  const long nt = static_cast<long>(tasks_.size());
  auto& work = ws.work;
  std::vector<double>& w0 = work.local();
  for (auto it = top_.rbegin(); it != top_.rend(); ++it)
    if (*it < s_end) backward_supernode<K>(*it, Y, k, w0);
  tbb::parallel_for(
      tbb::blocked_range<long>(0, nt, 1),
      [&](const tbb::blocked_range<long>& range) {
        std::vector<double>& w = work.local();
        for (long t = range.begin(); t < range.end(); ++t)
          for (long s = tasks_[t].last; s >= tasks_[t].first; --s)
            if (s < s_end) backward_supernode<K>(s, Y, k, w);
      },
      tbb::simple_partitioner());
}

template <class I>
long SupernodalSolveT<I>::supernode_starting_at(long c) const {
  if (c == n_) return nsuper_;
  if (c < 0 || c > n_) return -1;
  const long s = col_super_[static_cast<size_t>(c)];
  return static_cast<const I*>(L_->super)[s] == c ? s : -1;
}

namespace {
template <class F>
void dispatch_k(long k, F&& f) {
  if (k == 1)
    f(std::integral_constant<int, 1>{});
  else if (k == 3)
    f(std::integral_constant<int, 3>{});
  else
    f(std::integral_constant<int, 0>{});
}
}  // namespace

template <class I>
void SupernodalSolveT<I>::x1_sweep(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws, bool forward) const {
  const long s_end = supernode_starting_at(n1);
  if (B.rows() != n_ || s_end < 0)
    throw SolverError(
        fmt::format("supernodal solve: x1 sweep needs {} rows and a supernode starting at column {}", n_, n1));
  const long k = B.cols();
  if (k == 0) return;
  ws.Y.resize(static_cast<size_t>(n_ * k));
  double* Y = ws.Y.data();
  for (long i = 0; i < n_; ++i)
    for (long j = 0; j < k; ++j) Y[i * k + j] = B(i, j);
  dispatch_k(k, [&](auto kc) {
    if (forward)
      forward_sweep<decltype(kc)::value>(Y, k, s_end, ws);
    else
      backward_sweep<decltype(kc)::value>(Y, k, s_end, ws);
  });
  // The backward sweep leaves the x2 rows (the given u2) as they are.
  const long rows = forward ? n_ : n1;
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < k; ++j) B(i, j) = Y[i * k + j];
}

template <class I>
void SupernodalSolveT<I>::forward_x1(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws) const {
  x1_sweep(B, n1, ws, true);
}

template <class I>
void SupernodalSolveT<I>::backward_x1(Eigen::Ref<Eigen::MatrixXd> B, long n1, Workspace& ws) const {
  x1_sweep(B, n1, ws, false);
}

template class SupernodalSolveT<SuiteSparse_long>;
template class SupernodalSolveT<int>;

}  // namespace xpd::detail
