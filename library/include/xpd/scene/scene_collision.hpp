#pragma once
// The scene's "collision" key turned into running parts (docs/scene-format.md, "collision"):
// proxies (boundary nodes of the simulation mesh, or the vertices of the embedded surface), the
// collision-prone region (a node selection), obstacles (keyframed analytic shapes and SDF grids of
// surface files), optional rest-pose level-set self-collision, the detector and the
// collision-aware solver (solver/collision_solver.hpp) with its Schur factorization.
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <xpd/collision/detector.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/ipc_solver.hpp>

namespace xpd {

/// World-space obstacles of a scene: each ObstacleSpec as an Obstacle whose keyframes also carry
/// the spec's placement (box center). Mesh obstacles read their surface file and build its SDF grid.
/// Throws IoError / MeshError (with the file) or Error.
std::vector<Obstacle> make_obstacles(const CollisionSettings& settings);

/// An obstacle as a triangle surface in world coordinates (before its keyframes), for the contact
/// models that need one (IPC, two-way): a box's 12 triangles, a mesh file's triangles, or a sphere
/// as the coarsest icosphere whose edges are at most `max_edge` (below 1.33 r / 2^L, at most 7
/// levels). Throws SceneError naming `where` (e.g. "/collision/obstacles/0") on an unreadable or
/// empty surface, a sphere that needs more levels, or another type.
SurfaceMesh obstacle_surface(const Scene& scene, const ObstacleSpec& spec, double max_edge, const std::string& where);

struct SceneCollision {
  ProxySet proxies;
  std::vector<int> region;  ///< proxy indices of the collision-prone region
  std::vector<Obstacle> obstacles;
  double stiffness = 0;                         ///< penalty stiffness used [N/m]
  double mean_edge_length = 0;                  ///< of the simulation mesh at rest
  double margin = 0;                            ///< obstacle contact margin
  CollisionOptions options;                     ///< the penalty solver's options (stiffness included)
  std::unique_ptr<CollisionDetector> detector;  ///< penalty methods (null with "ipc")
  std::unique_ptr<CollisionSolver> solver;      ///< penalty methods (null with "ipc")
  /// "method": "ipc": the contact surface (the region's triangles, their vertices as proxies), the
  /// barrier model and its state (null otherwise).
  ProxySet ipc_proxies;
  Triangles ipc_triangles;
  std::unique_ptr<IpcModel> ipc;
  std::unique_ptr<IpcState> ipc_state;
};

/// Builds proxies, region, obstacles, the detector and the solver for `model` (built from `mesh`).
/// A null `model` (a surgery scene, whose SurgerySession runs the collision model through its
/// events): proxies, region, obstacles and options only, and SceneError for what a surgery scene
/// cannot combine with collisions (self_collision, "ipc", a method other than "schur").
/// `surface` / `embedding`: the scene's embedded surface and its embedding (for
/// "proxies": "embedded_surface"). `max_mu`: the largest shear modulus of the scene's materials
/// (default stiffness = 100 · max_mu · mean edge length). Throws SceneError naming /collision/...
/// for an empty region and SolverError when the region exceeds the memory budget. With "method":
/// "ipc", builds the IPC contact surface and model instead of the detector and penalty solver.
std::unique_ptr<SceneCollision> make_scene_collision(const Scene& scene, const TetMesh& mesh, const Model* model,
                                                     const std::optional<SurfaceMesh>& surface,
                                                     const std::optional<PointEmbedding>& embedding, double max_mu);

}  // namespace xpd
