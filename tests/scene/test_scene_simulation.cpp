// Shipped scenes run end to end through the run writer (a few frames each) and report complete
// statistics; scene-level errors from the model name the scene and the offending component; a
// simulation can be moved mid-run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "test_util.hpp"

using namespace xpd;

namespace {

nlohmann::json run_library(const std::string& scene, const std::filesystem::path& out, int frames) {
  SceneSimulation sim(load_scene(scene));
  RunOptions o;
  o.max_frames = frames;
  (void)run_scene(sim, out.string(), o);
  std::ifstream in(out / "stats.json");
  EXPECT_TRUE(in.good()) << "no stats.json for " << scene;
  return in.good() ? nlohmann::json::parse(in) : nlohmann::json{};
}

}  // namespace

TEST(ValidationScenes, ShippedScenesRunAndReportStatistics) {
  const std::string root = XPD_SOURCE_DIR;
  struct Case {
    const char* scene;
    int frames;
  };
  // The first frames of each shipped scene (cantilever_end_shear: the first load step).
  const Case cases[] = {{"scenes/armadillo_swing.json", 2},
                        {"scenes/twist.json", 2},
                        {"scenes/hand.json", 1},
                        {"scenes/cantilever.json", 2},
                        {"scenes/validation/cantilever_end_shear.json", 1},
                        {"scenes/squash.json", 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scene);
    const auto out = test::scratch_dir(std::string("scene_") + std::to_string(&c - cases));
    const nlohmann::json stats = run_library(root + "/" + c.scene, out, c.frames);
    ASSERT_TRUE(stats.contains("frames"));
    ASSERT_EQ(stats["frames"].size(), static_cast<size_t>(c.frames + 1));
    EXPECT_GT(stats.value("nodes", 0), 0);
    EXPECT_GT(stats.value("tets", 0), 0);
    EXPECT_EQ(stats.value("unconverged_frames", -1), 0);
    for (int f = 1; f <= c.frames; ++f) {
      const nlohmann::json& s = stats["frames"][static_cast<size_t>(f)];
      EXPECT_EQ(s["frame"].get<int>(), f);
      for (const char* key : {"energy", "residual", "relative_residual", "wall_ms"}) {
        ASSERT_TRUE(s.contains(key)) << key;
        EXPECT_TRUE(std::isfinite(s[key].get<double>())) << key;
      }
      EXPECT_GT(s["iterations"].get<int>(), 0);
      EXPECT_TRUE(s["converged"].get<bool>()) << "frame " << f << " residual " << s["residual"];
      EXPECT_GT(s["wall_ms"].get<double>(), 0.0);
      for (const char* key : {"local", "rhs", "solve", "other"}) {
        ASSERT_TRUE(s["timings_ms"].contains(key)) << key;
        EXPECT_GE(s["timings_ms"][key].get<double>(), 0.0) << key;
      }
      EXPECT_GT(s["timings_ms"]["solve"].get<double>(), 0.0);
    }
    // Frame 0 and the last computed frame are always written.
    EXPECT_TRUE(std::filesystem::exists(out / "frames" / "0000.vtu"));
    char last[16];
    std::snprintf(last, sizeof last, "%04d.vtu", c.frames);
    EXPECT_TRUE(std::filesystem::exists(out / "frames" / last));
  }
}

TEST(ValidationScenes, UnattachedComponentInQuasistaticSceneNamesTheComponent) {
  // Two separate tets; only the first is attached.
  const auto dir = test::scratch_dir("unattached");
  {
    std::ofstream m(dir / "two.mesh");
    m << "MeshVersionFormatted 1\nDimension 3\nVertices\n8\n"
         "0 0 0 0\n1 0 0 0\n0 1 0 0\n0 0 1 0\n"
         "5 0 0 0\n6 0 0 0\n5 1 0 0\n5 0 1 0\n"
         "Tetrahedra\n2\n1 2 3 4 0\n5 6 7 8 0\nEnd\n";
    std::ofstream s(dir / "scene.json");
    s << R"({ "mesh": "two.mesh", "materials": [{ "mu": 1000 }],
             "selections": { "left": { "type": "box", "min": [-1, -1, -1], "max": [2, 2, 2] } },
             "attachments": [{ "type": "fixed", "selection": "left", "stiffness": 1e5 }],
             "loads": [{ "type": "gravity", "acceleration": [0, 0, -9.81] }] })";
  }
  try {
    SceneSimulation sim(load_scene((dir / "scene.json").string()));
    FAIL() << "expected a SolverError";
  } catch (const SolverError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("scene.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("component #1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4 nodes"), std::string::npos) << msg;
    EXPECT_NE(msg.find("has no attachment"), std::string::npos) << msg;
  }
}

TEST(ValidationScenes, ExtrapolatedWarmStartSavesIterations) {
  // scenes/cantilever.json (10 quasistatic frames under a ramped load), with and without the
  // extrapolated warm start: both converge, to the same equilibrium, the warm start in fewer
  // iterations.
  const std::string scene = std::string(XPD_SOURCE_DIR) + "/scenes/cantilever.json";
  int iterations[2] = {0, 0};
  Points final_x[2];
  for (int warm = 0; warm < 2; ++warm) {
    SceneSimulation sim(load_scene(scene));
    sim.set_extrapolation(warm == 1);
    int extrapolated = 0;
    for (int f = 1; f <= sim.num_frames(); ++f) {
      const FrameStats st = sim.advance(f);
      EXPECT_TRUE(st.converged) << "frame " << f;
      iterations[warm] += st.iterations;
      extrapolated += sim.last_frame_extrapolated() ? 1 : 0;
    }
    final_x[warm] = sim.positions();
    if (warm == 1) {
      EXPECT_GT(extrapolated, 0);
    }
  }
  if (std::getenv("XPD_TEST_VERBOSE"))
    std::printf("  cantilever.json PD iterations: cold %d, extrapolated %d\n", iterations[0], iterations[1]);
  EXPECT_LT(iterations[1], iterations[0]);
  const double L = (final_x[0].colwise().maxCoeff() - final_x[0].colwise().minCoeff()).norm();
  EXPECT_LE((final_x[0] - final_x[1]).rowwise().norm().maxCoeff(), 1e-4 * L);
}

TEST(ValidationScenes, MovedSimulationContinuesIdentically) {
  // The model lives on the heap and the collision parts hold it by reference: a simulation moved
  // between frames (e.g. into a container) continues bit for bit like the one left in place.
  // The coarse sphere_slab: the shipped mesh took 41 s of the plain build for nothing this test checks.
  const nlohmann::json j = test::coarse_sphere_slab();
  const std::string dir = std::string(XPD_SOURCE_DIR) + "/scenes";
  SceneSimulation a(parse_scene(j, "sphere_slab.json", dir));
  SceneSimulation b(parse_scene(j, "sphere_slab.json", dir));
  a.advance(1);
  b.advance(1);
  std::vector<SceneSimulation> moved;
  moved.push_back(std::move(b));
  SceneSimulation c = std::move(moved.back());
  for (int f = 2; f <= 3; ++f) {  // in contact from frame 1
    const FrameStats sa = a.advance(f);
    const FrameStats sc = c.advance(f);
    EXPECT_EQ(sa.iterations, sc.iterations) << "frame " << f;
  }
  ASSERT_TRUE(a.collision_stats() && c.collision_stats());
  EXPECT_GT(c.collision_stats()->active_proxies, 0);
  EXPECT_EQ((a.positions() - c.positions()).cwiseAbs().maxCoeff(), 0.0);
}

// A bone attachment's pose_frame: the bones reach the pose at that frame (slerped from the rest
// pose as a scene of that many frames would) and hold it afterwards.
TEST(ValidationScenes, BonePoseFrameReachesThePoseThenHoldsIt) {
  const std::string dir = std::string(XPD_SOURCE_DIR) + "/scenes";
  auto arm = [&](int frames, int pose_frame) {
    nlohmann::json j = nlohmann::json::parse(R"({
      "mesh": { "generator": "lattice", "surface": "../../shared/data/libigl-tutorial-data/arm.obj", "resolution": 12 },
      "selections": { "forearm": { "type": "capsule", "a": [0.1949, 0.1319, -0.0224],
                                   "b": [0.5987815, -0.077609889, 0.065252126], "radius": 0.05 } },
      "materials": [ { "mu": 1e4 } ],
      "attachments": [ { "type": "bone", "selection": "forearm", "stiffness": 1e6,
                         "skeleton": "../../shared/data/libigl-tutorial-data/arm.tgf",
                         "pose": "data/elbow-flex-140.dmat", "bones": [0, 1, 2, 3] },
                       { "type": "fixed", "selection": "all", "stiffness": 1 } ]
    })");
    j["solver"] = {{"frames", frames}};
    if (pose_frame > 0) j["attachments"][0]["pose_frame"] = pose_frame;
    return SceneSimulation(parse_scene(j, "arm.json", dir));
  };
  SceneSimulation held = arm(6, 3), reference = arm(3, 0);
  std::vector<Points> targets;
  for (int f = 1; f <= 6; ++f) {
    held.advance(f);
    reference.advance(std::min(f, 3));
    const Points& t = held.state().inputs.attachment_targets;
    EXPECT_TRUE((t.array() == reference.state().inputs.attachment_targets.array()).all()) << "frame " << f;
    targets.push_back(t);
  }
  EXPECT_GT((targets[0] - targets[2]).norm(), 0.1);  // the forearm moves up to frame 3
  EXPECT_TRUE((targets[2].array() == targets[5].array()).all());
}

// A mesh whose tets overlap at rest (two copies of one box on their own, coincident nodes, as a
// cut duplicates tets): `coincident_nodes` admits it, and `embedded_tets` binds each half of the
// embedded points to its own copy. The second copy is moved rigidly; its points follow it, the
// first copy's stay. Located instead, every point lands in one copy (the locator cannot tell
// them apart), so half of them would stay behind.
TEST(ValidationScenes, EmbeddedTetsBindPointsToOverlappingCopies) {
  const auto dir = test::scratch_dir("embedded_tets");
  const TetMesh box = make_box(3, 2, 2, Vec3(0, 0, 0), Vec3(1, 0.5, 0.5));
  const Eigen::Index nv = box.nodes.rows(), nt = box.tets.rows();
  {
    std::ofstream f(dir / "two.mesh");
    f << "MeshVersionFormatted 2\nDimension 3\nVertices\n" << 2 * nv << "\n";
    for (int c = 0; c < 2; ++c)
      for (Eigen::Index i = 0; i < nv; ++i)
        f << fmt::format("{:.17g} {:.17g} {:.17g} 0\n", box.nodes(i, 0), box.nodes(i, 1), box.nodes(i, 2));
    f << "Tetrahedra\n" << 2 * nt << "\n";
    for (int c = 0; c < 2; ++c)
      for (Eigen::Index t = 0; t < nt; ++t)
        f << box.tets(t, 0) + 1 + c * nv << " " << box.tets(t, 1) + 1 + c * nv << " " << box.tets(t, 2) + 1 + c * nv
          << " " << box.tets(t, 3) + 1 + c * nv << " 0\n";
    f << "End\n";
  }
  // Six points inside the box (the same three twice) and one triangle per half.
  SurfaceMesh pts;
  pts.nodes.resize(6, 3);
  pts.nodes << 0.2, 0.1, 0.1, 0.5, 0.25, 0.3, 0.9, 0.4, 0.2, 0.2, 0.1, 0.1, 0.5, 0.25, 0.3, 0.9, 0.4, 0.2;
  pts.triangles.resize(2, 3);
  pts.triangles << 0, 1, 2, 3, 4, 5;
  io::write_surface((dir / "points.obj").string(), pts);
  const PointEmbedding located = embed_points(box, pts.nodes);
  ASSERT_TRUE(located.all_inside());
  {
    std::ofstream f(dir / "points_tets.txt");
    f << "# tet of each point: the first three in copy 0, the others in copy 1\n";
    for (int k = 0; k < 6; ++k) f << located.tet_of_point[std::size_t(k)] + (k >= 3 ? nt : 0) << "\n";
  }
  std::string second;
  for (Eigen::Index i = 0; i < nv; ++i) second += std::to_string(nv + i) + " ";
  std::ofstream(dir / "second.txt") << second << "\n";
  std::string first;
  for (Eigen::Index i = 0; i < nv; ++i) first += std::to_string(i) + " ";
  std::ofstream(dir / "first.txt") << first << "\n";
  const Vec3 move(0.3, -0.1, 0.2);
  nlohmann::json j = {
      {"mesh",
       {{"file", "two.mesh"},
        {"embedded_surface", "points.obj"},
        {"embedded_tets", "points_tets.txt"},
        {"coincident_nodes", true}}},
      {"materials", {{{"mu", 1e4}}}},
      {"selections",
       {{"first", {{"type", "indices"}, {"file", "first.txt"}}},
        {"second", {{"type", "indices"}, {"file", "second.txt"}}}}},
      {"attachments",
       {{{"selection", "first"}, {"type", "fixed"}, {"stiffness", 1e6}},
        {{"selection", "second"},
         {"type", "rigid"},
         {"stiffness", 1e6},
         {"keyframes", {{{"frame", 0}}, {{"frame", 1}, {"translation", {move.x(), move.y(), move.z()}}}}}}}},
      {"solver", {{"type", "quasistatic"}, {"frames", 1}, {"tolerance", 1e-10}}}};
  SceneSimulation sim(parse_scene(j, "two.json", dir.string()));
  sim.advance(1);
  const SurfaceMesh s = *sim.embedded_surface();
  for (int k = 0; k < 6; ++k) {
    const Vec3 expected = pts.nodes.row(k).transpose() + (k >= 3 ? move : Vec3::Zero());
    EXPECT_LT((s.nodes.row(k).transpose() - expected).norm(), 1e-8) << "point " << k;
  }

  // Without the bindings every point is located in one copy: some point misses its motion.
  nlohmann::json located_scene = j;
  located_scene["mesh"].erase("embedded_tets");
  SceneSimulation loc(parse_scene(located_scene, "two.json", dir.string()));
  loc.advance(1);
  const SurfaceMesh sl = *loc.embedded_surface();
  double worst = 0;
  for (int k = 0; k < 6; ++k) {
    const Vec3 expected = pts.nodes.row(k).transpose() + (k >= 3 ? move : Vec3::Zero());
    worst = std::max(worst, (sl.nodes.row(k).transpose() - expected).norm());
  }
  EXPECT_GT(worst, 0.1);

  // Coincident nodes are refused unless declared; a binding file of the wrong length is named.
  nlohmann::json strict = j;
  strict["mesh"].erase("coincident_nodes");
  EXPECT_THROW(SceneSimulation(parse_scene(strict, "two.json", dir.string())), Error);
  std::ofstream(dir / "short.txt") << "0 1 2\n";
  nlohmann::json short_file = j;
  short_file["mesh"]["embedded_tets"] = "short.txt";
  try {
    SceneSimulation bad(parse_scene(short_file, "two.json", dir.string()));
    ADD_FAILURE() << "a short binding file was accepted";
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/mesh/embedded_tets");
    EXPECT_NE(std::string(e.what()).find("3 tets for the 6 vertices"), std::string::npos) << e.what();
  }
  nlohmann::json no_surface = j;
  no_surface["mesh"].erase("embedded_surface");
  EXPECT_THROW(parse_scene(no_surface, "two.json", dir.string()), SceneError);
  std::filesystem::remove_all(dir);
}
