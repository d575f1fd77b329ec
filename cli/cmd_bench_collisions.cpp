// `xpd bench collisions --box N [--json]`: Wang et al. 2021's Figure 4 experiment on box:N, all figures
// from one run (bench/support/bench_collisions.hpp); `--scene FILE [--frame F]`: the same phases on a
// scene's contact state.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "bench_collisions.hpp"
#include "commands.hpp"

namespace xpd::cli {

void add_bench_collisions_command(CLI::App& bench) {
  struct Options {
    CollisionBenchOptions bench;
    std::string scene;
    int frame = 0;
    bool json = false;
    std::string method = "automatic";
  };
  auto o = std::make_shared<Options>();
  CLI::App* c = bench.add_subcommand(
      "collisions",
      "Algorithm 1 (Schur complement, inner loop) vs. a plain PD iteration and the refactorization "
      "baseline on box:N pressed by a sphere");
  c->add_option("--box", o->bench.box_n, "Nodes per side of the box mesh (box:48 = 110,592 nodes)")
      ->check(CLI::Range(4, 200));
  c->add_option("--iterations", o->bench.iterations, "Measured outer iterations per configuration (mean)")
      ->check(CLI::Range(1, 1000));
  c->add_option("--refactor-iterations", o->bench.refactor_iterations,
                "Measured iterations of the full-refactorization baseline (0 = skip)")
      ->check(CLI::Range(0, 100));
  c->add_option("--extra-inner", o->bench.extra_inner, "Inner iterations beyond the first, for extra_inner_ms")
      ->check(CLI::Range(1, 100));
  c->add_option("--patch", o->bench.patch, "Side of the central top-face patch holding proxies (fraction of the side)")
      ->check(CLI::Range(0.01, 1.0));
  c->add_option("--indent", o->bench.indent, "Sphere indentation below the undeformed top face (box side 1)")
      ->check(CLI::Range(1e-6, 0.5));
  c->add_option("--radius", o->bench.sphere_radius, "Sphere radius (box side 1)")->check(CLI::Range(1e-3, 10.0));
  c->add_option("--schur-solve", o->method, "Reduced solve: automatic, dense_refactor or woodbury")
      ->check(CLI::IsMember({"automatic", "dense_refactor", "woodbury"}));
  c->add_option("--threads", o->bench.threads, "Threads (0 = all)")->check(CLI::Range(0, 1024));
  c->add_option("--scene", o->scene,
                "A scene with collision handling instead of the box: its frames are solved up to --frame (or the "
                "first frame with contacts), then the phases are measured from that state (box options ignored)")
      ->check(CLI::ExistingFile);
  c->add_option("--frame", o->frame,
                "With --scene: the frame whose contact state is measured (0 = first with contacts)")
      ->check(CLI::Range(0, 1 << 30));
  c->add_flag("--json", o->json, "Print JSON");
  c->callback([o] {
    o->bench.schur_solve = o->method == "woodbury"         ? SchurSolveMethod::Woodbury
                           : o->method == "dense_refactor" ? SchurSolveMethod::DenseRefactor
                                                           : SchurSolveMethod::Automatic;
    const CollisionBenchResult r =
        o->scene.empty() ? bench_collisions(o->bench)
                         : bench_collisions_scene({o->scene, o->frame, o->bench.iterations, o->bench.extra_inner});
    if (o->json) {
      std::cout << r.to_json() << "\n";
      return;
    }
    if (o->scene.empty())
      fmt::print("box:{}  nodes {}  tets {}  threads {}\n", r.box_n, r.nodes, r.tets, r.threads);
    else
      fmt::print("{} at frame {}  nodes {}  tets {}  threads {}\n", r.scene, r.frame, r.nodes, r.tets, r.threads);
    fmt::print("proxies {}  collision nodes m = {}  active {} ({:.1f}%)  E_beta {}  reduced solve {}\n", r.proxies,
               r.collision_nodes, r.active_proxies, 100.0 * r.active_fraction, r.beta_elements, r.schur_solve);
    fmt::print("nnz(L) x2-last {:.0f} vs METIS {:.0f} (+{:.1f}%)\n", r.nnz_L, r.nnz_L_unconstrained,
               r.nnz_L_unconstrained > 0 ? 100.0 * (r.nnz_L / r.nnz_L_unconstrained - 1.0) : 0.0);
    fmt::print("plain_iteration_ms     {:9.2f}\n", r.plain_iteration_ms);
    fmt::print("outer_1inner_ms        {:9.2f}  ({:.2f} x plain)\n", r.outer_1inner_ms,
               r.outer_1inner_ms / r.plain_iteration_ms);
    fmt::print("extra_inner_ms         {:9.2f}  ({:.2f} x plain)\n", r.extra_inner_ms,
               r.extra_inner_ms / r.plain_iteration_ms);
    if (r.refactor_iteration_ms > 0)
      fmt::print("refactor_iteration_ms  {:9.2f}  ({:.1f} x outer_1inner)\n", r.refactor_iteration_ms,
                 r.refactor_iteration_ms / r.outer_1inner_ms);
    if (r.pcg_iteration_ms > 0) fmt::print("pcg_iteration_ms       {:9.2f}\n", r.pcg_iteration_ms);
    if (r.sigma_inv_bytes > 0) fmt::print("dense Sigma (+ inverse)  {:9.1f} MB\n", r.sigma_inv_bytes / 1e6);
    const CollisionTimings& t = r.phases_1inner;
    fmt::print("\nOne outer iteration, J = 1 (ms)\n");
    fmt::print("  outer preamble  local step + forces      {:8.2f}\n",
               r.pd_phases_1inner.local + r.pd_phases_1inner.rhs);
    fmt::print("                  forward substitution     {:8.2f}\n", t.forward);
    fmt::print("  inner loop      collision detection      {:8.2f}\n", t.detect);
    fmt::print("                  E_beta local step        {:8.2f}\n", t.local_beta);
    fmt::print("                  update of H / Woodbury   {:8.2f}\n", t.schur_update);
    fmt::print("                  dense factorization      {:8.2f}\n", t.schur_factor);
    fmt::print("                  solve Schur system       {:8.2f}\n", t.schur_solve);
    fmt::print("  conclusion      backward substitution    {:8.2f}\n", t.backward);
  });
}

}  // namespace xpd::cli
