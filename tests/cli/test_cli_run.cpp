// `xpd run` is the library's run writer plus a progress bar and a timing table: its folder equals,
// file for file and byte for byte, what run_scene() writes for the same scene, except the wall-clock
// figures of stats.json (the keys ending in "_ms" and "timings_ms", which differ between any two
// runs); and it prints the per-phase table. This is the only test that runs the CLI.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Relative paths of every regular file under dir.
std::set<std::string> files_under(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

// stats.json with every wall-clock figure zeroed (keys ending in "_ms", and all of "timings_ms").
nlohmann::ordered_json without_clock(nlohmann::ordered_json j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string& k = it.key();
      if (k == "timings_ms" || (k.size() > 3 && k.compare(k.size() - 3, 3, "_ms") == 0)) {
        if (it->is_object())
          for (auto& v : *it) v = 0;
        else
          *it = 0;
      } else {
        *it = without_clock(*it);
      }
    }
  } else if (j.is_array()) {
    for (auto& v : j) v = without_clock(v);
  }
  return j;
}

void expect_same_folder(const fs::path& cli, const fs::path& lib) {
  const std::set<std::string> a = files_under(cli), b = files_under(lib);
  ASSERT_EQ(a, b);
  for (const std::string& f : a) {
    SCOPED_TRACE(f);
    if (f == "stats.json") {
      const std::string sa = read_bytes(cli / f), sb = read_bytes(lib / f);
      EXPECT_EQ(without_clock(nlohmann::ordered_json::parse(sa)).dump(),
                without_clock(nlohmann::ordered_json::parse(sb)).dump());
    } else {
      EXPECT_TRUE(read_bytes(cli / f) == read_bytes(lib / f)) << "files differ";
    }
  }
}

struct Case {
  const char* scene;
  int frames;
};

TEST(CliRun, WritesExactlyWhatTheRunWriterWrites) {
  // twist: plain PD; sphere_slab: collisions (contacts from frame 1), with its obstacle overlay.
  for (const Case c : {Case{"scenes/twist.json", 2}, Case{"scenes/sphere_slab.json", 2}}) {
    SCOPED_TRACE(c.scene);
    std::string scene = std::string(XPD_SOURCE_DIR) + "/" + c.scene;
    const fs::path work = test::scratch_dir(std::string("cli_run_") + std::to_string(c.frames));
    if (std::string(c.scene).find("slab") != std::string::npos) {
      // The shipped mesh took most of this test's 32 s; the folder comparison does not depend on it.
      scene = (work / "sphere_slab.json").string();
      std::ofstream(scene) << test::coarse_sphere_slab().dump(2);
    }
    const std::string cmd = std::string("\"") + XPD_CLI_PATH + "\" run -q \"" + scene + "\" -o \"" +
                            (work / "cli").string() + "\" --frames " + std::to_string(c.frames) + " > \"" +
                            (work / "log.txt").string() + "\" 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << read_bytes(work / "log.txt");
    SceneSimulation sim(load_scene(scene));
    RunOptions o;
    o.max_frames = c.frames;
    (void)run_scene(sim, (work / "lib").string(), o);
    expect_same_folder(work / "cli", work / "lib");
    // The CLI's own part: the per-phase table.
    const std::string log = read_bytes(work / "log.txt");
    EXPECT_NE(log.find("PD iteration total"), std::string::npos) << log;
    if (std::string(c.scene).find("slab") != std::string::npos) {
      EXPECT_NE(log.find("Inner loop"), std::string::npos) << log;
      EXPECT_NE(log.find("Backward substitution"), std::string::npos) << log;
    }
  }
}

}  // namespace
}  // namespace xpd
