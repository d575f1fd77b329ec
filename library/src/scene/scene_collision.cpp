#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/collision/proxies.hpp>
#include <xpd/collision/sdf_grid.hpp>
#include <xpd/collision/self_collision.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/scene/scene_collision.hpp>

namespace xpd {

namespace {

// Keys that place a shape defined about `center` (its local frame's origin): K'(y) = K(center + y),
// with K(x) = R (x − p) + p + t, gives pivot' = p − center, translation' = t + center (exact under the
// linear interpolation of pivot and translation in evaluate()).
std::vector<Keyframe> placed(const std::vector<Keyframe>& keys, const Vec3& center) {
  if (keys.empty()) return {Keyframe{0.0, center, Eigen::Quaterniond::Identity(), Vec3::Zero()}};
  std::vector<Keyframe> out = keys;
  for (Keyframe& k : out) {
    k.pivot -= center;
    k.translation += center;
  }
  return out;
}

}  // namespace

std::vector<Obstacle> make_obstacles(const CollisionSettings& settings) {
  std::vector<Obstacle> out;
  for (const ObstacleSpec& s : settings.obstacles) {
    Obstacle o;
    o.keyframes = s.keyframes;
    switch (s.type) {
      case ObstacleSpec::Type::Plane:
        o.shape = Plane{s.point, s.normal};
        break;
      case ObstacleSpec::Type::Sphere:
        o.shape = Sphere{s.center, s.radius};
        break;
      case ObstacleSpec::Type::Capsule:
        o.shape = Capsule{s.a, s.b, s.radius};
        break;
      case ObstacleSpec::Type::Box:
        o.shape = Box{s.half_extents};
        o.keyframes = placed(s.keyframes, s.center);
        break;
      case ObstacleSpec::Type::Mesh: {
        const SurfaceMesh surface = io::read_surface(s.file);
        SdfGridOptions go;
        if (s.cell_size > 0) go.cell_size = s.cell_size;
        o.shape = MeshSdf{std::make_shared<const SdfGrid>(surface, go)};
        break;
      }
    }
    validate(o);
    out.push_back(std::move(o));
  }
  return out;
}

namespace {

// Icosphere levels of an IPC sphere obstacle at most (7: 327,680 triangles).
constexpr int kMaxIcosphereLevels = 7;

// IPC: the triangles of the proxies (mesh boundary, or the embedded surface) whose three vertices
// are region proxies, with those vertices as a compact proxy set.
void make_ipc(const Scene& scene, const TetMesh& mesh, const Model& model, const std::optional<SurfaceMesh>& surface,
              SceneCollision& sc) {
  const CollisionSettings& cs = *scene.collision;
  Triangles all;
  if (cs.proxies == CollisionSettings::Proxies::Surface) {
    // proxies_from_nodes was given the sorted boundary nodes: proxy i sits at the i-th of them.
    const Triangles faces = boundary_faces(mesh.tets);
    const std::vector<int> nodes = boundary_nodes(faces);
    std::vector<int> proxy_of(static_cast<std::size_t>(mesh.nodes.rows()), -1);
    for (std::size_t p = 0; p < nodes.size(); ++p) proxy_of[static_cast<std::size_t>(nodes[p])] = static_cast<int>(p);
    all.resize(faces.rows(), 3);
    for (Eigen::Index f = 0; f < faces.rows(); ++f)
      for (int k = 0; k < 3; ++k) all(f, k) = proxy_of[static_cast<std::size_t>(faces(f, k))];
  } else {
    all = surface->triangles;
  }
  std::vector<char> in_region(static_cast<std::size_t>(sc.proxies.size()), 0);
  for (const int p : sc.region) in_region[static_cast<std::size_t>(p)] = 1;
  std::vector<int> compact(static_cast<std::size_t>(sc.proxies.size()), -1);
  std::vector<int> used;
  std::vector<std::array<int, 3>> kept;
  for (Eigen::Index f = 0; f < all.rows(); ++f) {
    if (!in_region[static_cast<std::size_t>(all(f, 0))] || !in_region[static_cast<std::size_t>(all(f, 1))] ||
        !in_region[static_cast<std::size_t>(all(f, 2))])
      continue;
    std::array<int, 3> t{};
    for (int k = 0; k < 3; ++k) {
      int& c = compact[static_cast<std::size_t>(all(f, k))];
      if (c < 0) {
        c = static_cast<int>(used.size());
        used.push_back(all(f, k));
      }
      t[static_cast<std::size_t>(k)] = c;
    }
    kept.push_back(t);
  }
  if (kept.empty())
    throw SceneError(
        scene.file, "/collision/region",
        fmt::format("no triangle of the contact surface has all three vertices in the region '{}'", cs.region));
  sc.ipc_triangles.resize(static_cast<Eigen::Index>(kept.size()), 3);
  for (std::size_t f = 0; f < kept.size(); ++f)
    for (int k = 0; k < 3; ++k)
      sc.ipc_triangles(static_cast<Eigen::Index>(f), k) = kept[f][static_cast<std::size_t>(k)];
  sc.ipc_proxies.tet.resize(used.size());
  sc.ipc_proxies.weights.resize(static_cast<Eigen::Index>(used.size()), 4);
  sc.ipc_proxies.rest.resize(static_cast<Eigen::Index>(used.size()), 3);
  for (std::size_t i = 0; i < used.size(); ++i) {
    const auto p = static_cast<std::size_t>(used[i]);
    sc.ipc_proxies.tet[i] = sc.proxies.tet[p];
    sc.ipc_proxies.weights.row(static_cast<Eigen::Index>(i)) = sc.proxies.weights.row(static_cast<Eigen::Index>(p));
    sc.ipc_proxies.rest.row(static_cast<Eigen::Index>(i)) = sc.proxies.rest.row(static_cast<Eigen::Index>(p));
  }
  IpcOptions io;
  const Points& rest = sc.ipc_proxies.rest;
  io.dhat = cs.dhat > 0 ? cs.dhat : 1e-3 * (rest.colwise().maxCoeff() - rest.colwise().minCoeff()).norm();
  io.kappa = cs.kappa;
  io.ccd.tolerance = cs.ccd_tolerance;
  io.global_solve = cs.ipc_global_solve;
  io.schur.dense_memory_budget_bytes = static_cast<std::size_t>(cs.memory_budget_mb * 1024.0 * 1024.0);
  // Obstacles as triangle surfaces in world coordinates, moved by their keyframes as given.
  std::vector<IpcObstacle> obstacles;
  const double surface_edge = mean_edge_length(rest, sc.ipc_triangles);
  for (std::size_t k = 0; k < cs.obstacles.size(); ++k) {
    const ObstacleSpec& spec = cs.obstacles[k];
    SurfaceMesh surface = obstacle_surface(scene, spec, spec.max_edge > 0 ? spec.max_edge : surface_edge,
                                           fmt::format("/collision/obstacles/{}", k));
    obstacles.push_back(IpcObstacle{std::move(surface.nodes), std::move(surface.triangles), spec.keyframes});
  }
  try {
    sc.ipc = std::make_unique<IpcModel>(model, sc.ipc_proxies, sc.ipc_triangles, io, std::move(obstacles));
  } catch (const SolverError& e) {
    throw SolverError(fmt::format("{}: /collision: {}", scene.file, e.what()));
  } catch (const Error& e) {
    throw SceneError(scene.file, "/collision", e.what());
  }
  sc.ipc_state = std::make_unique<IpcState>(*sc.ipc);
}

}  // namespace

SurfaceMesh obstacle_surface(const Scene& scene, const ObstacleSpec& spec, double max_edge, const std::string& where) {
  SurfaceMesh surface;
  try {
    if (spec.type == ObstacleSpec::Type::Box) {
      surface = make_box_surface(spec.center - spec.half_extents, spec.center + spec.half_extents);
    } else if (spec.type == ObstacleSpec::Type::Sphere) {
      int levels = 0;
      while (levels < kMaxIcosphereLevels && 1.33 * spec.radius / std::ldexp(1.0, levels) > max_edge) ++levels;
      if (1.33 * spec.radius / std::ldexp(1.0, levels) > max_edge)
        throw SceneError(scene.file, where,
                         fmt::format("a sphere of radius {} needs more than {} icosphere levels for edges of {}; "
                                     "give a larger \"max_edge\"",
                                     spec.radius, kMaxIcosphereLevels, max_edge));
      surface = make_icosphere(spec.center, spec.radius, levels);
    } else if (spec.type == ObstacleSpec::Type::Mesh) {
      surface = io::read_surface(spec.file);
    } else {
      throw SceneError(scene.file, where, "this obstacle type has no triangle surface");
    }
  } catch (const SceneError&) {
    throw;
  } catch (const Error& e) {
    throw SceneError(scene.file, where, e.what());
  }
  if (surface.triangles.rows() == 0) throw SceneError(scene.file, where, "the obstacle has no triangle");
  return surface;
}

std::unique_ptr<SceneCollision> make_scene_collision(const Scene& scene, const TetMesh& mesh, const Model* model,
                                                     const std::optional<SurfaceMesh>& surface,
                                                     const std::optional<PointEmbedding>& embedding, double max_mu) {
  if (!scene.collision) return nullptr;
  const CollisionSettings& cs = *scene.collision;
  auto sc = std::make_unique<SceneCollision>();
  sc->mean_edge_length = mean_edge_length(mesh.nodes, mesh.tets);
  // Proxies.
  if (cs.proxies == CollisionSettings::Proxies::Surface) {
    std::vector<int> nodes;
    const Triangles faces = boundary_faces(mesh.tets);
    for (Eigen::Index f = 0; f < faces.rows(); ++f)
      for (int a = 0; a < 3; ++a) nodes.push_back(faces(f, a));
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    sc->proxies = proxies_from_nodes(mesh, nodes);
  } else {
    if (!surface || !embedding)
      throw SceneError(scene.file, "/collision/proxies", "'embedded_surface' proxies need mesh.embedded_surface");
    sc->proxies = proxies_from_embedding(mesh, embedding->tet_of_point, embedding->weights);
  }
  // Region: proxies whose largest-weight node is selected.
  const std::vector<int> selected = select_nodes(cs.region, scene.selections, mesh);
  std::vector<char> in(static_cast<std::size_t>(mesh.nodes.rows()), 0);
  for (const int v : selected) in[static_cast<std::size_t>(v)] = 1;
  for (int p = 0; p < sc->proxies.size(); ++p) {
    Eigen::Index a = 0;
    sc->proxies.weights.row(p).maxCoeff(&a);
    const int node = mesh.tets(sc->proxies.tet[static_cast<std::size_t>(p)], a);
    if (in[static_cast<std::size_t>(node)]) sc->region.push_back(p);
  }
  if (sc->region.empty())
    throw SceneError(
        scene.file, "/collision/region",
        fmt::format("the collision region '{}' holds no proxy ({} proxies in all)", cs.region, sc->proxies.size()));
  if (!model) {  // a surgery scene
    const auto refuse = [&](const char* key, const std::string& what) {
      throw SceneError(scene.file, std::string("/collision/") + key,
                       "a surgery scene's collisions " + what +
                           " (the collision region's Schur factorization follows the topology events)");
    };
    if (cs.ipc) refuse("method", "use the penalty method \"schur\", not \"ipc\"");
    if (cs.method != CollisionMethod::Schur) refuse("method", "use the method \"schur\"");
    if (cs.self_collision)
      refuse("self_collision", "are with obstacles only (the rest-pose level set does not follow cuts)");
  }
  if (cs.ipc) {
    make_ipc(scene, mesh, *model, surface, *sc);
    return sc;
  }
  // Detection.
  sc->obstacles = make_obstacles(cs);
  sc->margin = cs.margin;
  std::shared_ptr<const SdfGrid> rest_sdf;
  CollisionDetectorOptions dop;
  dop.margin = cs.margin;
  if (cs.self_collision) {
    SdfGridOptions go;
    go.cell_size = cs.sdf_cell_size > 0 ? cs.sdf_cell_size : 0.5 * sc->mean_edge_length;
    // Embedded proxies lie on the embedded surface: its level set is the rest shape they see.
    rest_sdf = cs.proxies == CollisionSettings::Proxies::EmbeddedSurface ? std::make_shared<const SdfGrid>(*surface, go)
                                                                         : rest_surface_sdf(mesh, go);
    dop.self.exclusion_radius = cs.exclusion_radius;
    dop.self.margin = cs.self_margin;
    // Search the tets around every node a region proxy hangs on: the proxies' own tets alone are a
    // one-tet-per-proxy sieve (surface nodes bind to one incident tet each) through which a
    // penetrating proxy of the other side can slip unseen.
    std::vector<char> hang(static_cast<std::size_t>(mesh.nodes.rows()), 0);
    for (const int p : sc->region)
      for (int a = 0; a < 4; ++a)
        if (sc->proxies.weights(p, a) != 0.0)
          hang[static_cast<std::size_t>(mesh.tets(sc->proxies.tet[static_cast<std::size_t>(p)], a))] = 1;
    // An embedded surface's triangles can be larger than the tets (the 608K-tet elbow: lattice edge
    // 0.01, surface edges up to 0.05): the ring around the vertices' tets then has holes between
    // the vertices, through which proxies went 5e-3 deep into the other side unseen. The tets the
    // region's triangles pass through (sampled at half the mean edge) close them.
    if (cs.proxies == CollisionSettings::Proxies::EmbeddedSurface) {
      std::vector<char> is_region(static_cast<std::size_t>(sc->proxies.size()), 0);
      for (const int p : sc->region) is_region[static_cast<std::size_t>(p)] = 1;
      const TetLocator locator(mesh.nodes, mesh.tets);
      const double spacing = 0.5 * sc->mean_edge_length;
      for (Eigen::Index f = 0; f < surface->triangles.rows(); ++f) {
        const int i0 = surface->triangles(f, 0), i1 = surface->triangles(f, 1), i2 = surface->triangles(f, 2);
        if (!is_region[static_cast<std::size_t>(i0)] && !is_region[static_cast<std::size_t>(i1)] &&
            !is_region[static_cast<std::size_t>(i2)])
          continue;
        const Vec3 A = surface->nodes.row(i0).transpose(), B = surface->nodes.row(i1).transpose(),
                   C = surface->nodes.row(i2).transpose();
        const double longest = std::max({(B - A).norm(), (C - B).norm(), (A - C).norm()});
        const int n = std::max(1, static_cast<int>(std::ceil(longest / spacing)));
        for (int i = 0; i <= n; ++i)
          for (int j = 0; i + j <= n; ++j) {
            const TetLocation loc = locator.find_tet(A + (B - A) * (double(i) / n) + (C - A) * (double(j) / n));
            if (loc.found())
              for (int a = 0; a < 4; ++a) hang[static_cast<std::size_t>(mesh.tets(loc.tet, a))] = 1;
          }
      }
    }
    for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t)
      for (int a = 0; a < 4; ++a)
        if (hang[static_cast<std::size_t>(mesh.tets(t, a))]) {
          dop.self_region.push_back(static_cast<int>(t));
          break;
        }
  }
  // Solver.
  CollisionOptions co;
  sc->stiffness = cs.stiffness > 0 ? cs.stiffness : 100.0 * max_mu * sc->mean_edge_length;
  co.stiffness = sc->stiffness;
  co.inner_iterations = cs.inner_iterations;
  co.method = cs.method;
  co.schur_solve = cs.schur_solve;
  co.schur.dense_memory_budget_bytes = static_cast<std::size_t>(cs.memory_budget_mb * 1024.0 * 1024.0);
  co.two_sided_self_contact = cs.two_sided_self_contact;
  co.hold_self_contact_pairing = cs.hold_self_contact_pairing;
  co.self_contact_half_space = cs.self_contact_half_space;
  co.half_space_repair_distance = cs.half_space_repair_distance;
  co.half_space_repair_rounds = cs.half_space_repair_rounds;
  co.region_tets = dop.self_region;  // the detector reads them in the inner loop: they move with x2
  sc->options = co;
  if (!model) return sc;
  sc->detector = std::make_unique<CollisionDetector>(mesh, sc->proxies, sc->region, sc->obstacles, rest_sdf, dop);
  try {
    sc->solver = std::make_unique<CollisionSolver>(*model, sc->proxies, sc->region, *sc->detector, co);
  } catch (const SolverError& e) {
    // The solver names its own option; a scene sets it as collision.memory_budget_mb.
    const std::string what = e.what();
    const bool budget = what.find("dense_memory_budget_bytes") != std::string::npos;
    throw SolverError(fmt::format("{}: /collision: {}{}", scene.file, what,
                                  budget ? " (in the scene: collision.memory_budget_mb, in MiB)" : ""));
  }
  return sc;
}

}  // namespace xpd
