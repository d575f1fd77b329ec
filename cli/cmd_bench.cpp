// `xpd bench core --box N [--json]`: scenario benchmarks measured in one run (ratios are robust to
// the machine's noise; absolute times are not).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "bench_core.hpp"
#include "commands.hpp"

namespace xpd::cli {
namespace {

struct BenchOptions {
  int box = 48;
  int iterations = 10;
  int threads = 0;
  bool json = false;
  double lambda = 0.0;
  std::string volume_matrix = "coupled";
};

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand("bench", "Scenario benchmarks");
  bench->require_subcommand(1);
  add_bench_collisions_command(*bench);
  CLI::App* core = bench->add_subcommand("core", "One plain PD iteration vs. CHOLMOD's 3-RHS solve on box:N");
  core->add_option("--box", o->box, "Nodes per side of the box mesh (box:48 = 110,592 nodes)")
      ->check(CLI::Range(3, 200));
  core->add_option("--iterations", o->iterations, "Measured PD iterations (median reported)")
      ->check(CLI::Range(1, 1000));
  core->add_option("--threads", o->threads, "Threads (0 = all)")->check(CLI::Range(0, 1024));
  core->add_option("--lambda", o->lambda, "First Lame parameter of the box [Pa] (mu = 1e4); > 0 adds the volume term")
      ->check(CLI::NonNegativeNumber);
  core->add_option("--volume-matrix", o->volume_matrix,
                   "Global matrix with --lambda > 0: coupled (3n x 3n) or isotropic (n x n)")
      ->check(CLI::IsMember({"coupled", "isotropic"}));
  core->add_flag("--json", o->json, "Print JSON");
  core->callback([o] {
    const CoreBenchResult r =
        bench_core(o->box, o->iterations, o->threads, o->lambda,
                   o->volume_matrix == "coupled" ? VolumeMatrix::Coupled : VolumeMatrix::Isotropic);
    if (o->json) {
      std::cout << r.to_json() << "\n";
      return;
    }
    fmt::print("box:{}  nodes {}  tets {}  threads {}  nnz(L) {:.0f}  lambda {}  volume matrix {}\n", r.box_n, r.nodes,
               r.tets, r.threads, r.nnz_L, r.lambda, r.volume_matrix);
    fmt::print("analyze {:.1f} ms  factor {:.1f} ms\n", r.analyze_ms, r.factor_ms);
    fmt::print("pd_iteration_ms {:.2f} = local {:.2f} + rhs {:.2f} + solve {:.2f}\n", r.pd_iteration_ms, r.local_ms,
               r.rhs_ms, r.solve_ms);
    fmt::print("solve_3rhs_ms {:.2f}   ratio pd_iteration / solve_3rhs = {:.3f}\n", r.solve_3rhs_ms, r.ratio);
  });
}

}  // namespace xpd::cli
