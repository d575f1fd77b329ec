// The run writer (scene/run_writer.hpp): what a run writes (docs/output-format.md), through the
// library, as every front end writes it: scene.json's overlay, every frame with the requested
// fields, stats.json with per-frame and collision statistics, no temporaries left behind.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  EXPECT_TRUE(fs::is_regular_file(p)) << p;
  return test::read_json_file(p);
}
using test::temporaries;

TEST(RunWriter, WritesSceneOverlayFramesAndFields) {
  const fs::path work = test::scratch_dir("run_output_cli");
  const fs::path scene = work / "tiny.json";
  std::ofstream(scene) << R"({
    "mesh": { "generator": "box", "nodes": [4, 2, 2], "min": [0, 0, 0], "max": [1, 0.3, 0.3] },
    "selections": {
      "clamp": { "type": "half_space", "normal": [1, 0, 0], "offset": 0.001 },
      "tip": { "type": "box", "min": [0.9, -1, -1], "max": [2, 1, 1] }
    },
    "materials": [{ "youngs_modulus": 1e5, "poisson_ratio": 0.0, "density": 1000 }],
    "attachments": [{ "type": "fixed", "selection": "clamp", "stiffness": 1e7 }],
    "loads": [{ "type": "gravity", "acceleration": [0, 0, -9.81] }],
    "solver": { "type": "quasistatic", "frames": 2, "max_iterations": 20, "tolerance": 1e-4 },
    "outputs": { "fields": ["displacement", "velocity", "external_force", "material", "volume_ratio"] }
  })";
  const fs::path out = work / "out";
  SceneSimulation sim(load_scene(scene.string()));
  const RunSummary sum = run_scene(sim, out.string());
  EXPECT_EQ(sum.frames, 2);

  const nlohmann::json j = read_json(out / "scene.json");
  ASSERT_EQ(j.at("attachments").size(), 1u);
  const auto& a = j.at("attachments")[0];
  EXPECT_EQ(a.at("type"), "fixed");
  EXPECT_EQ(a.at("selection"), "clamp");
  EXPECT_EQ(a.at("nodes"), nlohmann::json({0, 4, 8, 12}));  // x = 0 face of the 4×2×2 node grid
  EXPECT_FALSE(a.contains("truncated"));
  EXPECT_EQ(j.at("selections").at("clamp"), a.at("nodes"));
  EXPECT_EQ(j.at("selections").at("tip"), nlohmann::json({3, 7, 11, 15}));
  EXPECT_EQ(j.at("obstacles"), nlohmann::json::array());

  const nlohmann::json stats = read_json(out / "stats.json");
  EXPECT_EQ(stats.at("frames").size(), 3u);
  EXPECT_EQ(stats.at("unconverged_frames"), sum.unconverged_frames);
  for (int f = 0; f <= 2; ++f) {
    char name[16];
    std::snprintf(name, sizeof name, "%04d", f);
    const fs::path vtu = out / "frames" / (std::string(name) + ".vtu");
    ASSERT_TRUE(fs::is_regular_file(vtu)) << f;
    // Every requested outputs.fields entry is an array of the frame.
    std::ifstream in(vtu, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string header = bytes.substr(0, bytes.find("<AppendedData"));
    for (const char* field : {"displacement", "velocity", "external_force", "material", "volume_ratio"})
      EXPECT_NE(header.find(std::string("Name=\"") + field + "\""), std::string::npos) << field << " in " << vtu;
  }
  EXPECT_TRUE(temporaries(out).empty()) << temporaries(out).front();
}

// "surface" outputs of a mesh without an embedded surface: the tet mesh's boundary, deformed, one
// file per frame with the same triangles, its vertices the node positions of that frame.
TEST(RunWriter, SurfaceOutputWithoutEmbeddedSurfaceIsTheDeformedBoundary) {
  const fs::path work = test::scratch_dir("run_output_boundary_surface");
  const fs::path scene = work / "tiny.json";
  std::ofstream(scene) << R"({
    "mesh": { "generator": "box", "nodes": [4, 2, 2], "min": [0, 0, 0], "max": [1, 0.3, 0.3] },
    "selections": { "clamp": { "type": "half_space", "normal": [1, 0, 0], "offset": 0.001 } },
    "materials": [{ "mu": 1e4, "density": 1000 }],
    "attachments": [{ "type": "fixed", "selection": "clamp", "stiffness": 1e7 }],
    "loads": [{ "type": "gravity", "acceleration": [0, 0, -9.81] }],
    "solver": { "type": "quasistatic", "frames": 2, "max_iterations": 50, "tolerance": 1e-6 },
    "outputs": { "surface": "obj" }
  })";
  const fs::path out = work / "out";
  SceneSimulation sim(load_scene(scene.string()));
  run_scene(sim, out.string());
  const Triangles boundary = boundary_faces(sim.mesh().tets);
  for (int f = 0; f <= 2; ++f) {
    char name[16];
    std::snprintf(name, sizeof name, "%04d.obj", f);
    const fs::path obj = out / "surfaces" / name;
    ASSERT_TRUE(fs::is_regular_file(obj)) << obj;
    const SurfaceMesh s = io::read_surface(obj.string());
    ASSERT_EQ(s.triangles.rows(), boundary.rows()) << obj;
    EXPECT_EQ(s.nodes.rows(), sim.mesh().nodes.rows()) << obj;
    if (f == 2) {
      EXPECT_LT((s.nodes - sim.positions()).cwiseAbs().maxCoeff(), 1e-9);
    }
    if (f == 0) {
      EXPECT_LT((s.nodes - sim.mesh().nodes).cwiseAbs().maxCoeff(), 1e-12);
    }
  }
  EXPECT_GT((sim.positions() - sim.mesh().nodes).cwiseAbs().maxCoeff(), 1e-6);  // it did sag
}

TEST(RunWriter, ReportsEveryFrameAndHonoursMaxFrames) {
  const fs::path work = test::scratch_dir("run_writer_frames");
  SceneSimulation sim(load_scene(std::string(XPD_SOURCE_DIR) + "/scenes/twist.json"));
  std::vector<int> seen;
  RunOptions o;
  o.max_frames = 2;
  o.on_frame = [&](const FrameReport& r) {
    seen.push_back(r.frame);
    EXPECT_EQ(r.frames, 2);
    ASSERT_NE(r.stats, nullptr);
    EXPECT_GT(r.stats->iterations, 0);
  };
  const RunSummary sum = run_scene(sim, (work / "out").string(), o);
  EXPECT_EQ(seen, (std::vector<int>{1, 2}));
  const nlohmann::json stats = read_json(work / "out" / "stats.json");
  ASSERT_EQ(stats.at("frames").size(), 3u);
  EXPECT_EQ(stats.at("frames_computed"), 2);
  int iterations = 0;
  for (int f = 1; f <= 2; ++f) iterations += stats["frames"][static_cast<size_t>(f)]["iterations"].get<int>();
  EXPECT_EQ(iterations, sum.iterations);
  EXPECT_EQ(stats.at("unconverged_frames"), sum.unconverged_frames);
}

// Interactive mode (solver.interactive): a fixed budget of outer iterations per frame, each with
// the collision's J inner iterations, whatever the residual; every frame reports its frames per
// second and the residual it leaves; none counts as unconverged.
TEST(RunWriter, InteractiveModeRunsAFixedBudgetAndReportsFpsAndResidual) {
  const fs::path work = test::scratch_dir("run_writer_interactive");
  for (const int budget : {1, 3}) {
    SCOPED_TRACE("interactive " + std::to_string(budget));
    Scene scene = load_scene(std::string(XPD_SOURCE_DIR) + "/scenes/lips.json");
    scene.solver.interactive_iterations = budget;
    scene.outputs.vtu = false;
    SceneSimulation sim(std::move(scene));
    const int inner = sim.collision()->solver->state().inner_iterations();
    RunOptions o;
    o.max_frames = 7;  // the lobes touch from frame 5
    int unconverged = 0;
    o.on_frame = [&](const FrameReport& r) {
      EXPECT_EQ(r.stats->iterations, budget);
      ASSERT_NE(r.collision, nullptr);
      // Every outer iteration on the Schur path runs J inner iterations; plain ones (no contact) none.
      EXPECT_EQ(r.collision->inner_iterations, inner * (budget - r.collision->plain_iterations));
      unconverged += r.stats->converged ? 0 : 1;
    };
    const fs::path out = work / std::to_string(budget);
    const RunSummary sum = run_scene(sim, out.string(), o);
    EXPECT_GT(unconverged, 0);  // a budget of 1-3 iterations leaves residual in the contact frames
    EXPECT_EQ(sum.unconverged_frames, 0);
    EXPECT_EQ(sum.iterations, 7 * budget);
    const nlohmann::json stats = read_json(out / "stats.json");
    double mean = 0, worst = 0;
    for (int f = 1; f <= 7; ++f) {
      const nlohmann::json& fr = stats["frames"][static_cast<size_t>(f)];
      ASSERT_TRUE(fr.contains("fps"));
      EXPECT_NEAR(fr["fps"].get<double>(), 1000.0 / fr["wall_ms"].get<double>(), 1e-9 * fr["fps"].get<double>());
      mean += fr["relative_residual"].get<double>() / 7;
      worst = std::max(worst, fr["relative_residual"].get<double>());
    }
    const nlohmann::json& in = stats.at("interactive");
    EXPECT_EQ(in.at("iterations_per_frame"), budget);
    EXPECT_EQ(in.at("inner_iterations"), inner);
    EXPECT_GT(in.at("fps").get<double>(), 0.0);
    EXPECT_NEAR(in.at("mean_relative_residual").get<double>(), mean, 1e-12 * mean);
    EXPECT_DOUBLE_EQ(in.at("max_relative_residual").get<double>(), worst);
    EXPECT_EQ(stats.at("unconverged_frames"), 0);
  }
  // The key: true (= 1) or an integer >= 1.
  const auto scene_with = [](const char* value) {
    return nlohmann::json::parse(std::string(R"({"mesh": {"generator": "box", "nodes": [3, 2, 2]},
      "materials": [{"mu": 1e4}], "solver": {"interactive": )") +
                                 value + "}}");
  };
  EXPECT_EQ(parse_scene(scene_with("true"), "s.json", ".").solver.interactive_iterations, 1);
  EXPECT_EQ(parse_scene(scene_with("false"), "s.json", ".").solver.interactive_iterations, 0);
  EXPECT_EQ(parse_scene(scene_with("4"), "s.json", ".").solver.interactive_iterations, 4);
  EXPECT_THROW(parse_scene(scene_with("0"), "s.json", "."), SceneError);
  EXPECT_THROW(parse_scene(scene_with("\"fast\""), "s.json", "."), SceneError);
}

}  // namespace
}  // namespace xpd
