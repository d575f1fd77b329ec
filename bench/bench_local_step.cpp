// The PD local step on box:N: per-tet polar decomposition fused with the elastic force scatter
// (colour-parallel, deterministic), and the full evaluate() (local + rhs phases).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/strain_limit.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/energy/volume.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "bench_core.hpp"
#include "energy/polar_kernel.hpp"
#include "energy/tet_kernel.hpp"

using namespace xpd;

namespace {
struct Setup {
  std::unique_ptr<Model> model;
  std::unique_ptr<State> state;
};
Setup& setup(int n) {
  static std::map<int, Setup> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  ModelDesc d;
  d.mesh = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  d.gravity = Vec3(0, 0, -9.81);
  for (int i = 0; i < n * n; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  Setup s;
  s.model = std::make_unique<Model>(build_model(d));
  s.state = std::make_unique<State>(make_state(*s.model));
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(-0.2, 0.2);
  const double h = 1.0 / (n - 1);
  for (Eigen::Index i = 0; i < s.state->x.size(); ++i) s.state->x.data()[i] += h * u(rng);  // generic F
  return cache.emplace(n, std::move(s)).first->second;
}
}  // namespace

static void BM_Polar(benchmark::State& state) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-0.2, 0.2);
  std::vector<Eigen::Matrix3d> F(4096);
  for (auto& f : F) f = Eigen::Matrix3d::Identity() + Eigen::Matrix3d::NullaryExpr([&] { return u(rng); });
  for (auto _ : state)
    for (const auto& f : F) benchmark::DoNotOptimize(polar_rotation(f));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(F.size()));
}

static void BM_SignedSvd(benchmark::State& state) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-0.2, 0.2);
  std::vector<Eigen::Matrix3d> F(4096);
  for (auto& f : F) f = Eigen::Matrix3d::Identity() + Eigen::Matrix3d::NullaryExpr([&] { return u(rng); });
  for (auto _ : state)
    for (const auto& f : F) benchmark::DoNotOptimize(signed_svd(f));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(F.size()));
}

// The four-lane Newton kernel of the corotated hot path (AVX2 build) on the same matrices as BM_Polar.
__attribute__((target("avx2"), noinline)) static int polar4_avx2(const detail::Lanes4 (&in)[9],
                                                                 detail::Lanes4 (&out)[9]) {
  return detail::polar_rotation_newton4(in, out);
}
static void BM_PolarNewton4(benchmark::State& state) {
  if (!detail::corotated_range_variant(1)) {
    state.SkipWithError("no AVX2");
    return;
  }
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> u(-0.2, 0.2);
  std::vector<Eigen::Matrix3d> F(4096);
  for (auto& f : F) f = Eigen::Matrix3d::Identity() + Eigen::Matrix3d::NullaryExpr([&] { return u(rng); });
  for (auto _ : state)
    for (size_t k = 0; k < F.size(); k += 4) {
      detail::Lanes4 in[9], out[9];
      for (int i = 0; i < 9; ++i)
        in[i] = detail::Lanes4{F[k].data()[i], F[k + 1].data()[i], F[k + 2].data()[i], F[k + 3].data()[i]};
      benchmark::DoNotOptimize(polar4_avx2(in, out));
      benchmark::DoNotOptimize(out);
    }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(F.size()));
}

// Corotated local step + force with one compiled variant of the batched kernel (0 = baseline
// SSE2 build, 1 = AVX2 build) on box:N.
static void BM_LocalStepVariant(benchmark::State& state) {
  Setup& s = setup(static_cast<int>(state.range(0)));
  const auto fn = detail::corotated_range_variant(static_cast<int>(state.range(1)));
  if (!fn) {
    state.SkipWithError("variant not supported by this CPU");
    return;
  }
  const auto& coro = dynamic_cast<const TetTerm&>(*s.model->terms()[0]);
  for (auto _ : state) {
    s.state->force.setZero();
    benchmark::DoNotOptimize(
        detail::corotated_project_add_force(coro.elements(), s.state->x, s.state->force, nullptr, fn));
  }
  state.SetItemsProcessed(state.iterations() * s.model->num_tets());
}

static void BM_LocalStep(benchmark::State& state) {
  Setup& s = setup(static_cast<int>(state.range(0)));
  const Term& coro = *s.model->terms()[0];
  for (auto _ : state) {
    s.state->force.setZero();
    benchmark::DoNotOptimize(coro.project_add_force(s.state->x, s.state->inputs, s.state->force, nullptr));
  }
  state.SetItemsProcessed(state.iterations() * s.model->num_tets());
}

// The other element terms' local step + force on all tets of box:N, same state as BM_LocalStep:
// the λ volume term (batched polar kernel, volume physics) and strain limiting [0.8, 1.2] (most
// elements inside: the closed-form σ² fast path; the rest through the SVD).
// `make_term(elements of all tets)` timed like BM_LocalStep on box:N.
template <class MakeTerm>
static void time_term_on_box(benchmark::State& state, const MakeTerm& make_term) {
  Setup& s = setup(static_cast<int>(state.range(0)));
  const int n = static_cast<int>(state.range(0));
  const TetMesh mesh = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  std::vector<int> ids(static_cast<size_t>(mesh.tets.rows()));
  std::iota(ids.begin(), ids.end(), 0);
  const auto term = make_term(mesh, ids);
  for (auto _ : state) {
    s.state->force.setZero();
    benchmark::DoNotOptimize(term->project_add_force(s.state->x, s.state->inputs, s.state->force, nullptr));
  }
  state.SetItemsProcessed(state.iterations() * s.model->num_tets());
}

static void BM_VolumeLocalStep(benchmark::State& state) {
  time_term_on_box(state, [](const TetMesh& mesh, const std::vector<int>& ids) {
    return std::make_unique<VolumeTerm>(make_tet_elements(mesh, ids, std::vector<double>(ids.size(), 2e4)),
                                        VolumeMatrix::Coupled);
  });
}

static void BM_StrainLimitLocalStep(benchmark::State& state) {
  time_term_on_box(state, [](const TetMesh& mesh, const std::vector<int>& ids) {
    return std::make_unique<StrainLimitTerm>(make_tet_elements(mesh, ids, std::vector<double>(ids.size(), 1e5)),
                                             std::vector<Eigen::Vector2d>(ids.size(), Eigen::Vector2d(0.8, 1.2)));
  });
}

static void BM_Evaluate(benchmark::State& state) {
  Setup& s = setup(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(evaluate(*s.model, *s.state));
  state.SetItemsProcessed(state.iterations() * s.model->num_tets());
}

static void BM_CoreBox(benchmark::State& state) {
  CoreBenchResult r;
  for (auto _ : state) r = bench_core(static_cast<int>(state.range(0)), 10);
  state.counters["pd_iteration_ms"] = r.pd_iteration_ms;
  state.counters["solve_3rhs_ms"] = r.solve_3rhs_ms;
  state.counters["local_ms"] = r.local_ms;
  state.counters["rhs_ms"] = r.rhs_ms;
  state.counters["factor_ms"] = r.factor_ms;
  state.counters["ratio"] = r.ratio;
}

BENCHMARK(BM_Polar);
BENCHMARK(BM_SignedSvd);
BENCHMARK(BM_PolarNewton4);
BENCHMARK(BM_LocalStepVariant)->Args({48, 0})->Args({48, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LocalStep)->Arg(16)->Arg(32)->Arg(48)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VolumeLocalStep)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StrainLimitLocalStep)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Evaluate)->Arg(48)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CoreBox)->Arg(48)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_MAIN();
