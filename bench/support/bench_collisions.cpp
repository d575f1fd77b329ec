#include "bench_collisions.hpp"

#include <fmt/format.h>
#include <tbb/global_control.h>

#include <algorithm>
#include <memory>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/pd_solver.hpp>

namespace xpd {

namespace {

std::string timings_json(const CollisionTimings& t) {
  return fmt::format(
      "{{\"detect\": {:.3f}, \"local_beta\": {:.3f}, \"schur_update\": {:.3f}, \"schur_factor\": {:.3f}, "
      "\"schur_solve\": {:.3f}, \"forward\": {:.3f}, \"backward\": {:.3f}}}",
      t.detect, t.local_beta, t.schur_update, t.schur_factor, t.schur_solve, t.forward, t.backward);
}

}  // namespace

std::string CollisionBenchResult::to_json() const {
  return fmt::format("{{\"scene\": \"{}\", \"frame\": {}, \"sigma_inv_bytes\": {:.0f}, ", scene, frame,
                     sigma_inv_bytes) +
         fmt::format(
             "\"box\": {}, \"nodes\": {}, \"tets\": {}, \"threads\": {}, \"proxies\": {}, \"collision_nodes\": {}, "
             "\"active_proxies\": {}, \"active_fraction\": {:.4f}, \"beta_elements\": {}, \"schur_solve\": \"{}\", "
             "\"nnz_L\": {:.0f}, \"nnz_L_unconstrained\": {:.0f}, \"factor_ms\": {:.1f}, \"schur_setup_ms\": {:.1f}, "
             "\"plain_iteration_ms\": {:.3f}, \"outer_1inner_ms\": {:.3f}, \"extra_inner_ms\": {:.3f}, "
             "\"refactor_iteration_ms\": {:.3f}, \"pcg_iteration_ms\": {:.3f}, "
             "\"outer_1inner_ratio\": {:.3f}, \"extra_inner_ratio\": {:.3f}, \"refactor_ratio\": {:.3f}, "
             "\"phases_1inner_ms\": {}, \"pd_phases_1inner_ms\": {{\"local\": {:.3f}, \"rhs\": {:.3f}, \"solve\": "
             "{:.3f}, "
             "\"other\": {:.3f}}}}}",
             box_n, nodes, tets, threads, proxies, collision_nodes, active_proxies, active_fraction, beta_elements,
             schur_solve, nnz_L, nnz_L_unconstrained, factor_ms, schur_setup_ms, plain_iteration_ms, outer_1inner_ms,
             extra_inner_ms, refactor_iteration_ms, pcg_iteration_ms,
             plain_iteration_ms > 0 ? outer_1inner_ms / plain_iteration_ms : 0.0,
             plain_iteration_ms > 0 ? extra_inner_ms / plain_iteration_ms : 0.0,
             outer_1inner_ms > 0 ? refactor_iteration_ms / outer_1inner_ms : 0.0, timings_json(phases_1inner),
             pd_phases_1inner.local, pd_phases_1inner.rhs, pd_phases_1inner.solve, pd_phases_1inner.other);
}

CollisionBenchResult bench_collisions(const CollisionBenchOptions& o) {
  if (o.box_n < 4 || o.box_n > 1024)
    throw Error(fmt::format("bench collisions: box size {} outside [4, 1024]", o.box_n));
  if (o.iterations < 1 || o.refactor_iterations < 0 || o.extra_inner < 1)
    throw Error("bench collisions: iterations and extra_inner must be >= 1, refactor_iterations >= 0");
  if (!(o.patch > 0 && o.patch <= 1) || !(o.indent > 0) || !(o.sphere_radius > 0))
    throw Error("bench collisions: patch must be in (0, 1], indent and sphere_radius > 0");
  std::unique_ptr<tbb::global_control> control;
  if (o.threads > 0)
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(o.threads));
  CollisionBenchResult r;
  const int N = o.box_n;
  r.box_n = N;
  r.threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  ModelDesc d;
  d.mesh = make_box(N, N, N, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  d.density = {1000.0};
  for (int i = 0; i < N * N; ++i)  // bottom layer z = 0
    d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  r.nodes = d.mesh.nodes.rows();
  r.tets = d.mesh.tets.rows();
  const Model model = build_model(d);
  r.factor_ms = model.factor().info().factorize_ms;
  r.nnz_L_unconstrained = model.factor().info().nnz_L;

  // Proxies: top-face nodes (z = 1) in the central patch, each bound to one incident tet.
  const double half = 0.5 * o.patch + 1e-9;
  ProxySet proxies;
  std::vector<int> top;
  for (Eigen::Index i = 0; i < r.nodes; ++i) {
    const Vec3 p = d.mesh.nodes.row(i).transpose();
    if (p.z() > 1.0 - 1e-9 && std::abs(p.x() - 0.5) <= half && std::abs(p.y() - 0.5) <= half)
      top.push_back(static_cast<int>(i));
  }
  proxies = proxies_from_nodes(d.mesh, top);
  std::vector<int> region(top.size());
  for (size_t k = 0; k < top.size(); ++k) region[k] = static_cast<int>(k);
  r.proxies = static_cast<int>(top.size());
  CollisionDetector detector(d.mesh, proxies, region,
                             {Obstacle{Sphere{Vec3(0.5, 0.5, 1.0 + o.sphere_radius - o.indent), o.sphere_radius}, {}}});

  CollisionOptions co;
  co.stiffness = 1e4 * 100.0 / (N - 1);  // 100 μ h: stiff against the elements it pushes
  co.schur_solve = o.schur_solve;
  Timer ts;
  CollisionSolver schur(model, proxies, region, detector, co);
  r.schur_setup_ms = ts.elapsed_ms();
  r.collision_nodes = static_cast<int>(schur.region_nodes().size());
  r.beta_elements = schur.num_beta_elements();
  r.nnz_L = schur.schur() ? schur.schur()->stats().nnz_L : 0.0;

  // A pressed state: a few outer iterations with J = 2 from rest.
  State pressed = make_state(model);
  SolverOptions warm;
  warm.max_iterations = 6;
  warm.rel_tolerance = 0.0;
  schur.set_inner_iterations(2);
  schur.step(pressed, warm, 1.0);
  r.active_proxies = static_cast<int>(schur.contacts().size());
  r.active_fraction = r.proxies > 0 ? static_cast<double>(r.active_proxies) / r.proxies : 0.0;

  SolverOptions measure;
  measure.max_iterations = o.iterations;
  measure.rel_tolerance = 0.0;
  // Plain PD iterations (no collision handling) from the same state.
  {
    State s = pressed;
    const FrameStats fs = step(model, s, measure);
    r.plain_iteration_ms = fs.wall_ms / fs.iterations;
  }
  // Algorithm 1 with J = 1 and J = 1 + extra_inner.
  double wall_1 = 0, wall_j = 0;
  {
    State s = pressed;
    schur.set_inner_iterations(1);
    const CollisionFrameStats cs = schur.step(s, measure, 1.0);
    wall_1 = cs.pd.wall_ms / cs.pd.iterations;
    r.outer_1inner_ms = wall_1;
    accumulate(r.phases_1inner, cs.timings_ms, 1.0 / cs.pd.iterations);
    r.pd_phases_1inner.local = cs.pd.timings_ms.local / cs.pd.iterations;
    r.pd_phases_1inner.rhs = cs.pd.timings_ms.rhs / cs.pd.iterations;
    r.pd_phases_1inner.solve = cs.pd.timings_ms.solve / cs.pd.iterations;
    r.pd_phases_1inner.other = cs.pd.timings_ms.other / cs.pd.iterations;
    if (schur.schur()) {
      const SchurSolveMethod m = schur.schur()->last_method();
      r.schur_solve = m == SchurSolveMethod::Woodbury ? "woodbury" : "dense_refactor";
    }
  }
  {
    State s = pressed;
    schur.set_inner_iterations(1 + o.extra_inner);
    const CollisionFrameStats cs = schur.step(s, measure, 1.0);
    wall_j = cs.pd.wall_ms / cs.pd.iterations;
    r.extra_inner_ms = (wall_j - wall_1) / o.extra_inner;
  }
  // Baseline (a): springs in the sparse matrix, numeric refactorization per iteration.
  if (o.refactor_iterations > 0) {
    CollisionOptions ca = co;
    ca.method = CollisionMethod::FullRefactor;
    CollisionSolver refactor(model, proxies, region, detector, ca);
    State s = pressed;
    SolverOptions so = measure;
    so.max_iterations = o.refactor_iterations;
    const CollisionFrameStats cs = refactor.step(s, so, 1.0);
    r.refactor_iteration_ms = cs.pd.wall_ms / cs.pd.iterations;
  }
  // Baseline (c): PCG with a Jacobi preconditioner, 100 iterations per global step.
  {
    CollisionOptions cc = co;
    cc.method = CollisionMethod::Pcg;
    CollisionSolver pcg(model, proxies, region, detector, cc);
    State s = pressed;
    SolverOptions so = measure;
    so.max_iterations = std::min(2, o.iterations);
    const CollisionFrameStats cs = pcg.step(s, so, 1.0);
    r.pcg_iteration_ms = cs.pd.wall_ms / cs.pd.iterations;
  }
  return r;
}

CollisionBenchResult bench_collisions_scene(const SceneCollisionBenchOptions& o) {
  if (o.iterations < 1 || o.extra_inner < 1) throw Error("bench collisions: iterations and extra_inner must be >= 1");
  CollisionBenchResult r;
  r.scene = o.scene;
  SceneSimulation sim(load_scene(o.scene));
  const SceneCollision* c = sim.collision();
  if (!c) throw Error(fmt::format("bench collisions: {} has no collision handling", o.scene));
  if (!c->solver)
    throw Error(
        fmt::format("bench collisions: {} uses IPC contact; the benchmark measures the penalty method", o.scene));
  if (o.frame > sim.num_frames())
    throw Error(fmt::format("bench collisions: frame {} beyond the scene's {} frames", o.frame, sim.num_frames()));
  r.threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  r.nodes = sim.mesh().nodes.rows();
  r.tets = sim.mesh().tets.rows();
  r.factor_ms = sim.model().factor().info().factorize_ms;
  r.nnz_L_unconstrained = sim.model().factor().info().nnz_L;
  r.proxies = static_cast<int>(c->region.size());
  r.collision_nodes = static_cast<int>(c->solver->region_nodes().size());
  r.beta_elements = c->solver->num_beta_elements();
  r.schur_setup_ms = c->solver->setup_ms();
  if (const SchurFactorization* S = c->solver->schur()) {
    r.nnz_L = S->stats().nnz_L;
    const double m = r.collision_nodes;
    r.sigma_inv_bytes = (c->solver->options().schur_solve == SchurSolveMethod::DenseRefactor ? 1.0 : 2.0) * m * m * 8;
  }
  // The contact state: the scene's own frames, converged as it asks.
  int f = 0;
  for (f = 1; f <= sim.num_frames(); ++f) {
    sim.advance(f);
    // No collision figures before the scene's collision.start_frame.
    const int active = sim.collision_stats() ? sim.collision_stats()->active_proxies : 0;
    if (o.frame > 0 ? f == o.frame : active > 0) break;
  }
  if (f > sim.num_frames() || !sim.collision_stats() || sim.collision_stats()->active_proxies == 0)
    throw Error(
        fmt::format("bench collisions: no contacts in {} up to frame {}", o.scene, std::min(f, sim.num_frames())));
  r.frame = f;
  r.active_proxies = sim.collision_stats()->active_proxies;
  r.active_fraction = r.proxies > 0 ? static_cast<double>(r.active_proxies) / r.proxies : 0.0;
  // Fixed iteration counts from that state, the frame's inputs kept (no extrapolation).
  sim.set_extrapolation(false);
  SolverOptions& so = sim.options();
  so.max_iterations = so.min_iterations = o.iterations;
  so.rel_tolerance = so.abs_tolerance = 0.0;
  so.stagnation_window = 0;
  so.accelerator = Accelerator::None;
  so.anderson = false;
  {
    State s = sim.state();
    const FrameStats fs = step(sim.model(), s, so);
    r.plain_iteration_ms = fs.wall_ms / fs.iterations;
  }
  c->solver->set_inner_iterations(1);
  const FrameStats f1 = sim.advance(f);
  const CollisionFrameStats& cs = *sim.collision_stats();
  r.outer_1inner_ms = f1.wall_ms / f1.iterations;
  accumulate(r.phases_1inner, cs.timings_ms, 1.0 / f1.iterations);
  r.pd_phases_1inner.local = f1.timings_ms.local / f1.iterations;
  r.pd_phases_1inner.rhs = f1.timings_ms.rhs / f1.iterations;
  r.pd_phases_1inner.solve = f1.timings_ms.solve / f1.iterations;
  r.pd_phases_1inner.other = f1.timings_ms.other / f1.iterations;
  if (c->solver->schur()) {
    const SchurSolveMethod m = c->solver->state().schur_workspace().last_method();
    r.schur_solve = m == SchurSolveMethod::Woodbury ? "woodbury" : "dense_refactor";
  }
  c->solver->set_inner_iterations(1 + o.extra_inner);
  const FrameStats fj = sim.advance(f);
  r.extra_inner_ms = (fj.wall_ms / fj.iterations - r.outer_1inner_ms) / o.extra_inner;
  return r;
}

}  // namespace xpd
