// The scene format's "actuation" entries: shape-targeted tets (Wang 2025, §6.3). A bar fixed at
// x = 0 whose every tet targets S = diag(1.2, 1, 1) reaches the stretched bar x = S X exactly (the
// energy's minimum is 0 there); errors name their JSON pointer.
#include <gtest/gtest.h>

#include <xpd/core/error.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

namespace xpd {
namespace {

using nlohmann::json;

json bar(const json& actuation) {
  json j = json::parse(R"({
    "mesh": {"generator": "box", "nodes": [7, 3, 3], "min": [0, 0, 0], "max": [2, 0.5, 0.5]},
    "selections": {
      "root": {"type": "half_space", "normal": [1, 0, 0], "offset": 0.01},
      "front": {"type": "half_space", "normal": [-1, 0, 0], "offset": -1.0}
    },
    "materials": [{"mu": 1e4}],
    "attachments": [{"selection": "root", "type": "fixed", "stiffness": 1e8}],
    "solver": {"type": "quasistatic", "frames": 1, "max_iterations": 5000, "tolerance": 1e-10,
               "accelerator": "anderson"}
  })");
  j["actuation"] = actuation;
  return j;
}

TEST(SceneActuation, StretchTargetGivesTheStretchedBar) {
  SceneSimulation sim(parse_scene(bar(json::parse(R"([{"target": [0.2, 0, 0, 0, 0, 0]}])")), "bar.json", ""));
  const Model& model = sim.model();
  ASSERT_EQ(model.initial_inputs().shape_targets.rows(), model.num_tets());
  const FrameStats st = sim.advance(1);
  ASSERT_TRUE(st.converged);
  Points expected = model.rest_positions();
  expected.col(0) *= 1.2;
  const double err = (sim.positions() - expected).rowwise().norm().maxCoeff();
  EXPECT_LT(err, 1e-6 * 2.0) << "max node error " << err;
}

TEST(SceneActuation, KeyframesDriveTheTargetPerFrame) {
  // b0 from 0 at frame 0 to 0.2 at frame 2 (linear): the bar is stretched by 1.1, then by 1.2. No
  // extrapolated warm start: from frame 1's equilibrium it would land exactly on frame 2's, where
  // plain PD's relative test (no loads) cannot be met.
  json j = bar(json::parse(R"([{"keyframes": [{"frame": 0, "target": [0, 0, 0, 0, 0, 0]},
                                               {"frame": 2, "target": [0.2, 0, 0, 0, 0, 0]}]}])"));
  j["solver"]["frames"] = 3;
  SceneSimulation sim(parse_scene(j, "bar.json", ""));
  sim.set_extrapolation(false);
  EXPECT_EQ(sim.model().initial_inputs().shape_targets.cwiseAbs().maxCoeff(), 0.0);
  for (const auto& [frame, stretch] : {std::pair{1, 1.1}, std::pair{2, 1.2}}) {
    const FrameStats st = sim.advance(frame);
    ASSERT_TRUE(st.converged) << "frame " << frame;
    Points expected = sim.model().rest_positions();
    expected.col(0) *= stretch;
    EXPECT_LT((sim.positions() - expected).rowwise().norm().maxCoeff(), 2e-6) << "frame " << frame;
  }
  // Constant after the last keyframe, and before the first.
  const Actuation& act = sim.scene().actuation[0];
  EXPECT_EQ(act.target_at(3)[0], 0.2);
  EXPECT_EQ(act.target_at(-1)[0], 0.0);
  EXPECT_DOUBLE_EQ(act.target_at(0.5)[0], 0.05);
}

TEST(SceneActuation, RegionsStiffnessAndOrder) {
  // "front" (x ≥ 1) actuated with its own
  // stiffness; rows follow tet order, each with the entry's initial target.
  const Scene scene = parse_scene(
      bar(json::parse(R"([{"region": "front", "stiffness": 3e4, "target": [0, 0.1, 0, 0, 0, 0]}])")), "bar.json", "");
  ASSERT_EQ(scene.actuation.size(), 1u);
  EXPECT_EQ(*scene.actuation[0].stiffness, 3e4);
  SceneSimulation sim(scene);
  const std::vector<int> entry = assign_actuation(sim.scene(), sim.mesh());
  int targeted = 0;
  for (int e : entry) targeted += e == 0;
  ASSERT_GT(targeted, 0);
  ASSERT_LT(targeted, sim.model().num_tets());
  const ShapeTargetParams& b = sim.model().initial_inputs().shape_targets;
  ASSERT_EQ(b.rows(), targeted);
  for (Eigen::Index r = 0; r < b.rows(); ++r) EXPECT_EQ(b(r, 1), 0.1);
}

TEST(SceneActuation, ErrorsNameTheirPointer) {
  auto pointer_of = [](const json& actuation) -> std::string {
    try {
      SceneSimulation sim(parse_scene(bar(actuation), "bar.json", ""));
    } catch (const SceneError& e) {
      return e.json_path();
    }
    return "(no error)";
  };
  EXPECT_EQ(pointer_of(json::parse(R"([{"target": [0, 0, 0]}])")), "/actuation/0/target");
  EXPECT_EQ(pointer_of(json::parse(R"([{"stiffness": -1}])")), "/actuation/0/stiffness");
  EXPECT_EQ(pointer_of(json::parse(R"([{"region": "nowhere"}])")), "/actuation/0/region");
  EXPECT_EQ(pointer_of(json::parse(R"([{"muscle": 1}])")), "/actuation/0/muscle");
  EXPECT_EQ(pointer_of(json::parse(
                R"([{"target": [0, 0, 0, 0, 0, 0], "keyframes": [{"frame": 0, "target": [0, 0, 0, 0, 0, 0]}]}])")),
            "/actuation/0/keyframes");
  EXPECT_EQ(pointer_of(json::parse(R"([{"keyframes": [{"frame": 2, "target": [0, 0, 0, 0, 0, 0]},
                                                      {"frame": 1, "target": [0, 0, 0, 0, 0, 0]}]}])")),
            "/actuation/0/keyframes/1/frame");
}

}  // namespace
}  // namespace xpd
