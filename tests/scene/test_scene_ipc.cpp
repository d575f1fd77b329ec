// IPC barrier contact driven by a scene ("collision": {"method": "ipc"}): the lips scene, coarsened,
// closes its slot without any intersection (exact rational test of the whole boundary in every
// frame) while the penalty version of the same scene penetrates; the scene keys are validated.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <xpd/collision/contact.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_collision.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "collision/exact_intersection.hpp"
#include "test_util.hpp"

using namespace xpd;
using nlohmann::json;

namespace {

json read_json(const std::string& path) { return test::read_json_with_comments(path); }

using test::verbose;

// scenes/lips_ipc.json (or lips.json) on a coarser lattice (16 × 25 × 4 nodes: the slot still two
// cells high), the clamps' full travel in 8 frames.
json coarse_lips(const std::string& file) {
  json j = read_json(std::string(XPD_SOURCE_DIR) + "/scenes/" + file);
  j["mesh"]["nodes"] = {16, 25, 4};
  for (auto& a : j["attachments"])
    if (a.contains("keyframes")) a["keyframes"][1]["frame"] = 8;
  j["solver"]["frames"] = 8;
  j["outputs"]["vtu"] = false;
  return j;
}

TEST(SceneIpc, LipsCloseWithoutIntersectionWhereThePenaltyMethodPenetrates) {
  SceneSimulation ipc(parse_scene(coarse_lips("lips_ipc.json"), "lips_ipc.json", "."));
  SceneSimulation penalty(parse_scene(coarse_lips("lips.json"), "lips.json", "."));
  ASSERT_TRUE(ipc.collision() && ipc.collision()->ipc);
  const Triangles boundary = boundary_faces(ipc.mesh().tets);
  const double dhat = ipc.collision()->ipc->options().dhat;
  int contact_frames = 0;
  double penalty_depth = 0;
  for (int frame = 1; frame <= 8; ++frame) {
    SCOPED_TRACE(frame);
    const FrameStats s = ipc.advance(frame);
    (void)penalty.advance(frame);
    EXPECT_TRUE(s.converged) << s.iterations << " iterations";
    ASSERT_TRUE(ipc.ipc_stats());
    const IpcFrameStats& st = *ipc.ipc_stats();
    std::string first;
    EXPECT_EQ(test::count_intersections(ipc.positions(), boundary, &first), 0) << first;
    if (st.active_pairs > 0) {
      ++contact_frames;
      EXPECT_GT(st.min_distance, 0.0);
      EXPECT_LT(st.min_distance, dhat);
    }
    penalty_depth = std::max(penalty_depth, penalty.collision_stats()->max_penetration);
    if (verbose())
      std::printf("  frame %d: IPC %d iterations, %d pairs, min distance %.3e; penalty max_penetration %.3e\n", frame,
                  s.iterations, st.active_pairs, st.min_distance, penalty.collision_stats()->max_penetration);
  }
  EXPECT_GE(contact_frames, 3);   // the slot closes and the lobes squeeze
  EXPECT_GT(penalty_depth, 0.0);  // springs act only after penetration
}

// The coarse lips with Anderson acceleration (its extrapolated iterates CCD-checked by the frame
// loop) against the plain iteration, both to a tight tolerance: no intersection in any frame, the
// same equilibrium, and Anderson extrapolates (not every iterate rejected).
TEST(SceneIpc, LipsWithAndersonReachThePlainEquilibriumWithoutIntersection) {
  json j = coarse_lips("lips_ipc.json");
  j["solver"]["tolerance"] = 1e-9;
  j["solver"]["max_iterations"] = 4000;
  j["solver"]["accelerator"] = "none";
  SceneSimulation plain(parse_scene(j, "lips_ipc.json", "."));
  j["solver"]["accelerator"] = "anderson";
  SceneSimulation anderson(parse_scene(j, "lips_ipc.json", "."));
  const Triangles boundary = boundary_faces(plain.mesh().tets);
  const double diag = (plain.positions().colwise().maxCoeff() - plain.positions().colwise().minCoeff()).norm();
  int plain_iterations = 0, anderson_iterations = 0, contact_frames = 0;
  for (int frame = 1; frame <= 4; ++frame) {  // contact from frame 3
    SCOPED_TRACE(frame);
    const FrameStats p = plain.advance(frame);
    const FrameStats a = anderson.advance(frame);
    EXPECT_TRUE(p.converged) << p.iterations;
    EXPECT_TRUE(a.converged) << a.iterations;
    EXPECT_LT(a.anderson_rejections, a.iterations);
    plain_iterations += p.iterations;
    anderson_iterations += a.iterations;
    contact_frames += anderson.ipc_stats()->active_pairs > 0;
    std::string first;
    EXPECT_EQ(test::count_intersections(anderson.positions(), boundary, &first), 0) << first;
    EXPECT_LE((anderson.positions() - plain.positions()).cwiseAbs().maxCoeff(), 1e-6 * diag);
    if (verbose())
      std::printf("  frame %d: plain %d, Anderson %d iterations (%d rejected), %d pairs, difference %.2e\n", frame,
                  p.iterations, a.iterations, a.anderson_rejections, anderson.ipc_stats()->active_pairs,
                  (anderson.positions() - plain.positions()).cwiseAbs().maxCoeff() / diag);
  }
  EXPECT_GE(contact_frames, 2);
  EXPECT_LT(anderson_iterations, plain_iterations);
}

// scenes/face_ipc.json as shipped, frames 1-8 (the jaw closes 17°, 1° past the neutral face's
// closed lips; Anderson under the CCD check, tolerance 1e-7): every frame converges, the skin
// around the mouth never intersects itself (exact rational test over the contact surface after
// every frame), and the lips come within d̂ of each other.
TEST(SceneIpc, FaceMouthClosesWithoutIntersection) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "the 55K-tet face, 50 s in the plain build; the same solver and intersection "
      "oracle run there in the lips tests above");
  SceneSimulation sim(load_scene(std::string(XPD_SOURCE_DIR) + "/scenes/face_ipc.json"));
  ASSERT_TRUE(sim.collision() && sim.collision()->ipc);
  const SceneCollision& c = *sim.collision();
  const double dhat = c.ipc->options().dhat;
  const int region = static_cast<int>(c.ipc->region_nodes().size());
  EXPECT_EQ(test::count_intersections_broad_phase(proxy_positions(c.ipc_proxies, sim.mesh().tets, sim.positions()),
                                                  c.ipc_triangles),
            0);
  int contact_frames = 0;
  for (int frame = 1; frame <= 8; ++frame) {
    SCOPED_TRACE(frame);
    const FrameStats s = sim.advance(frame);
    EXPECT_TRUE(s.converged) << s.iterations << " iterations";
    const IpcFrameStats& st = *sim.ipc_stats();
    EXPECT_EQ(test::count_intersections_broad_phase(proxy_positions(c.ipc_proxies, sim.mesh().tets, sim.positions()),
                                                    c.ipc_triangles),
              0);
    if (st.active_pairs > 0) {
      ++contact_frames;
      EXPECT_GT(st.min_distance, 0.0);
      EXPECT_LT(st.min_distance, dhat);
    }
    if (verbose())
      std::printf("  frame %d: %d iterations, %d pairs, min distance %.3e, touched %d of %d region nodes\n", frame,
                  s.iterations, st.active_pairs, st.min_distance, st.max_touched_nodes, region);
  }
  EXPECT_GE(contact_frames, 4);  // the lips meet and press
}

// scenes/sphere_slab_ipc.json on a coarser slab (21 × 21 × 6 nodes; the icosphere then has edges of
// about the slab's, level 3): the sphere presses 0.06 into the slab over frames 1–12 and leaves.
// Every frame converges with the sphere at its keyframed pose, the slab's boundary and the sphere
// never intersect (exact test), and at the deepest frame the slab's top centre lies within d̂
// below the sphere's lowest vertex (its pole, over the centre node).
// Exact intersection count of the body's boundary and the obstacles as they stand.
long intersections_with_obstacles(const SceneSimulation& sim, const Triangles& boundary) {
  const SceneCollision& c = *sim.collision();
  const Points& o = c.ipc_state->obstacle_positions();
  const Eigen::Index n = sim.positions().rows();
  Points x(n + o.rows(), 3);
  x << sim.positions(), o;
  Triangles f(boundary.rows() + c.ipc->obstacle_triangles().rows(), 3);
  f << boundary, c.ipc->obstacle_triangles().array() + static_cast<int>(n);
  return test::count_intersections_broad_phase(x, f);
}

TEST(SceneIpc, SpherePressesTheSlabWithoutIntersection) {
  json j = read_json(std::string(XPD_SOURCE_DIR) + "/scenes/sphere_slab_ipc.json");
  j["mesh"]["nodes"] = {21, 21, 6};
  j["outputs"]["vtu"] = false;
  SceneSimulation sim(parse_scene(j, "sphere_slab_ipc.json", "."));
  ASSERT_TRUE(sim.collision() && sim.collision()->ipc);
  const SceneCollision& c = *sim.collision();
  const double dhat = c.ipc->options().dhat;
  const Triangles boundary = boundary_faces(sim.mesh().tets);
  Eigen::Index centre = 0;
  (sim.mesh().nodes.rowwise() - Eigen::RowVector3d(0.5, 0.5, 0.25)).rowwise().squaredNorm().minCoeff(&centre);
  int contact_frames = 0;
  for (int frame = 1; frame <= 14; ++frame) {
    SCOPED_TRACE(frame);
    const FrameStats s = sim.advance(frame);
    ASSERT_TRUE(sim.ipc_stats());
    const IpcFrameStats& st = *sim.ipc_stats();
    EXPECT_TRUE(s.converged) << s.iterations << " iterations";
    EXPECT_EQ(st.obstacle_lag, 0.0);
    const Points& o = c.ipc_state->obstacle_positions();
    EXPECT_LE((o - c.ipc->obstacle_pose(frame)).cwiseAbs().maxCoeff(), 0.0);
    EXPECT_EQ(intersections_with_obstacles(sim, boundary), 0);
    if (st.active_pairs > 0) {
      ++contact_frames;
      EXPECT_GT(st.min_distance, 0.0);
      EXPECT_LT(st.min_distance, dhat);
    }
    const double pole = o.col(2).minCoeff(), top = sim.positions()(centre, 2);
    if (frame == 12) {
      EXPECT_NEAR(pole, 0.56 - 0.3 - 0.07, 1e-12);  // the scene's centre, radius and frame-12 key
      EXPECT_LT(top, pole);
      EXPECT_GT(top, pole - dhat);
    }
    if (verbose())
      std::printf("  frame %d: %d iterations, %d advances, %d pairs, min distance %.3e, top centre %.6f, pole %.6f\n",
                  frame, s.iterations, st.obstacle_advances, st.active_pairs, st.min_distance, top, pole);
  }
  EXPECT_GE(contact_frames, 10);
}

// A box pressed 0.06 into the coarse slab while turning 30° about z and shifting 0.05: with κ
// fixed at its frame-start value the gaps shrank to a few % of d̂ and frames 10–12 stalled at
// 1,000 iterations with the box up to 6.5e−2 short of its pose; the automatic κ doubles while the
// box lags and a gap is below d̂/10 (ipc_solver.hpp), and every frame converges.
TEST(SceneIpc, TurningBoxPressesTheSlabWithTheAutomaticKappa) {
  json j = read_json(std::string(XPD_SOURCE_DIR) + "/scenes/sphere_slab_ipc.json");
  j["mesh"]["nodes"] = {21, 21, 6};
  j["outputs"]["vtu"] = false;
  j["solver"]["max_iterations"] = 400;
  j["collision"]["obstacles"] = json::parse(R"([{ "type": "box", "center": [0.5, 0.5, 0.36],
      "half_extents": [0.15, 0.1, 0.1],
      "keyframes": [ { "frame": 0 },
                     { "frame": 12, "translation": [0.05, 0, -0.07],
                       "rotation": { "axis": [0, 0, 1], "angle_deg": 30 }, "pivot": [0.5, 0.5, 0.36] } ] }])");
  SceneSimulation sim(parse_scene(j, "box_slab_ipc.json", "."));
  ASSERT_TRUE(sim.collision() && sim.collision()->ipc);
  const IpcModel& model = *sim.collision()->ipc;
  const Triangles boundary = boundary_faces(sim.mesh().tets);
  int raises = 0;
  for (int frame = 1; frame <= 12; ++frame) {
    SCOPED_TRACE(frame);
    const FrameStats s = sim.advance(frame);
    ASSERT_TRUE(sim.ipc_stats());
    const IpcFrameStats& st = *sim.ipc_stats();
    EXPECT_TRUE(s.converged) << s.iterations << " iterations, lag " << st.obstacle_lag;
    EXPECT_EQ(st.obstacle_lag, 0.0);
    EXPECT_EQ(intersections_with_obstacles(sim, boundary), 0);
    EXPECT_GE(st.kappa, model.kappa_min());
    EXPECT_LE(st.kappa, 100 * model.kappa_min() * (1 + 1e-12));
    raises += st.kappa_raises;
    if (verbose())
      std::printf("  frame %d: %d iterations, %d advances, kappa %.3e (%d raises), min distance %.3e\n", frame,
                  s.iterations, st.obstacle_advances, st.kappa, st.kappa_raises, st.min_distance);
  }
  EXPECT_GT(raises, 0);
}

TEST(SceneIpc, KeysOfTheOtherContactModelAreRefused) {
  json j = coarse_lips("lips_ipc.json");
  j["collision"]["stiffness"] = 1e5;
  EXPECT_THROW(parse_scene(j, "a.json", "."), SceneError);
  // IPC obstacles are triangle surfaces: planes and capsules are refused by type, grids by key;
  // the icosphere's max_edge is refused with the penalty methods (their spheres are exact).
  for (const json& o :
       {json{{"type", "plane"}, {"point", {0, 0, 0}}, {"normal", {0, 0, 1}}},
        json{{"type", "mesh"}, {"file", std::string(XPD_SOURCE_DIR) + "/scenes/lips_ipc.json"}, {"cell_size", 0.1}}}) {
    j = coarse_lips("lips_ipc.json");
    j["collision"]["obstacles"] = json::array({o});
    try {
      (void)parse_scene(j, "a.json", ".");
      ADD_FAILURE() << "accepted " << o.dump();
    } catch (const SceneError& e) {
      EXPECT_NE(std::string(e.what()).find("/collision/obstacles/0/"), std::string::npos) << e.what();
    }
  }
  j = coarse_lips("lips.json");
  j["collision"]["obstacles"] =
      json::array({json{{"type", "sphere"}, {"center", {0, 0, 0}}, {"radius", 1}, {"max_edge", 0.1}}});
  EXPECT_THROW(parse_scene(j, "a.json", "."), SceneError);
  j = coarse_lips("lips.json");
  j["collision"]["dhat"] = 0.01;
  try {
    (void)parse_scene(j, "a.json", ".");
    ADD_FAILURE() << "accepted";
  } catch (const SceneError& e) {
    EXPECT_NE(std::string(e.what()).find("/collision/dhat"), std::string::npos) << e.what();
  }
  j = coarse_lips("lips_ipc.json");
  j["collision"]["dhat"] = -1;
  EXPECT_THROW(parse_scene(j, "a.json", "."), SceneError);
  // d̂ above the slot's 0.08 gap: refused when the simulation is built, naming a pair.
  j = coarse_lips("lips_ipc.json");
  j["collision"]["dhat"] = 0.1;
  try {
    SceneSimulation sim(parse_scene(j, "a.json", "."));
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closer than dhat"), std::string::npos) << e.what();
  }
}

// `xpd bench ipc` on the coarse lips at its first squeezed frame: every figure present, the PCG
// baseline reaching the same positions, a penalty scene refused.
TEST(SceneIpc, BenchIpcMeasuresBothSolvesFromOneState) {
  const std::filesystem::path dir = test::scratch_dir("bench_ipc");
  {
    std::ofstream out(dir / "lips.json");
    out << coarse_lips("lips_ipc.json").dump();
    std::ofstream pen(dir / "penalty.json");
    pen << coarse_lips("lips.json").dump();
  }
  const std::string cmd = std::string("\"") + XPD_CLI_PATH + "\" bench ipc --json --frame 4 --scene \"" +
                          (dir / "lips.json").string() + "\" > \"" + (dir / "out.json").string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const json j = test::read_json_file(dir / "out.json");
  for (const char* key :
       {"ipc_global_ms", "pcg_global_ms", "ipc_frame_ms", "pcg_frame_ms", "plain_frame_ms", "touched_vertices", "rank",
        "global_step_ratio", "frame_ratio", "ipc_iteration_ms", "pcg_iteration_ms", "iteration_ratio"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j["touched_vertices"].get<int>(), 0);
  EXPECT_GT(j["pcg_cg_iterations"].get<int>(), 0);
  for (const char* solve : {"ipc", "pcg"}) {  // the per-iteration figures are the frame's over its iterations
    const double frame_ms = j[std::string(solve) + "_frame_ms"].get<double>();
    EXPECT_NEAR(
        j[std::string(solve) + "_iteration_ms"].get<double>() * j[std::string(solve) + "_iterations"].get<int>(),
        frame_ms, 1e-12 * frame_ms)
        << solve;
  }
  EXPECT_LE(j["same_result"].get<double>(), 1e-6 * 1.6);  // 1e-6 of the block's diagonal
  const std::string bad = std::string("\"") + XPD_CLI_PATH + "\" bench ipc --scene \"" +
                          (dir / "penalty.json").string() + "\" > /dev/null 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  // With an obstacle (the coarse sphere and slab, frame 6): the PCG rerun of the frame has the
  // sphere too, starting where the scene's stood, and reaches the same positions.
  {
    json slab = read_json(std::string(XPD_SOURCE_DIR) + "/scenes/sphere_slab_ipc.json");
    slab["mesh"]["nodes"] = {21, 21, 6};
    slab["outputs"]["vtu"] = false;
    std::ofstream(dir / "slab.json") << slab.dump();
  }
  const std::string slab_cmd = std::string("\"") + XPD_CLI_PATH + "\" bench ipc --json --frame 6 --scene \"" +
                               (dir / "slab.json").string() + "\" > \"" + (dir / "slab_out.json").string() + "\"";
  ASSERT_EQ(std::system(slab_cmd.c_str()), 0) << slab_cmd;
  const json js = test::read_json_file(dir / "slab_out.json");
  EXPECT_GT(js["active_pairs"].get<int>(), 0);
  EXPECT_LE(js["same_result"].get<double>(), 1e-6 * 1.44);  // 1e-6 of the slab's diagonal
}

}  // namespace
