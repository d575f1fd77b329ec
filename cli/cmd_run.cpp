// `xpd run SCENE -o OUT`: load and validate the scene, write frame 0, step the frames.
#include "commands.hpp"
#include "progress.hpp"

#include <xpd/core/error.hpp>
#include <xpd/io/run_output.hpp>
#include <xpd/io/scene.hpp>

#include <fmt/format.h>
#include <memory>

namespace xpd::cli {
namespace {

struct RunOptions {
  std::string scene;
  std::string out;
};

void run_scene(const RunOptions& o) {
  const Scene scene = load_scene(o.scene);
  const TetMesh mesh = build_scene_mesh(scene.mesh);
  check_scene_against_mesh(scene, mesh);
  (void)assign_materials(scene, mesh);
  io::RunOutput output(o.out);
  output.set_metadata("scene", scene.file);
  output.set_metadata("nodes", mesh.nodes.rows());
  output.set_metadata("tets", mesh.tets.rows());
  output.write_frame(0, mesh.nodes, mesh.nodes, mesh.tets);
  output.append_stats(nlohmann::ordered_json{{"frame", 0}});
  fmt::print("{}: {} nodes, {} tets; wrote {}\n", scene.file, mesh.nodes.rows(), mesh.tets.rows(), output.frame_path(0));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a scene and write its frames and statistics");
  cmd->add_option("scene", o->scene, "Scene file (JSON, see docs/scene-format.md)")->required();
  cmd->add_option("-o,--output", o->out, "Output folder (frames/NNNN.vtu, stats.json)")->required();
  cmd->callback([o] { run_scene(*o); });
}

void add_bench_command(CLI::App&) {}

}  // namespace xpd::cli
