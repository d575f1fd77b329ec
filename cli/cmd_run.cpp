// `xpd run SCENE -o OUT`: load and validate the scene, build the model (one factorization),
// write frame 0, step the frames with progress, print a per-phase table like paper 000's Fig. 4.
#include "commands.hpp"
#include "progress.hpp"

#include <xpd/core/error.hpp>
#include <xpd/io/run_output.hpp>
#include <xpd/io/scene.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/solver/scene_simulation.hpp>

#include <algorithm>
#include <cstddef>
#include <fmt/format.h>
#include <optional>
#include <memory>
#include <vector>

namespace xpd::cli {
namespace {

struct RunOptions {
  std::string scene;
  std::string out;
  bool quiet = false;
  int max_frames = 0;  // 0 = all frames of the scene
};

nlohmann::ordered_json frame_json(int frame, const FrameStats& s, const std::optional<CollisionFrameStats>& c) {
  nlohmann::ordered_json j = {{"frame", frame},
          {"energy", s.energy},
          {"residual", s.residual},
          {"relative_residual", s.initial_residual > 0 ? s.residual / std::max(s.initial_residual, s.load_scale) : 0.0},
          {"iterations", s.iterations},
          {"converged", s.converged},
          {"wall_ms", s.wall_ms},
          {"timings_ms",
           {{"local", s.timings_ms.local}, {"rhs", s.timings_ms.rhs}, {"solve", s.timings_ms.solve},
            {"other", s.timings_ms.other}}}};
  if (s.line_search_halvings > 0) j["line_search_halvings"] = s.line_search_halvings;
  if (c) {
    j["inner_iterations"] = c->inner_iterations;
    j["plain_iterations"] = c->plain_iterations;
    j["active_proxies"] = c->active_proxies;
    j["max_penetration"] = c->max_penetration;
    const CollisionTimings& t = c->timings_ms;
    auto& tm = j["timings_ms"];
    tm["detect"] = t.detect;
    tm["local_beta"] = t.local_beta;
    tm["schur_update"] = t.schur_update;
    tm["schur_factor"] = t.schur_factor;
    tm["schur_solve"] = t.schur_solve;
    tm["forward"] = t.forward;
    tm["backward"] = t.backward;
    if (t.refactor > 0) tm["refactor"] = t.refactor;
    if (t.pcg > 0) tm["pcg"] = t.pcg;
  }
  return j;
}

// Node lists longer than this are cut in scene.json (the viewer only draws them as points).
constexpr std::size_t kMaxOverlayNodes = 200000;

// {"nodes": [...]} plus "count" and "truncated": true when the list was cut at kMaxOverlayNodes.
void put_nodes(nlohmann::ordered_json& j, const std::vector<int>& nodes) {
  const std::size_t n = std::min(nodes.size(), kMaxOverlayNodes);
  j["nodes"] = std::vector<int>(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(n));
  if (n < nodes.size()) {
    j["count"] = nodes.size();
    j["truncated"] = true;
  }
}

// OUT/scene.json (docs/output-format.md): the attachments and named selections as node lists,
// and "obstacles" (filled by obstacle_overlay).
nlohmann::ordered_json scene_overlay(const Scene& scene, const TetMesh& mesh) {
  nlohmann::ordered_json attachments = nlohmann::ordered_json::array();
  for (const Attachment& a : scene.attachments) {
    nlohmann::ordered_json j;
    j["type"] = a.type == Attachment::Type::Fixed ? "fixed" : a.type == Attachment::Type::Rigid ? "rigid" : "bone";
    j["selection"] = a.selection;
    put_nodes(j, select_nodes(a.selection, scene.selections, mesh));
    attachments.push_back(std::move(j));
  }
  nlohmann::ordered_json selections = nlohmann::ordered_json::object();
  for (const auto& [name, selection] : scene.selections) {
    const std::vector<int> nodes = select_nodes(selection, scene.selections, mesh);
    if (nodes.size() <= kMaxOverlayNodes) {
      selections[name] = nodes;
    } else {
      nlohmann::ordered_json j;
      put_nodes(j, nodes);
      selections[name] = std::move(j);
    }
  }
  return {{"attachments", std::move(attachments)},
          {"selections", std::move(selections)},
          {"obstacles", nlohmann::ordered_json::array()}};
}

// The obstacles the viewer can draw (sphere, plane, box) where they stand at frame 0.
nlohmann::ordered_json obstacle_overlay(const SceneSimulation& sim) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  const SceneCollision* c = sim.collision();
  if (!c) return out;
  auto vec = [](const Vec3& v) { return std::vector<double>{v.x(), v.y(), v.z()}; };
  for (const Obstacle& o : c->obstacles) {
    const RigidTransform T = evaluate(o.keyframes, 0.0);
    if (const auto* sp = std::get_if<Sphere>(&o.shape)) {
      out.push_back({{"type", "sphere"}, {"center", vec(T.apply(sp->center))}, {"radius", sp->radius}});
    } else if (const auto* pl = std::get_if<Plane>(&o.shape)) {
      out.push_back({{"type", "plane"}, {"point", vec(T.apply(pl->point))}, {"normal", vec(T.rotation * pl->normal)}});
    } else if (const auto* bx = std::get_if<Box>(&o.shape)) {
      // The viewer draws axis-aligned boxes: the bounding box of the placed one.
      Vec3 lo = Vec3::Constant(1e300), hi = Vec3::Constant(-1e300);
      for (int k = 0; k < 8; ++k) {
        const Vec3 corner((k & 1 ? 1 : -1) * bx->half_extents.x(), (k & 2 ? 1 : -1) * bx->half_extents.y(),
                          (k & 4 ? 1 : -1) * bx->half_extents.z());
        lo = lo.cwiseMin(T.apply(corner));
        hi = hi.cwiseMax(T.apply(corner));
      }
      out.push_back({{"type", "box"}, {"min", vec(lo)}, {"max", vec(hi)}});
    }
  }
  return out;
}

// One entry of outputs.fields as a VTU array ("displacement" is always written by RunOutput).
void add_field(const SceneSimulation& sim, const std::string& name, std::vector<io::VtuField>& point_fields,
               std::vector<io::VtuField>& cell_fields) {
  const auto points = [&](const Points& p) {
    io::VtuField f{name, 3, std::vector<double>(static_cast<std::size_t>(sim.mesh().nodes.size()), 0.0)};
    if (p.rows() == sim.mesh().nodes.rows()) std::copy(p.data(), p.data() + p.size(), f.values.begin());
    point_fields.push_back(std::move(f));
  };
  const Tets& tets = sim.mesh().tets;
  if (name == "velocity") {
    points(sim.state().velocity);
  } else if (name == "external_force") {
    points(sim.state().inputs.nodal_forces);
  } else if (name == "material") {
    cell_fields.push_back({name, 1, std::vector<double>(sim.tet_material().begin(), sim.tet_material().end())});
  } else if (name == "volume_ratio") {
    // det F = det(Ds) / det(Dm): current over rest signed volume of each tet.
    io::VtuField f{name, 1, std::vector<double>(static_cast<std::size_t>(tets.rows()))};
    const Points& x = sim.positions();
    const Points& X = sim.mesh().nodes;
    for (Eigen::Index e = 0; e < tets.rows(); ++e)
      f.values[static_cast<std::size_t>(e)] =
          signed_volume(x.row(tets(e, 0)), x.row(tets(e, 1)), x.row(tets(e, 2)), x.row(tets(e, 3))) /
          signed_volume(X.row(tets(e, 0)), X.row(tets(e, 1)), X.row(tets(e, 2)), X.row(tets(e, 3)));
    cell_fields.push_back(std::move(f));
  }
}

void write_outputs(io::RunOutput& out, const SceneSimulation& sim, int frame, int last_frame) {
  const OutputSettings& o = sim.scene().outputs;
  if (frame % o.every != 0 && frame != last_frame) return;
  if (o.vtu) {
    std::vector<io::VtuField> point_fields, cell_fields;
    for (const std::string& name : o.fields) add_field(sim, name, point_fields, cell_fields);
    out.write_frame(frame, sim.mesh().nodes, sim.positions(), sim.mesh().tets, point_fields, cell_fields);
  }
  if (o.surface != OutputSettings::Surface::None) {
    const std::string ext = o.surface == OutputSettings::Surface::Obj ? "obj" : "ply";
    if (auto s = sim.embedded_surface()) out.write_surface(frame, *s, ext);
  }
}

// Per-iteration phase table, laid out like the paper's Figure 4 (averages over all iterations).
// With collisions the rows follow the figure's three blocks: outer preamble, inner loop, conclusion.
void print_timing_table(const SceneSimulation& sim, const PhaseTimings& total, int iterations, double wall_ms,
                        const CollisionFrameStats* col) {
  const double it = std::max(1, iterations);
  double iter_ms = (total.local + total.rhs + total.solve + total.other) / it;
  fmt::print("\n{:<58} {:>12}\n", "Phase (mean per PD iteration)", "time");
  fmt::print("{:-<71}\n", "");
  if (col) {
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
  if (const SceneCollision* c = sim.collision()) {
    fmt::print("{:<58} {:>12}\n", "Nodes in collision-prone region", c->solver->region_nodes().size());
    fmt::print("{:<58} {:>12}\n", "Collision proxies (region / all)",
               fmt::format("{} / {}", c->region.size(), c->proxies.size()));
    fmt::print("{:<58} {:>12.3e}\n", "Mean rest edge length", c->mean_edge_length);
    fmt::print("{:<58} {:>12.3e}\n", "Penalty stiffness per proxy [N/m]", c->stiffness);
  }
}

void run_scene(const RunOptions& o) {
  SceneSimulation sim(load_scene(o.scene));
  io::RunOutput output(o.out);
  output.set_metadata("scene", sim.scene().file);
  output.set_metadata("nodes", sim.mesh().nodes.rows());
  output.set_metadata("tets", sim.mesh().tets.rows());
  output.set_metadata("setup_ms", sim.setup_ms());
  nlohmann::ordered_json overlay = scene_overlay(sim.scene(), sim.mesh());
  overlay["obstacles"] = obstacle_overlay(sim);
  output.write_scene_overlay(overlay);
  write_outputs(output, sim, 0, sim.num_frames());
  output.append_stats(nlohmann::ordered_json{{"frame", 0}});

  // --frames N computes only frames 1..N; ramps and keyframes keep the scene's frame count.
  const int frames = o.max_frames > 0 ? std::min(o.max_frames, sim.num_frames()) : sim.num_frames();
  output.set_metadata("frames_computed", frames);
  Progress progress("frames", frames);
  PhaseTimings total;
  std::optional<CollisionFrameStats> col_total;
  double max_penetration = 0;
  int iterations = 0;
  double wall_ms = 0;
  int unconverged = 0;
  for (int f = 1; f <= frames; ++f) {
    const FrameStats s = sim.advance(f);
    write_outputs(output, sim, f, frames);
    output.append_stats(frame_json(f, s, sim.collision_stats()));
    if (const auto& c = sim.collision_stats()) {
      if (!col_total) col_total.emplace();
      accumulate(col_total->timings_ms, c->timings_ms);
      col_total->inner_iterations += c->inner_iterations;
      max_penetration = std::max(max_penetration, c->max_penetration);
    }
    total.local += s.timings_ms.local;
    total.rhs += s.timings_ms.rhs;
    total.solve += s.timings_ms.solve;
    total.other += s.timings_ms.other;
    iterations += s.iterations;
    wall_ms += s.wall_ms;
    unconverged += s.converged ? 0 : 1;
    if (!o.quiet) {
      if (const auto& c = sim.collision_stats())
        progress.update(f, fmt::format("{} it, residual {:.2e}, {} contacts, depth {:.1e}", s.iterations, s.residual,
                                       c->active_proxies, c->max_penetration));
      else
        progress.update(f, fmt::format("{} it, residual {:.2e}", s.iterations, s.residual));
    }
  }
  if (!o.quiet) progress.finish();
  print_timing_table(sim, total, iterations, wall_ms, col_total ? &*col_total : nullptr);
  if (col_total) {
    output.set_metadata("max_penetration", max_penetration);
    output.set_metadata("mean_edge_length", sim.collision()->mean_edge_length);
    fmt::print("{:<58} {:>12.3e}\n", "Deepest penetration after a frame (all frames)", max_penetration);
  }
  output.set_metadata("unconverged_frames", unconverged);
  if (unconverged > 0)
    fmt::print("\nWARNING: {} of {} frames did not reach the tolerance {} within {} iterations "
               "(see \"converged\" in stats.json)\n",
               unconverged, frames, sim.scene().solver.tolerance, sim.scene().solver.max_iterations);
  fmt::print("\nwrote {} frames to {}/frames, {}/stats.json and {}/scene.json\n", frames + 1, o.out, o.out, o.out);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a scene and write its frames and statistics");
  cmd->add_option("scene", o->scene, "Scene file (JSON, see docs/scene-format.md)")->required();
  cmd->add_option("-o,--output", o->out, "Output folder (frames/NNNN.vtu, stats.json, scene.json)")->required();
  cmd->add_flag("-q,--quiet", o->quiet, "No progress output");
  cmd->add_option("--frames", o->max_frames,
                  "Compute only frames 1..N (ramps and keyframes still use the scene's frame count)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->callback([o] { run_scene(*o); });
}

}  // namespace xpd::cli
