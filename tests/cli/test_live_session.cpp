// The live surgery session behind `xpd view --live` (cli/live_session.hpp), without a browser: events
// posted as JSON are applied at the next frame, refused ones leave the state as it was, and the
// session's events.json replayed by `xpd run --events` (merge_recorded_events + the scene) gives the
// same positions in every frame. The browser side is tests/viewer/live_e2e.mjs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "live_session.hpp"
#include "solver/pd_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kScene = std::string(XPD_SOURCE_DIR) + "/tests/viewer/live_slab.json";
// The slab: 2 × 0.4 × 1, top at y = 0.4; an incision across it at x = 1, 0.25 deep.
const char* kIncision = R"({"tool": "cut", "path": [[1.0, 0.4, 0.2], [1.0, 0.4, 0.8]], "sweep": [0, -0.25, 0]})";

json body_of(const cli::http::PostReply& r) { return json::parse(r.body); }

cli::LiveOptions options_for(const fs::path& out) {
  cli::LiveOptions o;
  o.scene = kScene;
  o.out = out.string();
  o.quiet = true;
  return o;
}

TEST(LiveSession, EventsApplyAtTheNextFrameAndRefusedOnesChangeNothing) {
  const fs::path out = test::scratch_dir("live_session_events");
  cli::LiveSession live(options_for(out));
  live.start();
  live.wait_until_idle();
  const SceneSimulation& sim = live.simulation();
  const int frames = sim.num_frames();
  ASSERT_EQ(sim.frames_done(), frames);
  const Eigen::Index nodes0 = sim.mesh().nodes.rows();

  // Malformed, misplaced and unknown requests: 400/404, nothing applied.
  EXPECT_EQ(live.post("/api/event", "{not json").status, 400);
  EXPECT_EQ(
      live.post("/api/event", R"({"tool": "cut", "frame": 9, "plane": {"point": [1, 0, 0], "normal": [1, 0, 0]}})")
          .status,
      400);
  EXPECT_EQ(live.post("/api/event", R"({"tool": "scalpel"})").status, 400);
  EXPECT_EQ(live.post("/api/event", R"({"tool": "suture", "a": [0, 0, 0], "b": [1, 0, 0], "stiffness": 1,
                                        "duration": 2})")
                .status,
            400);
  EXPECT_EQ(live.post("/api/event", R"({"tool": 3, "duration": 2})").status, 400);
  EXPECT_EQ(live.post("/api/event", "[1, 2]").status, 400);
  EXPECT_EQ(live.post("/api/other", "{}").status, 404);
  // A cut that misses the mesh: 422 naming the cause; frame, mesh and positions unchanged.
  const Points x_before = sim.positions();
  const cli::http::PostReply miss =
      live.post("/api/event", R"({"tool": "cut", "path": [[5, 0.4, 0.2], [5, 0.4, 0.8]], "sweep": [0, -0.25, 0]})");
  EXPECT_EQ(miss.status, 422);
  EXPECT_NE(body_of(miss).value("error", "").find("crosses no interior face"), std::string::npos) << miss.body;
  EXPECT_EQ(sim.frames_done(), frames);
  EXPECT_EQ(sim.mesh().nodes.rows(), nodes0);
  EXPECT_EQ(sim.scene().surgery->events.size(), 0u);
  EXPECT_EQ((sim.positions() - x_before).cwiseAbs().maxCoeff(), 0.0);

  // The incision: applied before frame frames + 1, nodes split along it, and the wound opens
  // under the slab's tension: every copy moves away from its original in x (the pull's direction).
  const cli::http::PostReply cut = live.post("/api/event", kIncision);
  ASSERT_EQ(cut.status, 200) << cut.body;
  const json c = body_of(cut);
  EXPECT_EQ(c["frame"].get<int>(), frames + 1);
  EXPECT_GT(c["faces_cut"].get<int>(), 0);
  live.wait_until_idle();
  const Eigen::Index nodes1 = sim.mesh().nodes.rows();
  EXPECT_GT(nodes1, nodes0);
  EXPECT_EQ(c["nodes"].get<Eigen::Index>(), nodes1);
  const TetMesh& mesh = sim.mesh();
  double min_gap = 1e300;
  for (Eigen::Index copy = nodes0; copy < nodes1; ++copy) {
    Eigen::Index original = -1;
    for (Eigen::Index v = 0; v < nodes0; ++v)
      if ((mesh.nodes.row(v) - mesh.nodes.row(copy)).norm() == 0) original = v;
    ASSERT_GE(original, 0) << "node " << copy << " is not a copy of an original node";
    min_gap = std::min(min_gap, std::abs(sim.positions()(copy, 0) - sim.positions()(original, 0)));
  }
  test::report("live incision: smallest opening of a split node pair (x)", min_gap, 1e-3);
  EXPECT_GT(min_gap, 1e-3);

  // A hook pulling over 3 frames: answered after its first, finished before the session idles.
  // (no stiffness: the session's default, 10 μ h̄, recorded with the event)
  const cli::http::PostReply hook = live.post(
      "/api/event", R"({"tool": "hook", "point": [1.4, 0.35, 0.5], "target": [1.4, 0.8, 0.5], "duration": 3})");
  ASSERT_EQ(hook.status, 200) << hook.body;
  EXPECT_EQ(body_of(hook)["last_frame"].get<int>(), frames + 4);
  live.wait_until_idle();
  EXPECT_EQ(sim.frames_done(), frames + 4);
  const json idx = json::parse(live.index_json());
  EXPECT_EQ(idx["live"]["state"], "waiting");
  EXPECT_EQ(idx["live"]["events"].get<int>(), 2);
  EXPECT_EQ(idx["frames"].size(), static_cast<std::size_t>(frames + 5));
  live.stop();
  const json rec = test::read_json_file(out / "events.json");
  EXPECT_EQ(rec["frames"].get<int>(), frames + 4);
  ASSERT_EQ(rec["events"].size(), 2u);
  EXPECT_EQ(rec["events"][0]["frame"].get<int>(), frames + 1);
  EXPECT_EQ(rec["events"][1]["frames"], json::array({frames + 2, frames + 4}));
  EXPECT_EQ(rec["events"][1]["stiffness"].get<double>(), idx["live"]["default_stiffness"].get<double>());
  EXPECT_GT(rec["events"][1]["stiffness"].get<double>(), 0);
  EXPECT_EQ(test::read_json_file(out / "stats.json")["frames_computed"].get<int>(), frames + 4);
}

TEST(LiveSession, ReplayOfEventsJsonGivesTheSessionsFrames) {
  const fs::path out = test::scratch_dir("live_session_replay");
  cli::LiveSession live(options_for(out));
  live.start();
  ASSERT_EQ(live.post("/api/event", kIncision).status, 200);
  ASSERT_EQ(live.post("/api/event", R"({"tool": "hook", "point": [0.6, 0.35, 0.5], "target": [0.6, 0.9, 0.5],
                                         "stiffness": 2e4, "duration": 2})")
                .status,
            200);
  ASSERT_EQ(live.post("/api/event", R"({"tool": "suture", "a": [0.97, 0.38, 0.5], "b": [1.03, 0.38, 0.5],
                                         "stiffness": 1e5})")
                .status,
            200);
  live.wait_until_idle();
  live.stop();
  const json rec = test::read_json_file(out / "events.json");
  const int frames = rec["frames"].get<int>();

  SceneSimulation replay(load_scene(kScene, [&](json& doc) { cli::merge_recorded_events(doc, rec); }));
  ASSERT_EQ(replay.num_frames(), frames);
  double worst = 0;
  for (int f = 1; f <= frames; ++f) {
    replay.advance(f);
    const TetMesh v = io::read_tet_mesh((out / "frames" / fmt::format("{:04d}.vtu", f)).string());
    ASSERT_EQ(v.nodes.rows(), replay.positions().rows()) << "frame " << f;
    ASSERT_EQ(v.tets.rows(), replay.mesh().tets.rows()) << "frame " << f;
    worst =
        std::max(worst, (v.nodes - replay.positions()).cwiseAbs().maxCoeff() / test::bbox_diagonal(replay.positions()));
  }
  test::report("live session vs replay: max |dx| / bbox diagonal", worst, 1e-8);
  EXPECT_LE(worst, 1e-8);
}

// The merge behind `xpd run --events`: events appended, solver.frames the largest of the recorded
// frame count and every event's last frame (an event cut short by a stop is replayed whole), bone
// attachments without pose_frame keep reaching their pose at the scene's own last frame.
TEST(LiveSession, RecordedEventsMergeIntoTheScene) {
  json scene = json::parse(R"({ "solver": { "frames": 4 }, "attachments": [
      { "type": "bone", "selection": "all" }, { "type": "bone", "pose_frame": 2 }, { "type": "fixed" } ],
      "surgery": { "events": [{ "tool": "cut", "frame": 2 }] } })");
  const json recorded = json::parse(R"({ "frames": 6, "events": [
      { "tool": "cut", "frame": 5 }, { "tool": "hook", "frames": [6, 9] } ] })");
  cli::merge_recorded_events(scene, recorded);
  EXPECT_EQ(scene["solver"]["frames"].get<int>(), 9);
  EXPECT_EQ(scene["surgery"]["events"].size(), 3u);
  EXPECT_EQ(scene["surgery"]["events"][2]["frames"], json::array({6, 9}));
  EXPECT_EQ(scene["attachments"][0]["pose_frame"].get<int>(), 4);
  EXPECT_EQ(scene["attachments"][1]["pose_frame"].get<int>(), 2);
  EXPECT_FALSE(scene["attachments"][2].contains("pose_frame"));
  json plain = json::parse(R"({ "solver": { "frames": 10 } })");  // no surgery key yet
  cli::merge_recorded_events(plain, recorded);
  EXPECT_EQ(plain["solver"]["frames"].get<int>(), 10);
  EXPECT_EQ(plain["surgery"]["events"].size(), 2u);
  EXPECT_THROW(cli::merge_recorded_events(plain, json::parse(R"({ "frames": 3 })")), Error);
}

// "Through tets" in the page: an incision posted with "mode": "split" on a scene whose tissue is an
// embedded surface (here the slab's own boundary) cuts through the tets the blade crosses, between
// two node layers where no face could follow it, and the wound opens under the slab's tension; on
// the plain slab the same event is refused (400, naming what it needs) and changes nothing, and a
// blade that misses the tissue is refused (422) without stopping the session.
TEST(LiveSession, ASplitIncisionCutsThroughTetsWhereTheSceneHasAnEmbeddedSurface) {
  const fs::path out = test::scratch_dir("live_session_split");
  // x = 1.05: halfway between the node layers x = 1.0 and 1.1.
  const char* split = R"({"tool": "cut", "mode": "split", "path": [[1.05, 0.45, 0.2], [1.05, 0.45, 0.8]],
                          "sweep": [0, -0.3, 0]})";
  {
    cli::LiveSession live(options_for(out / "plain"));
    live.start();
    live.wait_until_idle();
    const SceneSimulation& sim = live.simulation();
    const Eigen::Index nodes0 = sim.mesh().nodes.rows();
    const cli::http::PostReply r = live.post("/api/event", split);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(body_of(r).value("error", "").find("embedded surface"), std::string::npos) << r.body;
    EXPECT_EQ(sim.mesh().nodes.rows(), nodes0);
    EXPECT_EQ(sim.scene().surgery->events.size(), 0u);
    live.stop();
  }
  // The slab with its boundary as the embedded surface.
  json scene = test::read_json_with_comments(kScene);
  {
    const SceneSimulation plain(load_scene(kScene));
    io::write_surface((out / "slab.obj").string(), SurfaceMesh{plain.mesh().nodes, boundary_faces(plain.mesh().tets)});
  }
  scene["mesh"]["embedded_surface"] = (out / "slab.obj").string();
  const fs::path file = out / "slab_embedded.json";
  {
    std::ofstream f(file);
    f << scene.dump(2);
  }
  cli::LiveOptions o = options_for(out / "embedded");
  o.scene = file.string();
  cli::LiveSession live(o);
  live.start();
  live.wait_until_idle();
  const SceneSimulation& sim = live.simulation();
  const Eigen::Index nodes0 = sim.mesh().nodes.rows();
  // A blade beside the slab: refused (422) and the session goes on, nothing changed.
  const cli::http::PostReply miss =
      live.post("/api/event",
                R"({"tool": "cut", "mode": "split", "path": [[5, 0.45, 0.2], [5, 0.45, 0.8]], "sweep": [0, -0.3, 0]})");
  EXPECT_EQ(miss.status, 422) << miss.body;
  EXPECT_NE(body_of(miss).value("error", "").find("cuts through no tet"), std::string::npos) << miss.body;
  live.wait_until_idle();  // the reply comes before the worker is back to waiting
  EXPECT_EQ(json::parse(live.index_json())["live"]["state"], "waiting");
  EXPECT_EQ(sim.mesh().nodes.rows(), nodes0);
  const cli::http::PostReply r = live.post("/api/event", split);
  ASSERT_EQ(r.status, 200) << r.body;
  const json b = body_of(r);
  EXPECT_GT(b["tets_split"].get<int>(), 0);
  EXPECT_EQ(b["faces_cut"].get<int>(), 0);
  live.wait_until_idle();
  ASSERT_GT(sim.mesh().nodes.rows(), nodes0);
  double gap = 0;  // the widest opening between a node and its copy, in x (the pull's direction)
  for (Eigen::Index c = nodes0; c < sim.mesh().nodes.rows(); ++c) {
    const int v = sim.surgery()->cutter().original(static_cast<int>(c));
    gap = std::max(gap, std::abs(sim.positions()(c, 0) - sim.positions()(v, 0)));
  }
  test::report("live split incision: widest opening of a node and its copy (x)", gap, 1e-3);
  EXPECT_GT(gap, 1e-3);
  live.stop();
}

}  // namespace
}  // namespace xpd
