// Schur localisation kernels on box:48 (110,592 nodes, 622,938 tets) with a top-face collision
// region: analyze + factor, full 3-RHS solve, partial forward / backward, Σ u2, H solves by dense
// refactor (LAPACK and Eigen LLT) and by Woodbury for k = 5 / 10 / 15 % of m, and the baseline that
// adds the springs into the sparse K and refactorizes it. Setup is outside the timed loops.
// Run: build/bench/xpd_bench_schur --benchmark_counters_tabular=true
//
// Measured 2026-11-22 (2 shared cores, load average ≈ 6, so wall times are inflated 2-3×; treat as
// upper bounds): m = 3783, nnz(L) 59.7M vs 49.4M unconstrained (+20.8 %: L21 10.1M, L22 2.5M);
// analyze 1.8-4 s, numeric factor 7-10 s, Σ 2-4 s, Σ⁻¹ 1.5-2 s; plain full solve 181 ms, Schur
// full solve 216 ms, partial forward 125 ms, partial backward 138 ms, Σ u2 25 ms, H u2 = g with
// k = 0: 45 ms; dense refactor of H 0.8-0.9 s (Eigen LLT 2.7 s); Woodbury k = 5/10/15 %:
// 33/40/50 ms; sparse baseline refactor + solve 8.1 s.
#include <benchmark/benchmark.h>

#include <Eigen/Cholesky>
#include <cstdio>
#include <memory>
#include <vector>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/schur.hpp>

#include "../tests/solver/pd_like_matrix.hpp"
#include "solver/symmetric_kernel.hpp"

extern "C" {
void dsymm_(const char* side, const char* uplo, const int* m, const int* n, const double* alpha, const double* a,
            const int* lda, const double* b, const int* ldb, const double* beta, double* c, const int* ldc);
void dsymv_(const char* uplo, const int* n, const double* alpha, const double* a, const int* lda, const double* x,
            const int* incx, const double* beta, double* y, const int* incy);
}

namespace {

using xpd::SchurFactorization;
using xpd::SchurProxy;
using xpd::SchurSolveMethod;

constexpr int kSide = 48;

struct Setup {
  xpd::TetMesh mesh;
  Eigen::SparseMatrix<double> K;
  std::vector<int> region, beta_tets;
  std::unique_ptr<SchurFactorization> schur;
  Eigen::MatrixXd f, y1, g2, u2;

  Setup() {
    mesh = xpd::make_box(kSide, kSide, kSide, xpd::Vec3::Zero(), xpd::Vec3::Ones());
    K = xpd::test::pd_like_matrix(mesh, 1.0, xpd::test::nodes_in_band(mesh, 2, 1e-9, false), 10.0);
    // Proxies on the central 42 × 42 patch of the top face: region = nodes of the tets touching it
    // (top two node layers, ≈ 2 · 44²).
    std::vector<int> seeds;
    for (int j = 3; j < 3 + 42; ++j)
      for (int i = 3; i < 3 + 42; ++i) seeds.push_back(i + kSide * (j + kSide * (kSide - 1)));
    region = xpd::test::region_from_seeds(mesh, seeds, &beta_tets);
    xpd::SchurOptions opt;
    opt.compare_unconstrained_ordering = true;
    schur = std::make_unique<SchurFactorization>(K, region, opt);
    const auto& s = schur->stats();
    std::printf(
        "box:%d n = %d, tets = %ld, m = %d (%.2f %% of n), nnz(L) = %.0f, unconstrained METIS nnz(L) = %.0f "
        "(%+.1f %%); L21 %.0f, L22 %.0f\nanalyze %.1f ms, factor %.1f ms, Sigma extraction %.1f ms, Sigma^-1 %.1f ms, "
        "dense %.0f MB\n",
        kSide, s.n, static_cast<long>(mesh.tets.rows()), s.m, 100.0 * s.m / s.n, s.nnz_L, s.nnz_L_unconstrained,
        100.0 * (s.nnz_L / s.nnz_L_unconstrained - 1.0), s.nnz_L21, s.nnz_L22, s.analyze_ms, s.factor_ms, s.schur_ms,
        s.inverse_ms, s.dense_bytes / 1e6);
    std::srand(1);
    f = Eigen::MatrixXd::Random(s.n, 3);
    schur->forward(f, y1, g2);
    u2 = schur->solve_collision_system({}, g2);
  }
  std::vector<SchurProxy> proxies(int percent) const {
    const int k = std::max(1, schur->m() * percent / 100);
    return xpd::test::random_proxies(mesh, beta_tets, *schur, k, 100.0 * K.diagonal().mean(),
                                     17u + static_cast<unsigned>(percent));
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

void BM_AnalyzeFactor(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) {
    SchurFactorization f(s.K, s.region);
    benchmark::DoNotOptimize(f.schur_complement().data());
    state.counters["analyze_ms"] = f.stats().analyze_ms;
    state.counters["factor_ms"] = f.stats().factor_ms;
    state.counters["sigma_ms"] = f.stats().schur_ms;
    state.counters["inverse_ms"] = f.stats().inverse_ms;
  }
  state.counters["m"] = s.schur->m();
  state.counters["nnz_L"] = s.schur->stats().nnz_L;
}
BENCHMARK(BM_AnalyzeFactor)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_NumericRefactorWithSigma(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) s.schur->refactorize(s.K);
  state.counters["factor_ms"] = s.schur->stats().factor_ms;
  state.counters["sigma_ms"] = s.schur->stats().schur_ms;
  state.counters["inverse_ms"] = s.schur->stats().inverse_ms;
}
BENCHMARK(BM_NumericRefactorWithSigma)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

void BM_FullSolve3(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) benchmark::DoNotOptimize(s.schur->solve(s.f).data());
}
BENCHMARK(BM_FullSolve3)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

// The plain PD global solve for comparison: unconstrained METIS ordering (m = 0), full 3-RHS solve.
void BM_PlainFullSolve3(benchmark::State& state) {
  Setup& s = setup();
  xpd::SchurOptions opt;
  opt.precompute_inverse = false;
  static SchurFactorization plain(s.K, {}, opt);
  for (auto _ : state) benchmark::DoNotOptimize(plain.solve(s.f).data());
  state.counters["nnz_L"] = plain.stats().nnz_L;
}
BENCHMARK(BM_PlainFullSolve3)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_PartialForward(benchmark::State& state) {
  Setup& s = setup();
  Eigen::MatrixXd y1, g2;
  for (auto _ : state) {
    s.schur->forward(s.f, y1, g2);
    benchmark::DoNotOptimize(g2.data());
  }
}
BENCHMARK(BM_PartialForward)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_PartialBackward(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) benchmark::DoNotOptimize(s.schur->backward(s.y1, s.u2).data());
}
BENCHMARK(BM_PartialBackward)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_ApplySchur(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) benchmark::DoNotOptimize(s.schur->apply_schur(s.u2).data());
}
BENCHMARK(BM_ApplySchur)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SolveSigmaNoContacts(benchmark::State& state) {
  Setup& s = setup();
  for (auto _ : state) benchmark::DoNotOptimize(s.schur->solve_collision_system({}, s.g2).data());
}
BENCHMARK(BM_SolveSigmaNoContacts)->Unit(benchmark::kMillisecond)->UseRealTime();

// The three-column product with a dense symmetric m × m matrix (Σ⁻¹ or Σ in the Woodbury step of
// IPC, schur.cpp symmetric_times3) at the face scene's m = 2,134: one dsymm against three dsymv.
// No box setup: run alone with --benchmark_filter=SymmetricTimes3.
struct SymmetricProduct {
  int m = 2134;
  Eigen::MatrixXd a, x, y;
  SymmetricProduct() {
    a = Eigen::MatrixXd::Random(m, m);
    a = (a + a.transpose()).eval();
    a.diagonal().array() += m;
    x = Eigen::MatrixXd::Random(m, 3);
    y.resize(m, 3);
  }
};
SymmetricProduct& symmetric_product() {
  static SymmetricProduct p;
  return p;
}

// Arg(1): the matrix evicted from the caches before each product (untimed), as between two global
// steps of a PD iteration, where the local step and the barrier stream their own data; Arg(0):
// the matrix hot (m = 2,134: its 18 MB triangle fits this machine's 32 MB L3).
void evict_caches(benchmark::State& state) {
  static std::vector<double> junk(std::size_t{16} << 20, 1.0);  // 128 MB
  state.PauseTiming();
  double sum = 0;
  for (double& v : junk) sum += (v += 1.0);
  benchmark::DoNotOptimize(sum);
  state.ResumeTiming();
}

void BM_SymmetricTimes3_Dsymm(benchmark::State& state) {
  SymmetricProduct& p = symmetric_product();
  const int three = 3;
  const double one = 1.0, zero = 0.0;
  for (auto _ : state) {
    dsymm_("L", "L", &p.m, &three, &one, p.a.data(), &p.m, p.x.data(), &p.m, &zero, p.y.data(), &p.m);
    benchmark::DoNotOptimize(p.y.data());
  }
}
BENCHMARK(BM_SymmetricTimes3_Dsymm)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SymmetricTimes3_Dsymv(benchmark::State& state) {
  SymmetricProduct& p = symmetric_product();
  const int inc = 1;
  const double one = 1.0, zero = 0.0;
  for (auto _ : state) {
    if (state.range(0) != 0) evict_caches(state);
    for (int c = 0; c < 3; ++c)
      dsymv_("L", &p.m, &one, p.a.data(), &p.m, p.x.col(c).data(), &inc, &zero, p.y.col(c).data(), &inc);
    benchmark::DoNotOptimize(p.y.data());
  }
}
BENCHMARK(BM_SymmetricTimes3_Dsymv)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SymmetricTimes3_Kernel(benchmark::State& state) {
  SymmetricProduct& p = symmetric_product();
  std::vector<double> scratch;
  for (auto _ : state) {
    if (state.range(0) != 0) evict_caches(state);
    xpd::detail::symmetric_times3(p.m, p.a.data(), p.x.data(), p.m, 1.0, p.y.data(), false, scratch);
    benchmark::DoNotOptimize(p.y.data());
  }
}
BENCHMARK(BM_SymmetricTimes3_Kernel)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DenseRefactorH(benchmark::State& state) {
  Setup& s = setup();
  const auto proxies = s.proxies(static_cast<int>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(s.schur->solve_collision_system(proxies, s.g2, SchurSolveMethod::DenseRefactor).data());
  state.counters["k"] = static_cast<double>(proxies.size());
}
BENCHMARK(BM_DenseRefactorH)->Arg(5)->Arg(10)->Arg(15)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DenseRefactorH_EigenLLT(benchmark::State& state) {
  Setup& s = setup();
  const auto proxies = s.proxies(static_cast<int>(state.range(0)));
  const Eigen::MatrixXd c22 = Eigen::MatrixXd(xpd::collision_matrix(s.schur->m(), proxies));
  Eigen::MatrixXd h;
  for (auto _ : state) {
    h = s.schur->schur_complement() + c22;
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(h);
    benchmark::DoNotOptimize(llt.solve(s.g2).eval().data());
  }
}
BENCHMARK(BM_DenseRefactorH_EigenLLT)->Arg(10)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Woodbury(benchmark::State& state) {
  Setup& s = setup();
  const auto proxies = s.proxies(static_cast<int>(state.range(0)));
  for (auto _ : state)
    benchmark::DoNotOptimize(s.schur->solve_collision_system(proxies, s.g2, SchurSolveMethod::Woodbury).data());
  state.counters["k"] = static_cast<double>(proxies.size());
  state.counters["auto_is_woodbury"] = s.schur->choose_method(proxies) == SchurSolveMethod::Woodbury;
}
BENCHMARK(BM_Woodbury)->Arg(5)->Arg(10)->Arg(15)->Unit(benchmark::kMillisecond)->UseRealTime();

// Baseline: springs added into the sparse K (same pattern: proxies lie in E_β tets), numeric
// refactorization with the analyzed ordering, full 3-RHS solve.
void BM_BaselineSparseRefactor(benchmark::State& state) {
  Setup& s = setup();
  const auto proxies = s.proxies(static_cast<int>(state.range(0)));
  const Eigen::SparseMatrix<double> c22 = xpd::collision_matrix(s.schur->m(), proxies);
  std::vector<Eigen::Triplet<double>> trip;
  for (int j = 0; j < c22.outerSize(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(c22, j); it; ++it)
      trip.emplace_back(s.region[static_cast<size_t>(it.row())], s.region[static_cast<size_t>(j)], it.value());
  Eigen::SparseMatrix<double> cfull(s.K.rows(), s.K.cols());
  cfull.setFromTriplets(trip.begin(), trip.end());
  const Eigen::SparseMatrix<double> kc = s.K + cfull;
  xpd::SchurOptions opt;
  opt.precompute_inverse = false;
  SchurFactorization plain(s.K, {}, opt);
  for (auto _ : state) {
    plain.refactorize(kc);
    benchmark::DoNotOptimize(plain.solve(s.f).data());
  }
  state.counters["factor_ms"] = plain.stats().factor_ms;
  state.counters["nnz_L"] = plain.stats().nnz_L;
}
BENCHMARK(BM_BaselineSparseRefactor)->Arg(10)->Unit(benchmark::kMillisecond)->Iterations(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
