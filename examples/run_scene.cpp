// run_scene: runs a scene file (docs/scene-format.md) and writes what `xpd run` writes (frames,
// stats.json, scene.json; docs/output-format.md) through the library's run writer.
// Usage: run_scene SCENE.json OUT_DIR [MAX_FRAMES]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <xpd/scene/run_writer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SCENE.json OUT_DIR [MAX_FRAMES]\n", argv[0]);
    return 2;
  }
  try {
    xpd::SceneSimulation sim(xpd::load_scene(argv[1]));
    xpd::RunOptions options;
    if (argc > 3) options.max_frames = std::atoi(argv[3]);
    options.on_frame = [](const xpd::FrameReport& r) {
      std::printf("frame %d/%d: %d iterations, residual %.3g\n", r.frame, r.frames, r.stats->iterations,
                  r.stats->residual);
    };
    const xpd::RunSummary summary = xpd::run_scene(sim, argv[2], options);
    std::printf("run_scene: %d frames, %d iterations, %d unconverged, %.1f ms; output in %s\n", summary.frames,
                summary.iterations, summary.unconverged_frames, summary.wall_ms, argv[2]);
    return summary.unconverged_frames == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run_scene: %s\n", e.what());
    return 1;
  }
}
