// The adjoint method's cost (solver/adjoint.hpp) on the armadillo (pbd-models/armadillo_4k, 1,180
// nodes, 3,717 tets, every tet shape-targeted, feet attached), at equilibria of random actuations:
//  - Forward: one quasistatic frame from the rest shape (PD + Anderson to 1e-8 relative);
//  - Backward: the CG adjoint solve (1e-10) plus the parameter gradient, one frame;
//  - BackwardBatch/B: B frames in one batched solve (one n × 3B preconditioner solve per sweep);
//  - BackwardOneByOne/B: the same B frames solved one after the other.
// Compare in one run: backward / forward, and BackwardBatch/B / BackwardOneByOne/B per B.
// Run: build/bench/xpd_bench_adjoint --benchmark_counters_tabular=true --benchmark_min_time=0.5
// (about 5 minutes; figures in BENCHMARKS.md).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <xpd/io/mesh_io.hpp>
#include <xpd/solver/adjoint.hpp>
#include <xpd/solver/pd_solver.hpp>

namespace {

using namespace xpd;

constexpr int kMaxBatch = 96;

std::string data_dir() {
  const char* d = std::getenv("XPD_DATA_DIR");
  return d ? d : XPD_DEFAULT_DATA_DIR;
}

struct Setup {
  std::unique_ptr<Model> model;
  std::vector<State> states;  // kMaxBatch equilibria
  std::vector<Points> g;      // loss gradients
  SolverOptions forward;

  Setup() {
    ModelDesc d;
    d.mesh = io::read_tet_mesh(data_dir() + "/pbd-models/armadillo_4k.node");
    d.mu = {1e4};
    for (int t = 0; t < d.mesh.tets.rows(); ++t) d.shape_targets.push_back({t, {}});
    for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
      if (d.mesh.nodes(i, 1) <= -0.84)
        d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e8, d.mesh.nodes.row(i).transpose()});
    model = std::make_unique<Model>(build_model(d));
    forward.accelerator = Accelerator::Anderson;
    forward.rel_tolerance = 1e-8;
    forward.max_iterations = 5000;
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-0.1, 0.1);
    State s = make_state(*model);
    for (int i = 0; i < kMaxBatch; ++i) {  // each frame warm-starts from the previous equilibrium
      for (Eigen::Index r = 0; r < s.inputs.shape_targets.rows(); ++r)
        for (int c = 0; c < 6; ++c) s.inputs.shape_targets(r, c) = u(rng);
      step(*model, s, forward);
      states.push_back(s);
      Points gi(model->num_nodes(), 3);
      for (Eigen::Index r = 0; r < gi.rows(); ++r)
        for (int c = 0; c < 3; ++c) gi(r, c) = u(rng);
      g.push_back(gi);
    }
    std::printf("armadillo_4k: %d nodes, %d tets (all shape-targeted), %d equilibria\n", model->num_nodes(),
                model->num_tets(), kMaxBatch);
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

void BM_Forward(benchmark::State& st) {
  Setup& s = setup();
  int iterations = 0;
  for (auto _ : st) {
    State f = make_state(*s.model);
    f.inputs = s.states[0].inputs;
    iterations = step(*s.model, f, s.forward).iterations;
  }
  st.counters["pd_iterations"] = iterations;
}
BENCHMARK(BM_Forward)->Unit(benchmark::kMillisecond);

void BM_Backward(benchmark::State& st) {
  Setup& s = setup();
  const AdjointSolver solver(*s.model);
  Points h;
  int iterations = 0;
  for (auto _ : st) {
    iterations = solver.solve(s.states[0], s.g[0], h).iterations;
    benchmark::DoNotOptimize(input_gradient(*s.model, s.states[0], h));
  }
  st.counters["cg_iterations"] = iterations;
}
BENCHMARK(BM_Backward)->Unit(benchmark::kMillisecond);

void BM_BackwardBatch(benchmark::State& st) {
  Setup& s = setup();
  const int B = static_cast<int>(st.range(0));
  const AdjointSolver solver(*s.model);
  std::vector<const State*> states;
  std::vector<Points> g, h;
  for (int i = 0; i < B; ++i) {
    states.push_back(&s.states[static_cast<size_t>(i)]);
    g.push_back(s.g[static_cast<size_t>(i)]);
  }
  for (auto _ : st) benchmark::DoNotOptimize(solver.solve(states, g, h));
}
BENCHMARK(BM_BackwardBatch)->Arg(16)->Arg(48)->Arg(96)->Unit(benchmark::kMillisecond);

void BM_BackwardOneByOne(benchmark::State& st) {
  Setup& s = setup();
  const int B = static_cast<int>(st.range(0));
  const AdjointSolver solver(*s.model);
  Points h;
  for (auto _ : st)
    for (int i = 0; i < B; ++i)
      benchmark::DoNotOptimize(solver.solve(s.states[static_cast<size_t>(i)], s.g[static_cast<size_t>(i)], h));
}
BENCHMARK(BM_BackwardOneByOne)->Arg(16)->Arg(48)->Arg(96)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
