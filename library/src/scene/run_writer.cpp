// The run writer (scene/run_writer.hpp): the one code path that writes a run's folder.
#include <algorithm>
#include <cstddef>
#include <vector>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene_collision.hpp>

namespace xpd {
namespace {

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
nlohmann::ordered_json selection_overlay(const Scene& scene, const TetMesh& mesh) {
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
  } else if (name == "active" || name == "contact_depth") {
    // Per node: the active proxies hanging on it (largest barycentric weight) at the end of the frame,
    // 1 / their deepest penetration; 0 elsewhere and in frames without collision handling.
    io::VtuField f{name, 1, std::vector<double>(static_cast<std::size_t>(sim.mesh().nodes.rows()), 0.0)};
    // The contacts and the proxies they index: the scene's solver's, or a surgery session's (its
    // proxies follow the events: a cut adds proxies for the copies of split nodes).
    const SceneCollision* c = sim.collision();
    const std::vector<ProxyContact>* contacts = nullptr;
    const ProxySet* proxies = nullptr;
    if (c && sim.collision_stats()) {
      if (c->solver) {
        contacts = &c->solver->contacts();
        proxies = &c->proxies;
      } else if (sim.surgery() && sim.surgery()->collision_model()) {
        contacts = &sim.surgery()->contacts();
        proxies = &sim.surgery()->collision_model()->proxies();
      }
    }
    if (contacts) {
      for (const ProxyContact& k : *contacts) {
        Eigen::Index a = 0;
        proxies->weights.row(k.proxy).maxCoeff(&a);
        double& v = f.values[static_cast<std::size_t>(tets(proxies->tet[static_cast<std::size_t>(k.proxy)], a))];
        v = name == "active" ? 1.0 : std::max(v, k.depth);
      }
    }
    point_fields.push_back(std::move(f));
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

}  // namespace

namespace {
double relative_residual(const FrameStats& s) {
  return s.initial_residual > 0 ? s.residual / std::max(s.initial_residual, s.load_scale) : 0.0;
}
}  // namespace

nlohmann::ordered_json frame_stats_json(int frame, const FrameStats& s, const std::optional<CollisionFrameStats>& c,
                                        bool interactive) {
  nlohmann::ordered_json j = {{"frame", frame},
                              {"energy", s.energy},
                              {"residual", s.residual},
                              {"relative_residual", relative_residual(s)},
                              {"iterations", s.iterations},
                              {"converged", s.converged},
                              {"stagnated", s.stagnated},
                              {"roundoff_residual", s.roundoff_residual},
                              {"wall_ms", s.wall_ms},
                              {"timings_ms",
                               {{"local", s.timings_ms.local},
                                {"rhs", s.timings_ms.rhs},
                                {"solve", s.timings_ms.solve},
                                {"other", s.timings_ms.other}}}};
  if (interactive) j["fps"] = s.wall_ms > 0 ? 1000.0 / s.wall_ms : 0.0;
  if (s.line_search_halvings > 0) j["line_search_halvings"] = s.line_search_halvings;
  if (s.anderson_rejections > 0) j["anderson_rejections"] = s.anderson_rejections;
  if (s.chebyshev_rejections > 0) j["chebyshev_rejections"] = s.chebyshev_rejections;
  if (c) {
    j["inner_iterations"] = c->inner_iterations;
    j["plain_iterations"] = c->plain_iterations;
    j["active_proxies"] = c->active_proxies;
    j["max_penetration"] = c->max_penetration;
    if (c->repair_rounds > 0) j["repair_rounds"] = c->repair_rounds;
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

nlohmann::ordered_json scene_overlay(const SceneSimulation& sim) {
  nlohmann::ordered_json overlay = selection_overlay(sim.scene(), sim.mesh());
  overlay["obstacles"] = obstacle_overlay(sim);
  return overlay;
}

RunWriter::RunWriter(const SceneSimulation& sim, const std::string& out_dir, int frames)
    : sim_(&sim), out_(out_dir), frames_(frames) {
  out_.set_metadata("scene", sim.scene().file);
  out_.set_metadata("nodes", sim.mesh().nodes.rows());
  out_.set_metadata("tets", sim.mesh().tets.rows());
  out_.set_metadata("setup_ms", sim.setup_ms());
  out_.set_metadata("device", sim.compute_device());
  out_.write_scene_overlay(scene_overlay(sim));
  write_geometry(0);
  out_.append_stats(nlohmann::ordered_json{{"frame", 0}});
  out_.set_metadata("frames_computed", frames);
}

void RunWriter::write_geometry(int frame) {
  const SceneSimulation& sim = *sim_;
  const OutputSettings& o = sim.scene().outputs;
  if (frame % o.every != 0 && frame != frames_) return;
  if (o.vtu) {
    std::vector<io::VtuField> point_fields, cell_fields;
    for (const std::string& name : o.fields) add_field(sim, name, point_fields, cell_fields);
    out_.write_frame(frame, sim.mesh().nodes, sim.positions(), sim.mesh().tets, point_fields, cell_fields);
  }
  if (o.surface != OutputSettings::Surface::None) {
    const std::string ext = o.surface == OutputSettings::Surface::Obj ? "obj" : "ply";
    if (auto s = sim.embedded_surface()) {
      out_.write_surface(frame, *s, ext);
    } else {
      // No embedded surface: the tet mesh's own boundary, deformed (its triangles found once).
      if (boundary_version_ != sim.topology_version()) {  // found again after a cut or an excision
        boundary_ = boundary_faces(sim.mesh().tets);
        boundary_version_ = sim.topology_version();
      }
      out_.write_surface(frame, SurfaceMesh{sim.positions(), boundary_}, ext);
    }
    if (sim.two_way_obstacle_faces().rows() > 0)
      out_.write_obstacles(frame, SurfaceMesh{sim.two_way_obstacle_positions(), sim.two_way_obstacle_faces()}, ext);
    // IPC obstacles where they stand (their keyframed pose before collision handling starts).
    if (const SceneCollision* c = sim.collision(); c && c->ipc && c->ipc->obstacle_triangles().rows() > 0) {
      const Points& at = c->ipc_state->obstacle_positions();
      out_.write_obstacles(
          frame, SurfaceMesh{at.rows() > 0 ? at : c->ipc->obstacle_pose(frame), c->ipc->obstacle_triangles()}, ext);
    }
  }
}

void RunWriter::write_frame(int frame, const FrameStats& stats) {
  write_geometry(frame);
  nlohmann::ordered_json j =
      frame_stats_json(frame, stats, sim_->collision_stats(), sim_->scene().solver.interactive_iterations > 0);
  // A collision scene's frame before collision.start_frame: solved without collision handling.
  if (sim_->collision() && !sim_->collision_stats()) j["collisions"] = false;
  if (const auto& ipc = sim_->ipc_stats()) {
    j["min_distance"] = ipc->min_distance;
    j["kappa"] = ipc->kappa;
    j["line_search_halvings"] = ipc->pd.line_search_halvings;
    j["min_step_fraction"] = ipc->min_step_fraction;
    j["touched_nodes"] = ipc->max_touched_nodes;
    j["rank"] = ipc->max_rank;
    j["timings_ms"]["ccd"] = ipc->ccd_ms;
    j["timings_ms"]["barrier"] = ipc->barrier_ms;
    if (sim_->collision()->ipc->obstacle_triangles().rows() > 0) {
      j["obstacle_advances"] = ipc->obstacle_advances;
      j["kappa_raises"] = ipc->kappa_raises;
      j["obstacle_lag"] = ipc->obstacle_lag;
    }
  }
  if (const auto& tw = sim_->two_way_stats()) {
    const TwoWayStats& p = tw->projection;
    j["two_way"] = {
        {"steps", p.steps},
        {"searches", p.searches},
        {"converged", p.converged},
        {"max_r", p.max_r},
        {"max_pairs", p.max_pairs},
        {"max_active", p.max_active},
        {"min_distance", std::isfinite(p.min_distance) ? nlohmann::ordered_json(p.min_distance) : nullptr},
        {"max_displacement", p.max_displacement},
        {"max_stretch", p.max_stretch},
        {"inverted_tets", tw->inverted_tets},
        {"target_inverted_tets", tw->target_inverted_tets},
        {"timings_ms",
         {{"total", p.ms_total}, {"search", p.ms_search}, {"backward", p.ms_backward}, {"forward", p.ms_forward}}}};
  }
  if (const SurgerySession* s = sim_->surgery()) {
    const SceneSimulation::SurgeryFrame& f = sim_->surgery_frame();
    j["topology_events"] = f.events;
    j["faces_cut"] = f.faces_cut;
    j["tets_split"] = f.tets_split;
    j["tets_excised"] = f.tets_excised;
    j["attachments_released"] = f.attachments_released;
    j["hooks_placed"] = f.hooks_placed;
    j["sutures_placed"] = f.sutures_placed;
    j["factor_update_ms"] = f.factor_update_ms;
    j["factor_fallback"] = s->stats().factor_fallback;
    j["fill_refactored"] = f.fill_refactored;
    j["nnz_L"] = s->stats().nnz_L;
    j["nodes"] = sim_->mesh().nodes.rows();
    j["tets"] = sim_->mesh().tets.rows();
  }
  out_.append_stats(j);
}

void RunWriter::set_frames_computed(int frames) {
  frames_ = frames;
  out_.set_metadata("frames_computed", frames);
}

void RunWriter::finish(const RunSummary& summary) {
  if (summary.collision) {
    out_.set_metadata("max_penetration", summary.max_penetration);
    out_.set_metadata("mean_edge_length", sim_->collision()->mean_edge_length);
  }
  out_.set_metadata("unconverged_frames", summary.unconverged_frames);
  if (const SurgerySession* s = sim_->surgery()) {
    const SurgeryStats& st = s->stats();
    out_.set_metadata("surgery", nlohmann::ordered_json{{"topology_events", st.topology_events},
                                                        {"factor_update_ms_total", st.factor_update_ms_total},
                                                        {"model_ms_total", st.model_ms_total},
                                                        {"factor_fallback", st.factor_fallback},
                                                        {"fill_refactors", st.fill_refactors},
                                                        {"nnz_L", st.nnz_L},
                                                        {"schur_updates", st.schur_updates},
                                                        {"schur_rebuilds", st.schur_rebuilds},
                                                        {"nodes", sim_->mesh().nodes.rows()},
                                                        {"tets", sim_->mesh().tets.rows()}});
  }
  if (const int k = sim_->scene().solver.interactive_iterations; k > 0) {
    nlohmann::ordered_json j = {{"iterations_per_frame", k}};
    if (const SceneCollision* c = sim_->collision(); c && c->solver)
      j["inner_iterations"] = c->solver->state().inner_iterations();
    j["fps"] = summary.fps;
    j["mean_relative_residual"] = summary.mean_relative_residual;
    j["max_relative_residual"] = summary.max_relative_residual;
    out_.set_metadata("interactive", j);
  }
}

RunSummary run_scene(SceneSimulation& sim, const std::string& out_dir, const RunOptions& options) {
  const int frames = options.max_frames > 0 ? std::min(options.max_frames, sim.num_frames()) : sim.num_frames();
  RunWriter writer(sim, out_dir, frames);
  RunSummary sum;
  sum.frames = frames;
  for (int f = 1; f <= frames; ++f) {
    const FrameStats s = sim.advance(f);
    writer.write_frame(f, s);
    const auto& c = sim.collision_stats();
    if (c) {
      if (!sum.collision) sum.collision.emplace();
      accumulate(sum.collision->timings_ms, c->timings_ms);
      sum.collision->inner_iterations += c->inner_iterations;
      sum.collision->plain_iterations += c->plain_iterations;
      sum.max_penetration = std::max(sum.max_penetration, c->max_penetration);
    }
    sum.timings_ms.local += s.timings_ms.local;
    sum.timings_ms.rhs += s.timings_ms.rhs;
    sum.timings_ms.solve += s.timings_ms.solve;
    sum.timings_ms.other += s.timings_ms.other;
    sum.iterations += s.iterations;
    sum.wall_ms += s.wall_ms;
    const double rr = relative_residual(s);
    sum.mean_relative_residual += rr / frames;
    sum.max_relative_residual = std::max(sum.max_relative_residual, rr);
    // A fixed budget per frame is not a failure to converge.
    if (sim.scene().solver.interactive_iterations == 0) sum.unconverged_frames += s.converged ? 0 : 1;
    if (options.on_frame) options.on_frame(FrameReport{f, frames, &s, c ? &*c : nullptr});
  }
  sum.fps = sum.wall_ms > 0 ? 1000.0 * frames / sum.wall_ms : 0.0;
  writer.finish(sum);
  return sum;
}

}  // namespace xpd
