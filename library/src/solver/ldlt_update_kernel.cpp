#include "ldlt_update_kernel.hpp"

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <thread>
#include <xpd/core/threads.hpp>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define XPD_LDLT_AVX2 1
#endif

namespace {
inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}
}  // namespace

namespace xpd::detail {

void ldlt_column_scalar(const int* rows, double* vals, int count, double* W, const double* wj, const double* beta) {
  for (int e = 0; e < count; ++e) {
    double* wi = W + kLdltRank * static_cast<long>(rows[e]);
    double l = vals[e];
    // All slots (a pass of rank r < kLdltRank has wj = β = 0 in the rest): a fixed trip count the
    // compiler unrolls.
    for (int c = 0; c < kLdltRank; ++c) {
      wi[c] -= wj[c] * l;
      l += beta[c] * wi[c];
    }
    vals[e] = l;
  }
}

#ifdef XPD_LDLT_AVX2

namespace {

// Why this shape: the 8 steps of an entry form one dependent chain (each reads the l or w the step
// before wrote), so the scalar loop is bound by latency and by the loads the compiler repeats
// because W and vals may alias. Four entries per step put one entry in each lane: their W rows
// (32 bytes each, one load) are transposed so that lane k of register c holds w_c of entry k, and
// the chain runs on vectors. Rows within a column are distinct, so the four write-backs never
// collide.
__attribute__((target("avx2,fma"))) inline void transpose4(__m256d& a, __m256d& b, __m256d& c, __m256d& d) {
  const __m256d t0 = _mm256_unpacklo_pd(a, b);  // a0 b0 a2 b2
  const __m256d t1 = _mm256_unpackhi_pd(a, b);  // a1 b1 a3 b3
  const __m256d t2 = _mm256_unpacklo_pd(c, d);  // c0 d0 c2 d2
  const __m256d t3 = _mm256_unpackhi_pd(c, d);  // c1 d1 c3 d3
  a = _mm256_permute2f128_pd(t0, t2, 0x20);     // a0 b0 c0 d0
  b = _mm256_permute2f128_pd(t1, t3, 0x20);     // a1 b1 c1 d1
  c = _mm256_permute2f128_pd(t0, t2, 0x31);     // a2 b2 c2 d2
  d = _mm256_permute2f128_pd(t1, t3, 0x31);     // a3 b3 c3 d3
}

// Entries ahead whose W rows are prefetched (xpd bench cut --box 48, k = 16 faces, 2026-11-27, one
// run each: none 220–350 ms per update, 32 entries 230–280 ms, 16 entries 180–220 ms).
constexpr int kPrefetch = 16;

template <int G>
__attribute__((target("avx2,fma"))) void ldlt_column_avx2_g(const int* rows, double* vals, int count, double* W,
                                                            const double* wj, const double* beta) {
  constexpr int R = 4 * G;
  __m256d jv[R], bv[R];
  for (int c = 0; c < R; ++c) {
    jv[c] = _mm256_set1_pd(wj[c]);
    bv[c] = _mm256_set1_pd(beta[c]);
  }
  int e = 0;
  // Two blocks of 4 entries per step, their chains interleaved so that the out-of-order window
  // holds independent work (one block's 2R fused steps are one dependent chain).
  for (; e + 8 <= count; e += 8) {
    double *p[4], *q[4];
    // The W rows a few steps ahead: a long column's rows are scattered over W, which outgrows the
    // core's L2 on large meshes; the row ids are known from the stream, so the loads are not.
    if (e + 8 + kPrefetch <= count)
      for (int k = 0; k < 8; ++k)
        _mm_prefetch(reinterpret_cast<const char*>(W + R * static_cast<long>(rows[e + kPrefetch + k])), _MM_HINT_T0);
    for (int k = 0; k < 4; ++k) {
      p[k] = W + R * static_cast<long>(rows[e + k]);
      q[k] = W + R * static_cast<long>(rows[e + 4 + k]);
    }
    __m256d l = _mm256_loadu_pd(vals + e), m = _mm256_loadu_pd(vals + e + 4);
    for (int g = 0; g < G; ++g) {
      __m256d w0 = _mm256_loadu_pd(p[0] + 4 * g), w1 = _mm256_loadu_pd(p[1] + 4 * g),
              w2 = _mm256_loadu_pd(p[2] + 4 * g), w3 = _mm256_loadu_pd(p[3] + 4 * g);
      __m256d v0 = _mm256_loadu_pd(q[0] + 4 * g), v1 = _mm256_loadu_pd(q[1] + 4 * g),
              v2 = _mm256_loadu_pd(q[2] + 4 * g), v3 = _mm256_loadu_pd(q[3] + 4 * g);
      transpose4(w0, w1, w2, w3);  // w_c: slot 4g + c of the four entries
      transpose4(v0, v1, v2, v3);
      w0 = _mm256_fnmadd_pd(jv[4 * g], l, w0);
      v0 = _mm256_fnmadd_pd(jv[4 * g], m, v0);
      l = _mm256_fmadd_pd(bv[4 * g], w0, l);
      m = _mm256_fmadd_pd(bv[4 * g], v0, m);
      w1 = _mm256_fnmadd_pd(jv[4 * g + 1], l, w1);
      v1 = _mm256_fnmadd_pd(jv[4 * g + 1], m, v1);
      l = _mm256_fmadd_pd(bv[4 * g + 1], w1, l);
      m = _mm256_fmadd_pd(bv[4 * g + 1], v1, m);
      w2 = _mm256_fnmadd_pd(jv[4 * g + 2], l, w2);
      v2 = _mm256_fnmadd_pd(jv[4 * g + 2], m, v2);
      l = _mm256_fmadd_pd(bv[4 * g + 2], w2, l);
      m = _mm256_fmadd_pd(bv[4 * g + 2], v2, m);
      w3 = _mm256_fnmadd_pd(jv[4 * g + 3], l, w3);
      v3 = _mm256_fnmadd_pd(jv[4 * g + 3], m, v3);
      l = _mm256_fmadd_pd(bv[4 * g + 3], w3, l);
      m = _mm256_fmadd_pd(bv[4 * g + 3], v3, m);
      transpose4(w0, w1, w2, w3);
      transpose4(v0, v1, v2, v3);
      for (int k = 0; k < 4; ++k) {
        _mm256_storeu_pd(p[k] + 4 * g, k == 0 ? w0 : k == 1 ? w1 : k == 2 ? w2 : w3);
        _mm256_storeu_pd(q[k] + 4 * g, k == 0 ? v0 : k == 1 ? v1 : k == 2 ? v2 : v3);
      }
    }
    _mm256_storeu_pd(vals + e, l);
    _mm256_storeu_pd(vals + e + 4, m);
  }
  for (; e + 4 <= count; e += 4) {
    double* p[4];
    for (int k = 0; k < 4; ++k) p[k] = W + R * static_cast<long>(rows[e + k]);
    __m256d l = _mm256_loadu_pd(vals + e);
    for (int g = 0; g < G; ++g) {
      __m256d w0 = _mm256_loadu_pd(p[0] + 4 * g), w1 = _mm256_loadu_pd(p[1] + 4 * g),
              w2 = _mm256_loadu_pd(p[2] + 4 * g), w3 = _mm256_loadu_pd(p[3] + 4 * g);
      transpose4(w0, w1, w2, w3);
      w0 = _mm256_fnmadd_pd(jv[4 * g], l, w0);
      l = _mm256_fmadd_pd(bv[4 * g], w0, l);
      w1 = _mm256_fnmadd_pd(jv[4 * g + 1], l, w1);
      l = _mm256_fmadd_pd(bv[4 * g + 1], w1, l);
      w2 = _mm256_fnmadd_pd(jv[4 * g + 2], l, w2);
      l = _mm256_fmadd_pd(bv[4 * g + 2], w2, l);
      w3 = _mm256_fnmadd_pd(jv[4 * g + 3], l, w3);
      l = _mm256_fmadd_pd(bv[4 * g + 3], w3, l);
      transpose4(w0, w1, w2, w3);
      _mm256_storeu_pd(p[0] + 4 * g, w0);
      _mm256_storeu_pd(p[1] + 4 * g, w1);
      _mm256_storeu_pd(p[2] + 4 * g, w2);
      _mm256_storeu_pd(p[3] + 4 * g, w3);
    }
    _mm256_storeu_pd(vals + e, l);
  }
  // The last entries with the same fused steps (the same rounding as a lane above).
  for (; e < count; ++e) {
    double* wi = W + R * static_cast<long>(rows[e]);
    double l = vals[e];
    for (int c = 0; c < R; ++c) {
      wi[c] = __builtin_fma(-wj[c], l, wi[c]);
      l = __builtin_fma(beta[c], wi[c], l);
    }
    vals[e] = l;
  }
}

}  // namespace

bool ldlt_column_vector_available() {
  static const bool ok = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}

LdltColumnKernel ldlt_column_best() {
  return ldlt_column_vector_available() ? ldlt_column_avx2_g<kLdltRank / 4> : ldlt_column_scalar;
}

#else

bool ldlt_column_vector_available() { return false; }
LdltColumnKernel ldlt_column_best() { return ldlt_column_scalar; }

#endif

// ---- ColumnSplitter ----------------------------------------------------------------------------

struct ColumnSplitter::Impl {
  // The hand-over: the caller posts a job (state kPosted); the helper or, failing it, the caller
  // claims it (kClaimed); the helper marks it kDone. Job fields are written before the release
  // store of kPosted and read after an acquiring claim; W after an acquiring load of kDone.
  enum : int { kIdle = 0, kPosted = 1, kClaimed = 2, kDone = 3 };
  std::atomic<int> state{kIdle};
  std::atomic<bool> stop{false};
  LdltColumnKernel kernel = nullptr;
  const int* rows = nullptr;
  double* vals = nullptr;
  int count = 0;
  double* W = nullptr;
  const double* wj = nullptr;
  const double* beta = nullptr;
  tbb::task_group group;
  bool enabled = false;  // may start the helper (on the first long column: short passes never do)
  bool running = false;
  long splits = 0;
  std::atomic<long> helped{0};  // jobs the helper ran

  void helper_loop() {
    unsigned idle = 0;
    while (!stop.load(std::memory_order_acquire)) {
      int expected = kPosted;
      if (state.load(std::memory_order_relaxed) == kPosted &&
          state.compare_exchange_strong(expected, kClaimed, std::memory_order_acquire)) {
        kernel(rows, vals, count, W, wj, beta);
        helped.fetch_add(1, std::memory_order_relaxed);
        state.store(kDone, std::memory_order_release);
        idle = 0;
        continue;
      }
      // Spin while columns keep coming; back off to yields when the caller is elsewhere (a
      // short column, the symbolic phase) so that an oversubscribed machine is not starved.
      if (++idle < 4096)
        cpu_relax();
      else
        std::this_thread::yield();
    }
  }
};

ColumnSplitter::ColumnSplitter(bool enabled) : impl_(std::make_unique<Impl>()) {
  // Both limits: the arena's and a ThreadLimit's (tbb::global_control), which the arena's does not
  // reflect.
  impl_->enabled = enabled && tbb::this_task_arena::max_concurrency() >= 2 && tbb_threads() >= 2;
}

ColumnSplitter::~ColumnSplitter() {
  if (!impl_->running) return;
  impl_->stop.store(true, std::memory_order_release);
  impl_->group.wait();  // runs the helper here (and it returns at once) if TBB never started it
}

long ColumnSplitter::splits() const { return impl_->splits; }
long ColumnSplitter::helped() const { return impl_->helped.load(std::memory_order_relaxed); }

void ColumnSplitter::apply(LdltColumnKernel kernel, const int* rows, double* vals, int count, double* W,
                           const double* wj, const double* beta) {
  Impl& m = *impl_;
  if (!m.enabled || count < kMinSplit) {
    kernel(rows, vals, count, W, wj, beta);
    return;
  }
  if (!m.running) {
    m.running = true;
    Impl* p = &m;
    m.group.run([p] { p->helper_loop(); });
  }
  const int half = (count / 2) & ~7;
  m.kernel = kernel;
  m.rows = rows + half;
  m.vals = vals + half;
  m.count = count - half;
  m.W = W;
  m.wj = wj;
  m.beta = beta;
  m.state.store(Impl::kPosted, std::memory_order_release);
  ++m.splits;
  kernel(rows, vals, half, W, wj, beta);
  int expected = Impl::kPosted;
  if (m.state.compare_exchange_strong(expected, Impl::kClaimed, std::memory_order_acquire)) {
    kernel(m.rows, m.vals, m.count, W, wj, beta);  // the helper did not come: the caller's job
  } else {
    // The helper has the half: wait for it (yielding if it is descheduled mid-job).
    for (unsigned spins = 0; m.state.load(std::memory_order_acquire) != Impl::kDone; ++spins)
      if (spins < 4096)
        cpu_relax();
      else
        std::this_thread::yield();
  }
  m.state.store(Impl::kIdle, std::memory_order_relaxed);
}

}  // namespace xpd::detail
