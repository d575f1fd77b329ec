// `xpd bench twoway`: paper 004's Table 1 analogue (Wang, Chen et al. 2023) on a scene with a
// "two_way" key: steps per frame (mean, max), time per step and per frame, the proximity-search
// share, and the PD frame time beside it, all measured in one run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "commands.hpp"
#include "progress.hpp"

namespace xpd::cli {

namespace {

struct BenchTwoWayOptions {
  std::string scene = "scenes/mat_twist.json";
  int frames = 0;  // 0: all of the scene's
  std::string device = "cpu";
  bool json = false;
};

// One run of the scene's frames with the projection on the CPU or the device; the figures, and the
// final positions in `x`.
nlohmann::ordered_json bench_one(const BenchTwoWayOptions& o, bool cuda, Points& x) {
  Scene scene = load_scene(o.scene);
  if (!scene.two_way) throw Error(fmt::format("bench twoway: {} has no \"two_way\" key", o.scene));
  scene.two_way->cuda = cuda;
  SceneSimulation sim(std::move(scene));
  const int frames = o.frames > 0 ? std::min(o.frames, sim.num_frames()) : sim.num_frames();
  Progress progress(cuda ? "frames (cuda)" : "frames", frames);
  int projected = 0, steps = 0, max_steps = 0, searches = 0, unconverged = 0, max_inverted = 0, max_target_inverted = 0;
  double projection_ms = 0, search_ms = 0, backward_ms = 0, forward_ms = 0, pd_ms = 0, max_frame_ms = 0;
  double max_stretch = 1, min_distance = INFINITY;
  int pd_unconverged = 0, pd_iterations = 0, pd_iterations_max = 0;
  for (int f = 1; f <= frames; ++f) {
    Timer t;
    const FrameStats st = sim.advance(f);
    const double frame_ms = t.elapsed_ms();
    pd_unconverged += !st.converged;
    pd_iterations += st.iterations;
    pd_iterations_max = std::max(pd_iterations_max, st.iterations);
    if (const auto& tw = sim.two_way_stats()) {
      const TwoWayStats& p = tw->projection;
      ++projected;
      steps += p.steps;
      max_steps = std::max(max_steps, p.steps);
      searches += p.searches;
      unconverged += !p.converged;
      max_inverted = std::max(max_inverted, tw->inverted_tets);
      max_target_inverted = std::max(max_target_inverted, tw->target_inverted_tets);
      projection_ms += p.ms_total;
      search_ms += p.ms_search;
      backward_ms += p.ms_backward;
      forward_ms += p.ms_forward;
      max_frame_ms = std::max(max_frame_ms, p.ms_total);
      pd_ms += frame_ms - p.ms_total;
      max_stretch = std::max(max_stretch, p.max_stretch);
      min_distance = std::min(min_distance, p.min_distance);
    } else {
      pd_ms += frame_ms;
    }
    progress.update(f, fmt::format("{} projections, {} steps", projected, steps));  // stderr
  }
  progress.finish();
  x = sim.positions();
  nlohmann::ordered_json j;
  j["device"] = cuda ? "cuda" : "cpu";
  j["frames"] = frames;
  j["nodes"] = sim.mesh().nodes.rows();
  j["surface_triangles"] = sim.two_way()->faces().rows();
  j["delta"] = sim.two_way()->options().delta;
  j["d_max"] = sim.two_way()->options().d_max;
  j["projected_frames"] = projected;
  j["unconverged_frames"] = unconverged;
  j["steps_mean"] = projected > 0 ? double(steps) / projected : 0.0;
  j["steps_max"] = max_steps;
  j["searches_per_step"] = steps > 0 ? double(searches) / steps : 0.0;
  j["ms_per_step"] = steps > 0 ? projection_ms / steps : 0.0;
  j["ms_per_frame"] = projected > 0 ? projection_ms / projected : 0.0;
  j["ms_per_frame_max"] = max_frame_ms;
  j["search_share"] = projection_ms > 0 ? search_ms / projection_ms : 0.0;
  j["backward_share"] = projection_ms > 0 ? backward_ms / projection_ms : 0.0;
  j["forward_share"] = projection_ms > 0 ? forward_ms / projection_ms : 0.0;
  j["pd_ms_per_frame"] = frames > 0 ? pd_ms / frames : 0.0;
  j["pd_unconverged_frames"] = pd_unconverged;  // the dynamics' own solve stopped at max_iterations
  j["pd_iterations_mean"] = frames > 0 ? double(pd_iterations) / frames : 0.0;
  j["pd_iterations_max"] = pd_iterations_max;
  j["min_distance"] = std::isfinite(min_distance) ? nlohmann::ordered_json(min_distance) : nullptr;
  j["max_stretch"] = max_stretch;
  j["max_inverted_tets"] = max_inverted;
  j["max_target_inverted_tets"] = max_target_inverted;  // in the PD solutions the projections started from
  return j;
}

void run_bench_twoway(const BenchTwoWayOptions& o) {
  Points x_cpu, x_cuda;
  if (o.device != "both") {
    nlohmann::ordered_json j;
    j["scene"] = o.scene;
    j.update(bench_one(o, o.device == "cuda", x_cpu));
    print_result(j, o.json);
    return;
  }
  // Both in one run: the CPU first, then the device from the same scene.
  nlohmann::ordered_json j;
  j["scene"] = o.scene;
  j["cpu"] = bench_one(o, false, x_cpu);
  j["cuda"] = bench_one(o, true, x_cuda);
  const double cpu_step = j["cpu"]["ms_per_step"], cuda_step = j["cuda"]["ms_per_step"];
  const double cpu_frame = j["cpu"]["ms_per_frame"], cuda_frame = j["cuda"]["ms_per_frame"];
  j["step_speedup"] = cuda_step > 0 ? cpu_step / cuda_step : 0.0;
  j["frame_speedup"] = cuda_frame > 0 ? cpu_frame / cuda_frame : 0.0;
  // The two runs sweep their constraints in different orders (gpu/two_way.hpp): their trajectories
  // drift apart; this is how far, at the last frame, over the model's nodes.
  j["final_max_difference"] =
      x_cpu.rows() == x_cuda.rows() && x_cpu.rows() > 0 ? (x_cpu - x_cuda).rowwise().norm().maxCoeff() : 0.0;
  print_result(j, o.json);
}

}  // namespace

void add_bench_twoway_command(CLI::App& bench) {
  auto o = std::make_shared<BenchTwoWayOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "twoway",
      "Paper 004's Table 1 analogue: runs a scene with two-way continuous collision handling and reports steps per "
      "frame, time per step and per frame, and the proximity-search share");
  cmd->add_option("--scene", o->scene, "Scene with a \"two_way\" key")->capture_default_str();
  cmd->add_option("--frames", o->frames, "Run only frames 1..N (0: all)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--device", o->device,
                  "Where the projection runs: cpu, cuda (needs -DXPD_WITH_CUDA=ON and a device), or both (the CPU "
                  "run, then the device run, with step_speedup and frame_speedup)")
      ->check(CLI::IsMember({"cpu", "cuda", "both"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON: steps_mean, steps_max, ms_per_step, ms_per_frame, search_share, unconverged_frames, "
                "min_distance, max_stretch, max_inverted_tets, max_target_inverted_tets, pd_ms_per_frame, "
                "pd_unconverged_frames, pd_iterations_mean, pd_iterations_max");
  cmd->callback([o] { run_bench_twoway(*o); });
}

}  // namespace xpd::cli
