// `xpd run SCENE -o OUT`: load the scene, run it through the library's run writer
// (scene/run_writer.hpp: the same files every front end writes), with a progress bar, then print
// a per-phase table like Figure 4 of Wang et al. 2021.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "commands.hpp"
#include "live_session.hpp"
#include "progress.hpp"

namespace xpd::cli {
namespace {

struct RunCliOptions {
  std::string scene;
  std::string out;
  bool quiet = false;
  int max_frames = 0;  // 0 = all frames of the scene
  std::string events;  // OUT/events.json of `xpd view --live`: its events replayed
};

// Per-iteration phase table, laid out like Figure 4 of Wang et al. 2021 (averages over all iterations).
// With collisions the rows follow the figure's three blocks: outer preamble, inner loop, conclusion.
// IPC phases summed over the frames (the frame loop's own table has no barrier or CCD rows).
struct IpcTotals {
  double barrier_ms = 0, ccd_ms = 0;
  double min_distance = -1;  // smallest over the frames with active pairs; -1: none
};

void print_timing_table(const SceneSimulation& sim, const PhaseTimings& total, int iterations, double wall_ms,
                        const CollisionFrameStats* col, const IpcTotals& ipc) {
  const double it = std::max(1, iterations);
  double iter_ms = (total.local + total.rhs + total.solve + total.other) / it;
  fmt::print("\n{:<58} {:>12}\n", "Phase (mean per PD iteration)", "time");
  fmt::print("{:-<71}\n", "");
  if (col && sim.collision()->ipc) {
    // The barrier and CCD run inside the loop's evaluate / step-bound calls: shown apart, and
    // taken out of "other" where the loop charged them.
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  PD local step (rotations, elastic forces)", total.local / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Right-hand side (springs, loads, residual)", total.rhs / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Barrier: pairs within dhat, forces, PSD Hessians", ipc.barrier_ms / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  CCD of the line search (broad + narrow phase)", ipc.ccd_ms / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Global solve (Schur + Woodbury, or full sparse)", total.solve / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Other (line search, checks)",
               std::max(0.0, total.other - ipc.ccd_ms) / it);
    iter_ms += ipc.barrier_ms / it;
  } else if (col) {
    const CollisionTimings& t = col->timings_ms;
    const double inner = t.detect + t.local_beta + t.schur_update + t.schur_factor + t.schur_solve;
    iter_ms += (inner + t.forward + t.backward + t.refactor + t.pcg) / it;
    fmt::print("Outer loop - preamble\n");
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  PD local step (collision-safe region), forces", total.local / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Right-hand side (springs, loads, contacts, residual)", total.rhs / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Forward substitution (partial, x1 then Schur rhs)", t.forward / it);
    fmt::print("Inner loop (collision-prone region, {} inner iterations in all)\n", col->inner_iterations);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Collision detection", t.detect / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Local step of the region (R_beta), its forces", t.local_beta / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Update of contact constraints in H / Woodbury", t.schur_update / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Dense Cholesky (H, or the Woodbury capacitance)", t.schur_factor / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Solve Schur system, update of its right-hand side", t.schur_solve / it);
    fmt::print("Outer loop - conclusion\n");
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Backward substitution (partial)", t.backward / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Plain global solves (iterations without contact)", total.solve / it);
    if (t.refactor > 0) fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Sparse refactorization (baseline)", t.refactor / it);
    if (t.pcg > 0) fmt::print("{:<58} {:>10.3f}ms\n", "CPU  PCG (baseline)", t.pcg / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Other (update, checks)", total.other / it);
  } else if (sim.compute_device().rfind("cuda", 0) == 0) {
    fmt::print("{:<58} {:>10.3f}ms\n", "GPU  Local step, forces, energy and residual (two sums back)",
               total.local / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "GPU  Global solve (supernodal substitution, 3 RHS), update", total.solve / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Other (convergence test, frame start and end)",
               (total.rhs + total.other) / it);
  } else {
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  PD local step (rotations, elastic forces)", total.local / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Right-hand side (springs, loads, inertia, residual)", total.rhs / it);
    fmt::print("{:<58} {:>10.3f}ms\n",
               sim.model().coupled() ? "CPU  Global solve (CHOLMOD, coupled 3n x 3n matrix)"
                                     : "CPU  Global solve (CHOLMOD, 3 right-hand sides)",
               total.solve / it);
    fmt::print("{:<58} {:>10.3f}ms\n", "CPU  Other (update, acceleration, checks)", total.other / it);
  }
  fmt::print("{:-<71}\n", "");
  fmt::print("{:<58} {:>10.3f}ms\n", "PD iteration total", iter_ms);
  fmt::print("{:<58} {:>10.1f}ms\n", "Setup (model build + one factorization)", sim.setup_ms());
  fmt::print("{:<58} {:>12}\n", "PD iterations (all frames)", iterations);
  fmt::print("{:<58} {:>10.1f}ms\n", "Wall time of all frames", wall_ms);
  fmt::print("{:<58} {:>12}\n", "Total tetrahedra in mesh", sim.mesh().tets.rows());
  fmt::print("{:<58} {:>12}\n", "Total simulation nodes", sim.mesh().nodes.rows());
  fmt::print("Device (solver.device): {}\n", sim.compute_device());
  if (const SceneCollision* c = sim.collision()) {
    // A surgery scene's collision model is its session's, whose proxies and region follow the events.
    const CollisionModel* session = sim.surgery() ? sim.surgery()->collision_model() : nullptr;
    fmt::print("{:<58} {:>12}\n", "Nodes in collision-prone region",
               c->solver ? c->solver->region_nodes().size()
               : c->ipc  ? c->ipc->region_nodes().size()
               : session ? session->region_nodes().size()
                         : std::size_t{0});
    if (c->ipc)
      fmt::print("{:<58} {:>12}\n", "IPC contact surface (triangles, dhat)",
                 fmt::format("{}, {:.3g}", c->ipc_triangles.rows(), c->ipc->options().dhat));
    fmt::print("{:<58} {:>12}\n", "Collision proxies (region / all)",
               session ? fmt::format("{} / {}", session->region().size(), session->proxies().size())
                       : fmt::format("{} / {}", c->region.size(), c->proxies.size()));
    fmt::print("{:<58} {:>12.3e}\n", "Mean rest edge length", c->mean_edge_length);
    if (c->solver || session) fmt::print("{:<58} {:>12.3e}\n", "Penalty stiffness per proxy [N/m]", c->stiffness);
    if (c->ipc && ipc.min_distance >= 0)
      fmt::print("{:<58} {:>12.3e}\n", "Closest pair after a frame (all frames)", ipc.min_distance);
  }
}

void run(const RunCliOptions& o) {
  nlohmann::json recorded;
  if (!o.events.empty()) {
    const std::string data = io::read_file_bytes(o.events);
    try {
      recorded = nlohmann::json::parse(data);
    } catch (const nlohmann::json::parse_error& e) {
      throw IoError(o.events, 0, std::string("malformed JSON: ") + e.what());
    }
    // The events are in the rest space of the scene they were drawn on.
    namespace fs = std::filesystem;
    if (recorded.is_object() && recorded.contains("scene") && recorded["scene"].is_string()) {
      std::error_code ec;
      const fs::path drawn = fs::weakly_canonical(recorded["scene"].get<std::string>(), ec),
                     given = fs::weakly_canonical(o.scene, ec);
      if (drawn != given)
        std::cerr << "xpd run: warning: " << o.events << " was recorded on " << drawn.string() << ", not on "
                  << given.string() << std::endl;
    }
  }
  SceneSimulation sim(o.events.empty() ? load_scene(o.scene) : load_scene(o.scene, [&](nlohmann::json& doc) {
    merge_recorded_events(doc, recorded);
  }));
  const int frames = o.max_frames > 0 ? std::min(o.max_frames, sim.num_frames()) : sim.num_frames();
  Progress progress("frames", frames);
  RunOptions ro;
  ro.max_frames = o.max_frames;
  const bool interactive = sim.scene().solver.interactive_iterations > 0;
  IpcTotals ipc;
  struct {
    int frames = 0, steps = 0, max_steps = 0, unconverged = 0, max_inverted = 0, max_target_inverted = 0;
    double ms = 0, search_ms = 0, min_distance = -1;
  } tw;
  ro.on_frame = [&](const FrameReport& r) {
    if (const auto& st = sim.two_way_stats()) {
      const TwoWayStats& p = st->projection;
      ++tw.frames;
      tw.steps += p.steps;
      tw.max_steps = std::max(tw.max_steps, p.steps);
      tw.unconverged += !p.converged;
      tw.max_inverted = std::max(tw.max_inverted, st->inverted_tets);
      tw.max_target_inverted = std::max(tw.max_target_inverted, st->target_inverted_tets);
      tw.ms += p.ms_total;
      tw.search_ms += p.ms_search;
      if (std::isfinite(p.min_distance))
        tw.min_distance = tw.min_distance < 0 ? p.min_distance : std::min(tw.min_distance, p.min_distance);
    }
    if (const auto& st = sim.ipc_stats()) {
      ipc.barrier_ms += st->barrier_ms;
      ipc.ccd_ms += st->ccd_ms;
      if (st->active_pairs > 0)
        ipc.min_distance = ipc.min_distance < 0 ? st->min_distance : std::min(ipc.min_distance, st->min_distance);
    }
    if (o.quiet) return;
    if (interactive)
      progress.update(
          r.frame,
          fmt::format("{:.1f} fps, relative residual {:.2e}", r.stats->wall_ms > 0 ? 1000.0 / r.stats->wall_ms : 0.0,
                      r.stats->initial_residual > 0
                          ? r.stats->residual / std::max(r.stats->initial_residual, r.stats->load_scale)
                          : 0.0));
    else if (const auto& t = sim.two_way_stats())
      progress.update(r.frame, fmt::format("{} it, residual {:.2e}, two-way {} steps{}, {} pairs within delta",
                                           r.stats->iterations, r.stats->residual, t->projection.steps,
                                           t->projection.converged ? "" : " (unconverged)", t->projection.max_active));
    else if (r.collision && sim.ipc_stats())
      progress.update(r.frame,
                      fmt::format("{} it, residual {:.2e}, {} pairs within dhat, closest {:.1e}", r.stats->iterations,
                                  r.stats->residual, sim.ipc_stats()->active_pairs, sim.ipc_stats()->min_distance));
    else if (r.collision)
      progress.update(r.frame,
                      fmt::format("{} it, residual {:.2e}, {} contacts, depth {:.1e}", r.stats->iterations,
                                  r.stats->residual, r.collision->active_proxies, r.collision->max_penetration));
    else
      progress.update(r.frame, fmt::format("{} it, residual {:.2e}", r.stats->iterations, r.stats->residual));
  };
  const RunSummary sum = run_scene(sim, o.out, ro);
  if (!o.quiet) progress.finish();
  print_timing_table(sim, sum.timings_ms, sum.iterations, sum.wall_ms, sum.collision ? &*sum.collision : nullptr, ipc);
  if (sum.collision)
    fmt::print("{:<58} {:>12.3e}\n", "Deepest penetration after a frame (all frames)", sum.max_penetration);
  if (tw.frames > 0) {
    fmt::print("{:<58} {:>12}\n", "Two-way projections (frames)", tw.frames);
    fmt::print("{:<58} {:>12}\n", "Two-way steps per frame (mean, max)",
               fmt::format("{:.1f}, {}", double(tw.steps) / tw.frames, tw.max_steps));
    fmt::print("{:<58} {:>10.3f}ms\n", "Two-way time per frame (proximity search share)", tw.ms / tw.frames);
    fmt::print("{:<58} {:>11.1f}%\n", "  proximity search", tw.ms > 0 ? 100 * tw.search_ms / tw.ms : 0.0);
    if (tw.min_distance >= 0)
      fmt::print("{:<58} {:>12.3e}\n", "Closest surface pair after a projection", tw.min_distance);
    fmt::print("{:<58} {:>12}\n", "Inverted tets after a projection (max)", tw.max_inverted);
    fmt::print("{:<58} {:>12}\n", "Inverted tets in the PD solution before it (max)", tw.max_target_inverted);
    if (tw.unconverged > 0)
      fmt::print(
          "\nWARNING: {} two-way projection(s) reached max_steps before ||r|| < tolerance (the state is "
          "still intersection-free; see \"two_way\" in stats.json)\n",
          tw.unconverged);
  }
  if (interactive)
    fmt::print(
        "\nInteractive: {} outer iteration(s) per frame{}: {:.1f} frames/s, relative residual left mean {:.2e}, "
        "max {:.2e}\n",
        sim.scene().solver.interactive_iterations,
        sim.collision() && sim.collision()->solver
            ? fmt::format(" x {} inner", sim.collision()->solver->state().inner_iterations())
            : "",
        sum.fps, sum.mean_relative_residual, sum.max_relative_residual);
  if (sum.unconverged_frames > 0)
    fmt::print(
        "\nWARNING: {} of {} frames did not reach the tolerance {} within {} iterations "
        "(see \"converged\" in stats.json)\n",
        sum.unconverged_frames, frames, sim.scene().solver.tolerance, sim.scene().solver.max_iterations);
  fmt::print("\nwrote {} frames to {}/frames, {}/stats.json and {}/scene.json\n", frames + 1, o.out, o.out, o.out);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunCliOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a scene and write its frames and statistics");
  cmd->add_option("scene", o->scene, "Scene file (JSON, see docs/scene-format.md)")->required();
  cmd->add_option("-o,--output", o->out, "Output folder (frames/NNNN.vtu, stats.json, scene.json)")->required();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
  cmd->add_option("--events", o->events,
                  "Replay a live session: add the surgical events of OUT/events.json (xpd view --live) to the "
                  "scene's, and run to its last frame")
      ->check(CLI::ExistingFile);
  cmd->add_option("--frames", o->max_frames,
                  "Compute only frames 1..N (ramps and keyframes still use the scene's frame count)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->callback([o] { run(*o); });
}

}  // namespace xpd::cli
