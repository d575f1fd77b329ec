// Two-way continuous collision handling driven by a scene ("two_way"): the mat of
// scenes/mat_twist.json, coarsened (mat20x20, 800 nodes) and twisted faster (the first 9 frames of
// 32), stays intersection-free by an exact rational test of its whole boundary after every frame,
// while the same scene without the projection passes through itself; every projection converges;
// the keys are validated and an intersecting start is refused naming two triangles.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "collision/collision_fixtures.hpp"
#include "collision/exact_intersection.hpp"
#include "test_util.hpp"

using namespace xpd;
using nlohmann::json;

namespace {

using test::verbose;

// scenes/mat_twist.json on mat20x20 with the two turns in `frames` frames (keys every 90°).
json coarse_mat(int frames) {
  json j = test::read_json_with_comments(std::string(XPD_SOURCE_DIR) + "/scenes/mat_twist.json");
  j["mesh"]["file"] = test::data_path("ipc-tetmeshes/mat20x20.msh");
  for (auto& a : j["attachments"]) {
    auto& keys = a["keyframes"];
    const auto n = static_cast<int>(keys.size()) - 1;
    for (int k = 0; k <= n; ++k) keys[static_cast<std::size_t>(k)]["frame"] = k * frames / n;
  }
  j["solver"]["frames"] = frames;
  j["outputs"]["vtu"] = false;
  j["outputs"]["surface"] = nullptr;
  return j;
}

TEST(SceneTwoWay, TwistedMatStaysIntersectionFreeWherePlainPdPassesThroughItself) {
  // The first 9 frames of a 32-frame schedule: contact from frame 5, plain PD through itself from 6.
  const int frames = 32, run = 9;
  json with = coarse_mat(frames), without = coarse_mat(frames);
  without.erase("two_way");
  SceneSimulation tw(parse_scene(with, "mat.json", "."));
  SceneSimulation plain(parse_scene(without, "plain.json", "."));
  const Triangles faces = boundary_faces(tw.mesh().tets);
  int plain_frames_intersecting = 0, unconverged = 0, contact_frames = 0, max_steps = 0, steps = 0;
  for (int frame = 1; frame <= run; ++frame) {
    SCOPED_TRACE(frame);
    tw.advance(frame);
    plain.advance(frame);
    std::string first;
    ASSERT_EQ(test::count_intersections(tw.positions(), faces, &first), 0) << first;
    const int plain_hits = test::count_intersections(plain.positions(), faces);
    plain_frames_intersecting += plain_hits > 0;
    const auto& st = tw.two_way_stats();
    ASSERT_TRUE(st.has_value());
    unconverged += !st->projection.converged;
    contact_frames += st->projection.max_active > 0;
    max_steps = std::max(max_steps, st->projection.steps);
    steps += st->projection.steps;
    EXPECT_GT(st->projection.min_distance, 0.0);
    if (verbose())
      std::printf(
          "  frame %d: %d steps, %d searches, %zu pairs within delta, min distance %.3e, stretch %.3f, %d "
          "inverted tets, %.1f ms; plain PD: %d intersecting edge-triangle pairs\n",
          frame, st->projection.steps, st->projection.searches, st->projection.max_active, st->projection.min_distance,
          st->projection.max_stretch, st->inverted_tets, st->projection.ms_total, plain_hits);
  }
  EXPECT_GT(plain_frames_intersecting, 0);  // the test can fail: without the projection the mat self-intersects
  EXPECT_GT(contact_frames, 0);
  EXPECT_EQ(unconverged, 0);
  if (verbose())
    std::printf("  steps per frame: mean %.1f, max %d; plain PD intersecting in %d of %d frames\n", double(steps) / run,
                max_steps, plain_frames_intersecting, run);
}

TEST(SceneTwoWay, BadKeysAreNamed) {
  struct Bad {
    const char* key;
    json value;
  };
  for (const Bad& b :
       {Bad{"gamma", 1.0}, Bad{"sigma", 0.5}, Bad{"delta", -1.0}, Bad{"max_steps", 0}, Bad{"tolerance", 2.0},
        Bad{"constraint", "soft"}, Bad{"min_volume", 1.0}, Bad{"rest_fraction", -0.1}, Bad{"contact_forces", "yes"},
        Bad{"forward", "fast"}, Bad{"frobnicate", 1}}) {
    SCOPED_TRACE(b.key);
    json j = coarse_mat(8);
    j["two_way"][b.key] = b.value;
    try {
      (void)parse_scene(j, "a.json", ".");
      ADD_FAILURE() << "accepted";
    } catch (const SceneError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("/two_way")), std::string::npos) << e.what();
      if (std::string(b.key) != "frobnicate") {
        EXPECT_NE(std::string(e.what()).find(b.key), std::string::npos) << e.what();
      }
    }
  }
  json j = coarse_mat(8);
  j["two_way"] = {{"delta", 0.01}, {"d_min", 0.005}};
  EXPECT_THROW((void)parse_scene(j, "a.json", "."), SceneError);
  // An explicit d_min below the automatic delta is found when the mesh is known.
  j = coarse_mat(8);
  j["two_way"] = {{"d_min", 1e-6}};
  EXPECT_THROW(SceneSimulation(parse_scene(j, "a.json", ".")), SceneError);
  // IPC and two-way are alternatives.
  j = coarse_mat(8);
  j["collision"] = {{"method", "ipc"}};
  EXPECT_THROW((void)parse_scene(j, "a.json", "."), SceneError);
}

// Two tets that overlap (a TetGen file written here): building the simulation refuses the start.
TEST(SceneTwoWay, IntersectingStartIsRefusedNamingTwoTriangles) {
  const std::filesystem::path dir = test::scratch_dir("two_way_overlap");
  {
    std::ofstream node(dir / "two.node"), ele(dir / "two.ele");
    node << "8 3 0 0\n0 0 0 0\n1 1 0 0\n2 0 1 0\n3 0 0 1\n4 0.2 0.2 0.2\n5 1.2 0.2 0.2\n6 0.2 1.2 0.2\n7 0.2 0.2 1.2\n";
    ele << "2 4 0\n0 0 1 2 3\n1 4 5 6 7\n";
  }
  const json j = {{"mesh", {{"file", (dir / "two.node").string()}}},
                  {"materials", {{{"mu", 1e3}, {"density", 1000}}}},
                  {"attachments", {{{"type", "fixed"}, {"selection", "all"}, {"stiffness", 1e5}}}},
                  {"solver", {{"type", "implicit_euler"}, {"frames", 1}}},
                  {"two_way", json::object()}};
  try {
    SceneSimulation sim(parse_scene(j, "overlap.json", "."));
    ADD_FAILURE() << "accepted";
  } catch (const CollisionError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("overlap.json"), std::string::npos) << m;
    EXPECT_NE(m.find("meets triangle"), std::string::npos) << m;
    EXPECT_NE(m.find("triangle "), std::string::npos) << m;
  }
  // Without "two_way" the same mesh runs (nothing checks it).
  json plain = j;
  plain.erase("two_way");
  EXPECT_NO_THROW(SceneSimulation(parse_scene(plain, "overlap.json", ".")));
}

// A kinematic plate ("two_way": {"obstacles": [{"type": "box", ...}]}) pressed 5 cm into a soft
// block whose base is held: after every frame the block's boundary and the plate's triangles are
// intersection-free together (exact test), the projection converges, the plate reaches its
// keyframed pose (the block gives way) and the block's top stays under the plate.
TEST(SceneTwoWay, KinematicPlateObstaclePressesABlockWithoutIntersection) {
  const json j = {{"mesh", {{"generator", "box"}, {"nodes", {5, 5, 3}}, {"max", {0.4, 0.4, 0.16}}}},
                  {"selections", {{"base", {{"type", "half_space"}, {"normal", {0, 0, -1}}, {"offset", -0.01}}}}},
                  {"materials", {{{"mu", 1e3}, {"density", 1000}}}},
                  {"attachments", {{{"type", "fixed"}, {"selection", "base"}, {"stiffness", 1e5}}}},
                  {"solver", {{"type", "implicit_euler"}, {"time_step", 0.01}, {"frames", 10}, {"tolerance", 1e-6}}},
                  {"two_way",
                   {{"obstacles",
                     {{{"type", "box"},
                       {"center", {0.2, 0.2, 0.25}},
                       {"half_extents", {0.3, 0.3, 0.04}},
                       {"keyframes", {{{"frame", 0}}, {{"frame", 10}, {"translation", {0, 0, -0.1}}}}}}}}}}};
  SceneSimulation sim(parse_scene(j, "plate.json", "."));
  const Triangles body = boundary_faces(sim.mesh().tets);
  const Triangles& plate = sim.two_way_obstacle_faces();
  ASSERT_EQ(plate.rows(), 12);
  const auto n = static_cast<int>(sim.mesh().nodes.rows());
  Triangles faces(body.rows() + plate.rows(), 3);
  faces << body, plate.array() + n;
  for (int frame = 1; frame <= 10; ++frame) {
    SCOPED_TRACE(frame);
    sim.advance(frame);
    const Points& p = sim.two_way_obstacle_positions();
    Points all(n + p.rows(), 3);
    all << sim.positions(), p;
    std::string first;
    ASSERT_EQ(test::count_intersections(all, faces, &first), 0) << first;
    const auto& st = sim.two_way_stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->projection.converged) << st->projection.max_r;
    EXPECT_EQ(st->inverted_tets, 0);
    const double plate_bottom = p.col(2).minCoeff(), body_top = sim.positions().col(2).maxCoeff();
    EXPECT_NEAR(plate_bottom, 0.21 - 0.01 * frame, 1e-9);
    EXPECT_LT(body_top, plate_bottom);
    if (verbose())
      std::printf("  frame %d: %d steps, plate bottom %.4f, block top %.4f, closest pair %.3e\n", frame,
                  st->projection.steps, plate_bottom, body_top, st->projection.min_distance);
  }
  EXPECT_LT(sim.positions().col(2).maxCoeff(), 0.115);  // pushed 4.5 cm or more below its rest top (0.16)

  // The run writer puts the obstacles where they stand beside the surfaces: obstacles/NNNN.ply.
  json written = j;
  written["outputs"] = {{"every", 5}, {"vtu", false}, {"surface", "ply"}};
  SceneSimulation run(parse_scene(written, "plate.json", "."));
  const std::filesystem::path out = test::scratch_dir("two_way_obstacles") / "out";
  (void)run_scene(run, out.string());
  for (const char* name : {"0000.ply", "0005.ply", "0010.ply"}) {
    SCOPED_TRACE(name);
    const SurfaceMesh o = io::read_surface((out / "obstacles" / name).string());
    ASSERT_EQ(o.nodes.rows(), 8);
    EXPECT_EQ(o.triangles, plate);
  }
  const SurfaceMesh last = io::read_surface((out / "obstacles" / "0010.ply").string());
  EXPECT_EQ(last.nodes, run.two_way_obstacle_positions());  // PLY stores doubles

  // Only triangle surfaces are two-way obstacles.
  json bad = j;
  bad["two_way"]["obstacles"][0] = {{"type", "sphere"}, {"center", {0, 0, 1}}, {"radius", 0.1}};
  try {
    (void)parse_scene(bad, "plate.json", ".");
    ADD_FAILURE() << "accepted";
  } catch (const SceneError& e) {
    EXPECT_NE(std::string(e.what()).find("/two_way/obstacles/0/type"), std::string::npos) << e.what();
  }
}

// The inversion counts of a frame: the block's centre node (interior, on no contact triangle) is
// dragged by a stiff rigid attachment far past its neighbours, so the PD solution itself inverts
// tets around it. target_inverted_tets counts the PD solution the projection starts from (frame 1:
// the same solve as the scene without "two_way", counted independently), inverted_tets the
// projection's result (its volume floors push back on the inversions).
TEST(SceneTwoWay, InversionsOfThePdSolutionAreCountedApartFromTheProjections) {
  json j = {{"mesh", {{"generator", "box"}, {"nodes", {5, 5, 3}}, {"max", {0.4, 0.4, 0.16}}}},
            {"selections", {{"base", {{"type", "half_space"}, {"normal", {0, 0, -1}}, {"offset", -0.01}}}}},
            {"materials", {{{"mu", 1e3}, {"density", 1000}}}},
            {"attachments", {{{"type", "fixed"}, {"selection", "base"}, {"stiffness", 1e5}}}},
            {"solver", {{"type", "quasistatic"}, {"frames", 2}, {"tolerance", 1e-8}}}};
  const Points rest = SceneSimulation(parse_scene(j, "drag.json", ".")).mesh().nodes;
  Eigen::Index centre = 0;
  (rest.rowwise() - Eigen::RowVector3d(0.2, 0.2, 0.08)).rowwise().squaredNorm().minCoeff(&centre);
  j["selections"]["centre"] = {{"type", "indices"}, {"nodes", {centre}}};
  j["attachments"].push_back({{"type", "rigid"},
                              {"selection", "centre"},
                              {"stiffness", 1e7},
                              {"keyframes", {{{"frame", 0}}, {{"frame", 2}, {"translation", {0.25, 0, 0}}}}}});
  auto inverted = [](const SceneSimulation& s) {
    return mesh_quality(TetMesh{s.positions(), s.mesh().tets, {}, {}}).num_inverted;
  };
  SceneSimulation plain(parse_scene(j, "drag.json", "."));
  plain.advance(1);
  const int plain_inverted = inverted(plain);
  ASSERT_GT(plain_inverted, 0);  // the fixture inverts tets by PD alone

  j["two_way"] = json::object();
  SceneSimulation sim(parse_scene(j, "drag.json", "."));
  const Triangles body = boundary_faces(sim.mesh().tets);
  for (int frame = 1; frame <= 2; ++frame) {
    SCOPED_TRACE(frame);
    sim.advance(frame);
    ASSERT_EQ(test::count_intersections(sim.positions(), body), 0);
    const auto& st = sim.two_way_stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->projection.converged);
    if (frame == 1) {
      EXPECT_EQ(st->target_inverted_tets, plain_inverted);
    }
    EXPECT_EQ(st->inverted_tets, inverted(sim));
    if (verbose())
      std::printf("  frame %d: %d inverted in the PD solution, %d after the projection (max |x - y| %.3g)\n", frame,
                  st->target_inverted_tets, st->inverted_tets, st->projection.max_displacement);
  }
}

// An embedded surface is the contact surface: a ball (icosphere, radius 10 cm) embedded in a BCC
// lattice ("generator": "lattice") and pressed by a kinematic plate 5 cm down. The ball's surface
// and the plate stay intersection-free (exact test) in every frame, while the lattice's nodes,
// which stick out of the ball by up to a cell, pass into the plate: the projection moved the
// drawn surface, not the lattice's boundary. Quasistatic (the projection after each solve).
TEST(SceneTwoWay, EmbeddedSurfaceIsTheContactSurface) {
  const std::filesystem::path dir = test::scratch_dir("two_way_embedded");
  const SurfaceMesh ball = test::icosphere(3, Vec3(0, 0, 0.1), 0.1);
  io::write_surface((dir / "ball.obj").string(), ball);
  const json j = {{"mesh", {{"generator", "lattice"}, {"surface", (dir / "ball.obj").string()}, {"resolution", 6}}},
                  {"selections", {{"base", {{"type", "half_space"}, {"normal", {0, 0, -1}}, {"offset", -0.03}}}}},
                  {"materials", {{{"mu", 1e3}, {"density", 1000}}}},
                  {"attachments", {{{"type", "fixed"}, {"selection", "base"}, {"stiffness", 1e5}}}},
                  {"solver", {{"type", "quasistatic"}, {"frames", 10}, {"tolerance", 1e-6}}},
                  {"two_way",
                   {{"obstacles",
                     {{{"type", "box"},
                       {"center", {0, 0, 0.25}},
                       {"half_extents", {0.2, 0.2, 0.04}},
                       {"keyframes", {{{"frame", 0}}, {{"frame", 10}, {"translation", {0, 0, -0.06}}}}}}}}}}};
  SceneSimulation sim(parse_scene(j, "ball.json", "."));
  ASSERT_TRUE(sim.embedding().has_value());
  const Triangles& plate = sim.two_way_obstacle_faces();
  const auto nb = static_cast<int>(ball.nodes.rows());
  ASSERT_EQ(sim.two_way()->num_contact_points(), nb + 8);
  Triangles faces(ball.triangles.rows() + plate.rows(), 3);
  faces << ball.triangles, plate.array() + nb;
  int lattice_into_plate = 0;
  for (int frame = 1; frame <= 10; ++frame) {
    SCOPED_TRACE(frame);
    sim.advance(frame);
    const std::optional<SurfaceMesh> skin = sim.embedded_surface();  // what the output draws
    ASSERT_TRUE(skin.has_value());
    const Points& p = sim.two_way_obstacle_positions();
    Points all(nb + p.rows(), 3);
    all << skin->nodes, p;
    std::string first;
    ASSERT_EQ(test::count_intersections(all, faces, &first), 0) << first;
    const auto& st = sim.two_way_stats();
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->projection.converged) << st->projection.max_r;
    const double plate_bottom = p.col(2).minCoeff(), skin_top = skin->nodes.col(2).maxCoeff();
    EXPECT_NEAR(plate_bottom, 0.21 - 0.006 * frame, 1e-9);
    EXPECT_LT(skin_top, plate_bottom);
    lattice_into_plate += sim.positions().col(2).maxCoeff() > plate_bottom;
    if (verbose())
      std::printf("  frame %d: %d steps, plate bottom %.4f, skin top %.4f, lattice top %.4f, closest %.3e\n", frame,
                  st->projection.steps, plate_bottom, skin_top, sim.positions().col(2).maxCoeff(),
                  st->projection.min_distance);
  }
  EXPECT_GT(lattice_into_plate, 0);  // the lattice's boundary is not what the projection keeps apart
  EXPECT_LT(sim.embedded_surface()->nodes.col(2).maxCoeff(), 0.16);  // pressed ≥ 4 cm below its rest top (0.2)
}

}  // namespace
