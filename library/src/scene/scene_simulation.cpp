#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <xpd/core/error.hpp>
#include <xpd/core/skeleton_pose.hpp>
#include <xpd/core/threads.hpp>
#include <xpd/gpu/device.hpp>
#include <xpd/gpu/two_way.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/skeleton.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/shell.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/device_pd.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/surface_region.hpp>

namespace xpd {
namespace {

// Why release event `i` of `events` cannot let go of the hook it names ("" when it can): the hook
// must be a hook event placed at an earlier frame, without a release_frame, released by no other.
std::string hook_release_problem(const std::vector<SurgeryEvent>& events, std::size_t i) {
  const SurgeryEvent& e = events[i];
  const auto k = static_cast<std::size_t>(e.hook);
  if (e.hook < 0 || k >= events.size() || events[k].tool != SurgeryEvent::Tool::Hook)
    return fmt::format("event {} is not a hook (surgery.events has {} events)", e.hook, events.size());
  const SurgeryEvent& h = events[k];
  if (h.first_frame >= e.first_frame)
    return fmt::format("hook event {} is placed at frame {}, not before the release's frame {}", e.hook, h.first_frame,
                       e.first_frame);
  if (h.release_frame != 0)
    return fmt::format("hook event {} is released at its release_frame {} already", e.hook, h.release_frame);
  for (std::size_t j = 0; j < events.size(); ++j)
    if (j != i && events[j].tool == SurgeryEvent::Tool::Release && events[j].hook == e.hook)
      return fmt::format("hook event {} is released by event {} already", e.hook, j);
  return "";
}

// Why a split cut or excision needs an embedded surface (after "needs " / "has ").
constexpr const char* kSplitNeedsSurface =
    "an embedded surface (mesh.embedded_surface, or a lattice's): the split fragments overlap at rest, so the tet "
    "mesh's own faces do not draw the cut tissue";

// Rest-pose nearest bone among `bones` for node position p.
int nearest_bone(const Skeleton& sk, const std::vector<int>& bones, const Vec3& p) {
  int best = bones.front();
  double best_d = std::numeric_limits<double>::infinity();
  for (int b : bones) {
    const double d =
        point_segment_distance(p, sk.joints.row(sk.bones(b, 0)).transpose(), sk.joints.row(sk.bones(b, 1)).transpose());
    if (d < best_d) best_d = d, best = b;
  }
  return best;
}

}  // namespace

SceneSimulation::SceneSimulation(Scene scene) : scene_(std::move(scene)) {
  const auto t0 = std::chrono::steady_clock::now();
  // solver.threads > 0 limits TBB and OpenBLAS while the simulation builds or advances (0 = all).
  const ThreadLimit limit(scene_.solver.threads);
  mesh_ = build_scene_mesh(scene_.mesh);
  check_scene_against_mesh(scene_, mesh_);
  tet_material_ = assign_materials(scene_, mesh_);

  ModelDesc desc;
  desc.mesh = mesh_;
  const int nt = static_cast<int>(mesh_.tets.rows());
  desc.mu.resize(static_cast<std::size_t>(nt));
  desc.lambda.assign(static_cast<std::size_t>(nt), 0.0);
  for (int t = 0; t < nt; ++t) {
    const Material& m = scene_.materials[static_cast<std::size_t>(tet_material_[static_cast<std::size_t>(t)])];
    desc.mu[static_cast<std::size_t>(t)] = m.mu;
    desc.lambda[static_cast<std::size_t>(t)] = m.lambda;
    if (m.strain_limit)
      desc.strain_limits.push_back(
          {t, m.strain_limit->stiffness, m.strain_limit->sigma_min, m.strain_limit->sigma_max});
  }
  // Shape-targeted tets (their stiffness replaces μ when given); rows in increasing tet order.
  const std::vector<int> actuation = assign_actuation(scene_, mesh_);
  for (int t = 0; t < nt; ++t) {
    const int a = actuation[static_cast<std::size_t>(t)];
    if (a < 0) continue;
    const Actuation& act = scene_.actuation[static_cast<std::size_t>(a)];
    if (act.stiffness) desc.mu[static_cast<std::size_t>(t)] = *act.stiffness;
    desc.shape_targets.push_back({t, act.target});
    actuation_entry_.push_back(a);
  }
  // Per-tet densities: the model's lumped masses carry both gravity and inertia.
  desc.density = tet_densities(scene_, tet_material_);
  desc.volume_matrix = scene_.solver.volume_matrix;

  skeletons_.resize(scene_.attachments.size());
  poses_.resize(scene_.attachments.size());
  for (std::size_t a = 0; a < scene_.attachments.size(); ++a) {
    const Attachment& att = scene_.attachments[a];
    const std::vector<int> nodes = select_nodes(att.selection, scene_.selections, mesh_);
    if (att.type == Attachment::Type::Bone) {
      skeletons_[a] = io::read_tgf(att.bone.skeleton);
      const int nb = static_cast<int>(skeletons_[a].bones.rows());
      for (int b : att.bone.bones)
        if (b < 0 || b >= nb)
          throw SceneError(scene_.file, fmt::format("/attachments/{}/bones", a),
                           fmt::format("bone {} out of range ({} bones)", b, nb));
      poses_[a] = pose_rotations(io::read_dmat(att.bone.pose), nb);
    }
    for (int v : nodes) {
      attach_owner_.push_back(static_cast<int>(a));
      attach_node_.push_back(v);
      attach_bone_.push_back(att.type == Attachment::Type::Bone
                                 ? nearest_bone(skeletons_[a], att.bone.bones, mesh_.nodes.row(v).transpose())
                                 : -1);
      desc.attachments.push_back({BaryPoint::node(v), att.stiffness, mesh_.nodes.row(v).transpose()});
    }
  }
  // Node forces (gravity on the model's masses) are set once the model exists.
  desc.integrator = scene_.solver.type;
  desc.time_step = scene_.solver.time_step;

  if (!scene_.mesh.embedded_surface.empty()) {
    surface_ = io::read_surface(scene_.mesh.embedded_surface);
    if (!scene_.mesh.embedded_tets_file.empty()) {
      // Given bindings (a cut mesh's overlapping copies): the file says which copy holds a vertex.
      const std::size_t count = scene_.mesh.embedded_tets.size();
      if (count != static_cast<std::size_t>(surface_->nodes.rows()))
        throw SceneError(scene_.file, "/mesh/embedded_tets",
                         fmt::format("{} lists {} tets for the {} vertices of {}", scene_.mesh.embedded_tets_file,
                                     count, surface_->nodes.rows(), scene_.mesh.embedded_surface));
      try {
        embedding_ = bind_points(mesh_, surface_->nodes, scene_.mesh.embedded_tets);
      } catch (const MeshError& e) {
        throw SceneError(scene_.file, "/mesh/embedded_tets", e.what());
      }
    } else {
      EmbedPointsOptions eo;
      eo.snap_outside = true;
      embedding_ = embed_points(mesh_, surface_->nodes, eo);
    }
  }

  if (scene_.surgery) {
    check_surgery_scene();
    if (surface_) {
      const double edge = mean_edge_length(mesh_.nodes, mesh_.tets);
      surface_offset_ = 0.15 * edge;  // beyond the fragments' snap (5%) and the blade's interpolation
      surface_event_.assign(static_cast<std::size_t>(surface_->nodes.rows()), -1);
      surface_side_.assign(static_cast<std::size_t>(surface_->nodes.rows()), 0);
      if (is_closed_manifold(surface_->triangles)) {
        closed_surface_ = surface_;
        wall_spacing_ = 0.35 * edge;
      }
    }
    SurgeryOptions so;
    so.factor_update = scene_.surgery->factor_update;
    so.fill.nnz_ratio = scene_.surgery->fill_ratio;
    try {
      surgery_ = std::make_unique<SurgerySession>(std::move(desc), so);
    } catch (const SolverError& e) {
      throw SolverError(fmt::format("{}: {}", scene_.file, e.what()));
    }
    cut_faces_.resize(scene_.surgery->events.size());
    hook_keys_.assign(scene_.surgery->events.size(), {});
    grip_start_.assign(scene_.surgery->events.size(), {});
    cut_done_.assign(scene_.surgery->events.size(), 0);
    applied_frame_.assign(scene_.surgery->events.size(), 0);
    hook_start_.assign(scene_.surgery->events.size(), Vec3::Zero());
    set_frame_inputs(1);
  } else {
    try {
      model_ = std::make_unique<Model>(build_model(desc));
    } catch (const SolverError& e) {
      // Name the scene (e.g. "scene.json: model: connected component #1 (...) has no attachment").
      throw SolverError(fmt::format("{}: {}", scene_.file, e.what()));
    }
    state_ = make_state(*model_);
    state_.inputs.nodal_forces = external_forces(scene_, mesh_, model_->masses(), 1);
  }
  if (scene_.collision && scene_.solver.accelerator == Accelerator::Chebyshev)
    throw SceneError(scene_.file, "/solver/accelerator",
                     "chebyshev cannot be combined with collision handling (the contact set changes the matrix "
                     "between iterations); use anderson or none");
  if (scene_.collision) {
    double max_mu = 0;
    for (const Material& m : scene_.materials) max_mu = std::max(max_mu, m.mu);
    collision_ = make_scene_collision(scene_, mesh_, model_.get(), surface_, embedding_, max_mu);
    if (surgery_) {
      // A surgery scene's collisions run from the first frame on (check_surgery_scene), in its
      // session: the proxies are bound to the mesh as built and follow every event from there.
      SurgeryCollision c{collision_->proxies, collision_->region, collision_->obstacles, collision_->margin,
                         collision_->options};
      try {
        surgery_->enable_collision(std::move(c));
      } catch (const SolverError& e) {  // e.g. the region's dense matrices over the memory budget
        throw SolverError(fmt::format("{}: /collision: {}", scene_.file, e.what()));
      }
    }
  }
  if (scene_.two_way) {
    // Contact surface: the mesh boundary and the obstacles' triangles; soft length constraints and
    // volume floors on the tets; the model's lumped masses (nodes without mass, unused by any tet,
    // are kinematic, and so are the obstacles' vertices, appended after the mesh's).
    const auto n = static_cast<Eigen::Index>(mesh_.nodes.rows());
    std::vector<SurfaceMesh> parts;
    for (std::size_t k = 0; k < scene_.two_way->obstacles.size(); ++k)  // boxes and meshes (parse_two_way)
      parts.push_back(
          obstacle_surface(scene_, scene_.two_way->obstacles[k], 0.0, fmt::format("/two_way/obstacles/{}", k)));
    Eigen::Index m = 0, nf = 0;
    for (const SurfaceMesh& p : parts) m += p.nodes.rows(), nf += p.triangles.rows();
    obstacle_local_.resize(m, 3);
    obstacle_faces_.resize(nf, 3);
    obstacle_ranges_.clear();
    for (Eigen::Index row = 0, frow = 0; const SurfaceMesh& p : parts) {
      obstacle_local_.middleRows(row, p.nodes.rows()) = p.nodes;
      obstacle_faces_.middleRows(frow, p.triangles.rows()) = p.triangles.array() + static_cast<int>(row);
      obstacle_ranges_.emplace_back(row, row + p.nodes.rows());
      row += p.nodes.rows(), frow += p.triangles.rows();
    }
    obstacle_x_ = obstacle_pose(scene_.two_way->start_frame - 1);
    // Contact points: the embedded surface's vertices through their tets' weights, or the nodes of
    // the tet mesh's boundary; then the obstacles' vertices (one node each).
    const Triangles body_faces = surface_ ? surface_->triangles : boundary_faces(mesh_.tets);
    const Eigen::Index nb = surface_ ? surface_->nodes.rows() : n;  // the body's contact points
    TwoWayEmbedding contact = TwoWayEmbedding::identity(nb + m);
    if (surface_) {
      for (Eigen::Index i = 0; i < nb; ++i) {
        const int t = embedding_->tet_of_point[static_cast<std::size_t>(i)];
        if (t < 0)
          throw SceneError(scene_.file, "/mesh", fmt::format("two_way: surface vertex {} is not bound to a tet", i));
        for (int k = 0; k < 4; ++k)
          contact.nodes(i, k) = mesh_.tets(t, k), contact.weights(i, k) = embedding_->weights(i, k);
      }
      for (Eigen::Index k = 0; k < m; ++k) contact.nodes(nb + k, 0) = static_cast<int>(n + k);
    }
    Triangles faces(body_faces.rows() + obstacle_faces_.rows(), 3);
    faces << body_faces, obstacle_faces_.array() + static_cast<int>(nb);
    Points rest(n + m, 3);
    rest << mesh_.nodes, obstacle_x_;
    Eigen::VectorXd inverse_mass = Eigen::VectorXd::Zero(n + m);
    for (Eigen::Index i = 0; i < n; ++i) inverse_mass[i] = model_->masses()[i] > 0 ? 1 / model_->masses()[i] : 0;
    TwoWayOptions options = scene_.two_way->options;
    if (options.delta == 0)  // automatic δ from the body alone, not the obstacles
      options.delta = two_way_automatic_delta(surface_ ? surface_->nodes : mesh_.nodes, body_faces);
    try {
      two_way_ = std::make_unique<TwoWayProjector>(rest, std::move(contact), std::move(faces), unique_edges(mesh_.tets),
                                                   std::move(inverse_mass), options);
      two_way_->set_volume_tets(rest, mesh_.tets);
    } catch (const CollisionError&) {
      throw;
    } catch (const Error& e) {
      throw SceneError(scene_.file, "/two_way", e.what());
    }
    if (scene_.two_way->cuda) {
      try {
        device_two_way_ = std::make_unique<gpu::DeviceTwoWay>(*two_way_);
      } catch (const GpuError& e) {
        throw SceneError(scene_.file, "/two_way/device", std::string("\"cuda\": ") + e.what());
      }
    }
    if (scene_.two_way->start_frame == 1) {
      try {
        Points start(n + m, 3);
        start << state_.x, obstacle_x_;
        two_way_->check_intersection_free(start);
      } catch (const CollisionError& e) {
        throw CollisionError(fmt::format("{}: the initial state is not intersection-free: {}", scene_.file, e.what()));
      }
    }
  }
  options_.max_iterations = scene_.solver.max_iterations;
  options_.rel_tolerance = scene_.solver.tolerance;
  options_.min_iterations = scene_.solver.min_iterations;
  options_.stagnation_window = scene_.solver.stagnation_window;
  if (const int k = scene_.solver.interactive_iterations; k > 0) {
    // A fixed budget per frame: no convergence test can stop it early.
    options_.max_iterations = k;
    options_.min_iterations = k;
    options_.rel_tolerance = 0.0;
    options_.abs_tolerance = 0.0;
    options_.stagnation_window = 0;
  }
  options_.accelerator = scene_.solver.accelerator;
  if (surgery_) surgery_->solver_options() = options_;
  select_device();
  setup_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Points SceneSimulation::obstacle_pose(int frame) const {
  Points x(obstacle_local_.rows(), 3);
  for (std::size_t k = 0; k < obstacle_ranges_.size(); ++k) {
    const RigidTransform T = evaluate(scene_.two_way->obstacles[k].keyframes, static_cast<double>(frame));
    for (Eigen::Index i = obstacle_ranges_[k].first; i < obstacle_ranges_[k].second; ++i)
      x.row(i) = T.apply(obstacle_local_.row(i).transpose()).transpose();
  }
  return x;
}

void SceneSimulation::select_device() {
  const ComputeDevice want = scene_.solver.device;
  compute_device_ = "cpu";
  if (want == ComputeDevice::Cpu) return;
  // What the device does not run, in the scene's terms first; make_device_pd_desc then names the
  // model's terms it refuses, and the backend a missing device, driver or memory.
  std::string why;
  if (surgery_)
    why = "surgery scenes run on the CPU";
  else if (scene_.collision)
    why = "collision handling runs on the CPU";
  else if (scene_.two_way)
    why = "the two-way projection runs on the CPU";
  else if (scene_.solver.accelerator == Accelerator::Chebyshev)
    why = "Chebyshev acceleration runs on the CPU (set solver.accelerator to \"anderson\" or \"none\")";
  if (why.empty()) {
    try {
      device_step_ = std::make_unique<DevicePdStep>(
          *model_, options_.accelerator == Accelerator::Anderson ? options_.anderson_window : 0);
      const std::vector<gpu::DeviceInfo> devices = gpu::cuda_devices();
      compute_device_ = "cuda (" + (devices.empty() ? std::string("device 0") : devices.front().name) + ")";
      return;
    } catch (const GpuError& e) {
      why = e.what();
    }
  }
  if (want == ComputeDevice::Cuda) throw SceneError(scene_.file, "/solver/device", "\"cuda\": " + why);
  compute_device_ = "cpu (automatic: " + why + ")";
}

void SceneSimulation::set_frame_inputs(int frame) {
  const double last_frame = std::max(1, scene_.solver.frames);
  // Bone transforms per bone-type attachment for this frame.
  std::vector<std::vector<RigidTransform>> bone_tf(scene_.attachments.size());
  std::vector<RigidTransform> rigid_tf(scene_.attachments.size());
  for (std::size_t a = 0; a < scene_.attachments.size(); ++a) {
    const Attachment& att = scene_.attachments[a];
    if (att.type == Attachment::Type::Rigid) rigid_tf[a] = evaluate(att.keyframes, frame);
    if (att.type == Attachment::Type::Bone) {
      // Slerp from the rest pose, reaching the pose at bone.pose_frame (0: the last frame), then held.
      const double last = att.bone.pose_frame > 0 ? att.bone.pose_frame : last_frame;
      const double s = std::clamp(frame / last, 0.0, 1.0);
      std::vector<Eigen::Quaterniond> rel;
      for (const auto& q : poses_[a]) rel.push_back(Eigen::Quaterniond::Identity().slerp(s, q));
      bone_tf[a] = forward_kinematics(skeletons_[a], rel);
    }
  }
  State& state = surgery_ ? surgery_->state() : state_;
  Points& targets = state.inputs.attachment_targets;
  // A surgery scene's attachment j is the session's key j: its row moves when others are released
  // or excised, it has none once it is gone, and the copies of its node that cuts made carry keys
  // of their own whose origin is j (same rest position, so the same target).
  std::vector<std::vector<int>> rows_of(surgery_ ? attach_node_.size() : 0);
  if (surgery_) {
    const std::vector<int>& keys = surgery_->attachment_keys();
    for (std::size_t r = 0; r < keys.size(); ++r) {
      const int origin = surgery_->attachment_origin(keys[r]);
      if (origin >= 0 && static_cast<std::size_t>(origin) < attach_node_.size())
        rows_of[static_cast<std::size_t>(origin)].push_back(static_cast<int>(r));
    }
  }
  for (std::size_t j = 0; j < attach_node_.size(); ++j) {
    if (surgery_ && rows_of[j].empty()) continue;
    const std::size_t a = static_cast<std::size_t>(attach_owner_[j]);
    const Vec3 rest = mesh_.nodes.row(attach_node_[j]).transpose();
    Vec3 t = rest;
    switch (scene_.attachments[a].type) {
      case Attachment::Type::Fixed:
        break;
      case Attachment::Type::Rigid:
        t = rigid_tf[a].apply(rest);
        break;
      case Attachment::Type::Bone:
        t = bone_tf[a][static_cast<std::size_t>(attach_bone_[j])].apply(rest);
        break;
    }
    if (!surgery_) {
      targets.row(static_cast<Eigen::Index>(j)) = t.transpose();
      continue;
    }
    for (int row : rows_of[j]) targets.row(row) = t.transpose();
  }
  if (surgery_) {
    // Hooks: the target moves linearly from where the point was when placed to the event's
    // target, reached at its last frame.
    // A gripped patch moves with the hook: each point keeps its offset from the hooked point.
    for (std::size_t i = 0; i < hook_keys_.size(); ++i)
      for (std::size_t g = 0; g < hook_keys_[i].size(); ++g) {
        const int row = surgery_->attachment_row(hook_keys_[i][g]);
        if (row < 0) continue;  // excised with its tissue
        const SurgeryEvent& e = scene_.surgery->events[i];
        const double s =
            std::min(1.0, static_cast<double>(frame - e.first_frame + 1) / (e.last_frame - e.first_frame + 1));
        targets.row(row) = (grip_start_[i][g] + s * (e.target - hook_start_[i])).transpose();
      }
    // Gravity only (check_surgery_scene): the model applies it to its lumped masses, which follow
    // every cut and excision.
    Vec3 g = Vec3::Zero();
    for (const Load& load : scene_.loads) g += load.scale_at(frame) * load.value;
    state.inputs.gravity = g;
    return;
  }
  state_.inputs.nodal_forces = external_forces(scene_, mesh_, model_->masses(), frame);
  // Keyframed actuation: each shape-target row takes its entry's b at this frame.
  for (std::size_t r = 0; r < actuation_entry_.size(); ++r) {
    const Actuation& act = scene_.actuation[static_cast<std::size_t>(actuation_entry_[r])];
    if (act.keyframes.empty()) continue;
    const std::array<double, 6> b = act.target_at(frame);
    for (int c = 0; c < 6; ++c)
      state_.inputs.shape_targets(static_cast<Eigen::Index>(r), c) = b[static_cast<std::size_t>(c)];
  }
  if (frame <= static_cast<int>(actuation_frames_.size()))
    state_.inputs.shape_targets = actuation_frames_[static_cast<std::size_t>(frame - 1)];
}

void SceneSimulation::set_actuation_frames(std::vector<ShapeTargetParams> frames) {
  const Eigen::Index u = model().initial_inputs().shape_targets.rows();
  for (std::size_t k = 0; k < frames.size(); ++k) {
    const ShapeTargetParams& b = frames[k];
    if (b.rows() != u || b.cols() != 6)
      throw Error(fmt::format("set_actuation_frames: frame {} has shape {}x{}, expected {}x6 (#actuated tets x 6)",
                              k + 1, b.rows(), b.cols(), u));
    if (!b.allFinite()) throw Error(fmt::format("set_actuation_frames: frame {} has a NaN or Inf entry", k + 1));
  }
  actuation_frames_ = std::move(frames);
}

FrameStats SceneSimulation::advance(int frame) {
  if (frame < 1) throw Error("SceneSimulation::advance: frames start at 1 (frame 0 is the initial state)");
  // solver.threads > 0 limits TBB and OpenBLAS while the simulation builds or advances (0 = all).
  const ThreadLimit limit(scene_.solver.threads);
  last_extrapolated_ = false;
  if (surgery_) {
    apply_surgery_events(frame);
    set_frame_inputs(frame);
    const FrameStats st = surgery_->step(frame);
    if (surgery_->collision_model())
      collision_stats_ = surgery_->last_collision_stats();
    else
      collision_stats_.reset();
    frames_done_ = frame;
    return st;
  }
  set_frame_inputs(frame);
  const bool implicit_euler = model_->integrator() == Integrator::ImplicitEuler;
  if (two_way_ && two_way_->options().contact_forces && implicit_euler &&
      two_way_force_.rows() >= state_.inputs.nodal_forces.rows())
    state_.inputs.nodal_forces += two_way_force_.topRows(state_.inputs.nodal_forces.rows());
  const Points current = state_.x;  // x_{k−1}
  // No extrapolation with collisions: the guess is judged by the elastic energy alone, which happily
  // drives contacting parts through each other, deeper than detection can see.
  const bool collisions = collision_ && frame >= scene_.collision->start_frame;
  if (extrapolate_ && !collisions && model_->integrator() == Integrator::Quasistatic &&
      previous_x_.rows() == current.rows()) {
    // Warm start: linear extrapolation of the displacement, kept only when it lowers the objective
    // at this frame's inputs (two local steps, cheap next to the solve).
    const double e_current = evaluate(*model_, state_);
    state_.x = 2.0 * current - previous_x_;
    const double e_guess = evaluate(*model_, state_);
    if (std::isfinite(e_guess) && e_guess < e_current)
      last_extrapolated_ = true;
    else
      state_.x = current;
  }
  FrameStats st;
  ipc_stats_.reset();
  if (collisions && collision_->ipc_state) {
    ipc_stats_ = collision_->ipc_state->step(state_, options_);
    CollisionFrameStats c;
    c.pd = ipc_stats_->pd;
    c.active_proxies = ipc_stats_->active_pairs;  // barrier pairs within d̂
    c.max_penetration = 0;                        // intersection-free by construction
    collision_stats_ = c;
    st = c.pd;
  } else if (collisions) {
    collision_stats_ = collision_->solver->step(state_, options_, frame);
    st = collision_stats_->pd;
  } else {
    collision_stats_.reset();  // no collision solver, or before collision.start_frame
    st = device_step_ ? run_frame(*model_, state_, *device_step_, options_) : step(*model_, state_, options_);
  }
  two_way_stats_.reset();
  if (two_way_ && frame >= scene_.two_way->start_frame) {
    // Bodies and obstacles together: the obstacles start where the last projection left them and
    // aim at their keyframed pose of this frame.
    const Eigen::Index n = current.rows(), m = obstacle_x_.rows();
    Points from(n + m, 3), target(n + m, 3), to;
    from << current, obstacle_x_;
    target << state_.x, obstacle_pose(frame);
    if (frame == scene_.two_way->start_frame && frame > 1) {
      try {
        two_way_->check_intersection_free(from);
      } catch (const CollisionError& e) {
        throw CollisionError(
            fmt::format("{}: frame {} (two_way.start_frame) starts intersecting: {}", scene_.file, frame, e.what()));
      }
    }
    TwoWayFrame tw;
    const Tets& tets = mesh_.tets;
    auto inverted = [&](const auto& x) {
      int count = 0;
      for (Eigen::Index t = 0; t < tets.rows(); ++t)
        count += signed_volume(x.row(tets(t, 0)).transpose(), x.row(tets(t, 1)).transpose(),
                               x.row(tets(t, 2)).transpose(), x.row(tets(t, 3)).transpose()) <= 0;
      return count;
    };
    tw.target_inverted_tets = inverted(state_.x);  // the PD solution, before the projection
    tw.projection = device_two_way_ ? device_two_way_->project(from, target, to) : two_way_->project(from, target, to);
    state_.x = to.topRows(n);
    obstacle_x_ = to.bottomRows(m);
    if (implicit_euler) {
      state_.velocity = (state_.x - current) / model_->time_step();
      // An unconverged projection's x − y holds motion it did not finish, not a contact force:
      // accumulating it would feed the lag back into the next target; the forces are kept as they were.
      if (two_way_->options().contact_forces && tw.projection.converged)
        two_way_->update_contact_forces(to, target, model_->time_step(), two_way_force_);
    }
    tw.inverted_tets = inverted(state_.x);
    two_way_stats_ = tw;
  }
  previous_x_ = current;
  frames_done_ = frame;
  return st;
}

int SceneSimulation::add_surgery_event(const SurgeryEvent& event) {
  if (!surgery_) throw Error("add_surgery_event: the scene has no \"surgery\" key");
  if (event.first_frame <= frames_done_ || event.last_frame < event.first_frame ||
      (event.release_frame != 0 && event.release_frame <= event.last_frame))
    throw Error(fmt::format(
        "add_surgery_event: the event's frames ({}..{}) must come after the last frame solved ({}), in order",
        event.first_frame, event.last_frame, frames_done_));
  if (event.split && scene_.mesh.embedded_surface.empty())
    throw SceneError(scene_.file, "/surgery", std::string("a \"mode\": \"split\" event needs ") + kSplitNeedsSurface);
  if (event.tool == SurgeryEvent::Tool::Release && event.hook >= 0) {
    std::vector<SurgeryEvent> with = scene_.surgery->events;
    with.push_back(event);
    if (const std::string why = hook_release_problem(with, with.size() - 1); !why.empty())
      throw SceneError(scene_.file, "/event/hook", why);
  }
  scene_.surgery->events.push_back(event);
  cut_faces_.emplace_back();
  hook_keys_.emplace_back();
  grip_start_.emplace_back();
  cut_done_.push_back(0);
  applied_frame_.push_back(0);
  hook_start_.push_back(Vec3::Zero());
  return static_cast<int>(scene_.surgery->events.size()) - 1;
}

void SceneSimulation::discard_last_surgery_event() {
  if (!surgery_ || scene_.surgery->events.empty())
    throw Error("discard_last_surgery_event: there is no surgical event to discard");
  const SurgeryEvent& e = scene_.surgery->events.back();
  if (applied_frame_.back() != 0 || e.first_frame <= frames_done_)
    throw Error("discard_last_surgery_event: the last event has already been applied");
  scene_.surgery->events.pop_back();
  cut_faces_.pop_back();
  hook_keys_.pop_back();
  grip_start_.pop_back();
  cut_done_.pop_back();
  applied_frame_.pop_back();
  hook_start_.pop_back();
}

const TetMesh& SceneSimulation::mesh() const { return surgery_ ? surgery_->mesh() : mesh_; }
const Model& SceneSimulation::model() const { return surgery_ ? surgery_->model() : *model_; }
const State& SceneSimulation::state() const { return surgery_ ? surgery_->state() : state_; }

void SceneSimulation::check_surgery_scene() const {
  const auto refuse = [&](const std::string& what) {
    throw SceneError(scene_.file, "/surgery", "a surgery scene " + what);
  };
  for (std::size_t i = 0; i < scene_.surgery->events.size(); ++i)
    if (scene_.surgery->events[i].tool == SurgeryEvent::Tool::Release && scene_.surgery->events[i].hook >= 0)
      if (const std::string why = hook_release_problem(scene_.surgery->events, i); !why.empty())
        throw SceneError(scene_.file, "/surgery/events/" + std::to_string(i) + "/hook", why);
  if (scene_.collision && scene_.collision->start_frame != 1)
    throw SceneError(scene_.file, "/collision/start_frame",
                     "a surgery scene's collisions start at frame 1 (the proxies follow every event from the start)");
  if (scene_.two_way) refuse("has no two_way projection");
  if (!scene_.actuation.empty()) refuse("has no actuation (shape targets)");
  if (scene_.mesh.embedded_surface.empty())
    for (const SurgeryEvent& e : scene_.surgery->events)
      if (e.split) refuse(std::string("with \"mode\": \"split\" events has ") + kSplitNeedsSurface);
  for (const Material& m : scene_.materials)
    if (m.lambda != 0)
      refuse(
          "uses corotated materials (lambda 0; a strain_limit may be added): the factor updates carry the mu and "
          "strain-limit terms");
  for (const Load& l : scene_.loads)
    if (l.type != Load::Type::Gravity)
      refuse("has gravity as its only load (node and total forces on selections do not follow cuts yet)");
}

namespace {

// Centroid of the face two tets share (the mean of their three common nodes).
Vec3 shared_face_centroid(const TetMesh& mesh, const TetPair& f) {
  Vec3 c = Vec3::Zero();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (mesh.tets(f.first, a) == mesh.tets(f.second, b)) c += mesh.nodes.row(mesh.tets(f.first, a)).transpose() / 3.0;
  return c;
}

// The part of a blade's path between the arc lengths s0 < s1 (clamped to the path): the points
// strictly between them and two interpolated at them (point and sweep).
SweptPath path_section(const SweptPath& path, double s0, double s1) {
  std::vector<double> arc{0.0};
  for (std::size_t i = 0; i + 1 < path.points.size(); ++i)
    arc.push_back(arc.back() + (path.points[i + 1] - path.points[i]).norm());
  s0 = std::clamp(s0, 0.0, arc.back());
  s1 = std::clamp(s1, s0, arc.back());
  auto at = [&](double s, Vec3& p, Vec3& w) {
    std::size_t i = 0;
    while (i + 2 < arc.size() && arc[i + 1] < s) ++i;
    const double len = arc[i + 1] - arc[i], u = len > 0 ? (s - arc[i]) / len : 0.0;
    p = path.points[i] + u * (path.points[i + 1] - path.points[i]);
    w = path.sweep_at(i) + u * (path.sweep_at(i + 1) - path.sweep_at(i));
  };
  SweptPath out;
  Vec3 p, w;
  at(s0, p, w);
  out.points.push_back(p);
  out.sweep.push_back(w);
  for (std::size_t i = 1; i + 1 < arc.size(); ++i)
    if (arc[i] > s0 && arc[i] < s1) {
      out.points.push_back(path.points[i]);
      out.sweep.push_back(path.sweep_at(i));
    }
  at(s1, p, w);
  out.points.push_back(p);
  out.sweep.push_back(w);
  return out;
}

double path_length(const SweptPath& path) {
  double total = 0;
  for (std::size_t i = 0; i + 1 < path.points.size(); ++i) total += (path.points[i + 1] - path.points[i]).norm();
  return total;
}

// The blade's swept surface as a grid of triangles of about `spacing` (each patch p_i, p_i+1,
// q_i+1, q_i bilinear), normals pointing to the blade's positive side (as swept_cut_surface's).
SurfaceMesh blade_wall(const SweptPath& path, double spacing) {
  std::vector<Vec3> nodes;
  std::vector<Eigen::RowVector3i> tris;
  for (std::size_t i = 0; i + 1 < path.points.size(); ++i) {
    const Vec3 p0 = path.points[i], p1 = path.points[i + 1], s0 = path.sweep_at(i), s1 = path.sweep_at(i + 1);
    const int nu = std::max(1, static_cast<int>(std::ceil((p1 - p0).norm() / spacing)));
    const int nv = std::max(1, static_cast<int>(std::ceil(std::max(s0.norm(), s1.norm()) / spacing)));
    const int base = static_cast<int>(nodes.size());
    for (int a = 0; a <= nu; ++a)
      for (int b = 0; b <= nv; ++b) {
        const double u = double(a) / nu, v = double(b) / nv;
        nodes.push_back(p0 + u * (p1 - p0) + v * ((1 - u) * s0 + u * s1));
      }
    auto id = [&](int a, int b) { return base + a * (nv + 1) + b; };
    for (int a = 0; a < nu; ++a)
      for (int b = 0; b < nv; ++b) {
        // (p0 → p1) × (→ sweep) is the blade's normal: corners (a, b), (a+1, b), (a+1, b+1), (a, b+1).
        tris.emplace_back(id(a, b), id(a + 1, b), id(a + 1, b + 1));
        tris.emplace_back(id(a, b), id(a + 1, b + 1), id(a, b + 1));
      }
  }
  SurfaceMesh m{Points(static_cast<Eigen::Index>(nodes.size()), 3),
                Triangles(static_cast<Eigen::Index>(tris.size()), 3)};
  for (std::size_t k = 0; k < nodes.size(); ++k) m.nodes.row(static_cast<Eigen::Index>(k)) = nodes[k].transpose();
  for (std::size_t k = 0; k < tris.size(); ++k) m.triangles.row(static_cast<Eigen::Index>(k)) = tris[k];
  return m;
}

bool in_box(const std::optional<std::pair<Vec3, Vec3>>& box, const Vec3& p) {
  return !box || ((p.array() >= box->first.array()).all() && (p.array() <= box->second.array()).all());
}

}  // namespace

bool SceneSimulation::release_hook_springs(std::size_t event) {
  // An excision may have taken the hook with its tissue already.
  std::vector<int> live;
  for (const int key : hook_keys_[event])
    if (surgery_->attachment_row(key) >= 0) live.push_back(key);
  if (!live.empty()) {
    surgery_->remove_attachments(live);
    surgery_frame_.attachments_released += static_cast<int>(live.size());
  }
  hook_keys_[event].clear();
  grip_start_[event].clear();
  return !live.empty();
}

void SceneSimulation::apply_surgery_events(int frame) {
  surgery_frame_ = {};
  const double update_ms_before = surgery_->stats().factor_update_ms_total;
  const std::vector<SurgeryEvent>& events = scene_.surgery->events;
  bool ended = false;  // an event that did something had its last frame here
  // Every error names the event and the frame. Events are applied in the file's order, each one
  // transactionally (the session is unchanged by a failed event); one that already ran at this
  // frame is not applied again if advance(frame) is called again after an error.
  auto fail = [&](const std::string& where, const std::string& what) {
    throw SceneError(scene_.file, where, fmt::format("frame {}: {}", frame, what));
  };
  auto rest_point = [&](const Vec3& p, const std::string& where, const char* what) {
    const TetMesh& m = surgery_->mesh();
    const TetLocation l = TetLocator(m.nodes, m.tets).find_tet(p);
    if (!l.found())
      fail(where,
           fmt::format("the {} ({}, {}, {}) lies in no tet of the mesh (rest coordinates)", what, p.x(), p.y(), p.z()));
    // Fragments of a split tet overlap at rest: the point belongs to the one holding it.
    const FaceCutter& cutter = surgery_->cutter();
    const int t =
        cutter.has_split_elements() ? cutter.fragment_holding(l.tet, l.weights, cutter.fragments_by_source()) : l.tet;
    BaryPoint b;
    for (int a = 0; a < 4; ++a) {
      b.nodes[static_cast<std::size_t>(a)] = m.tets(t, a);
      b.weights[static_cast<std::size_t>(a)] = l.weights[a];
    }
    return b;
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    const SurgeryEvent& e = events[i];
    const bool release_hook = e.tool == SurgeryEvent::Tool::Hook && e.release_frame == frame;
    if ((frame < e.first_frame || frame > e.last_frame) && !release_hook) continue;
    if (applied_frame_[i] == frame) continue;
    const std::string where = "/surgery/events/" + std::to_string(i);
    const TetMesh& mesh = surgery_->mesh();
    try {
      switch (e.tool) {
        case SurgeryEvent::Tool::Cut: {
          if (e.split) {
            // The blade's path up to this frame's share of its arc length.
            const double share =
                static_cast<double>(frame - e.first_frame + 1) / static_cast<double>(e.last_frame - e.first_frame + 1);
            const double length = path_length(e.path);
            const auto blade = swept_cut_surface(path_section(e.path, 0.0, share * length));
            const CutEvent ev = surgery_->split(*blade);
            // A blade that has split nothing by its last frame is refused before the event counts as
            // applied (a split of no tet changes nothing): a live session answers 422 and goes on.
            if (frame == e.last_frame && cut_done_[i] == 0 && ev.tets_split == 0)
              fail(where, "the cut's swept path cuts through no tet of the mesh");
            applied_frame_[i] = frame;  // the session has the event (the surface follows below)
            cut_done_[i] += static_cast<std::size_t>(ev.tets_split);
            surgery_frame_.tets_split += ev.tets_split;
            if (ev.tets_split > 0) {
              follow_topology(&ev, nullptr, blade.get(), static_cast<int>(i));
              // The walls of the part the blade advanced through this frame, one per side.
              const double before = static_cast<double>(frame - e.first_frame) /
                                    static_cast<double>(e.last_frame - e.first_frame + 1) * length;
              if (closed_surface_)
                add_wall(blade_wall(path_section(e.path, before, share * length), wall_spacing_), {1, -1}, *blade,
                         static_cast<int>(i));
              ++surgery_frame_.events;
              ++topology_version_;
              ended = ended || frame == e.last_frame;
            }
            break;
          }
          std::vector<TetPair>& faces = cut_faces_[i];
          if (frame == e.first_frame) {
            faces = e.path.points.empty()
                        ? faces_across_plane(mesh, e.plane_normal, e.plane_normal.dot(e.plane_point), e.advance)
                        : faces_across_swept_path(mesh, e.path);
            if (e.box)
              faces.erase(
                  std::remove_if(faces.begin(), faces.end(),
                                 [&](const TetPair& f) { return !in_box(e.box, shared_face_centroid(mesh, f)); }),
                  faces.end());
            if (faces.empty())
              fail(where, std::string(e.path.points.empty() ? "the cut's plane" : "the cut's swept path") +
                              " crosses no interior face of the mesh" + (e.box ? " inside its box" : ""));
            cut_done_[i] = 0;
          }
          // The faces left, in equal shares over the frames left (an excision may have removed some).
          const std::size_t left = faces.size() - cut_done_[i],
                            frames_left = static_cast<std::size_t>(e.last_frame - frame + 1);
          const std::size_t count = left - left * (frames_left - 1) / frames_left;
          const std::vector<TetPair> now(faces.begin() + static_cast<long>(cut_done_[i]),
                                         faces.begin() + static_cast<long>(cut_done_[i] + count));
          const CutEvent ev = surgery_->cut(now);
          cut_done_[i] += count;
          surgery_frame_.faces_cut += ev.faces_cut;
          if (ev.faces_cut > 0) {
            ++surgery_frame_.events;
            ++topology_version_;
            ended = ended || frame == e.last_frame;
          }
          break;
        }
        case SurgeryEvent::Tool::Excise: {
          if (e.split) {
            CutEvent split;
            const auto ball = sphere_cut_surface(e.sphere->first, e.sphere->second);
            const ExcisionEvent ev = surgery_->excise_inside(*ball, &split);
            if (ev.removed.empty()) fail(where, "the excision's sphere holds no tissue");
            applied_frame_[i] = frame;  // the session has the event (the surface follows below)
            follow_topology(&split, &ev, ball.get(), static_cast<int>(i));
            // The cavity's wall: the sphere inside the tissue, facing its centre (out of the tissue
            // left, which is the sphere's positive side: the icosphere's outward normals point there).
            if (closed_surface_) {
              const int levels =
                  std::clamp(static_cast<int>(std::ceil(std::log2(1.33 * e.sphere->second / wall_spacing_))), 0, 7);
              add_wall(make_icosphere(e.sphere->first, e.sphere->second, levels), {1}, *ball, static_cast<int>(i));
            }
            surgery_frame_.tets_split += split.tets_split;
            surgery_frame_.tets_excised += static_cast<int>(ev.removed.size());
            ++surgery_frame_.events;
            ++topology_version_;
            ended = true;
            break;
          }
          std::vector<int> tets;
          for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t) {
            Vec3 c = Vec3::Zero();
            for (int a = 0; a < 4; ++a) c += mesh.nodes.row(mesh.tets(t, a)).transpose() / 4.0;
            const bool inside = e.sphere ? (c - e.sphere->first).norm() <= e.sphere->second : in_box(e.box, c);
            if (inside) tets.push_back(static_cast<int>(t));
          }
          if (tets.empty()) fail(where, "the excision's region holds no tet centroid");
          const ExcisionEvent ev = surgery_->excise(tets);
          applied_frame_[i] = frame;  // the session has the event (the rest follows below)
          // Per-tet data, the embedded surface and the faces of cuts still under way follow the
          // renumbering.
          follow_topology(nullptr, &ev, nullptr, static_cast<int>(i));
          for (std::size_t c = 0; c < cut_faces_.size(); ++c) {
            std::vector<TetPair> kept;
            std::size_t done = 0;
            for (std::size_t k = 0; k < cut_faces_[c].size(); ++k) {
              const TetPair& f = cut_faces_[c][k];
              const int ta = ev.tet_map[static_cast<std::size_t>(f.first)],
                        tb = ev.tet_map[static_cast<std::size_t>(f.second)];
              if (ta < 0 || tb < 0) continue;
              kept.emplace_back(std::min(ta, tb), std::max(ta, tb));
              if (k < cut_done_[c]) ++done;
            }
            cut_faces_[c] = std::move(kept);
            cut_done_[c] = done;
          }
          surgery_frame_.tets_excised += static_cast<int>(ev.removed.size());
          ++surgery_frame_.events;
          ++topology_version_;
          ended = true;
          break;
        }
        case SurgeryEvent::Tool::Release: {
          if (e.hook >= 0) {  // a hook placed by an earlier event (hook_release_problem checked it)
            // As at the hook's release_frame: no fill check follows (the release only removes
            // rank-1 columns), so both ways give the same frames.
            release_hook_springs(static_cast<std::size_t>(e.hook));
            ++surgery_frame_.events;
            break;
          }
          const std::vector<int> nodes = select_nodes(e.selection, scene_.selections, mesh_);
          std::vector<char> in(static_cast<std::size_t>(mesh_.nodes.rows()), 0);
          for (int v : nodes) in[static_cast<std::size_t>(v)] = 1;
          // The scene attachments on the selection's nodes, and the copies cuts made of them.
          const std::vector<int> keys = scene_attachment_keys([&](int, int origin) {
            return in[static_cast<std::size_t>(attach_node_[static_cast<std::size_t>(origin)])];
          });
          if (keys.empty()) fail(where, "selection '" + e.selection + "' carries no attachment to release");
          surgery_->remove_attachments(keys);
          surgery_frame_.attachments_released += static_cast<int>(keys.size());
          ++surgery_frame_.events;
          ended = true;
          break;
        }
        case SurgeryEvent::Tool::Hook: {
          if (release_hook) {
            if (release_hook_springs(i)) ++surgery_frame_.events;
            break;
          }
          if (frame != e.first_frame) break;  // placed once; set_frame_inputs moves its target
          const BaryPoint p = rest_point(e.point, where + "/point", "hook's point");
          const Vec3 start = p.eval(surgery_->state().x);
          std::vector<BaryPoint> grip{p};
          if (e.grip_radius > 0 && surgery_->cutter().has_split_elements())
            fail(where,
                 "a hook's grip_radius reads the mesh's boundary faces, which a split cut's overlapping "
                 "fragments do not form; use a point hook");
          if (e.grip_radius > 0) {
            grip.clear();
            for (const int v : hook_grip_nodes(surgery_->mesh(), p.nodes, e.point, e.grip_radius))
              grip.push_back(BaryPoint::node(v));
            if (grip.empty())
              fail(where + "/grip_radius", fmt::format("the hook's grip ({}) reaches no surface node of the tissue "
                                                       "around its point",
                                                       e.grip_radius));
          }
          std::vector<Vec3> starts;
          for (const BaryPoint& g : grip) starts.push_back(g.eval(surgery_->state().x));
          hook_keys_[i] = surgery_->add_hooks(grip, starts, e.stiffness / static_cast<double>(grip.size()));
          grip_start_[i] = std::move(starts);
          hook_start_[i] = start;
          ++surgery_frame_.hooks_placed;
          ++surgery_frame_.events;
          break;
        }
        case SurgeryEvent::Tool::Suture: {
          const BaryPoint a = rest_point(e.a, where + "/a", "suture's end a");
          const BaryPoint b = rest_point(e.b, where + "/b", "suture's end b");
          if (a.nodes == b.nodes)
            fail(where, "both ends of the suture lie in one tet: place them on either side of the wound");
          (void)surgery_->add_suture(a, b, e.stiffness);
          ++surgery_frame_.sutures_placed;
          ++surgery_frame_.events;
          break;
        }
        case SurgeryEvent::Tool::SutureRow: {
          // The cardinal stitches and those evenly spaced between consecutive ones, all located
          // before any is placed; a placement that fails takes the row's earlier stitches back.
          std::vector<std::pair<Vec3, Vec3>> row;
          for (std::size_t k = 0; k < e.stitches.size(); ++k) {
            row.push_back(e.stitches[k]);
            if (k + 1 == e.stitches.size()) break;
            for (int j = 1; j <= e.between; ++j) {
              const double t = static_cast<double>(j) / (e.between + 1);
              row.emplace_back((1 - t) * e.stitches[k].first + t * e.stitches[k + 1].first,
                               (1 - t) * e.stitches[k].second + t * e.stitches[k + 1].second);
            }
          }
          std::vector<std::pair<BaryPoint, BaryPoint>> ends;
          for (std::size_t k = 0; k < row.size(); ++k) {
            const std::string what = fmt::format("row's stitch {} (of {}), end", k, row.size());
            ends.emplace_back(rest_point(row[k].first, where, (what + " a").c_str()),
                              rest_point(row[k].second, where, (what + " b").c_str()));
            if (ends.back().first.nodes == ends.back().second.nodes)
              fail(where,
                   fmt::format("both ends of the row's stitch {} lie in one tet: the lips are too close there", k));
          }
          std::vector<int> placed;
          try {
            for (const auto& [a, b] : ends) placed.push_back(surgery_->add_suture(a, b, e.stiffness));
          } catch (...) {
            for (auto it = placed.rbegin(); it != placed.rend(); ++it) surgery_->remove_suture(*it);
            throw;
          }
          surgery_frame_.sutures_placed += static_cast<int>(placed.size());
          ++surgery_frame_.events;
          break;
        }
        case SurgeryEvent::Tool::Undermine: {
          const int released = undermine(e, where, frame);
          surgery_frame_.attachments_released += released;
          ++surgery_frame_.events;
          ended = true;
          break;
        }
      }
    } catch (const SceneError&) {
      throw;
    } catch (const Error& err) {
      // The session is unchanged (every event is transactional); name the event and the frame.
      fail(where, err.what());
    }
    applied_frame_[i] = frame;
  }
  surgery_frame_.factor_update_ms = surgery_->stats().factor_update_ms_total - update_ms_before;
  if (ended && scene_.surgery->fill_check && scene_.surgery->factor_update == FactorUpdate::Progressive)
    surgery_frame_.fill_refactored = surgery_->check_fill().refactored;
}

std::vector<int> SceneSimulation::scene_attachment_keys(const std::function<bool(int, int)>& keep) const {
  std::vector<int> keys;
  for (const int key : surgery_->attachment_keys()) {
    const int origin = surgery_->attachment_origin(key);
    if (origin >= 0 && static_cast<std::size_t>(origin) < attach_node_.size() && keep(key, origin)) keys.push_back(key);
  }
  return keys;
}

int SceneSimulation::undermine(const SurgeryEvent& e, const std::string& where, int frame) {
  const auto fail = [&](const std::string& what) {
    throw SceneError(scene_.file, where, fmt::format("frame {}: {}", frame, what));
  };
  if (surgery_->cutter().has_split_elements())
    fail("undermining reads the shell's faces, which a split cut's overlapping fragments do not form");
  Shell shell;  // the skin tools read the shell's layout only
  shell.surface_vertices = scene_.mesh.shell_surface_vertices;
  shell.layers = scene_.mesh.shell.layers;
  const FaceCutter& cutter = surgery_->cutter();
  const Points& rest = cutter.mesh().nodes;
  const Triangles skin = shell_skin(shell, cutter);
  if (skin.rows() == 0) fail("the shell has no skin left");
  auto centroid = [&](Eigen::Index f) -> Vec3 {
    return (rest.row(skin(f, 0)) + rest.row(skin(f, 1)) + rest.row(skin(f, 2))).transpose() / 3.0;
  };
  Eigen::Index seed = 0;
  for (Eigen::Index f = 1; f < skin.rows(); ++f)
    if ((centroid(f) - e.point).squaredNorm() < (centroid(seed) - e.point).squaredNorm()) seed = f;
  // The flap's base: each boundary point snapped to its nearest skin vertex, consecutive ones
  // joined by the shortest path along skin edges (Dijkstra on edge lengths).
  std::vector<std::array<int, 2>> barrier;
  if (!e.boundary.empty()) {
    std::map<int, std::vector<std::pair<int, double>>> adjacency;
    for (Eigen::Index f = 0; f < skin.rows(); ++f)
      for (int k = 0; k < 3; ++k) {
        const int a = skin(f, k), b = skin(f, (k + 1) % 3);
        const double len = (rest.row(a) - rest.row(b)).norm();
        adjacency[a].emplace_back(b, len);
        adjacency[b].emplace_back(a, len);
      }
    auto nearest = [&](const Vec3& p) {
      int best = -1;
      double d = std::numeric_limits<double>::infinity();
      for (const auto& [v, nb] : adjacency)
        if (const double dv = (rest.row(v).transpose() - p).squaredNorm(); dv < d) {
          d = dv;
          best = v;
        }
      return best;
    };
    for (std::size_t i = 0; i + 1 < e.boundary.size(); ++i) {
      const int from = nearest(e.boundary[i]), to = nearest(e.boundary[i + 1]);
      std::map<int, double> dist{{from, 0.0}};
      std::map<int, int> prev;
      std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>> queue;
      queue.emplace(0.0, from);
      while (!queue.empty()) {
        const auto [d, v] = queue.top();
        queue.pop();
        if (v == to) break;
        if (d > dist[v]) continue;
        for (const auto& [w, len] : adjacency[v])
          if (const auto it = dist.find(w); it == dist.end() || d + len < it->second) {
            dist[w] = d + len;
            prev[w] = v;
            queue.emplace(d + len, w);
          }
      }
      if (from != to && !prev.count(to))
        fail(
            fmt::format("boundary points {} and {} are not joined by the skin (an incision separates them)", i, i + 1));
      for (int v = to; v != from; v = prev[v]) barrier.push_back({prev[v], v});
    }
  }
  const std::vector<int> region = flood_fill_triangles(skin, static_cast<int>(seed), barrier);
  const std::vector<int> below = shell_nodes_below(shell, cutter, skin, region);
  std::vector<char> in(static_cast<std::size_t>(rest.rows()), 0);
  for (int v : below) in[static_cast<std::size_t>(v)] = 1;
  // The scene attachments (node attachments; a cut's copy carries its own node) on those nodes.
  const std::vector<int> keys = scene_attachment_keys(
      [&](int key, int) { return in[static_cast<std::size_t>(surgery_->attachment_point(key).nodes[0])] != 0; });
  if (keys.empty())
    fail(fmt::format("the undermined region ({} of {} skin triangles) has no attached tissue below it", region.size(),
                     skin.rows()));
  if (region.size() == static_cast<std::size_t>(skin.rows()))
    fail(
        fmt::format("the flood fill reached the whole skin ({} triangles): close the flap with incisions and a "
                    "'boundary' (its base)",
                    skin.rows()));
  surgery_->remove_attachments(keys);
  return static_cast<int>(keys.size());
}

SceneSimulation::~SceneSimulation() = default;
SceneSimulation::SceneSimulation(SceneSimulation&&) noexcept = default;
SceneSimulation& SceneSimulation::operator=(SceneSimulation&&) noexcept = default;

namespace {

// A point on (or at) a cut's surface bound to the fragment on `side` (±1) of it: the fragment that
// holds the point `offset` along the blade's normal on that side. On the blade itself every
// fragment's margin is about 0 (the fragments' planes interpolate the blade and are snapped off
// the nodes), so the offset decides. Returns the tet and the point's weights in it, or tet −1 when
// no fragment holds the offset point (excised tissue, or outside the mesh).
std::pair<int, Vec4> bind_beside(const TetMesh& mesh, const FaceCutter& cutter, const TetLocator& locator,
                                 const std::vector<std::vector<int>>& by_source, const CutSurface& blade, const Vec3& p,
                                 int side, double offset) {
  const Vec3 q = p + (side * offset) * blade.normal(p);
  TetLocation l = locator.find_tet(q);
  if (!l.found()) l = locator.find_tet(p);  // the offset left the mesh (near its boundary)
  if (!l.found()) return {-1, Vec4::Zero()};
  const int t = cutter.fragment_holding(l.tet, l.weights, by_source);
  if (cutter.material_margin(t, barycentric(q, mesh.nodes, mesh.tets, t)) < 0 &&
      cutter.material_margin(t, barycentric(p, mesh.nodes, mesh.tets, t)) < 0)
    return {-1, Vec4::Zero()};
  return {t, barycentric(p, mesh.nodes, mesh.tets, t)};
}

}  // namespace

int SceneSimulation::surface_side(std::size_t v, const CutSurface& blade, int event) const {
  if (surface_event_[v] == event) return surface_side_[v];
  return blade.side(surface_->nodes.row(static_cast<Eigen::Index>(v)).transpose()) >= 0 ? 1 : -1;
}

void SceneSimulation::append_surface_vertices(const std::vector<Vec3>& rest, const std::vector<int>& tets,
                                              const std::vector<Vec4>& weights, const std::vector<int>& sides,
                                              int event) {
  if (rest.empty()) return;
  SurfaceMesh& surf = *surface_;
  PointEmbedding& emb = *embedding_;
  const Eigen::Index n0 = surf.nodes.rows(), n = n0 + static_cast<Eigen::Index>(rest.size());
  surf.nodes.conservativeResize(n, 3);
  emb.weights.conservativeResize(n, 4);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    surf.nodes.row(n0 + static_cast<Eigen::Index>(i)) = rest[i].transpose();
    emb.weights.row(n0 + static_cast<Eigen::Index>(i)) = weights[i].transpose();
    emb.tet_of_point.push_back(tets[i]);
    surface_event_.push_back(event);
    surface_side_.push_back(static_cast<signed char>(sides[i]));
  }
}

void SceneSimulation::cut_surface_triangles(const CutSurface& blade, bool excision, int event) {
  SurfaceMesh& surf = *surface_;
  const TetMesh& mesh = surgery_->mesh();
  const FaceCutter& cutter = surgery_->cutter();
  const auto nv = static_cast<std::size_t>(surf.nodes.rows());
  std::vector<int> side(nv);
  for (std::size_t v = 0; v < nv; ++v) side[v] = surface_side(v, blade, event);
  auto rest = [&](int v) { return Vec3(surf.nodes.row(v).transpose()); };
  // An edge is cut where its ends lie on either side and the blade meets it; an edge with an end
  // this cut made lies along the cut already (a later frame of the same blade).
  auto made_here = [&](int v) { return surface_event_[static_cast<std::size_t>(v)] == event; };
  auto cut_edge = [&](int a, int b) {
    return !made_here(a) && !made_here(b) && side[static_cast<std::size_t>(a)] != side[static_cast<std::size_t>(b)] &&
           blade.crosses(rest(a), rest(b), 0.0);
  };
  std::optional<TetLocator> locator;
  std::vector<std::vector<int>> by_source;
  std::vector<Vec3> new_rest;
  std::vector<int> new_tet, new_side;
  std::vector<Vec4> new_weights;
  auto add_vertex = [&](const Vec3& p, int s) {
    int t = -1;
    Vec4 w = Vec4::Zero();
    if (!(excision && s < 0)) {  // the inside of an excision goes
      if (!locator) {
        locator.emplace(mesh.nodes, mesh.tets);
        by_source = cutter.fragments_by_source();
      }
      std::tie(t, w) = bind_beside(mesh, cutter, *locator, by_source, blade, p, s, surface_offset_);
    }
    new_rest.push_back(p);
    new_tet.push_back(t);
    new_weights.push_back(w);
    new_side.push_back(s);
    return static_cast<int>(nv + new_rest.size() - 1);
  };
  // Per cut edge (lower id first): its two vertices, on the lower id's side and on the other's.
  std::map<std::pair<int, int>, std::pair<int, int>> split_edge;
  auto edge_vertices = [&](int a, int b) {  // (on a's side, on b's side)
    const std::pair<int, int> key{std::min(a, b), std::max(a, b)};
    auto it = split_edge.find(key);
    if (it == split_edge.end()) {
      // The crossing on the blade itself (bisection on its side along the edge; the ends' signs
      // differ), so that a sphere's rim lies on the sphere, not on the chords' interpolation.
      const Vec3 xa = rest(key.first), xb = rest(key.second);
      const int sa = side[static_cast<std::size_t>(key.first)], sb = side[static_cast<std::size_t>(key.second)];
      double s0 = 0, s1 = 1;
      for (int step = 0; step < 48; ++step) {
        const double mid = 0.5 * (s0 + s1);
        ((blade.side(xa + mid * (xb - xa)) >= 0 ? 1 : -1) == sa ? s0 : s1) = mid;
      }
      const Vec3 p = xa + 0.5 * (s0 + s1) * (xb - xa);
      const int lo = add_vertex(p, sa);
      const int hi = add_vertex(p, sb);
      it = split_edge.emplace(key, std::make_pair(lo, hi)).first;
    }
    return a < b ? it->second : std::make_pair(it->second.second, it->second.first);
  };
  std::vector<Eigen::RowVector3i> tris;
  tris.reserve(static_cast<std::size_t>(surf.triangles.rows()));
  for (Eigen::Index f = 0; f < surf.triangles.rows(); ++f) {
    const int v[3] = {surf.triangles(f, 0), surf.triangles(f, 1), surf.triangles(f, 2)};
    const bool cut[3] = {cut_edge(v[0], v[1]), cut_edge(v[1], v[2]), cut_edge(v[2], v[0])};
    const int n = int(cut[0]) + int(cut[1]) + int(cut[2]);
    if (n != 2) {  // uncut, or the blade's end inside the triangle: left whole
      tris.emplace_back(v[0], v[1], v[2]);
      continue;
    }
    // The corner alone on its side is the one between the two cut edges: a (then b, c in order).
    const int k = !cut[0] ? 2 : (!cut[1] ? 0 : 1);
    const int a = v[k], b = v[(k + 1) % 3], c = v[(k + 2) % 3];
    const auto [ab_a, ab_b] = edge_vertices(a, b);
    const auto [ac_a, ac_c] = edge_vertices(a, c);
    tris.emplace_back(a, ab_a, ac_a);
    tris.emplace_back(ab_b, b, c);
    tris.emplace_back(ab_b, c, ac_c);
  }
  if (new_rest.empty()) return;
  append_surface_vertices(new_rest, new_tet, new_weights, new_side, event);
  surf.triangles.resize(static_cast<Eigen::Index>(tris.size()), 3);
  for (std::size_t i = 0; i < tris.size(); ++i) surf.triangles.row(static_cast<Eigen::Index>(i)) = tris[i];
}

void SceneSimulation::add_wall(const SurfaceMesh& wall, const std::vector<int>& sides, const CutSurface& blade,
                               int event) {
  if (!closed_surface_ || wall.triangles.rows() == 0) return;
  const TetMesh& mesh = surgery_->mesh();
  const FaceCutter& cutter = surgery_->cutter();
  // Wall vertices inside the closed rest surface. A wall triangle is kept when a corner is inside;
  // a corner outside moves to where the edge from an inside corner leaves the surface (the rim, where
  // the cut leaves the body), put back on the blade (a chord of a sphere lies inside it).
  const auto nw = static_cast<std::size_t>(wall.nodes.rows());
  std::vector<char> inside(nw);
  for (std::size_t v = 0; v < nw; ++v)
    inside[v] =
        inside_closed_surface(*closed_surface_, wall.nodes.row(static_cast<Eigen::Index>(v)).transpose()) ? 1 : 0;
  std::vector<Vec3> at(nw);
  std::vector<char> usable(nw);
  for (std::size_t v = 0; v < nw; ++v) {
    at[v] = wall.nodes.row(static_cast<Eigen::Index>(v)).transpose();
    usable[v] = inside[v];
  }
  const SurfaceMesh& cs = *closed_surface_;
  for (Eigen::Index f = 0; f < wall.triangles.rows(); ++f)
    for (int k = 0; k < 3; ++k) {
      const auto v = static_cast<std::size_t>(wall.triangles(f, k));
      if (inside[v] || usable[v]) continue;
      for (int l = 1; l < 3 && !usable[v]; ++l) {
        const auto u = static_cast<std::size_t>(wall.triangles(f, (k + l) % 3));
        if (!inside[u]) continue;
        double nearest = 2.0;  // segment parameter from u
        for (Eigen::Index g = 0; g < cs.triangles.rows(); ++g)
          if (const auto hit = segment_triangle(at[u], at[v], cs.nodes.row(cs.triangles(g, 0)).transpose(),
                                                cs.nodes.row(cs.triangles(g, 1)).transpose(),
                                                cs.nodes.row(cs.triangles(g, 2)).transpose()))
            nearest = std::min(nearest, (*hit)[0]);
        if (nearest > 1.0) continue;
        Vec3 q = at[u] + nearest * (at[v] - at[u]);
        q -= blade.side(q) * blade.normal(q);
        at[v] = q;
        usable[v] = 1;
      }
    }
  const TetLocator locator(mesh.nodes, mesh.tets);
  const auto by_source = cutter.fragments_by_source();
  const auto first = static_cast<int>(surface_->nodes.rows());
  std::vector<Vec3> rest;
  std::vector<int> tets, vertex_sides;
  std::vector<Vec4> weights;
  std::vector<Eigen::RowVector3i> added;
  for (int side : sides) {
    std::vector<int> index(static_cast<std::size_t>(wall.nodes.rows()), -2);  // −2 not yet, −1 unbound
    auto bind = [&](int v) {
      int& id = index[static_cast<std::size_t>(v)];
      if (id != -2) return id;
      const Vec3 p = at[static_cast<std::size_t>(v)];
      const auto [t, w] = bind_beside(mesh, cutter, locator, by_source, blade, p, side, surface_offset_);
      id = -1;
      if (t < 0) return id;  // in excised tissue
      rest.push_back(p);
      tets.push_back(t);
      weights.push_back(w);
      vertex_sides.push_back(side);
      id = first + static_cast<int>(rest.size()) - 1;
      return id;
    };
    for (Eigen::Index f = 0; f < wall.triangles.rows(); ++f) {
      const int a = wall.triangles(f, 0), b = wall.triangles(f, 1), c = wall.triangles(f, 2);
      if (!usable[static_cast<std::size_t>(a)] || !usable[static_cast<std::size_t>(b)] ||
          !usable[static_cast<std::size_t>(c)] ||
          !(inside[static_cast<std::size_t>(a)] || inside[static_cast<std::size_t>(b)] ||
            inside[static_cast<std::size_t>(c)]))
        continue;
      const int ia = bind(a), ib = bind(b), ic = bind(c);
      if (ia < 0 || ib < 0 || ic < 0) continue;
      // The wall's normals point to the positive side: the negative side's tissue faces that way.
      if (side < 0)
        added.emplace_back(ia, ib, ic);
      else
        added.emplace_back(ia, ic, ib);
    }
  }
  append_surface_vertices(rest, tets, weights, vertex_sides, event);
  SurfaceMesh& surf = *surface_;
  const Eigen::Index n0 = surf.triangles.rows();
  surf.triangles.conservativeResize(n0 + static_cast<Eigen::Index>(added.size()), 3);
  for (std::size_t i = 0; i < added.size(); ++i) surf.triangles.row(n0 + static_cast<Eigen::Index>(i)) = added[i];
}

void SceneSimulation::follow_topology(const CutEvent* split, const ExcisionEvent* excision, const CutSurface* blade,
                                      int event) {
  if (split)
    for (int src : split->tet_copy_of) tet_material_.push_back(tet_material_[static_cast<std::size_t>(src)]);
  if (excision) {
    std::vector<int> material;
    for (std::size_t t = 0; t < excision->tet_map.size(); ++t)
      if (excision->tet_map[t] >= 0) material.push_back(tet_material_[t]);
    tet_material_ = std::move(material);
  }
  if (!surface_) return;
  // Per tet before the event: the fragment the split appended to it (split numbering), or −1.
  std::vector<int> appended;
  if (split) {
    appended.assign(static_cast<std::size_t>(split->tets_before), -1);
    for (std::size_t k = 0; k < split->tet_copy_of.size(); ++k)
      appended[static_cast<std::size_t>(split->tet_copy_of[k])] = split->tets_before + static_cast<int>(k);
  }
  const FaceCutter& cutter = surgery_->cutter();
  std::vector<int>& tet_of = embedding_->tet_of_point;
  auto mapped = [&](int t) { return excision ? excision->tet_map[static_cast<std::size_t>(t)] : t; };
  for (std::size_t v = 0; v < tet_of.size(); ++v) {
    const int t = tet_of[v];
    if (t < 0) continue;
    // The blade's side of the vertex itself (or the side it was made for), not of its tet's
    // snapped plane: a vertex near the blade may lie on the other side of that plane.
    const int side = blade ? surface_side(v, *blade, event) : 0;
    int chosen = t;
    if (split && appended[static_cast<std::size_t>(t)] >= 0) {
      if (blade) {
        // split() keeps the positive side in the tet and appends the negative side's fragment.
        chosen = side > 0 ? t : appended[static_cast<std::size_t>(t)];
      } else {
        const Vec4 w = embedding_->weights.row(static_cast<Eigen::Index>(v)).transpose();
        const int u = mapped(appended[static_cast<std::size_t>(t)]), kept = mapped(t);
        if (kept < 0 || (u >= 0 && cutter.material_margin(u, w) > cutter.material_margin(kept, w)))
          chosen = appended[static_cast<std::size_t>(t)];
      }
    }
    tet_of[v] = mapped(chosen);  // −1 when excised
    // An excision by a closed surface takes every vertex inside it.
    if (excision && blade && side < 0) tet_of[v] = -1;
  }
  // The surface's own triangles across the blade split along it (after the rebinding above, which
  // the new vertices do not need: they are bound to the mesh as it is now).
  if (blade) cut_surface_triangles(*blade, excision != nullptr, event);
  if (!excision) return;
  Triangles kept(surface_->triangles.rows(), 3);
  Eigen::Index k = 0;
  for (Eigen::Index f = 0; f < surface_->triangles.rows(); ++f) {
    const auto row = surface_->triangles.row(f);
    if (tet_of[static_cast<std::size_t>(row(0))] >= 0 && tet_of[static_cast<std::size_t>(row(1))] >= 0 &&
        tet_of[static_cast<std::size_t>(row(2))] >= 0)
      kept.row(k++) = row;
  }
  kept.conservativeResize(k, 3);
  surface_->triangles = std::move(kept);
}

std::optional<SurfaceMesh> SceneSimulation::embedded_surface() const {
  if (!surface_) return std::nullopt;
  if (surgery_) {
    // The current binding; vertices of excised tissue (unbound) left out, triangles renumbered.
    const TetMesh& m = surgery_->mesh();
    const Points& x = surgery_->state().x;
    const std::vector<int>& tet_of = embedding_->tet_of_point;
    std::vector<int> index(tet_of.size(), -1);
    Eigen::Index n = 0;
    for (std::size_t v = 0; v < tet_of.size(); ++v)
      if (tet_of[v] >= 0) index[v] = static_cast<int>(n++);
    SurfaceMesh s{Points(n, 3), Triangles(surface_->triangles.rows(), 3)};
    for (std::size_t v = 0; v < tet_of.size(); ++v) {
      if (index[v] < 0) continue;
      const int t = tet_of[v];
      Vec3 p = Vec3::Zero();
      for (int a = 0; a < 4; ++a)
        p += embedding_->weights(static_cast<Eigen::Index>(v), a) * x.row(m.tets(t, a)).transpose();
      s.nodes.row(index[v]) = p.transpose();
    }
    for (Eigen::Index f = 0; f < s.triangles.rows(); ++f)
      for (int a = 0; a < 3; ++a) s.triangles(f, a) = index[static_cast<std::size_t>(surface_->triangles(f, a))];
    return s;
  }
  SurfaceMesh s{embedded_positions(mesh_.tets, embedding_->tet_of_point, embedding_->weights, state_.x),
                surface_->triangles};
  return s;
}

}  // namespace xpd
