#pragma once
// The JSON scene: what xpd simulates (mesh, materials, named selections, attachments, loads) and
// how (solver settings, outputs). docs/scene-format.md is the specification; this header holds the
// parsed form as plain structs with every default filled in. Parsing is strict: unknown keys, wrong
// types, out-of-range values and references to undefined selections are SceneErrors that name the
// JSON pointer of the offending value ("/materials/0/mu"). CLI, Python and tests share this loader.
#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <xpd/collision/two_way.hpp>
#include <xpd/core/keyframes.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/shell.hpp>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/ipc_solver.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/schur.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/surgery_session.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

/// Where the simulation mesh comes from: a tet-mesh file, the structured box generator, or a BCC
/// lattice around a closed surface (mesh/embedding.hpp make_bcc_embedding).
struct MeshSource {
  enum class Kind { File, Box, Lattice, Shell };
  Kind kind = Kind::Box;
  std::string file;                   ///< Kind::File: path resolved against the scene's directory
  std::array<int, 3> nodes{2, 2, 2};  ///< Kind::Box: nodes per axis (each in [2, 1024])
  Vec3 min = Vec3::Zero();            ///< Kind::Box: lower corner [m]
  Vec3 max = Vec3::Ones();            ///< Kind::Box: upper corner [m]
  /// Kind::Box: boxes [min, max] whose tets (by centroid) are removed, unused nodes dropped.
  std::vector<std::pair<Vec3, Vec3>> carve;
  std::string surface;   ///< Kind::Lattice: closed surface file; Kind::Shell: open surface (resolved)
  int resolution = 32;   ///< Kind::Lattice: cells along the surface's longest side
  double cell_size = 0;  ///< Kind::Lattice: cube side [m]; > 0 wins over resolution
  ShellOptions shell;    ///< Kind::Shell: thickness, layers (mesh/shell.hpp); surface = the skin
  /// Kind::Shell: only the surface's triangles inside this ball (center, radius) (crop_surface).
  std::optional<std::pair<Vec3, double>> shell_crop;
  int shell_subdivide = 0;         ///< Kind::Shell: midpoint subdivision levels after the crop
  int shell_surface_vertices = 0;  ///< Kind::Shell: #vertices of the skin (after crop and subdivision)
  std::string embedded_surface;    ///< optional surface file embedded in the tets (resolved; "" = none;
                                   ///< Kind::Lattice: the lattice's surface unless given)
  bool fix_orientation = false;    ///< reorient inverted tets instead of rejecting the mesh
  /// Kind::File: the tet of each embedded-surface vertex, read from `embedded_tets_file` (#vertices
  /// integers; empty = locate them): bind_points instead of embed_points, for meshes whose tets
  /// overlap at rest.
  std::string embedded_tets_file;
  std::vector<int> embedded_tets;
  /// Kind::File: accept nodes at identical positions (a mesh cut by duplicating nodes, Molino et
  /// al. 2004); by default they are rejected as an unwelded mesh.
  bool coincident_nodes = false;
};

/// Strain limiting term mu' ||F - Q||^2, Q = U clamp(Sigma, sigma_min, sigma_max) V^T (paper 5.3).
struct StrainLimit {
  double stiffness = 0;  ///< mu' [Pa], > 0
  double sigma_min = 0;  ///< lower principal stretch limit, in [0, 1)
  double sigma_max = 0;  ///< upper principal stretch limit, > 1
};

/// An elastic material applied to the tets of a region. Later entries of Scene::materials override
/// earlier ones where their regions overlap.
struct Material {
  std::string region = "all";     ///< "all" or a selection name (tets via select_tets)
  std::optional<int> region_tag;  ///< set instead when the region is a mesh region tag (TetMesh::region)
  double mu = 0;                  ///< shear modulus [Pa], > 0
  double lambda = 0;              ///< first Lame parameter [Pa], >= 0 (0 keeps the PD matrix block diagonal)
  double density = 1000;          ///< [kg/m^3], > 0
  std::optional<StrainLimit> strain_limit;
};

/// Shape-targeted tets (Wang 2025, §6.3: the "muscles" of the learning chapter): each tet of the
/// region uses stiffness · ||F − R S||² with a symmetric target S(b), b ∈ R⁶ per tet (0 = the rest
/// shape), instead of the corotated μ ||F − R||². b follows the entry's keyframes per frame, or stays
/// at `target`; a front end (Python, solver/quasistatic_batch.hpp) may set it instead. Later entries override earlier
/// ones where regions overlap; the model's shape-target rows follow increasing tet index.
struct Actuation {
  std::string region = "all";                      ///< "all" or a selection name (tets via select_tets)
  std::optional<double> stiffness;                 ///< [Pa], > 0; absent: the tet's material μ
  std::array<double, 6> target{0, 0, 0, 0, 0, 0};  ///< initial b of every tet of the region
  /// Per-frame values: b(frame) piecewise linear between keyframes (frame, b), constant before the
  /// first and after the last; empty = `target` in every frame.
  std::vector<std::pair<double, std::array<double, 6>>> keyframes;
  /// b at `frame` (keyframes, or target).
  std::array<double, 6> target_at(double frame) const;
};

/// Skeleton data of a bone attachment; the solver defines how the bones drive the selection.
struct BoneBinding {
  std::string skeleton;    ///< .tgf path, resolved
  std::string pose;        ///< .dmat path, resolved
  std::vector<int> bones;  ///< 0-based bone indices (rows of Skeleton::bones), checked against the skeleton
  /// Frame at which the pose is reached (slerped from the rest pose before, held after); 0 = the
  /// scene's last frame (solver.frames).
  int pose_frame = 0;
};

/// Zero-rest-length springs pulling the nodes of a selection towards targets (w/2 ||x - t||^2 per node).
struct Attachment {
  enum class Type { Fixed, Rigid, Bone };
  Type type = Type::Fixed;
  std::string selection;            ///< "all" or a selection name
  double stiffness = 0;             ///< w per node [N/m], > 0
  std::vector<Keyframe> keyframes;  ///< Type::Rigid: non-empty, strictly increasing frames; targets =
                                    ///< evaluate(keyframes, frame) applied to rest positions
  BoneBinding bone;                 ///< Type::Bone
};

/// Scale of a load over the frames: linear ramp or explicit per-frame list (see scale_at).
struct LoadRamp {
  int frames = 0;             ///< linear ramp: scale(k) = min(1, k / frames); 0 when `scale` is used
  std::vector<double> scale;  ///< explicit: scale(k) = scale[min(k, size) - 1]
};

/// An external load.
struct Load {
  enum class Type { Gravity, NodeForce, TotalForce };
  enum class Distribution { Equal, Area };
  Type type = Type::Gravity;
  Vec3 value =
      Vec3::Zero();       ///< Gravity: acceleration [m/s^2]; NodeForce: force per node [N]; TotalForce: total force [N]
  std::string selection;  ///< NodeForce / TotalForce: "all" or a selection name
  Distribution distribution = Distribution::Equal;  ///< TotalForce: equal shares, or by lumped boundary area
  std::optional<LoadRamp> ramp;

  /// Multiplier of the load while stepping to frame k (k >= 1): 1 without a ramp.
  double scale_at(int frame) const;
};

/// The "solver" key. Its enumerations are the solver's own (Integrator, Accelerator, VolumeMatrix).
struct SolverSettings {
  Integrator type = Integrator::Quasistatic;  ///< "quasistatic" | "implicit_euler"
  double time_step = 1.0 / 30.0;  ///< [s], > 0; the implicit Euler step, and the frame length for "time" keys
  int frames = 1;                 ///< frames to compute, >= 1
  int max_iterations = 100;       ///< PD iterations per frame, >= 1
  int min_iterations = 1;         ///< in [0, max_iterations]
  double tolerance = 1e-6;        ///< stop when ||residual|| <= tolerance * ||residual at iteration 0||; > 0
  Accelerator accelerator = Accelerator::None;  ///< "none" | "anderson" | "chebyshev"
  int threads = 0;                              ///< 0 = all hardware threads
  int stagnation_window = 200;  ///< SolverOptions::stagnation_window: stop at the round-off floor (0 = never)
  /// Interactive mode (> 0): every frame runs exactly this many outer iterations (each with the
  /// collision's inner_iterations), whatever the residual; tolerance, min/max_iterations and the
  /// stagnation stop are ignored, frames do not count as unconverged, and the run reports frames
  /// per second and the residual each frame leaves. Key "interactive": true (= 1) or N ≥ 1.
  int interactive_iterations = 0;
  /// Constant matrix when a material has λ > 0: the coupled 3n × 3n rest Hessian, or the isotropic
  /// n × n approximation (VolumeMatrix in energy/volume.hpp): "coupled" | "isotropic".
  VolumeMatrix volume_matrix = VolumeMatrix::Coupled;
  /// "cpu" | "cuda" | "automatic": where the frames run (ComputeDevice). "cuda" runs quasistatic PD
  /// on the GPU (corotated material with λ = 0, fixed/rigid/bone attachments, gravity and forces;
  /// accelerator "none" or "anderson"; no collision, two-way, surgery or strain limits) and is an
  /// error otherwise; "automatic" picks the GPU when that holds and a device is present.
  ComputeDevice device = ComputeDevice::Cpu;
};

struct OutputSettings {
  enum class Surface { None, Obj, Ply };
  int every = 1;    ///< write every n-th frame, >= 1
  bool vtu = true;  ///< volume frames as .vtu
  Surface surface = Surface::None;
  std::vector<std::string> fields{"displacement"};  ///< per-node/per-tet arrays in the .vtu (see docs)
};

/// A kinematic obstacle (collision/obstacles.hpp shapes, placed by rigid keyframes; "mesh" is a
/// closed triangle surface turned into a signed-distance grid).
struct ObstacleSpec {
  enum class Type { Plane, Sphere, Capsule, Box, Mesh };
  Type type = Type::Sphere;
  Vec3 point = Vec3::Zero();                ///< Plane: a point on it
  Vec3 normal = Vec3::UnitZ();              ///< Plane: outward normal (unit; the half-space below is solid)
  Vec3 center = Vec3::Zero();               ///< Sphere: center; Box: center
  double radius = 0;                        ///< Sphere, Capsule: > 0
  Vec3 a = Vec3::Zero(), b = Vec3::Zero();  ///< Capsule: segment end points
  Vec3 half_extents = Vec3::Ones();         ///< Box: half side lengths (> 0), axis-aligned before keyframes
  std::string file;                         ///< Mesh: closed surface file (resolved)
  double cell_size = 0;                     ///< Mesh: SDF grid cell [length]; 0 = bounding-box diagonal / 64
  double max_edge =
      0;  ///< Sphere with IPC: longest edge of its icosphere [length]; 0 = the contact surface's mean edge
  std::vector<Keyframe> keyframes;  ///< rigid motion (empty: fixed)
};

/// Collision handling (Wang et al. 2021): proxies, the collision-prone region, penalty springs, detection.
struct CollisionSettings {
  enum class Proxies { Surface, EmbeddedSurface };
  Proxies proxies = Proxies::Surface;  ///< boundary nodes of the mesh, or vertices of mesh.embedded_surface
  std::string region = "all";          ///< node selection: proxies whose nearest node (largest weight) is in it
  double stiffness = 0;                ///< penalty per proxy [N/m], > 0; 0 = 100 · max μ · mean edge length
  int inner_iterations = 1;            ///< J ≥ 1
  /// "schur" | "full_refactor" | "projective_skinning" | "pcg"
  CollisionMethod method = CollisionMethod::Schur;
  /// "automatic" | "dense_refactor" | "woodbury"
  SchurSolveMethod schur_solve = SchurSolveMethod::Automatic;
  double memory_budget_mb = 2048;  ///< dense Schur matrices budget [MiB]
  double margin = 0;               ///< obstacle contact margin [length], ≥ 0
  bool self_collision = false;     ///< rest-pose level-set self-collision of the region
  double exclusion_radius = 0;     ///< self-collision neighbourhood [length]; 0 = default of the detector
  double self_margin = 0;  ///< self-collision contact margin [rest length], ≥ 0 (SelfCollisionOptions::margin)
  bool two_sided_self_contact = true;     ///< CollisionOptions::two_sided_self_contact
  bool hold_self_contact_pairing = true;  ///< CollisionOptions::hold_self_contact_pairing
  bool self_contact_half_space = false;   ///< CollisionOptions::self_contact_half_space
  double half_space_repair_distance = 0;  ///< CollisionOptions::half_space_repair_distance [length]
  int half_space_repair_rounds = 8;       ///< CollisionOptions::half_space_repair_rounds
  double sdf_cell_size = 0;               ///< rest-pose SDF cell [length]; 0 = half the mean edge length
  /// First frame solved with collision handling; earlier frames are plain PD (the parts may pass
  /// through each other), e.g. for the disentangling test of Wang et al. 2021, §5.
  int start_frame = 1;
  std::vector<ObstacleSpec> obstacles;
  /// "method": "ipc": barrier contact (solver/ipc_solver.hpp) instead of penalty springs; the
  /// surface is the proxies' triangles whose three vertices are in the region.
  bool ipc = false;
  double dhat = 0;           ///< IPC activation distance [length]; 0 = 10⁻³ × bbox diagonal of the contact surface
  double kappa = 0;          ///< IPC barrier stiffness; 0 = automatic
  double ccd_tolerance = 0;  ///< IPC CCD codomain tolerance [length]; 0 = 10⁻³ d̂
  IpcGlobalSolve ipc_global_solve = IpcGlobalSolve::Woodbury;  ///< "woodbury" | "full_sparse" | "pcg"
};

/// Two-way continuous collision handling (collision/two_way.hpp; Wang, Chen et al. 2023): after
/// every frame from `start_frame` on, the frame's result is projected to an intersection-free state
/// of the tet mesh's boundary surface, reached from the previous frame's (safe) state.
struct TwoWaySettings {
  TwoWayOptions
      options;          ///< "delta", "d_min", "d_max", "gamma", "sigma", "max_steps", "tolerance", "constraint", "seed"
  int start_frame = 1;  ///< first projected frame (≥ 1); the state before it must be intersection-free
  /// "obstacles": kinematic triangle surfaces (type "mesh": a surface file; "box": its 12
  /// triangles) moved by their keyframes, with inverse mass 0 in the projection.
  std::vector<ObstacleSpec> obstacles;
  /// "device": "cpu" (default) or "cuda": the projection on the GPU (gpu/two_way.hpp). Without the
  /// CUDA backend or a device the simulation refuses it (SceneError at /two_way/device).
  bool cuda = false;
};

/// One surgical event of the "surgery" key (docs/scene-format.md §9b), applied before its frame is
/// solved. Geometry is in rest coordinates (the mesh's own, which cuts and excisions keep).
struct SurgeryEvent {
  enum class Tool { Cut, Excise, Release, Hook, Suture, SutureRow, Undermine };
  Tool tool = Tool::Cut;
  int first_frame = 1;  ///< "frame" (one frame) or "frames": [first, last]
  int last_frame = 1;
  /// Cut by a plane (`path` empty): interior faces whose two tets' centroids lie strictly on
  /// opposite sides of it (faces_across_plane), ordered by `advance` · (face centroid). Cut along a
  /// swept path (an incision or a deep cut): the faces whose dual segment crosses the surface the
  /// polyline sweeps (faces_across_swept_path), ordered along the polyline. Either list is made on
  /// the mesh as it is at first_frame and cut in equal shares per frame up to last_frame.
  Vec3 plane_point = Vec3::Zero();
  Vec3 plane_normal = Vec3::UnitX();  ///< unit
  Vec3 advance = Vec3::UnitY();       ///< unit; the direction the blade advances
  SweptPath path;                     ///< points empty: a plane cut
  /// Cut: only faces whose centroid lies in this box; Excise: tets whose centroid lies in it.
  std::optional<std::pair<Vec3, Vec3>> box;  ///< (min, max)
  /// Excise: tets whose centroid lies in this sphere (center, radius).
  std::optional<std::pair<Vec3, double>> sphere;
  /// "mode": "split" — Cut (a path only): element splitting (FaceCutter::split) by the blade's
  /// swept surface, advancing along the path over the frames (at frame k the part of the path up
  /// to the share (k − first + 1) / (last − first + 1) of its arc length), for cuts that do not
  /// follow mesh faces, e.g. through a lattice with an embedded surface. Excise (a sphere only):
  /// the tissue inside the sphere, its boundary cutting the tets it crosses
  /// (SurgerySession::excise_inside). false: faces (cuts) or whole tets by centroid (excisions).
  bool split = false;
  /// Release: the attachments on this selection's nodes are removed (the tissue let go, e.g. the
  /// tissue under an undermined flap).
  std::string selection;
  /// Release (instead of `selection`): the hook placed by surgery event #hook (0-based index into
  /// surgery.events, a hook placed at an earlier frame, without a release_frame, released by no
  /// other event) lets go: its springs are removed, as at a release_frame (how a hook placed in
  /// the live viewer is released). −1: none.
  int hook = -1;
  /// Hook: a zero-rest-length spring of `stiffness` from the material point at rest position
  /// `point` (in the tet containing it at first_frame) to a target that moves linearly from where
  /// that point is at first_frame to `target`, reached at last_frame and held; removed before
  /// `release_frame` is solved (0 = never).
  /// With `grip_radius` > 0 the hook grips a patch instead of a point: the mesh's boundary nodes
  /// within grip_radius of `point` (rest space) that the tissue joins to the point's tet without
  /// crossing a cut (reached through tets whose nodes lie within the radius), each by a spring of
  /// stiffness / (their number), all moving with the hook (each target keeps its node's offset
  /// from the point).
  Vec3 point = Vec3::Zero();
  Vec3 target = Vec3::Zero();
  double grip_radius = 0;
  int release_frame = 0;
  /// Suture: a zero-rest-length spring of `stiffness` between the material points at rest
  /// positions `a` and `b` (each in the tet containing it; two different tets: one on each side
  /// of the wound).
  Vec3 a = Vec3::Zero(), b = Vec3::Zero();
  double stiffness = 0;
  /// Suture row (the thesis's automatic sutures): the cardinal stitches (a, b) placed by the
  /// surgeon, ≥ 2, plus `between` stitches evenly spaced between each consecutive pair (a and b
  /// interpolated linearly in rest space), all of `stiffness`.
  std::vector<std::pair<Vec3, Vec3>> stitches;
  int between = 0;
  /// Undermine (a prism skin shell only, mesh.generator "shell"): the skin triangles a flood fill
  /// reaches from the one nearest `point` (rest space) without crossing incisions or the skin
  /// edges along `boundary` (rest points, each snapped to its nearest skin vertex and joined by
  /// the shortest path along skin edges: the flap's base), and the attachments of the deep-side
  /// nodes below them are released (topology/surface_region.hpp).
  std::vector<Vec3> boundary;
};

/// The "surgery" key: topology events during a quasistatic run, the factor kept by progressive
/// Cholesky updates (solver/surgery_session.hpp).
struct SurgerySettings {
  FactorUpdate factor_update = FactorUpdate::Progressive;  ///< "progressive" | "refactor"
  double fill_ratio = 1.15;                                ///< the fill policy's ratio (FillPolicy::nnz_ratio), ≥ 1
  /// Progressive mode: check the fill policy (DynamicLdlt::refill: an analysis of the current
  /// matrix, about 1 s on 10⁵ nodes) after the last frame of each event.
  bool fill_check = true;
  std::vector<SurgeryEvent> events;  ///< in the file's order; several may share a frame
};

/// A parsed, validated scene.
struct Scene {
  std::string file;      ///< the scene's file name (or the name given to parse_scene)
  std::string base_dir;  ///< directory relative paths were resolved against
  std::string description;
  MeshSource mesh;
  std::vector<Material> materials;
  std::vector<Actuation> actuation;  ///< shape-targeted regions (empty: none)
  SelectionMap selections;
  std::vector<Attachment> attachments;
  std::vector<Load> loads;
  SolverSettings solver;
  OutputSettings outputs;
  std::optional<CollisionSettings> collision;  ///< absent: no collision handling
  std::optional<TwoWaySettings> two_way;       ///< absent: no two-way projection
  std::optional<SurgerySettings> surgery;      ///< absent: the topology never changes
};

/// Reads and validates a scene file. Relative paths inside are resolved against the file's
/// directory. Throws IoError (missing file; malformed JSON with line:column) or SceneError.
Scene load_scene(const std::string& path);
/// load_scene with an edit of the JSON document between reading and validation (a front end's
/// overrides: `xpd run --events` adds recorded surgical events, `xpd view --live` a "surgery" key).
/// Errors still name the file; paths resolve against its directory.
Scene load_scene(const std::string& path, const std::function<void(nlohmann::json&)>& edit);

/// Validates an in-memory scene; `name` is used in error messages, `base_dir` resolves relative
/// paths. Referenced index files and skeletons are read (IoError if unreadable); other referenced
/// files must exist. Throws SceneError.
Scene parse_scene(const nlohmann::json& json, const std::string& name, const std::string& base_dir);

/// Parses one surgical event (docs/scene-format.md §9b) outside a scene file, as `xpd view --live`
/// receives it: the same keys and checks as an entry of "surgery.events" of `scene` (selections are
/// the scene's), with frames allowed up to `frames` (≥ 1) instead of solver.frames. `pointer` names
/// the event in error messages. Throws SceneError (also when the scene has no "surgery" key).
SurgeryEvent parse_surgery_event(const nlohmann::json& event, const Scene& scene, int frames,
                                 const std::string& pointer = "/event");

/// Builds the mesh of a generator source (Kind::Box with its carving, Kind::Lattice). Throws Error
/// for Kind::File.
TetMesh make_generated_mesh(const MeshSource& source);
/// The skin of a Kind::Shell source: its surface file, cropped and subdivided as it asks. Throws
/// IoError / MeshError.
SurfaceMesh shell_skin_surface(const MeshSource& source);

/// Builds the simulation mesh: the generator, or io::read_tet_mesh with fix_orientation.
TetMesh build_scene_mesh(const MeshSource& source);

/// Material index for every tet (the last material whose region contains it). Throws SceneError
/// (path "/materials") when some tet has no material, or a material region is empty or uses a
/// region tag the mesh does not have.
std::vector<int> assign_materials(const Scene& scene, const TetMesh& mesh);

/// Per tet the index into scene.actuation of the entry that targets it, or −1 (later entries win).
/// Throws SceneError (pointer /actuation/i/region) for a region without tets.
std::vector<int> assign_actuation(const Scene& scene, const TetMesh& mesh);

/// Checks a scene against its mesh: every selection referenced by an attachment or load selects at
/// least one node and index selections are in range. Throws SceneError naming the JSON path.
void check_scene_against_mesh(const Scene& scene, const TetMesh& mesh);

/// Density of every tet [kg/m³] from its material (`tet_material` from assign_materials): the
/// per-tet density of the model (ModelDesc::density), whose lumped masses (Model::masses) carry
/// gravity and inertia.
std::vector<double> tet_densities(const Scene& scene, const std::vector<int>& tet_material);

/// The external force on every node [N] while stepping to `frame` (#V × 3): the sum of all loads,
/// each times its ramp scale (Load::scale_at). Gravity is `masses` × acceleration, with the model's
/// lumped masses (Model::masses: the same masses as the implicit-Euler inertia); node_force adds
/// `force` to each selected node; total_force splits `force` over the selected nodes equally or by
/// lumped boundary area (lumped_boundary_area). Throws SceneError (path of the load) when an
/// area-distributed load's selection has no boundary area, and Error when `masses` is not #V long.
Points external_forces(const Scene& scene, const TetMesh& mesh, const Eigen::VectorXd& masses, int frame);

}  // namespace xpd
