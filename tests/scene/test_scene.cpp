// Scene loader: a full example round-trips into the structs, defaults are filled, and every
// invalid input is a SceneError naming the exact JSON pointer of the offending value.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/scene/scene.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

using nlohmann::json;

std::string scenes_dir() { return test::fixture_path("scenes"); }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(SceneParse, FullExampleRoundTrips) {
  const Scene s = load_scene(test::fixture_path("scenes/full.json"));
  EXPECT_TRUE(ends_with(s.file, "scenes/full.json"));
  EXPECT_EQ(s.description, "bar clamped at x = 0, twisted at x = 1, pulled down, strain limited skin");

  // Mesh.
  EXPECT_EQ(s.mesh.kind, MeshSource::Kind::Box);
  EXPECT_EQ(s.mesh.nodes, (std::array<int, 3>{5, 3, 3}));
  EXPECT_EQ(s.mesh.min, Vec3(0, 0, 0));
  EXPECT_EQ(s.mesh.max, Vec3(1, 0.25, 0.25));
  EXPECT_TRUE(ends_with(s.mesh.embedded_surface, "scenes/tiny_surface.obj")) << s.mesh.embedded_surface;
  EXPECT_TRUE(s.mesh.fix_orientation);

  // Selections.
  ASSERT_EQ(s.selections.size(), 10u);
  const auto& left = std::get<HalfSpaceSelection>(s.selections.at("left"));
  EXPECT_EQ(left.normal, Vec3::UnitX());
  EXPECT_DOUBLE_EQ(left.offset, 0.01);
  const auto& right = std::get<BoxSelection>(s.selections.at("right"));
  EXPECT_EQ(right.min, Vec3(0.99, -1, -1));
  const auto& ball = std::get<SphereSelection>(s.selections.at("ball"));
  EXPECT_DOUBLE_EQ(ball.radius, 0.2);
  const auto& top = std::get<SurfaceSelection>(s.selections.at("top"));
  EXPECT_EQ(top.within, "ball");
  ASSERT_TRUE(top.cone.has_value());
  EXPECT_EQ(top.cone->direction, Vec3::UnitZ());
  EXPECT_DOUBLE_EQ(top.cone->max_angle_deg, 30);
  const auto& skin = std::get<SurfaceSelection>(s.selections.at("skin"));
  EXPECT_TRUE(skin.within.empty());
  EXPECT_FALSE(skin.cone.has_value());
  const auto& pinned = std::get<IndexSelection>(s.selections.at("pinned"));
  EXPECT_EQ(pinned.nodes, (std::vector<int>{0, 5, 10, 5}));
  EXPECT_TRUE(ends_with(pinned.file, "pinned_nodes.txt"));
  EXPECT_EQ(std::get<IndexSelection>(s.selections.at("listed")).nodes, (std::vector<int>{3, 1, 2}));
  const auto& ends = std::get<SetSelection>(s.selections.at("ends"));
  EXPECT_EQ(ends.op, SetSelection::Op::Union);
  EXPECT_EQ(ends.operands, (std::vector<std::string>{"left", "right"}));
  EXPECT_EQ(std::get<SetSelection>(s.selections.at("middle")).op, SetSelection::Op::Difference);
  EXPECT_EQ(std::get<SetSelection>(s.selections.at("top_left")).op, SetSelection::Op::Intersection);

  // Materials: E = 1e5, nu = 0.25 -> mu = E / (2 (1 + nu)) = 4e4, lambda = E nu / ((1 + nu)(1 - 2 nu)) = 4e4.
  ASSERT_EQ(s.materials.size(), 3u);
  EXPECT_EQ(s.materials[0].region, "all");
  EXPECT_NEAR(s.materials[0].mu, 4e4, 1e-9);
  EXPECT_NEAR(s.materials[0].lambda, 4e4, 1e-9);
  EXPECT_DOUBLE_EQ(s.materials[0].density, 1100);
  EXPECT_FALSE(s.materials[0].strain_limit.has_value());
  EXPECT_EQ(s.materials[1].region, "middle");
  EXPECT_DOUBLE_EQ(s.materials[1].mu, 2e4);
  EXPECT_DOUBLE_EQ(s.materials[1].lambda, 1e3);
  EXPECT_DOUBLE_EQ(s.materials[1].density, 1000);  // default
  ASSERT_TRUE(s.materials[1].strain_limit.has_value());
  EXPECT_DOUBLE_EQ(s.materials[1].strain_limit->stiffness, 1e6);
  EXPECT_DOUBLE_EQ(s.materials[1].strain_limit->sigma_min, 0.9);
  EXPECT_DOUBLE_EQ(s.materials[1].strain_limit->sigma_max, 1.2);
  EXPECT_EQ(s.materials[2].region_tag, 3);
  EXPECT_DOUBLE_EQ(s.materials[2].lambda, 0);  // default

  // Attachments.
  ASSERT_EQ(s.attachments.size(), 4u);
  EXPECT_EQ(s.attachments[0].type, Attachment::Type::Fixed);
  EXPECT_EQ(s.attachments[0].selection, "left");
  EXPECT_DOUBLE_EQ(s.attachments[0].stiffness, 1e6);
  const Attachment& rigid = s.attachments[1];
  EXPECT_EQ(rigid.type, Attachment::Type::Rigid);
  ASSERT_EQ(rigid.keyframes.size(), 3u);
  EXPECT_DOUBLE_EQ(rigid.keyframes[0].frame, 0);
  EXPECT_EQ(rigid.keyframes[0].translation, Vec3::Zero());
  EXPECT_DOUBLE_EQ(rigid.keyframes[0].rotation.w(), 1);
  EXPECT_DOUBLE_EQ(rigid.keyframes[1].frame, 10);
  EXPECT_EQ(rigid.keyframes[1].pivot, Vec3(1, 0.125, 0.125));
  EXPECT_NEAR(
      rigid.keyframes[1].rotation.angularDistance(Eigen::Quaterniond(Eigen::AngleAxisd(M_PI / 2, Vec3::UnitX()))), 0,
      1e-12);
  EXPECT_NEAR(rigid.keyframes[2].frame, 20, 1e-12);  // time 1.0 / time_step 0.05
  EXPECT_NEAR(rigid.keyframes[2].rotation.x(), 1, 1e-15);
  const Attachment& bone = s.attachments[2];
  EXPECT_EQ(bone.type, Attachment::Type::Bone);
  EXPECT_TRUE(ends_with(bone.bone.skeleton, "scenes/tiny.tgf"));
  EXPECT_TRUE(ends_with(bone.bone.pose, "scenes/tiny-pose.dmat"));
  EXPECT_EQ(bone.bone.bones, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.attachments[3].bone.bones, (std::vector<int>{1}));

  // Loads.
  ASSERT_EQ(s.loads.size(), 4u);
  EXPECT_EQ(s.loads[0].type, Load::Type::Gravity);
  EXPECT_EQ(s.loads[0].value, Vec3(0, 0, -9.81));
  EXPECT_DOUBLE_EQ(s.loads[0].scale_at(7), 1);
  EXPECT_EQ(s.loads[1].type, Load::Type::NodeForce);
  EXPECT_EQ(s.loads[1].selection, "top");
  EXPECT_DOUBLE_EQ(s.loads[1].scale_at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.loads[1].scale_at(2), 0.5);
  EXPECT_DOUBLE_EQ(s.loads[1].scale_at(4), 1);
  EXPECT_DOUBLE_EQ(s.loads[1].scale_at(9), 1);
  EXPECT_EQ(s.loads[2].type, Load::Type::TotalForce);
  EXPECT_EQ(s.loads[2].distribution, Load::Distribution::Area);
  EXPECT_DOUBLE_EQ(s.loads[2].scale_at(1), 0.25);
  EXPECT_DOUBLE_EQ(s.loads[2].scale_at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.loads[2].scale_at(4), 0.5);
  EXPECT_DOUBLE_EQ(s.loads[2].scale_at(100), 0.5);  // last value holds
  EXPECT_EQ(s.loads[3].distribution, Load::Distribution::Equal);
  EXPECT_FALSE(s.loads[3].ramp.has_value());

  // Solver and outputs.
  EXPECT_EQ(s.solver.type, Integrator::ImplicitEuler);
  EXPECT_DOUBLE_EQ(s.solver.time_step, 0.05);
  EXPECT_EQ(s.solver.frames, 40);
  EXPECT_EQ(s.solver.max_iterations, 30);
  EXPECT_EQ(s.solver.min_iterations, 2);
  EXPECT_DOUBLE_EQ(s.solver.tolerance, 1e-4);
  EXPECT_EQ(s.solver.accelerator, Accelerator::Anderson);
  EXPECT_EQ(s.solver.threads, 2);
  EXPECT_EQ(s.outputs.every, 2);
  EXPECT_FALSE(s.outputs.vtu);
  EXPECT_EQ(s.outputs.surface, OutputSettings::Surface::Ply);
  EXPECT_EQ(s.outputs.fields, (std::vector<std::string>{"displacement", "velocity", "material"}));
  ASSERT_TRUE(s.collision.has_value());
  const CollisionSettings& c = *s.collision;
  EXPECT_EQ(c.proxies, CollisionSettings::Proxies::EmbeddedSurface);
  EXPECT_EQ(c.region, "top");
  EXPECT_DOUBLE_EQ(c.stiffness, 5e4);
  EXPECT_EQ(c.inner_iterations, 3);
  EXPECT_EQ(c.method, CollisionMethod::Schur);
  EXPECT_EQ(c.schur_solve, SchurSolveMethod::Woodbury);
  EXPECT_DOUBLE_EQ(c.memory_budget_mb, 512);
  EXPECT_DOUBLE_EQ(c.margin, 0.001);
  EXPECT_TRUE(c.self_collision);
  EXPECT_DOUBLE_EQ(c.exclusion_radius, 0.05);
  EXPECT_DOUBLE_EQ(c.sdf_cell_size, 0.01);
  EXPECT_TRUE(c.self_contact_half_space);
  EXPECT_DOUBLE_EQ(c.half_space_repair_distance, 0.002);
  EXPECT_EQ(c.half_space_repair_rounds, 3);
  ASSERT_EQ(c.obstacles.size(), 5u);
  EXPECT_EQ(c.obstacles[0].type, ObstacleSpec::Type::Plane);
  EXPECT_TRUE(c.obstacles[0].normal.isApprox(Vec3::UnitZ()));
  EXPECT_EQ(c.obstacles[1].type, ObstacleSpec::Type::Sphere);
  ASSERT_EQ(c.obstacles[1].keyframes.size(), 2u);
  EXPECT_DOUBLE_EQ(c.obstacles[1].keyframes[1].translation.z(), -0.2);
  EXPECT_EQ(c.obstacles[2].type, ObstacleSpec::Type::Capsule);
  EXPECT_DOUBLE_EQ(c.obstacles[2].radius, 0.05);
  EXPECT_EQ(c.obstacles[3].type, ObstacleSpec::Type::Box);
  EXPECT_DOUBLE_EQ(c.obstacles[3].half_extents.z(), 0.3);
  EXPECT_EQ(c.obstacles[4].type, ObstacleSpec::Type::Mesh);
  EXPECT_NE(c.obstacles[4].file.find("tiny_surface.obj"), std::string::npos);
}

TEST(SceneParse, FullExampleAgainstItsMesh) {
  const Scene s = load_scene(test::fixture_path("scenes/full.json"));
  const TetMesh mesh = make_generated_mesh(s.mesh);
  EXPECT_EQ(mesh.nodes.rows(), 45);
  EXPECT_NO_THROW(check_scene_against_mesh(s, mesh));
  // The third material names region tag 3, which a generated box does not have.
  try {
    (void)assign_materials(s, mesh);
    FAIL() << "expected SceneError";
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/materials/2/region");
  }
  Scene untagged = s;
  untagged.materials.pop_back();
  const std::vector<int> material = assign_materials(untagged, mesh);
  const std::vector<int> middle = select_tets("middle", s.selections, mesh);
  ASSERT_FALSE(middle.empty());
  for (std::size_t e = 0; e < material.size(); ++e)
    EXPECT_EQ(material[e], std::binary_search(middle.begin(), middle.end(), static_cast<int>(e)) ? 1 : 0) << e;
}

TEST(SceneParse, ShippedScenesAreValid) {
  // Every scene under scenes/ (demos) parses and fits its mesh.
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(XPD_SOURCE_DIR) + "/scenes")) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    SCOPED_TRACE(entry.path().string());
    const Scene s = load_scene(entry.path().string());
    if (s.mesh.kind != MeshSource::Kind::Box) continue;
    const TetMesh mesh = make_generated_mesh(s.mesh);
    EXPECT_NO_THROW(check_scene_against_mesh(s, mesh));
    EXPECT_NO_THROW((void)assign_materials(s, mesh));
  }
  EXPECT_GE(count, 2);
}

TEST(SceneParse, MinimalSceneGetsDefaults) {
  const Scene s = load_scene(test::fixture_path("scenes/minimal.json"));
  EXPECT_EQ(s.mesh.kind, MeshSource::Kind::Box);
  EXPECT_EQ(s.mesh.nodes, (std::array<int, 3>{4, 4, 4}));
  EXPECT_EQ(s.mesh.max, Vec3(1, 1, 1));
  EXPECT_FALSE(s.mesh.fix_orientation);
  EXPECT_TRUE(s.mesh.embedded_surface.empty());
  ASSERT_EQ(s.materials.size(), 1u);
  EXPECT_EQ(s.materials[0].region, "all");
  EXPECT_FALSE(s.materials[0].region_tag.has_value());
  EXPECT_DOUBLE_EQ(s.materials[0].mu, 1000);
  EXPECT_DOUBLE_EQ(s.materials[0].lambda, 0);
  EXPECT_DOUBLE_EQ(s.materials[0].density, 1000);
  EXPECT_TRUE(s.selections.empty());
  EXPECT_TRUE(s.attachments.empty());
  EXPECT_TRUE(s.loads.empty());
  const SolverSettings d;
  EXPECT_EQ(s.solver.type, Integrator::Quasistatic);
  EXPECT_DOUBLE_EQ(s.solver.time_step, d.time_step);
  EXPECT_EQ(s.solver.frames, 1);
  EXPECT_EQ(s.solver.max_iterations, 100);
  EXPECT_EQ(s.solver.min_iterations, 1);
  EXPECT_DOUBLE_EQ(s.solver.tolerance, 1e-6);
  EXPECT_EQ(s.solver.accelerator, Accelerator::None);
  EXPECT_EQ(s.solver.threads, 0);
  EXPECT_EQ(s.outputs.every, 1);
  EXPECT_TRUE(s.outputs.vtu);
  EXPECT_EQ(s.outputs.surface, OutputSettings::Surface::None);
  EXPECT_EQ(s.outputs.fields, (std::vector<std::string>{"displacement"}));
  EXPECT_FALSE(s.collision.has_value());
}

TEST(SceneParse, BoxGeneratorForms) {
  // The string form and the object form without max give the mesh of make_box_from_spec.
  const Scene a = parse_scene(json::parse(R"({"mesh": "box:5,3,2", "materials": [{"mu": 1}]})"), "a", "");
  const Scene b = parse_scene(
      json::parse(R"({"mesh": {"generator": "box", "nodes": [5, 3, 2]}, "materials": [{"mu": 1}]})"), "b", "");
  const TetMesh expected = make_box_from_spec("box:5,3,2");
  for (const Scene* s : {&a, &b}) {
    const TetMesh m = make_generated_mesh(s->mesh);
    ASSERT_EQ(m.nodes.rows(), expected.nodes.rows());
    EXPECT_TRUE(m.nodes.isApprox(expected.nodes));
    EXPECT_EQ(m.tets, expected.tets);
  }
  const Scene c =
      parse_scene(json::parse(R"({"mesh": {"generator": "box", "nodes": 3, "min": [1, 1, 1], "max": [2, 3, 4]},
                      "materials": [{"mu": 1}]})"),
                  "c", "");
  EXPECT_EQ(c.mesh.nodes, (std::array<int, 3>{3, 3, 3}));
  EXPECT_EQ(c.mesh.max, Vec3(2, 3, 4));
}

// Carving removes the tets whose centroid lies in a carve box and drops unused nodes: a C shape.
TEST(SceneParse, CarvedBoxGenerator) {
  json j = {{"mesh",
             {{"generator", "box"},
              {"nodes", {5, 7, 3}},
              {"max", {0.4, 0.6, 0.2}},
              {"carve", {{{"min", {0.2, 0.2, -1}}, {"max", {1, 0.4, 1}}}}}}},
            {"materials", {{{"mu", 1}}}}};
  const Scene s = parse_scene(j, "carve.json", ".");
  ASSERT_EQ(s.mesh.carve.size(), 1u);
  const TetMesh full = make_box(5, 7, 3, Vec3::Zero(), Vec3(0.4, 0.6, 0.2));
  const TetMesh m = build_scene_mesh(s.mesh);
  // Brute force: tets whose centroid is outside the slot.
  int kept = 0;
  for (Eigen::Index t = 0; t < full.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += full.nodes.row(full.tets(t, a)).transpose() / 4.0;
    kept += (c.x() >= 0.2 && c.y() >= 0.2 && c.y() <= 0.4) ? 0 : 1;
  }
  EXPECT_EQ(m.tets.rows(), kept);
  EXPECT_LT(m.tets.rows(), full.tets.rows());
  std::vector<char> used(static_cast<std::size_t>(m.nodes.rows()), 0);
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t)
    for (int a = 0; a < 4; ++a) used[static_cast<std::size_t>(m.tets(t, a))] = 1;
  EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](char u) { return u != 0; }));
  double volume = 0;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t) {
    const Vec3 a = m.nodes.row(m.tets(t, 0)), b = m.nodes.row(m.tets(t, 1)), c = m.nodes.row(m.tets(t, 2)),
               d = m.nodes.row(m.tets(t, 3));
    volume += (b - a).cross(c - a).dot(d - a) / 6.0;
  }
  // The slot x ∈ [0.2, 0.4], y ∈ [0.2, 0.4]: the carve box's faces lie on cell faces, so whole cells go.
  EXPECT_NEAR(volume, 0.4 * 0.6 * 0.2 - 0.2 * 0.2 * 0.2, 1e-12);
  json bad = j;
  bad["mesh"]["carve"] = {{{"min", {0, 0, 0}}, {"max", {0, 1, 1}}}};
  EXPECT_THROW(parse_scene(bad, "carve.json", "."), SceneError);
  bad["mesh"]["carve"] = {{{"min", {-1, -1, -1}}, {"max", {2, 2, 2}}}};
  EXPECT_THROW(build_scene_mesh(parse_scene(bad, "carve.json", ".").mesh), Error);
}

TEST(SceneParse, MeshFileIsResolvedAgainstTheSceneDirectory) {
  const Scene s = parse_scene(json::parse(R"({"mesh": {"file": "tiny_surface.obj"}, "materials": [{"mu": 1}]})"),
                              "x.json", scenes_dir());
  EXPECT_EQ(s.mesh.kind, MeshSource::Kind::File);
  EXPECT_EQ(s.mesh.file, scenes_dir() + "/tiny_surface.obj");
  EXPECT_THROW(make_generated_mesh(s.mesh), Error);
}

TEST(SceneParse, MalformedJsonNamesLineAndColumn) {
  try {
    (void)load_scene(test::fixture_path("scenes/malformed.json"));
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(e.line(), 3u) << e.what();
    EXPECT_NE(std::string(e.what()).find("column 31"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("malformed.json:3:"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)load_scene(test::fixture_path("scenes/does_not_exist.json")), IoError);
}

TEST(SceneErrors, DuplicateKeyInFileNamesItsPointer) {
  try {
    (void)load_scene(test::fixture_path("scenes/duplicate_key.json"));
    FAIL() << "expected SceneError";
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/materials/1/mu") << e.what();
    EXPECT_NE(std::string(e.what()).find("duplicate key 'mu'"), std::string::npos) << e.what();
  }
}

// ---- every error names its JSON pointer --------------------------------------------------------

json base_scene() {
  return json::parse(R"({
    "mesh": "box:4",
    "selections": {"left": {"type": "box", "min": [0, 0, 0], "max": [0.1, 1, 1]}},
    "materials": [{"mu": 1000}],
    "attachments": [{"type": "fixed", "selection": "left", "stiffness": 1e5}],
    "loads": [{"type": "node_force", "selection": "left", "force": [0, 0, 1]}]
  })");
}

struct ErrorCase {
  const char* what;
  std::function<void(json&)> edit;
  std::string pointer;
  std::string message_part;
};

TEST(SceneErrors, EveryErrorNamesItsJsonPointer) {
  const std::vector<ErrorCase> cases = {
      {"misspelled key", [](json& j) { j["materials"][0]["mew"] = 1; }, "/materials/0/mew",
       "unknown key 'mew'; did you mean 'mu'?"},
      {"misspelled top-level key", [](json& j) { j["solvr"] = json::object(); }, "/solvr", "did you mean 'solver'?"},
      {"unknown key in solver", [](json& j) { j["solver"]["time_stepp"] = 1; }, "/solver/time_stepp",
       "did you mean 'time_step'?"},
      {"wrong type", [](json& j) { j["materials"][0]["mu"] = "soft"; }, "/materials/0/mu",
       "expected a number, found string \"soft\""},
      {"mu zero", [](json& j) { j["materials"][0]["mu"] = 0; }, "/materials/0/mu", "must be > 0"},
      {"mu negative", [](json& j) { j["materials"][0]["mu"] = -3.5; }, "/materials/0/mu", "must be > 0"},
      {"lambda negative", [](json& j) { j["materials"][0]["lambda"] = -1; }, "/materials/0/lambda", ">= 0"},
      {"density zero", [](json& j) { j["materials"][0]["density"] = 0; }, "/materials/0/density", "> 0"},
      {"mu and youngs", [](json& j) { j["materials"][0]["youngs_modulus"] = 1e5; }, "/materials/0/mu", "not both"},
      {"poisson 0.5",
       [](json& j) {
         j["materials"][0] = {{"youngs_modulus", 1e5}, {"poisson_ratio", 0.5}};
       },
       "/materials/0/poisson_ratio", "[0, 0.5)"},
      {"negative poisson",
       [](json& j) {
         j["materials"][0] = {{"youngs_modulus", 1e5}, {"poisson_ratio", -0.2}};
       },
       "/materials/0/poisson_ratio", "[0, 0.5)"},
      {"youngs without poisson",
       [](json& j) {
         j["materials"][0] = {{"youngs_modulus", 1e5}};
       },
       "/materials/0", "missing required key 'poisson_ratio'"},
      {"sigma_min >= 1",
       [](json& j) {
         j["materials"][0]["strain_limit"] = {{"stiffness", 1}, {"sigma_min", 1.0}, {"sigma_max", 2}};
       },
       "/materials/0/strain_limit/sigma_min", "[0, 1)"},
      {"sigma_max <= 1",
       [](json& j) {
         j["materials"][0]["strain_limit"] = {{"stiffness", 1}, {"sigma_min", 0.5}, {"sigma_max", 1}};
       },
       "/materials/0/strain_limit/sigma_max", "> 1"},
      {"strain limit stiffness",
       [](json& j) {
         j["materials"][0]["strain_limit"] = {{"stiffness", 0}, {"sigma_min", 0.5}, {"sigma_max", 2}};
       },
       "/materials/0/strain_limit/stiffness", "> 0"},
      {"missing materials", [](json& j) { j.erase("materials"); }, "", "missing required key 'materials'"},
      {"empty materials", [](json& j) { j["materials"] = json::array(); }, "/materials", "at least one material"},
      {"materials not an array",
       [](json& j) {
         j["materials"] = {{"mu", 1}};
       },
       "/materials", "expected an array, found object"},
      {"unknown material region", [](json& j) { j["materials"][0]["region"] = "lef"; }, "/materials/0/region",
       "unknown selection 'lef'; did you mean 'left'?"},
      {"time_step zero", [](json& j) { j["solver"]["time_step"] = 0; }, "/solver/time_step", "must be > 0"},
      {"time_step negative", [](json& j) { j["solver"]["time_step"] = -0.1; }, "/solver/time_step", "must be > 0"},
      {"frames zero", [](json& j) { j["solver"]["frames"] = 0; }, "/solver/frames", "must be >= 1"},
      {"frames fractional", [](json& j) { j["solver"]["frames"] = 2.5; }, "/solver/frames", "expected an integer"},
      {"min > max iterations",
       [](json& j) {
         j["solver"] = {{"max_iterations", 5}, {"min_iterations", 6}};
       },
       "/solver/min_iterations", "exceeds max_iterations"},
      {"tolerance", [](json& j) { j["solver"]["tolerance"] = 0; }, "/solver/tolerance", "> 0"},
      {"solver type", [](json& j) { j["solver"]["type"] = "implicit-euler"; }, "/solver/type",
       "did you mean 'implicit_euler'?"},
      {"accelerator", [](json& j) { j["solver"]["accelerator"] = "andersen"; }, "/solver/accelerator",
       "did you mean 'anderson'?"},
      {"threads", [](json& j) { j["solver"]["threads"] = -1; }, "/solver/threads", ">= 0"},
      {"volume matrix", [](json& j) { j["solver"]["volume_matrix"] = "coupeld"; }, "/solver/volume_matrix",
       "did you mean 'coupled'?"},
      {"negative radius",
       [](json& j) {
         j["selections"]["ball"] = {{"type", "sphere"}, {"center", {0, 0, 0}}, {"radius", -1}};
       },
       "/selections/ball/radius", "negative radius"},
      {"box min > max",
       [](json& j) {
         j["selections"]["left"]["max"] = {0.1, -1, 1};
       },
       "/selections/left/max", ">= min"},
      {"vector of 2",
       [](json& j) {
         j["selections"]["left"]["min"] = {0, 0};
       },
       "/selections/left/min", "expected an array of 3 numbers"},
      {"vector element type",
       [](json& j) {
         j["selections"]["left"]["min"] = {0, "a", 0};
       },
       "/selections/left/min/1", "expected a number"},
      {"selection type", [](json& j) { j["selections"]["left"]["type"] = "bx"; }, "/selections/left/type",
       "did you mean 'box'?"},
      {"key of another selection type", [](json& j) { j["selections"]["left"]["radius"] = 1; },
       "/selections/left/radius", "unknown key 'radius' (for a selection of type 'box')"},
      {"redefined all",
       [](json& j) {
         j["selections"]["all"] = {{"type", "surface"}};
       },
       "/selections/all", "built-in"},
      {"escaped selection name",
       [](json& j) {
         j["selections"]["a/b~c"] = {{"type", "sphere"}, {"center", {0, 0, 0}}, {"radius", -1}};
       },
       "/selections/a~1b~0c/radius", "negative radius"},
      {"unknown union operand",
       [](json& j) {
         j["selections"]["u"] = {{"type", "union"}, {"of", {"left", "rigth"}}};
       },
       "/selections/u/of/1", "unknown selection 'rigth'"},
      {"empty union",
       [](json& j) {
         j["selections"]["u"] = {{"type", "union"}, {"of", json::array()}};
       },
       "/selections/u/of", "non-empty array"},
      {"reference cycle",
       [](json& j) {
         j["selections"]["a"] = {{"type", "union"}, {"of", {"left", "b"}}};
         j["selections"]["b"] = {{"type", "surface"}, {"within", "a"}};
       },
       "/selections/a", "cycle: a -> b -> a"},
      {"max_angle without direction",
       [](json& j) {
         j["selections"]["s"] = {{"type", "surface"}, {"max_angle_deg", 10}};
       },
       "/selections/s/max_angle_deg", "needs a 'direction'"},
      {"index file missing",
       [](json& j) {
         j["selections"]["p"] = {{"type", "indices"}, {"file", "nope.txt"}};
       },
       "/selections/p/file", "file not found"},
      {"negative inline index",
       [](json& j) {
         j["selections"]["p"] = {{"type", "indices"}, {"nodes", {1, -2}}};
       },
       "/selections/p/nodes/1", "negative node index"},
      {"attachment to unknown selection", [](json& j) { j["attachments"][0]["selection"] = "lefft"; },
       "/attachments/0/selection", "did you mean 'left'?"},
      {"attachment type", [](json& j) { j["attachments"][0]["type"] = "fixd"; }, "/attachments/0/type",
       "did you mean 'fixed'?"},
      {"attachment stiffness", [](json& j) { j["attachments"][0]["stiffness"] = -1; }, "/attachments/0/stiffness",
       "> 0"},
      {"keyframes on fixed", [](json& j) { j["attachments"][0]["keyframes"] = json::array(); },
       "/attachments/0/keyframes", "(for an attachment of type 'fixed')"},
      {"rigid without keyframes", [](json& j) { j["attachments"][0]["type"] = "rigid"; }, "/attachments/0",
       "missing required key 'keyframes'"},
      {"keyframes out of order",
       [](json& j) {
         j["attachments"][0]["type"] = "rigid";
         j["attachments"][0]["keyframes"] = {{{"frame", 5}}, {{"frame", 5}}};
       },
       "/attachments/0/keyframes/1/frame", "strictly increasing"},
      {"keyframe frame and time",
       [](json& j) {
         j["attachments"][0]["type"] = "rigid";
         j["attachments"][0]["keyframes"] = {{{"frame", 5}, {"time", 1}}};
       },
       "/attachments/0/keyframes/0", "exactly one of 'frame' and 'time'"},
      {"zero quaternion",
       [](json& j) {
         j["attachments"][0]["type"] = "rigid";
         j["attachments"][0]["keyframes"] = {{{"frame", 0}, {"rotation", {{"quaternion", {0, 0, 0, 0}}}}}};
       },
       "/attachments/0/keyframes/0/rotation/quaternion", "zero quaternion"},
      {"rotation axis zero",
       [](json& j) {
         j["attachments"][0]["type"] = "rigid";
         j["attachments"][0]["keyframes"] = {{{"frame", 0}, {"rotation", {{"axis", {0, 0, 0}}, {"angle_deg", 3}}}}};
       },
       "/attachments/0/keyframes/0/rotation/axis", "nonzero"},
      {"bone index out of range",
       [](json& j) {
         j["attachments"][0] = {{"type", "bone"},         {"selection", "all"},       {"stiffness", 1},
                                {"skeleton", "tiny.tgf"}, {"pose", "tiny-pose.dmat"}, {"bones", {1, 2}}};
       },
       "/attachments/0/bones/1", "out of range [0, 2)"},
      {"bone pose missing",
       [](json& j) {
         j["attachments"][0] = {{"type", "bone"},         {"selection", "all"},     {"stiffness", 1},
                                {"skeleton", "tiny.tgf"}, {"pose", "missing.dmat"}, {"bones", 0}};
       },
       "/attachments/0/pose", "file not found"},
      {"bad skeleton file",
       [](json& j) {
         j["attachments"][0] = {{"type", "bone"},           {"selection", "all"},
                                {"stiffness", 1},           {"skeleton", "pinned_nodes.txt"},
                                {"pose", "tiny-pose.dmat"}, {"bones", 0}};
       },
       "/attachments/0/skeleton", "cannot read skeleton"},
      {"pose_frame zero",
       [](json& j) {
         j["attachments"][0] = {{"type", "bone"},         {"selection", "all"},       {"stiffness", 1},
                                {"skeleton", "tiny.tgf"}, {"pose", "tiny-pose.dmat"}, {"bones", 0},
                                {"pose_frame", 0}};
       },
       "/attachments/0/pose_frame", ">= 1"},
      {"shell_layer on a box",
       [](json& j) {
         j["selections"]["deep"] = {{"type", "shell_layer"}, {"layer", "deep"}};
       },
       "/selections/deep", "needs a mesh made by the shell generator"},
      {"shell without thickness",
       [](json& j) {
         j["mesh"] = {{"generator", "shell"}, {"surface", "../../../scenes/data/ict-face-jawopen.obj.gz"}};
       },
       "/mesh", "missing required key 'thickness'"},
      {"shell_layer out of range",
       [](json& j) {
         j["mesh"] = {{"generator", "shell"},
                      {"surface", "../../../scenes/data/ict-face-jawopen.obj.gz"},
                      {"thickness", 0.01},
                      {"layers", 2}};
         j["selections"]["deep"] = {{"type", "shell_layer"}, {"layer", 3}};
       },
       "/selections/deep/layer", "out of [0, 2]"},
      {"shell min_depth above 1",
       [](json& j) {
         j["mesh"] = {{"generator", "shell"},
                      {"surface", "../../../scenes/data/ict-face-jawopen.obj.gz"},
                      {"thickness", 0.01},
                      {"min_depth", 2}};
       },
       "/mesh/min_depth", "(0, 1]"},
      {"load selection", [](json& j) { j["loads"][0]["selection"] = "nowhere"; }, "/loads/0/selection",
       "unknown selection 'nowhere'"},
      {"load type", [](json& j) { j["loads"][0]["type"] = "force"; }, "/loads/0/type", "expected one of"},
      {"distribution on node_force", [](json& j) { j["loads"][0]["distribution"] = "area"; }, "/loads/0/distribution",
       "(for a load of type 'node_force')"},
      {"distribution value",
       [](json& j) {
         j["loads"][0]["type"] = "total_force";
         j["loads"][0]["distribution"] = "areas";
       },
       "/loads/0/distribution", "did you mean 'area'?"},
      {"ramp frames",
       [](json& j) {
         j["loads"][0]["ramp"] = {{"frames", 0}};
       },
       "/loads/0/ramp/frames", ">= 1"},
      {"ramp both",
       [](json& j) {
         j["loads"][0]["ramp"] = {{"frames", 2}, {"scale", {1}}};
       },
       "/loads/0/ramp", "exactly one"},
      {"gravity vector",
       [](json& j) {
         j["loads"][0] = {{"type", "gravity"}, {"acceleration", {0, -9.81}}};
       },
       "/loads/0/acceleration", "array of 3 numbers"},
      {"mesh generator count", [](json& j) { j["mesh"] = "box:1"; }, "/mesh", "[2, 1024]"},
      {"mesh generator syntax", [](json& j) { j["mesh"] = "box:4,4"; }, "/mesh", "malformed box generator"},
      {"mesh file missing", [](json& j) { j["mesh"] = "no_such_mesh.msh"; }, "/mesh", "file not found"},
      {"mesh nodes type",
       [](json& j) {
         j["mesh"] = {{"generator", "box"}, {"nodes", "4"}};
       },
       "/mesh/nodes", "expected an integer, found string"},
      {"mesh box min > max",
       [](json& j) {
         j["mesh"] = {{"generator", "box"}, {"nodes", 3}, {"min", {0, 0, 0}}, {"max", {1, 0, 1}}};
       },
       "/mesh/max", "exceed min"},
      {"mesh file and generator",
       [](json& j) {
         j["mesh"] = {{"generator", "box"}, {"file", "x.msh"}};
       },
       "/mesh", "exactly one"},
      {"mesh generator name",
       [](json& j) {
         j["mesh"] = {{"generator", "ball"}, {"nodes", 3}};
       },
       "/mesh/generator", "expected one of 'box'"},
      {"output field",
       [](json& j) {
         j["outputs"] = {{"fields", {"displacment"}}};
       },
       "/outputs/fields/0", "did you mean 'displacement'?"},
      {"duplicate output field",
       [](json& j) {
         j["outputs"] = {{"fields", {"velocity", "velocity"}}};
       },
       "/outputs/fields/1", "duplicate"},
      {"output every",
       [](json& j) {
         j["outputs"] = {{"every", 0}};
       },
       "/outputs/every", ">= 1"},
      {"output surface",
       [](json& j) {
         j["outputs"] = {{"surface", "stl"}};
       },
       "/outputs/surface", "'obj', 'ply'"},
      {"vtu type",
       [](json& j) {
         j["outputs"] = {{"vtu", 1}};
       },
       "/outputs/vtu", "expected a boolean"},
      {"collision not an object", [](json& j) { j["collision"] = 3; }, "/collision", "expected an object"},
      {"collision unknown key",
       [](json& j) {
         j["collision"] = {{"stifness", 1}};
       },
       "/collision/stifness", "did you mean 'stiffness'"},
      {"collision stiffness",
       [](json& j) {
         j["collision"] = {{"stiffness", -1}};
       },
       "/collision/stiffness", "> 0"},
      {"collision inner",
       [](json& j) {
         j["collision"] = {{"inner_iterations", 0}};
       },
       "/collision/inner_iterations", ">= 1"},
      {"collision method",
       [](json& j) {
         j["collision"] = {{"method", "fast"}};
       },
       "/collision/method", "schur"},
      {"collision region",
       [](json& j) {
         j["collision"] = {{"region", "nowhere"}};
       },
       "/collision/region", "unknown selection 'nowhere'"},
      {"collision embedded without surface",
       [](json& j) {
         j["collision"] = {{"proxies", "embedded_surface"}};
       },
       "/collision/proxies", "mesh.embedded_surface"},
      {"obstacle type",
       [](json& j) {
         j["collision"] = {{"obstacles", {{{"type", "cone"}}}}};
       },
       "/collision/obstacles/0/type", "sphere"},
      {"obstacle radius",
       [](json& j) {
         j["collision"] = {{"obstacles", {{{"type", "sphere"}, {"center", {0, 0, 0}}, {"radius", 0}}}}};
       },
       "/collision/obstacles/0/radius", "> 0"},
      {"obstacle plane normal",
       [](json& j) {
         j["collision"] = {{"obstacles", {{{"type", "plane"}, {"point", {0, 0, 0}}, {"normal", {0, 0, 0}}}}}};
       },
       "/collision/obstacles/0/normal", "nonzero"},
      {"obstacle box extents",
       [](json& j) {
         j["collision"] = {{"obstacles", {{{"type", "box"}, {"half_extents", {1, 0, 1}}}}}};
       },
       "/collision/obstacles/0/half_extents", "> 0"},
      {"obstacle mesh file",
       [](json& j) {
         j["collision"] = {{"obstacles", {{{"type", "mesh"}, {"file", "missing.obj"}}}}};
       },
       "/collision/obstacles/0/file", "missing.obj"},
      {"obstacle keyframes order",
       [](json& j) {
         j["collision"] = {{"obstacles",
                            {{{"type", "sphere"},
                              {"center", {0, 0, 0}},
                              {"radius", 1},
                              {"keyframes", {{{"frame", 2}}, {{"frame", 1}}}}}}}};
       },
       "/collision/obstacles/0/keyframes/1/frame", "strictly increasing"},
      {"version", [](json& j) { j["version"] = 2; }, "/version", "unsupported scene version 2"},
      {"root not an object", [](json& j) { j = json::array(); }, "", "expected an object"},
  };
  for (const ErrorCase& c : cases) {
    json j = base_scene();
    c.edit(j);
    try {
      (void)parse_scene(j, "case.json", scenes_dir());
      ADD_FAILURE() << c.what << ": no error";
    } catch (const SceneError& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.json_path(), c.pointer) << c.what << ": " << what;
      const std::string at = "case.json: at " + (c.pointer.empty() ? std::string("/") : c.pointer) + ": ";
      EXPECT_EQ(what.rfind(at, 0), 0u) << c.what << ": " << what;
      EXPECT_NE(what.find(c.message_part), std::string::npos) << c.what << ": " << what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << c.what << ": wrong exception type: " << e.what();
    }
  }
  // The base itself is valid.
  EXPECT_NO_THROW((void)parse_scene(base_scene(), "case.json", scenes_dir()));
}

TEST(SceneErrors, ChecksAgainstTheMesh) {
  const TetMesh mesh = make_box_from_spec("box:4");
  json j = base_scene();
  j["selections"]["far"] = {{"type", "sphere"}, {"center", {5, 5, 5}}, {"radius", 1}};
  j["attachments"][0]["selection"] = "far";
  try {
    check_scene_against_mesh(parse_scene(j, "m.json", ""), mesh);
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/attachments/0/selection") << e.what();
  }
  j = base_scene();
  j["selections"]["p"] = {{"type", "indices"}, {"nodes", {1, 64}}};
  try {
    check_scene_against_mesh(parse_scene(j, "m.json", ""), mesh);
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/selections/p") << e.what();
    EXPECT_NE(std::string(e.what()).find("64"), std::string::npos);
  }
  // A material list that leaves tets uncovered.
  j = base_scene();
  j["materials"][0]["region"] = "left";
  try {
    (void)assign_materials(parse_scene(j, "m.json", ""), mesh);
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(e.json_path(), "/materials") << e.what();
  }
}

TEST(SceneErrors, EditDistanceSuggestionsStayQuietForUnrelatedKeys) {
  json j = base_scene();
  j["materials"][0]["zzzzzz"] = 1;
  try {
    (void)parse_scene(j, "case.json", "");
    FAIL();
  } catch (const SceneError& e) {
    EXPECT_EQ(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// Every value of the full example replaced by values of every other type, and every key removed:
// the loader either accepts the result or throws SceneError, never another exception.
void collect_pointers(const json& value, const std::string& pointer, std::vector<std::string>& out) {
  out.push_back(pointer);
  if (value.is_object())
    for (const auto& item : value.items()) {
      std::string token;
      for (char c : item.key())
        token += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
      collect_pointers(item.value(), pointer + "/" + token, out);
    }
  else if (value.is_array())
    for (std::size_t i = 0; i < value.size(); ++i) collect_pointers(value[i], pointer + "/" + std::to_string(i), out);
}

TEST(SceneErrors, MutatedFullExampleNeverEscapesAsAnotherException) {
  std::ifstream in(test::fixture_path("scenes/full.json"));
  json full = json::parse(in, nullptr, true, /*ignore_comments=*/true);
  full["materials"].erase(2);  // the region-tag material, which a generated box cannot satisfy
  std::vector<std::string> pointers;
  collect_pointers(full, "", pointers);
  ASSERT_GT(pointers.size(), 100u);
  const std::vector<json> replacements{
      nullptr, 0, -1, 1e300, 2.5, "x", "all", json::array(), json::object(), json::array({1, 2, 3}), true};
  int accepted = 0, rejected = 0, checked = 0;
  const auto attempt = [&](const json& j, const std::string& what) {
    try {
      const Scene s = parse_scene(j, "full.json", scenes_dir());
      ++accepted;
      // The mesh-level checks may reject it too, but only with xpd errors.
      if (s.mesh.kind != MeshSource::Kind::Box) return;
      const TetMesh mesh = make_generated_mesh(s.mesh);
      try {
        check_scene_against_mesh(s, mesh);
        (void)assign_materials(s, mesh);
        (void)external_forces(s, mesh, Eigen::VectorXd::Ones(mesh.nodes.rows()), 3);
        ++checked;
      } catch (const SceneError&) {
      }
    } catch (const SceneError&) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
    }
  };
  for (const std::string& p : pointers) {
    if (p.empty()) continue;
    const json::json_pointer ptr(p);
    for (const json& r : replacements) {
      json j = full;
      j[ptr] = r;
      attempt(j, p + " = " + r.dump());
    }
    json j = full;
    const json::json_pointer parent = ptr.parent_pointer();
    if (j[parent].is_object())
      j[parent].erase(ptr.back());
    else
      j[parent].erase(std::stoul(ptr.back()));
    attempt(j, "erase " + p);
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace xpd
