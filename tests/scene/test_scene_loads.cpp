// Node forces of scene loads on a box, against totals computed by hand.
#include <gtest/gtest.h>

#include <xpd/core/error.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/solver/model.hpp>

namespace xpd {
namespace {

using nlohmann::json;

// A 2 × 1 × 1 m bar of 5 × 3 × 3 nodes, density 500 kg/m^3: mass 1000 kg.
Scene bar_scene(const json& loads) {
  json j = json::parse(R"({
    "mesh": {"generator": "box", "nodes": [5, 3, 3], "min": [0, 0, 0], "max": [2, 1, 1]},
    "selections": {
      "tip": {"type": "half_space", "normal": [-1, 0, 0], "offset": -1.99},
      "top": {"type": "surface", "direction": [0, 0, 1], "max_angle_deg": 1},
      "top_face": {"type": "box", "min": [-1, -1, 0.99], "max": [3, 3, 2]},
      "inside": {"type": "indices", "nodes": [22]}
    },
    "materials": [{"mu": 1, "density": 500}]
  })");
  j["loads"] = loads;
  return parse_scene(j, "bar.json", "");
}

Vec3 total(const Points& f) { return f.colwise().sum().transpose(); }

// The model's lumped masses (per-tet densities of the materials) for the bar.
Eigen::VectorXd bar_masses(const Scene& s, const TetMesh& mesh) {
  ModelDesc d;
  d.mesh = mesh;
  d.mu = {1.0};
  d.density = tet_densities(s, assign_materials(s, mesh));
  d.allow_unattached = true;
  return build_model(d).masses();
}

TEST(SceneLoads, GravityActsOnTheModelsLumpedMasses) {
  const Scene s =
      bar_scene(json::parse(R"([{"type": "gravity", "acceleration": [0, 0, -9.81], "ramp": {"scale": [0.5, 1]}}])"));
  const TetMesh mesh = make_generated_mesh(s.mesh);
  const Eigen::VectorXd mass = bar_masses(s, mesh);
  EXPECT_NEAR(mass.sum(), 1000, 1e-9);
  const Points f1 = external_forces(s, mesh, mass, 1);
  const Points f2 = external_forces(s, mesh, mass, 2);
  EXPECT_TRUE(total(f1).isApprox(Vec3(0, 0, -4905), 1e-12)) << total(f1).transpose();
  EXPECT_TRUE(total(f2).isApprox(Vec3(0, 0, -9810), 1e-12)) << total(f2).transpose();
  for (Eigen::Index n = 0; n < f2.rows(); ++n) EXPECT_NEAR(f2(n, 2), -9.81 * mass(n), 1e-9);
  EXPECT_THROW((void)external_forces(s, mesh, Eigen::VectorXd::Ones(3), 1), Error);
}

TEST(SceneLoads, NodeAndTotalForcesWithRamps) {
  const Scene s = bar_scene(json::parse(R"([
    {"type": "node_force", "selection": "tip", "force": [0, 1, 0], "ramp": {"frames": 4}},
    {"type": "total_force", "selection": "tip", "force": [3, 0, 0], "ramp": {"scale": [0.5, 2]}},
    {"type": "total_force", "selection": "top_face", "force": [0, 0, -8], "distribution": "area"}
  ])"));
  const TetMesh mesh = make_generated_mesh(s.mesh);
  // Frame 1: the tip's 9 nodes get (0, 1/4, 0) each and (3 * 0.5) / 9 in x; the top face -8 in z.
  const Points f1 = external_forces(s, mesh, bar_masses(s, mesh), 1);
  EXPECT_TRUE(total(f1).isApprox(Vec3(1.5, 9 * 0.25, -8), 1e-12)) << total(f1).transpose();
  const std::vector<int> tip = select_nodes("tip", s.selections, mesh);
  ASSERT_EQ(tip.size(), 9u);
  for (int n : tip) EXPECT_NEAR(f1(n, 0), 1.5 / 9, 1e-12);
  const Points f9 = external_forces(s, mesh, bar_masses(s, mesh), 9);
  EXPECT_TRUE(total(f9).isApprox(Vec3(6, 9, -8), 1e-12)) << total(f9).transpose();
  // Area weights on the 2 × 1 top face with spacing 0.5: interior nodes carry 0.25 m^2, edges 0.125,
  // corners sum to what is left; the force per node is -8 * area / 2.
  const std::vector<int> top = select_nodes("top_face", s.selections, mesh);
  const std::vector<double> area = lumped_boundary_area(mesh, top);
  for (std::size_t k = 0; k < top.size(); ++k) EXPECT_NEAR(f9(top[k], 2), -8 * area[k] / 2.0, 1e-12);
  const std::vector<int> interior = select_nodes("top", s.selections, mesh);
  ASSERT_EQ(interior.size(), 3u);
  for (int n : interior) EXPECT_NEAR(f9(n, 2), -8 * 0.25 / 2.0, 1e-12);
}

TEST(SceneLoads, AreaLoadWithoutSurfaceIsAnError) {
  const Scene s = bar_scene(json::parse(
      R"([{"type": "gravity", "acceleration": [0, 0, -1]},
          {"type": "total_force", "selection": "inside", "force": [1, 0, 0], "distribution": "area"}])"));
  const TetMesh mesh = make_generated_mesh(s.mesh);
  try {
    (void)external_forces(s, mesh, bar_masses(s, mesh), 1);
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/loads/1/selection") << e.what();
  }
}

TEST(SceneLoads, IndexFileErrorsNameFileAndLine) {
  try {
    (void)parse_scene(json::parse(R"({"mesh": "box:3", "materials": [{"mu": 1}],
                                      "selections": {"p": {"type": "indices", "file": "bad_indices.txt"}}})"),
                      "x.json", std::string(XPD_SOURCE_DIR) + "/tests/data/scenes");
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/selections/p/file");
    EXPECT_NE(std::string(e.what()).find("bad_indices.txt:3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xpd
