#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <xpd/core/error.hpp>
#include <xpd/gpu/supernodal_plan.hpp>

extern "C" {
// LAPACK (linked through CHOLMOD's dependencies): inverse of a triangular matrix, in place.
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda, int* info);
}

namespace xpd::gpu {

namespace {
using T = SupernodalTiles;
constexpr int ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }
}  // namespace

double SupernodalPlan::device_bytes() const {
  return static_cast<double>(values.size()) * sizeof(double) + static_cast<double>(rows.size()) * sizeof(int) +
         static_cast<double>(relmap.size()) * sizeof(int) +
         static_cast<double>(diag_tiles.size() + below_tiles.size() + col_tiles.size()) * sizeof(PlanTile);
}

SupernodalPlan make_supernodal_plan(const SupernodalFactorView& L) {
  if (L.nsuper <= 0 || !L.super || !L.pi || !L.px || !L.s || !L.x || !L.perm)
    throw SolverError("GPU solve plan: the factor is not a CHOLMOD supernodal LL' factor");
  if (L.n > (1L << 31) - 1) throw SolverError("GPU solve plan: more than 2^31 unknowns");
  SupernodalPlan p;
  p.n = L.n;
  const int ns = static_cast<int>(L.nsuper);
  p.nsuper = ns;
  p.first_col.resize(ns);
  p.ncols.resize(ns);
  p.nrows.resize(ns);
  p.value_offset.resize(ns);
  p.row_offset.resize(ns);
  p.contrib_offset.resize(ns);
  p.partial_offset.resize(ns);
  p.parent.assign(ns, -1);
  std::vector<int> col_super(static_cast<size_t>(L.n));
  for (int s = 0; s < ns; ++s)
    for (long c = L.super[s]; c < L.super[s + 1]; ++c) col_super[static_cast<size_t>(c)] = s;
  long contrib = 0, slots = 0;
  for (int s = 0; s < ns; ++s) {
    const long nc = L.super[s + 1] - L.super[s], nr = L.pi[s + 1] - L.pi[s];
    if (nc <= 0 || nr < nc || nr > (1L << 30))
      throw SolverError(fmt::format("GPU solve plan: supernode {} has {} rows and {} columns", s, nr, nc));
    p.first_col[s] = L.super[s];
    p.ncols[s] = static_cast<int>(nc);
    p.nrows[s] = static_cast<int>(nr);
    p.value_offset[s] = L.px[s];
    p.row_offset[s] = L.pi[s];
    p.contrib_offset[s] = contrib;
    contrib += nr - nc;
    p.partial_offset[s] = slots;
    const long fwd = static_cast<long>(ceil_div(nc, T::kCols)) * nr;
    const long bwd = static_cast<long>(std::max(ceil_div(nr - nc, T::kRowChunk), ceil_div(nc, T::kRowChunk))) * nc;
    slots += std::max(fwd, bwd);
    if (nr > nc) {
      p.parent[s] = col_super[static_cast<size_t>(L.s[L.pi[s] + nc])];
      if (p.parent[s] <= s)
        throw SolverError(fmt::format("GPU solve plan: supernode {} has parent {} (not postordered)", s, p.parent[s]));
    }
  }
  p.contrib_rows = contrib;
  p.partial_slots = slots;

  // Children in ascending order (the fixed order of the forward gather).
  p.child_offsets.assign(ns + 1, 0);
  for (int s = 0; s < ns; ++s)
    if (p.parent[s] >= 0) ++p.child_offsets[p.parent[s] + 1];
  for (int s = 0; s < ns; ++s) p.child_offsets[s + 1] += p.child_offsets[s];
  p.children.resize(static_cast<size_t>(p.child_offsets[ns]));
  {
    std::vector<int> fill(p.child_offsets.begin(), p.child_offsets.end() - 1);
    for (int s = 0; s < ns; ++s)
      if (p.parent[s] >= 0) p.children[fill[p.parent[s]]++] = s;
  }

  // Relative maps: a child's rows below, located among its parent's rows (both lists ascending).
  p.relmap.resize(static_cast<size_t>(contrib));
  for (int s = 0; s < ns; ++s) {
    const int q = p.parent[s];
    if (q < 0) continue;
    const long* cr = L.s + L.pi[s] + p.ncols[s];
    const long* pr = L.s + L.pi[q];
    const int nb = p.nrows[s] - p.ncols[s];
    int pos = 0;
    for (int i = 0; i < nb; ++i) {
      // The parent's own columns come first (consecutive), then its rows below (ascending).
      const long r = cr[i];
      if (r >= p.first_col[q] && r < p.first_col[q] + p.ncols[q]) {
        p.relmap[p.contrib_offset[s] + i] = static_cast<int>(r - p.first_col[q]);
        continue;
      }
      pos = std::max(pos, p.ncols[q]);
      while (pos < p.nrows[q] && pr[pos] < r) ++pos;
      if (pos == p.nrows[q] || pr[pos] != r)
        throw SolverError(fmt::format("GPU solve plan: row {} of supernode {} is missing from its parent {}", r, s, q));
      p.relmap[p.contrib_offset[s] + i] = pos;
    }
  }

  // Levels: leaves 0, a parent one above its highest child.
  std::vector<int> level(ns, 0);
  int levels = 0;
  for (int s = 0; s < ns; ++s) {
    if (p.parent[s] >= 0) level[p.parent[s]] = std::max(level[p.parent[s]], level[s] + 1);
    levels = std::max(levels, level[s] + 1);
  }
  p.levels = levels;
  p.level_offsets.assign(levels + 1, 0);
  for (int s = 0; s < ns; ++s) ++p.level_offsets[level[s] + 1];
  for (int l = 0; l < levels; ++l) p.level_offsets[l + 1] += p.level_offsets[l];
  p.level_supernodes.resize(ns);
  {
    std::vector<int> fill(p.level_offsets.begin(), p.level_offsets.end() - 1);
    for (int s = 0; s < ns; ++s) p.level_supernodes[fill[level[s]]++] = s;
  }
  p.diag_tile_offsets.assign(1, 0);
  p.below_tile_offsets.assign(1, 0);
  p.col_tile_offsets.assign(1, 0);
  p.level_max_chunks_fwd.assign(levels, 1);
  p.level_max_chunks_bwd.assign(levels, 1);
  for (int l = 0; l < levels; ++l) {
    for (int i = p.level_offsets[l]; i < p.level_offsets[l + 1]; ++i) {
      const int s = p.level_supernodes[i];
      const int nc = p.ncols[s], nb = p.nrows[s] - nc;
      for (int r = 0; r < nc; r += T::kRows) p.diag_tiles.push_back({s, r});
      for (int r = 0; r < nb; r += T::kRows) p.below_tiles.push_back({s, r});
      for (int c = 0; c < nc; c += T::kWarpCols) p.col_tiles.push_back({s, c});
      p.level_max_chunks_fwd[l] = std::max(p.level_max_chunks_fwd[l], ceil_div(nc, T::kCols));
      p.level_max_chunks_bwd[l] =
          std::max({p.level_max_chunks_bwd[l], ceil_div(nb, T::kRowChunk), ceil_div(nc, T::kRowChunk)});
    }
    p.diag_tile_offsets.push_back(static_cast<int>(p.diag_tiles.size()));
    p.below_tile_offsets.push_back(static_cast<int>(p.below_tiles.size()));
    p.col_tile_offsets.push_back(static_cast<int>(p.col_tiles.size()));
  }

  // Values with inverted diagonal blocks (partitioned inverse), rows and the permutation.
  const long nvals = L.px[ns];
  p.values.assign(L.x, L.x + nvals);
  p.rows.assign(L.s, L.s + L.pi[ns]);
  p.perm.assign(L.perm, L.perm + L.n);
  for (int s = 0; s < ns; ++s) {
    double* a = p.values.data() + p.value_offset[s];
    const int nc = p.ncols[s], ld = p.nrows[s];
    for (int j = 1; j < nc; ++j) std::fill(a + static_cast<long>(j) * ld, a + static_cast<long>(j) * ld + j, 0.0);
    int info = 0;
    dtrtri_("L", "N", &nc, a, &ld, &info);
    if (info != 0)
      throw SolverError(
          fmt::format("GPU solve plan: diagonal block of supernode {} is singular (LAPACK dtrtri info {})", s, info));
  }
  return p;
}

namespace {

// The warp's sum of one column (backward kernels): lane l adds rows l, l + 32, ... of the chunk in
// order, then the 32 lane sums meet in the butterfly of __shfl_xor_sync (offsets 16, 8, 4, 2, 1).
template <class Term>
double warp_sum(int begin, int end, Term term) {
  double lane[32];
  for (int l = 0; l < 32; ++l) {
    double a = 0.0;
    for (int i = begin + l; i < end; i += 32) a += term(i);
    lane[l] = a;
  }
  for (int off = 16; off >= 1; off /= 2) {
    double next[32];
    for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
    std::memcpy(lane, next, sizeof(lane));
  }
  return lane[0];
}

}  // namespace

void solve_reference(const SupernodalPlan& p, double* B, int k) {
  if (k <= 0) return;
  const long n = p.n;
  std::vector<double> Y(static_cast<size_t>(n * k)), C(static_cast<size_t>(p.contrib_rows * k)),
      P(static_cast<size_t>(p.partial_slots * k));
  for (long i = 0; i < n; ++i)
    for (int r = 0; r < k; ++r) Y[i * k + r] = B[p.perm[i] + r * n];

  for (int l = 0; l < p.levels; ++l) {
    for (int q = p.level_offsets[l]; q < p.level_offsets[l + 1]; ++q) {
      const int s = p.level_supernodes[q];
      const int nc = p.ncols[s], nr = p.nrows[s], nb = nr - nc;
      const long fc = p.first_col[s];
      const double* a = p.values.data() + p.value_offset[s];
      double* cs = C.data() + p.contrib_offset[s] * k;
      double* part = P.data() + p.partial_offset[s] * k;
      // F1: gather the children's contributions (ascending children).
      std::fill(cs, cs + static_cast<long>(nb) * k, 0.0);
      for (int ci = p.child_offsets[s]; ci < p.child_offsets[s + 1]; ++ci) {
        const int c = p.children[ci];
        const int cnb = p.nrows[c] - p.ncols[c];
        const double* cc = C.data() + p.contrib_offset[c] * k;
        const int* map = p.relmap.data() + p.contrib_offset[c];
        for (int i = 0; i < cnb; ++i) {
          double* dst = map[i] < nc ? &Y[(fc + map[i]) * k] : cs + static_cast<long>(map[i] - nc) * k;
          for (int r = 0; r < k; ++r) dst[r] += cc[i * k + r];
        }
      }
      // F2: partial products of L_ss⁻¹ w (chunks c ≤ the row tile's index).
      for (int i = 0; i < nc; ++i)
        for (int c = 0; c <= i / T::kRows; ++c) {
          const int j1 = std::min((c + 1) * T::kCols, nc);
          for (int r = 0; r < k; ++r) {
            double acc = 0.0;
            for (int j = c * T::kCols; j < j1; ++j) acc += a[i + static_cast<long>(j) * nr] * Y[(fc + j) * k + r];
            part[(static_cast<long>(c) * nr + i) * k + r] = acc;
          }
        }
      for (int i = 0; i < nc; ++i)
        for (int r = 0; r < k; ++r) {
          double y = part[static_cast<long>(i) * k + r];
          for (int c = 1; c <= i / T::kRows; ++c) y += part[(static_cast<long>(c) * nr + i) * k + r];
          Y[(fc + i) * k + r] = y;
        }
      // F3: c_s −= L_rs y_s.
      const int nchunks = (nc + T::kCols - 1) / T::kCols;
      for (int i = nc; i < nr; ++i)
        for (int c = 0; c < nchunks; ++c) {
          const int j1 = std::min((c + 1) * T::kCols, nc);
          for (int r = 0; r < k; ++r) {
            double acc = 0.0;
            for (int j = c * T::kCols; j < j1; ++j) acc += a[i + static_cast<long>(j) * nr] * Y[(fc + j) * k + r];
            part[(static_cast<long>(c) * nr + i) * k + r] = acc;
          }
        }
      for (int i = nc; i < nr; ++i)
        for (int r = 0; r < k; ++r) {
          double sum = part[static_cast<long>(i) * k + r];
          for (int c = 1; c < nchunks; ++c) sum += part[(static_cast<long>(c) * nr + i) * k + r];
          cs[static_cast<long>(i - nc) * k + r] -= sum;
        }
    }
  }

  for (int l = p.levels - 1; l >= 0; --l) {
    for (int q = p.level_offsets[l]; q < p.level_offsets[l + 1]; ++q) {
      const int s = p.level_supernodes[q];
      const int nc = p.ncols[s], nr = p.nrows[s], nb = nr - nc;
      const long fc = p.first_col[s];
      const double* a = p.values.data() + p.value_offset[s];
      const long* rows = p.rows.data() + p.row_offset[s];
      double* part = P.data() + p.partial_offset[s] * k;
      // B1: t = y − L_rsᵀ x[rows below].
      const int nb_chunks = (nb + T::kRowChunk - 1) / T::kRowChunk;
      for (int c = 0; c < nb_chunks; ++c) {
        const int i0 = nc + c * T::kRowChunk, i1 = std::min(nc + (c + 1) * T::kRowChunk, nr);
        for (int j = 0; j < nc; ++j)
          for (int r = 0; r < k; ++r)
            part[(static_cast<long>(c) * nc + j) * k + r] =
                warp_sum(i0, i1, [&](int i) { return a[i + static_cast<long>(j) * nr] * Y[rows[i] * k + r]; });
      }
      for (int j = 0; j < nc; ++j)
        for (int r = 0; r < k; ++r) {
          if (nb_chunks == 0) continue;
          double sum = part[static_cast<long>(j) * k + r];
          for (int c = 1; c < nb_chunks; ++c) sum += part[(static_cast<long>(c) * nc + j) * k + r];
          Y[(fc + j) * k + r] -= sum;
        }
      // B2: x = L_ss⁻ᵀ t (row chunks that reach the column tile).
      const int nd_chunks = (nc + T::kRowChunk - 1) / T::kRowChunk;
      for (int j = 0; j < nc; ++j) {
        const int c0 = (j / T::kWarpCols) * T::kWarpCols / T::kRowChunk;
        for (int c = c0; c < nd_chunks; ++c) {
          const int i0 = c * T::kRowChunk, i1 = std::min((c + 1) * T::kRowChunk, nc);
          for (int r = 0; r < k; ++r)
            part[(static_cast<long>(c) * nc + j) * k + r] =
                warp_sum(i0, i1, [&](int i) { return a[i + static_cast<long>(j) * nr] * Y[(fc + i) * k + r]; });
        }
      }
      for (int j = 0; j < nc; ++j) {
        const int c0 = (j / T::kWarpCols) * T::kWarpCols / T::kRowChunk;
        for (int r = 0; r < k; ++r) {
          double x = part[(static_cast<long>(c0) * nc + j) * k + r];
          for (int c = c0 + 1; c < nd_chunks; ++c) x += part[(static_cast<long>(c) * nc + j) * k + r];
          Y[(fc + j) * k + r] = x;
        }
      }
    }
  }
  for (long i = 0; i < n; ++i)
    for (int r = 0; r < k; ++r) B[p.perm[i] + r * n] = Y[i * k + r];
}

}  // namespace xpd::gpu
