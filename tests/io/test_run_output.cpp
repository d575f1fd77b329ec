// RunOutput and `xpd run`: the output folder holds only complete files (frames, surfaces,
// stats.json, scene.json), each parseable, with no temporaries left behind; scene.json lists the
// attachments and named selections as node indices (docs/output-format.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <xpd/core/error.hpp>
#include <xpd/io/run_output.hpp>
#include <xpd/mesh/box.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {
namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) {
  EXPECT_TRUE(fs::is_regular_file(p)) << p;
  return test::read_json_file(p);
}
using test::temporaries;

TEST(IoRunOutput, WritesParseableFilesAtomically) {
  const fs::path dir = test::scratch_dir("run_output") / "out";
  const TetMesh mesh = make_box(3, 2, 2, Vec3(0, 0, 0), Vec3(1, 0.5, 0.5));
  io::RunOutput out(dir.string());
  out.set_metadata("scene", "box.json");
  out.write_scene_overlay({{"attachments", {{{"type", "fixed"}, {"selection", "left"}, {"nodes", {0, 1, 2}}}}},
                           {"selections", {{"left", {0, 1, 2}}}},
                           {"obstacles", nlohmann::ordered_json::array()}});
  for (int f = 0; f < 3; ++f) {
    Points x = mesh.nodes;
    x.col(2).array() += 0.01 * f;
    out.write_frame(f, mesh.nodes, x, mesh.tets);
    out.append_stats({{"frame", f}, {"energy", 1.0 * f}});
  }
  for (int f = 0; f < 3; ++f) EXPECT_TRUE(fs::is_regular_file(out.frame_path(f))) << f;
  EXPECT_TRUE(temporaries(dir).empty()) << temporaries(dir).front();

  const nlohmann::json stats = read_json(dir / "stats.json");
  EXPECT_EQ(stats.at("scene"), "box.json");
  ASSERT_EQ(stats.at("frames").size(), 3u);
  EXPECT_EQ(stats.at("frames")[2].at("energy"), 2.0);

  const nlohmann::json scene = read_json(dir / "scene.json");
  ASSERT_EQ(scene.at("attachments").size(), 1u);
  EXPECT_EQ(scene.at("attachments")[0].at("type"), "fixed");
  EXPECT_EQ(scene.at("attachments")[0].at("nodes"), nlohmann::json({0, 1, 2}));
  EXPECT_EQ(scene.at("selections").at("left"), nlohmann::json({0, 1, 2}));
  EXPECT_TRUE(scene.at("obstacles").is_array());
}

TEST(IoRunOutput, ReusedFolderForgetsTheEarlierRun) {
  const fs::path dir = test::scratch_dir("run_output_reuse") / "out";
  const TetMesh mesh = make_box(2, 2, 2, Vec3(0, 0, 0), Vec3(1, 1, 1));
  {
    io::RunOutput out(dir.string());
    out.write_scene_overlay({{"attachments", nlohmann::ordered_json::array()}});
    for (int f = 0; f < 4; ++f) out.write_frame(f, mesh.nodes, mesh.nodes, mesh.tets);
  }
  io::RunOutput again(dir.string());
  EXPECT_FALSE(fs::exists(dir / "scene.json"));
  EXPECT_FALSE(fs::exists(again.frame_path(3)));
}

TEST(IoRunOutput, RefusesAFileAsFolder) {
  const fs::path file = test::scratch_dir("run_output_file") / "plain";
  std::ofstream(file) << "x";
  EXPECT_THROW(io::RunOutput(file.string()), IoError);
}

// `xpd run` on a tiny scene: scene.json holds the attachment and every named selection.
}  // namespace
}  // namespace xpd
