#pragma once
// The run writer: everything a run of a scene writes, in one place for every front end (`xpd run`,
// the tests, the Python module, programs embedding the library). The folder layout, the files and
// every key are described in docs/output-format.md:
//   OUT/frames/NNNN.vtu      frame 0 (initial state), then every outputs.every-th frame and the
//                            last, each with its own connectivity (surgery scenes change it),
//                            with "displacement" and the scene's outputs.fields
//                            (velocity, external_force, material, volume_ratio);
//   OUT/surfaces/NNNN.EXT    the embedded surface of those frames (outputs.surface: obj | ply);
//   OUT/stats.json           {"frames": [...], metadata}, rewritten after every frame (surgery
//                            scenes: each frame's topology events, factor update time, nnz(L));
//   OUT/scene.json           attachments, selections and obstacles for the viewer, written once.
// Files are written atomically (io::RunOutput): an interrupted run leaves complete files only.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <xpd/io/run_output.hpp>
#include <xpd/scene/scene_simulation.hpp>

namespace xpd {

/// One frame's statistics as written to stats.json ("frame", "energy", "residual", ...);
/// `interactive` adds "fps" (1000 / wall_ms of the frame's solve).
nlohmann::ordered_json frame_stats_json(int frame, const FrameStats& stats,
                                        const std::optional<CollisionFrameStats>& collision, bool interactive = false);

/// The viewer overlay of OUT/scene.json: attachments and named selections as node lists (lists
/// over 200,000 nodes are cut, with "count" and "truncated"), and the obstacles the viewer draws
/// (sphere, plane, box) where they stand at frame 0.
nlohmann::ordered_json scene_overlay(const SceneSimulation& sim);

/// What a run did, summed over its frames.
struct RunSummary {
  int frames = 0;              ///< frames computed (1..frames)
  int iterations = 0;          ///< PD (outer) iterations of all frames
  int unconverged_frames = 0;  ///< frames that stopped at max_iterations
  double wall_ms = 0;          ///< wall time of all frames (setup excluded)
  PhaseTimings timings_ms;     ///< phase times summed over all frames
  /// Collision scenes: collision timings and inner iterations summed over all frames.
  std::optional<CollisionFrameStats> collision;
  double max_penetration = 0;  ///< collision scenes: deepest penetration after any frame [m]
  /// Interactive scenes (solver.interactive): frames per second over all frames (frames / wall
  /// time of their solves), and the mean and largest relative residual the frames left.
  double fps = 0;
  double mean_relative_residual = 0;
  double max_relative_residual = 0;
};

/// Progress of a run, reported after every frame.
struct FrameReport {
  int frame = 0;   ///< the frame just computed (1-based)
  int frames = 0;  ///< frames the run computes
  const FrameStats* stats = nullptr;
  const CollisionFrameStats* collision = nullptr;  ///< null without collision handling
};

struct RunOptions {
  /// Compute only frames 1..max_frames (0 = all frames of the scene); ramps and keyframes keep the
  /// scene's frame count.
  int max_frames = 0;
  /// Called after every frame has been written (e.g. a progress bar); may be empty.
  std::function<void(const FrameReport&)> on_frame;
};

/// Writes one run of `sim` into a folder. Construction creates the folder, writes the metadata,
/// scene.json and frame 0; write_frame() writes what one frame produces; finish() the closing
/// metadata. The simulation is borrowed and must outlive the writer.
class RunWriter {
 public:
  /// Throws IoError when the folder cannot be created or written.
  RunWriter(const SceneSimulation& sim, const std::string& out_dir, int frames);
  /// After sim.advance(frame): the frame's VTU/surface (by the scene's output cadence) and its
  /// statistics.
  void write_frame(int frame, const FrameStats& stats);
  /// Run metadata after the last frame (unconverged frames, collision figures).
  void finish(const RunSummary& summary);
  /// The run's frame count when it differs from the constructor's (a live session runs on past
  /// the scene's frames): the "frames_computed" metadata and the last frame, always written.
  void set_frames_computed(int frames);
  const io::RunOutput& output() const { return out_; }

 private:
  void write_geometry(int frame);
  const SceneSimulation* sim_;
  io::RunOutput out_;
  int frames_;
  Triangles boundary_;         // boundary faces of the tet mesh, for "surface" outputs without an embedded surface
  int boundary_version_ = -1;  // the simulation's topology_version() boundary_ was found for
};

/// Runs the scene into `out_dir` (RunWriter) and returns the summary. This is `xpd run`.
RunSummary run_scene(SceneSimulation& sim, const std::string& out_dir, const RunOptions& options = {});

}  // namespace xpd
