// RunOutput and `xpd run`: the output folder holds only complete files (frames, surfaces,
// stats.json, scene.json), each parseable, with no temporaries left behind; scene.json lists the
// attachments and named selections as node indices (docs/output-format.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <fstream>
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
  std::ifstream in(p);
  EXPECT_TRUE(in.good()) << p;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());  // throws on a truncated or malformed file
}

// Every regular file under `dir` whose name contains ".tmp" (write_file_atomic's temporaries).
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

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
TEST(IoRunOutput, XpdRunWritesSceneOverlay) {
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
  const std::string cmd = std::string("\"") + XPD_CLI_PATH + "\" run -q \"" + scene.string() + "\" -o \"" +
                          out.string() + "\" > \"" + (work / "log.txt").string() + "\" 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream log(work / "log.txt");
    std::stringstream ss;
    ss << log.rdbuf();
    FAIL() << cmd << " exited with " << rc << ":\n" << ss.str();
  }

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

  EXPECT_EQ(read_json(out / "stats.json").at("frames").size(), 3u);
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

}  // namespace
}  // namespace xpd
