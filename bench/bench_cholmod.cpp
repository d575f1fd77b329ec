// CHOLMOD phases on the PD matrix of box:N, timed separately: analyze (METIS + symbolic),
// factorize (numeric, supernodal), solve with 3 right-hand sides (x, y, z at once) and with 1.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <xpd/energy/corotated.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

using namespace xpd;

namespace {
// The PD matrix of box:N with the bottom face attached (cached per N; setup outside timing).
const Eigen::SparseMatrix<double>& box_matrix(int n) {
  static std::map<int, Eigen::SparseMatrix<double>> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  // Assemble K = Σ 2μVol GᵀG + attachment diagonal through the term interface (no factorization).
  const TetMesh mesh = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  std::vector<int> ids(static_cast<size_t>(mesh.tets.rows()));
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int>(t);
  const CorotatedTerm coro(make_tet_elements(mesh, ids, std::vector<double>(ids.size(), 1e4)));
  std::vector<Triplet> trip;
  coro.add_matrix(trip);
  for (int i = 0; i < n * n; ++i) trip.emplace_back(i, i, 1e6);
  Eigen::SparseMatrix<double> K(mesh.nodes.rows(), mesh.nodes.rows());
  K.setFromTriplets(trip.begin(), trip.end());
  return cache.emplace(n, std::move(K)).first->second;
}
}  // namespace

static void BM_CholmodAnalyze(benchmark::State& state) {
  const auto& K = box_matrix(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    SparseCholesky c(CholeskyBackend::Cholmod);
    c.analyze(K);
    benchmark::DoNotOptimize(c.rows());
  }
  state.counters["n"] = static_cast<double>(K.rows());
}

static void BM_CholmodFactorize(benchmark::State& state) {
  const auto& K = box_matrix(static_cast<int>(state.range(0)));
  SparseCholesky c(CholeskyBackend::Cholmod);
  c.analyze(K);
  for (auto _ : state) c.factorize(K);
  state.counters["nnz_L"] = c.info().nnz_L;
}

static void BM_CholmodSolve(benchmark::State& state) {
  const auto& K = box_matrix(static_cast<int>(state.range(0)));
  const int k = static_cast<int>(state.range(1));
  SparseCholesky c(CholeskyBackend::Cholmod);
  c.compute(K);
  Eigen::MatrixXd B = Eigen::MatrixXd::Random(K.rows(), k), X = B;
  for (auto _ : state) {
    state.PauseTiming();
    X = B;
    state.ResumeTiming();
    c.solve_in_place(X);
    benchmark::ClobberMemory();
  }
  state.counters["nnz_L"] = c.info().nnz_L;
}

BENCHMARK(BM_CholmodAnalyze)->Arg(16)->Arg(32)->Arg(48)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_CholmodFactorize)->Arg(16)->Arg(32)->Arg(48)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_CholmodSolve)->Args({16, 3})->Args({32, 3})->Args({48, 3})->Args({48, 1})->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
