#pragma once
// A scene turned into a running simulation: the one place where the parsed scene (scene/scene.hpp)
// meets the PD model (solver/model.hpp). CLI, Python and tests all run scenes through it, and
// write what they run through the run writer (scene/run_writer.hpp).
//
// Per frame k ≥ 1 it sets the frame inputs, then solves the frame (quasistatic equilibrium or one
// implicit Euler step):
//   - attachment targets: "fixed" → rest positions; "rigid" → evaluate(keyframes, k) applied to
//     the rest positions; "bone" → each selected node follows the nearest listed bone (rest-pose
//     distance to the bone segment), the bones posed by forward kinematics with the relative
//     rotations of the pose file slerped from identity (frame 0) to the full pose (last frame);
//   - actuation: the shape targets of keyframed "actuation" entries, Actuation::target_at(k);
//   - external forces: external_forces(scene, mesh, model.masses(), k): gravity on the model's
//     lumped masses (per-tet densities of the materials: the same masses as the implicit-Euler
//     inertia), node and total forces, with their ramps.
// Quasistatic warm start: frame k starts from the displacement of frame k−1 extrapolated linearly,
// x⁰_k = x_{k−1} + (x_{k−1} − x_{k−2}) (loads and keyframes of the shipped scenes change smoothly,
// so this removes the first-order part of the load increment). The extrapolated guess is kept only
// if its objective at the new inputs is lower than that of x_{k−1}; otherwise the frame starts from
// x_{k−1}. PD then decreases the energy monotonically from there. Implicit Euler frames start from
// the inertial position y = x_n + h v_n as before (pd_solver).
// With a "collision" key, frames are solved by the collision-aware solver (scene/scene_collision.hpp,
// solver/collision_solver.hpp): same convergence test, plus penalty springs on the active proxies of
// the collision-prone region; collision_stats() holds the last frame's collision figures. Frames
// before collision.start_frame are plain PD, and collision_stats() is empty after them.
// With a "two_way" key, every frame from two_way.start_frame on is followed by the two-way projection
// (collision/two_way.hpp) of the tet mesh's boundary surface from the previous frame's state (safe)
// to the frame's result; implicit Euler velocities become (x_projected − x_{k−1})/h, which carries
// the projection's damping (Wang, Chen et al. 2023, §7.2). The surface must be intersection-free
// before the first projected frame (CollisionError naming the two triangles otherwise). With
// two_way.device "cuda" the projection runs on the GPU (gpu/two_way.hpp), the rest on the CPU.
// With a "surgery" key (docs/scene-format.md §9b), the model is a SurgerySession
// (solver/surgery_session.hpp): the events of frame k (cuts, excisions, released attachments, hooks,
// sutures) are applied before frame k is solved, the factor following by
// progressive Cholesky updates (or by a refactorization per event); mesh(), model(), state() and tet_material() then
// change between frames (nodes are only appended by cuts; excision renumbers tets). Surgery scenes are quasistatic,
// corotated, optionally strain-limited (no λ or actuation), with gravity as their only load, and without collision
// handling, two-way projection or an embedded surface (SceneError otherwise). Frames start from the previous frame's
// positions (no extrapolation: the node count changes). Solver settings used: max_iterations, min_iterations, tolerance
// (relative), accelerator (none / anderson / chebyshev with its defaults in SolverOptions), threads (> 0: a
// tbb::global_control caps the parallelism while the constructor and advance() run; 0 = all hardware threads).
// With solver.device "cuda" (or "automatic" where it applies) plain frames run on the GPU
// (solver/device_pd.hpp, DevicePdStep: the positions stay on the device during the frame); the warm
// start and everything between frames stay on the CPU.
#include <functional>
#include <optional>
#include <vector>
#include <xpd/collision/two_way.hpp>
#include <xpd/core/skeleton.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_collision.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/solver/surgery_session.hpp>

namespace xpd {

class CutSurface;
class DevicePdStep;
namespace gpu {
class DeviceTwoWay;
}

class SceneSimulation {
 public:
  /// Builds the mesh, materials, attachments and loads, and the model (one factorization).
  /// Throws SceneError / MeshError / SolverError / IoError with messages naming the cause.
  explicit SceneSimulation(Scene scene);
  ~SceneSimulation();
  // Movable (the model lives on the heap, so the collision parts' references to it stay valid);
  // not copyable (the model holds its factorization).
  SceneSimulation(SceneSimulation&&) noexcept;
  SceneSimulation& operator=(SceneSimulation&&) noexcept;
  SceneSimulation(const SceneSimulation&) = delete;
  SceneSimulation& operator=(const SceneSimulation&) = delete;

  const Scene& scene() const { return scene_; }
  const TetMesh& mesh() const;
  const Model& model() const;
  const State& state() const;
  const Points& positions() const { return state().x; }
  /// Material index (into scene().materials) of every tet.
  const std::vector<int>& tet_material() const { return tet_material_; }
  int num_frames() const { return scene_.solver.frames; }
  /// Time to build the model, including the one factorization (ms).
  double setup_ms() const { return setup_ms_; }
  /// Where the frames run (solver.device): "cpu", "cuda (<device name>)", or for "automatic" on
  /// the CPU "cpu (automatic: <why not the GPU>)".
  const std::string& compute_device() const { return compute_device_; }

  /// Sets the inputs of frame `frame` (≥ 1), chooses the start (warm start above) and solves it.
  FrameStats advance(int frame);
  /// Solver options derived from the scene (editable, e.g. by tests and benchmarks).
  SolverOptions& options() { return options_; }
  /// Turns the quasistatic warm start (extrapolation) on (default) or off (start from x_{k−1}).
  void set_extrapolation(bool on) { extrapolate_ = on; }
  /// Whether the last quasistatic frame started from the extrapolated guess.
  bool last_frame_extrapolated() const { return last_extrapolated_; }

  /// The embedded surface at the current positions (W x), if the scene has one.
  std::optional<SurfaceMesh> embedded_surface() const;
  /// The embedded surface at rest (the file of mesh.embedded_surface) and its binding to the tets
  /// (tet and barycentric weights of every vertex; vertices outside every tet are snapped to the
  /// nearest one with extrapolated weights); both empty when the scene has none. In a surgery scene
  /// the binding follows the events: a vertex in a split tet moves to the fragment holding it, one
  /// in excised tissue is unbound (tet −1) and the triangles using it are dropped; embedded_surface()
  /// then leaves the unbound vertices out.
  const std::optional<SurfaceMesh>& rest_embedded_surface() const { return surface_; }
  const std::optional<PointEmbedding>& embedding() const { return embedding_; }

  /// Per-frame actuation set by a front end (e.g. fitted by learning): frame k (1-based, k ≤
  /// frames.size()) uses frames[k−1] (#actuated tets × 6, the shape-target rows b) instead of the
  /// scene's actuation targets and keyframes; later frames fall back to the scene. Throws Error on
  /// a wrong shape or a non-finite entry. An empty vector removes the override.
  void set_actuation_frames(std::vector<ShapeTargetParams> frames);

  /// Collision handling of the scene (null without a "collision" key).
  const SceneCollision* collision() const { return collision_.get(); }
  /// Collision figures of the last advance() (empty without collision handling or before frame 1).
  const std::optional<CollisionFrameStats>& collision_stats() const { return collision_stats_; }
  /// IPC figures of the last advance() ("method": "ipc" only; empty otherwise). collision_stats()
  /// then carries the same frame with active_proxies = the active barrier pairs.
  const std::optional<IpcFrameStats>& ipc_stats() const { return ipc_stats_; }

  /// The surgery session of the scene (null without a "surgery" key).
  const SurgerySession* surgery() const { return surgery_.get(); }
  /// What the last advance() did to the topology (zeros without a "surgery" key).
  struct SurgeryFrame {
    int events = 0;                ///< topology events applied before the frame (cut steps, excisions, releases)
    int faces_cut = 0;             ///< faces newly separated
    int tets_split = 0;            ///< tets cut through by "split" cuts and excisions (element splitting)
    int tets_excised = 0;          ///< tets removed
    int attachments_released = 0;  ///< scene attachments released, and hooks removed
    int hooks_placed = 0;
    int sutures_placed = 0;
    double factor_update_ms = 0;   ///< the factor's updates (or refactorizations) of those events
    bool fill_refactored = false;  ///< the fill policy refactored after the frame's events
  };
  const SurgeryFrame& surgery_frame() const { return surgery_frame_; }
  /// Increases whenever the mesh's connectivity changes (a cut or an excision).
  int topology_version() const { return topology_version_; }
  /// The last frame advance() completed (0 before the first).
  int frames_done() const { return frames_done_; }
  /// Adds a surgical event while the simulation runs (the live viewer, a front end's tool): it is
  /// applied like a scene event from its first frame on, which must come after frames_done();
  /// frames may go past solver.frames (the inputs of such frames are those of frame k as the scene
  /// defines them: keyframes and ramps hold their last values). Returns its index in
  /// scene().surgery->events. Throws Error without a "surgery" key or for a frame already solved,
  /// SceneError for a "split" event in a scene without an embedded surface (as the scene's own
  /// events are refused at load).
  int add_surgery_event(const SurgeryEvent& event);
  /// Removes the last added event if no frame has applied it yet (after advance() refused it:
  /// a cut that crosses no face, a hook in no tet); throws Error otherwise.
  void discard_last_surgery_event();

  /// The two-way projector of the scene (null without a "two_way" key).
  const TwoWayProjector* two_way() const { return two_way_.get(); }
  /// Two-way figures of the last advance(): the projection's, the tets of the mesh with
  /// non-positive volume after it, and those with non-positive volume in the frame's PD solution
  /// that the projection started from (its target y: the dynamics' own inversions, which the
  /// projection did not cause) (empty without "two_way" or before its start frame).
  struct TwoWayFrame {
    TwoWayStats projection;
    int inverted_tets = 0;
    int target_inverted_tets = 0;
  };
  const std::optional<TwoWayFrame>& two_way_stats() const { return two_way_stats_; }
  /// The two-way obstacles' triangles (indices into two_way_obstacle_positions()) and where they
  /// are after the last advance() (empty without "two_way" obstacles).
  const Triangles& two_way_obstacle_faces() const { return obstacle_faces_; }
  const Points& two_way_obstacle_positions() const { return obstacle_x_; }

 private:
  void set_frame_inputs(int frame);
  void select_device();
  void check_surgery_scene() const;
  void apply_surgery_events(int frame);
  // Removes the springs hook event `event` placed that are still there (an excision may have taken
  // some); true when it removed any.
  bool release_hook_springs(std::size_t event);
  // The embedded surface's binding (and the per-tet materials) after an element split by `blade`
  // and/or an excision (in that order, as excise_inside makes them), for surgical event `event`.
  void follow_topology(const CutEvent* split, const ExcisionEvent* excision, const CutSurface* blade, int event);
  // The embedded surface's triangles that `blade` crosses along two edges are split there, each
  // crossing point becoming two vertices, one bound to either side; with `excision`, those on the
  // negative side of the blade (the inside of the excised region) are left unbound.
  void cut_surface_triangles(const CutSurface& blade, bool excision, int event);
  // Surfaces the tissue a split opens (when the embedded surface is closed): `wall` — triangles on
  // the cut's surface, those with a corner inside the closed rest surface, the corners outside moved
  // onto its rim — is added once per
  // side it bounds (`sides`: +1 the blade's positive side, −1 the negative; faces oriented out of
  // that side's tissue, given `wall`'s normals point to the positive side), each vertex bound to
  // the fragment of its side (vertices in excised tissue dropped with their triangles).
  void add_wall(const SurfaceMesh& wall, const std::vector<int>& sides, const CutSurface& blade, int event);
  // The side (±1) of surface vertex v for the cut of `event`: the side it was made for when that
  // event made it (it lies on the blade), else the blade's side of its rest position.
  int surface_side(std::size_t v, const CutSurface& blade, int event) const;
  void append_surface_vertices(const std::vector<Vec3>& rest, const std::vector<int>& tets,
                               const std::vector<Vec4>& weights, const std::vector<int>& sides, int event);
  int undermine(const SurgeryEvent& e, const std::string& where, int frame);  // attachments released
  // Session keys of the scene's attachments and of the copies cuts made of them (hooks excluded)
  // for which keep(key, index of the scene attachment) holds.
  std::vector<int> scene_attachment_keys(const std::function<bool(int, int)>& keep) const;

  Scene scene_;
  TetMesh mesh_;
  std::vector<int> tet_material_;
  // Attachment springs, in Model order: owning scene attachment, node, bone (−1 if none).
  std::vector<int> attach_owner_, attach_node_, attach_bone_;
  std::vector<int> actuation_entry_;                    // per shape-target row, its scene.actuation entry
  std::vector<ShapeTargetParams> actuation_frames_;     // set_actuation_frames (empty: the scene's)
  std::vector<Skeleton> skeletons_;                     // per scene attachment (bone type)
  std::vector<std::vector<Eigen::Quaterniond>> poses_;  // per scene attachment (bone type)
  std::optional<SurfaceMesh> surface_;
  std::optional<SurfaceMesh> closed_surface_;  // surgery: the embedded surface at rest, when closed (walls)
  double wall_spacing_ = 0;                    // surgery: the walls' triangle size (0.35 × the mean edge)
  double surface_offset_ = 0;                  // surgery: how far beside a cut a vertex on it is bound
  std::vector<int> surface_event_;             // surgery: per surface vertex, the event that made it (−1: the file's)
  std::vector<signed char> surface_side_;      // … and the side of its cut it was made for (±1)
  std::optional<PointEmbedding> embedding_;
  std::unique_ptr<Model> model_;
  State state_;
  std::unique_ptr<SceneCollision> collision_;
  std::optional<CollisionFrameStats> collision_stats_;
  std::optional<IpcFrameStats> ipc_stats_;
  std::unique_ptr<TwoWayProjector> two_way_;
  std::unique_ptr<gpu::DeviceTwoWay> device_two_way_;  ///< two_way.device "cuda"
  std::optional<TwoWayFrame> two_way_stats_;
  Points two_way_force_;  ///< contact forces carried into the next frame (TwoWayOptions::contact_forces)
  /// Two-way obstacles (TwoWaySettings::obstacles): their vertices in local frames, one keyframe
  /// list per vertex range, and where they are now (their last safe positions, behind their
  /// keyframed pose when the projection blocked them).
  Points obstacle_local_;
  Triangles obstacle_faces_;
  std::vector<std::pair<Eigen::Index, Eigen::Index>> obstacle_ranges_;  ///< [first, end) rows per obstacle
  Points obstacle_x_;
  Points obstacle_pose(int frame) const;
  std::unique_ptr<SurgerySession> surgery_;
  std::unique_ptr<DevicePdStep> device_step_;  // solver.device "cuda" (or "automatic" on a GPU)
  std::string compute_device_ = "cpu";
  std::vector<std::vector<TetPair>> cut_faces_;  // per surgery event: its faces, listed at its first frame
  std::vector<std::size_t> cut_done_;            // per surgery event: faces of its list cut so far
  std::vector<int> applied_frame_;               // per surgery event: the last frame it was applied at
  std::vector<std::vector<int>> hook_keys_;    // per surgery event: the hook's attachment keys (one per gripped point)
  std::vector<Vec3> hook_start_;               // per surgery event: where the hooked point was when placed
  std::vector<std::vector<Vec3>> grip_start_;  // per surgery event: where each gripped point was then
  SurgeryFrame surgery_frame_;
  int topology_version_ = 0;
  int frames_done_ = 0;
  SolverOptions options_;
  Points previous_x_;  // x_{k−2} when the frame k is about to be solved (empty before frame 2)
  bool last_extrapolated_ = false;
  bool extrapolate_ = true;
  double setup_ms_ = 0;
};

}  // namespace xpd
