// `xpd bench ipc`: Li et al. 2023's Table 1 analogue on an IPC scene, measured in one run from one
// start state: the frame and its global step with the Schur + Woodbury solve, with the PCG
// baseline (△: CG preconditioned by the PD factor, relative residual 1e-8), and the same frame
// without contact handling.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_collision.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/ipc_solver.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "commands.hpp"

namespace xpd::cli {

namespace {

struct BenchIpcOptions {
  std::string scene = "scenes/lips_ipc.json";
  int frame = 6;
  bool json = false;
};

void run_bench_ipc(const BenchIpcOptions& o) {
  SceneSimulation sim(load_scene(o.scene));
  const SceneCollision* c = sim.collision();
  if (!c || !c->ipc) throw Error(fmt::format("bench ipc: {} does not use \"method\": \"ipc\"", o.scene));
  if (o.frame < 1 || o.frame > sim.num_frames())
    throw Error(fmt::format("bench ipc: frame {} outside the scene's 1..{}", o.frame, sim.num_frames()));
  for (int f = 1; f < o.frame; ++f) (void)sim.advance(f);
  const State start = sim.state();
  const Points obstacles_at_start = c->ipc_state->obstacle_positions();  // empty before the first IPC frame
  // The frame with the scene's own solve (Schur + Woodbury).
  Timer t;
  const FrameStats w = sim.advance(o.frame);
  const double ipc_frame_ms = t.elapsed_ms();
  const IpcFrameStats wi = *sim.ipc_stats();
  const FrameInputs inputs = sim.state().inputs;
  // The same frame, same start, with the PCG baseline.
  IpcOptions po = c->ipc->options();
  po.global_solve = IpcGlobalSolve::Pcg;
  const IpcModel pcg_model(sim.model(), c->ipc_proxies, c->ipc_triangles, po, c->ipc->obstacles());
  IpcState pcg_state(pcg_model);
  if (obstacles_at_start.rows() > 0) pcg_state.place_obstacles(obstacles_at_start);
  State sp = start;
  sp.inputs = inputs;
  t.restart();
  const IpcFrameStats p = pcg_state.step(sp, sim.options());
  const double pcg_frame_ms = t.elapsed_ms();
  // And without contact handling.
  State plain = start;
  plain.inputs = inputs;
  t.restart();
  const FrameStats pl = step(sim.model(), plain, sim.options());
  const double plain_frame_ms = t.elapsed_ms();

  const double ipc_global_ms = w.timings_ms.solve / std::max(1, w.iterations);
  const double pcg_global_ms = p.pd.timings_ms.solve / std::max(1, p.pd.iterations);
  nlohmann::ordered_json j;
  j["scene"] = o.scene;
  j["frame"] = o.frame;
  j["nodes"] = sim.mesh().nodes.rows();
  j["region_nodes"] = c->ipc->region_nodes().size();
  j["touched_vertices"] = wi.max_touched_nodes;
  j["rank"] = wi.max_rank;
  j["active_pairs"] = wi.active_pairs;
  j["ipc_iterations"] = w.iterations;
  j["pcg_iterations"] = p.pd.iterations;
  j["pcg_cg_iterations"] = p.pcg_iterations;
  j["ipc_global_ms"] = ipc_global_ms;
  j["ipc_substitution_ms"] = wi.substitution_ms / std::max(1, w.iterations);
  j["ipc_reduced_ms"] = wi.reduced_ms / std::max(1, w.iterations);
  j["pcg_global_ms"] = pcg_global_ms;
  j["ipc_frame_ms"] = ipc_frame_ms;
  j["pcg_frame_ms"] = pcg_frame_ms;
  j["plain_frame_ms"] = plain_frame_ms;
  j["plain_iterations"] = pl.iterations;
  j["global_step_ratio"] = ipc_global_ms > 0 ? pcg_global_ms / ipc_global_ms : 0.0;
  j["frame_ratio"] = ipc_frame_ms > 0 ? pcg_frame_ms / ipc_frame_ms : 0.0;
  // Per PD iteration: with Anderson the two solves may take different iteration counts from the
  // same start (their round-off differs), which moves frame_ratio with the path; these do not.
  const double ipc_iteration_ms = ipc_frame_ms / std::max(1, w.iterations);
  const double pcg_iteration_ms = pcg_frame_ms / std::max(1, p.pd.iterations);
  j["ipc_iteration_ms"] = ipc_iteration_ms;
  j["pcg_iteration_ms"] = pcg_iteration_ms;
  j["iteration_ratio"] = ipc_iteration_ms > 0 ? pcg_iteration_ms / ipc_iteration_ms : 0.0;
  j["same_result"] = (sp.x - sim.state().x).cwiseAbs().maxCoeff();
  print_result(j, o.json);
}

}  // namespace

void add_bench_ipc_command(CLI::App& bench) {
  auto o = std::make_shared<BenchIpcOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "ipc",
      "Li et al. 2023's Table 1 analogue: one frame of an IPC scene with the Schur + Woodbury global step, with the "
      "PCG baseline, and without contact, from the same state");
  cmd->add_option("--scene", o->scene, "IPC scene (\"collision\": {\"method\": \"ipc\"})")->capture_default_str();
  cmd->add_option("--frame", o->frame, "Frame to measure (the frames before it are run first)")->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON: ipc_global_ms (with its parts ipc_substitution_ms and ipc_reduced_ms), pcg_global_ms, "
                "ipc_frame_ms, pcg_frame_ms, plain_frame_ms, "
                "touched_vertices, rank, iterations, the frame time per PD iteration (ipc_iteration_ms, "
                "pcg_iteration_ms), the ratios and the largest position difference");
  cmd->callback([o] { run_bench_ipc(*o); });
}

}  // namespace xpd::cli
