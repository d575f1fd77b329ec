// `xpd bench core --box N | --mesh FILE [--scaling] [--json]`: scenario benchmarks measured in one run
// (ratios are robust to the machine's noise; absolute times are not).
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "bench_core.hpp"
#include "commands.hpp"

namespace xpd::cli {
namespace {

struct BenchOptions {
  int box = 48;
  std::string mesh;
  std::string up = "y";
  bool scaling = false;
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
  add_bench_ipc_command(*bench);
  add_bench_twoway_command(*bench);
  add_bench_cut_command(*bench);
  add_bench_gpu_command(*bench);
  CLI::App* core = bench->add_subcommand(
      "core", "One plain PD iteration vs. the 3-RHS solve alone on box:N or a tet mesh; thread scaling");
  CLI::Option* box = core->add_option("--box", o->box, "Nodes per side of the box mesh (box:48 = 110,592 nodes)")
                         ->check(CLI::Range(3, 200));
  core->add_option("--mesh", o->mesh, "A tet mesh file instead of the box (its lowest 5% along --up attached)")
      ->check(CLI::ExistingFile)
      ->excludes(box);
  core->add_option("--up", o->up, "Up axis of --mesh: x, y or z (gravity along -up)")
      ->check(CLI::IsMember({"x", "y", "z"}));
  core->add_flag("--scaling", o->scaling,
                 "Time the same state with 1 thread and with --threads (0 = all), alternating, and print the "
                 "speed-ups");
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
    CoreBenchConfig c;
    c.box_n = o->box;
    c.mesh = o->mesh;
    c.up = o->up[0] - 'x';
    c.iterations = o->iterations;
    c.threads = o->threads;
    c.lambda = o->lambda;
    c.volume_matrix = o->volume_matrix == "coupled" ? VolumeMatrix::Coupled : VolumeMatrix::Isotropic;
    auto print = [](const CoreBenchResult& r) {
      fmt::print("pd_iteration_ms {:.2f} = local {:.2f} + rhs {:.2f} + solve {:.2f}   (threads {}, BLAS {})\n",
                 r.pd_iteration_ms, r.local_ms, r.rhs_ms, r.solve_ms, r.threads, r.blas_threads);
      fmt::print(
          "solve_3rhs_ms {:.2f} ({:.2f} GB/s of the factor)  CHOLMOD serial solve {:.2f} ms  ratio pd_iteration / "
          "solve_3rhs = {:.3f}\n",
          r.solve_3rhs_ms, r.solve_gbps, r.cholmod_solve_3rhs_ms, r.ratio);
    };
    auto header = [](const CoreBenchResult& r) {
      fmt::print("{}  nodes {}  tets {}  nnz(L) {:.0f}  lambda {}  volume matrix {}\n", r.mesh, r.nodes, r.tets,
                 r.nnz_L, r.lambda, r.volume_matrix);
      fmt::print("analyze {:.1f} ms  factor {:.1f} ms\n", r.analyze_ms, r.factor_ms);
    };
    if (o->scaling) {
      const CoreScalingResult s = bench_core_scaling(c);
      if (o->json) {
        std::cout << s.to_json() << "\n";
        return;
      }
      header(s.one);
      print(s.one);
      print(s.many);
      fmt::print("speed-up with {} threads: iteration {:.2f}x  local {:.2f}x  rhs {:.2f}x  solve {:.2f}x\n",
                 s.many.threads, s.iteration_speedup, s.local_speedup, s.rhs_speedup, s.solve_speedup);
      return;
    }
    const CoreBenchResult r = bench_core(c);
    if (o->json) {
      std::cout << r.to_json() << "\n";
      return;
    }
    header(r);
    print(r);
  });
}

}  // namespace xpd::cli
