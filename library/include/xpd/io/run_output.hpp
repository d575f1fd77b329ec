#pragma once
// The output folder of a run: OUT/frames/NNNN.vtu (frame 0 = initial state), optional embedded or
// boundary surfaces OUT/surfaces/NNNN.{obj,ply}, OUT/stats.json = {"frames": [ {...}, ... ]}, and
// OUT/scene.json, the viewer's overlay (attachments, selections, obstacles; docs/output-format.md).
// Every file is written atomically, and stats.json is rewritten after each frame, so a run that is
// interrupted leaves only complete, parseable files behind.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <xpd/io/vtu.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io {

class RunOutput {
 public:
  /// Creates `dir` and `dir/frames` (fails with IoError if `dir` exists and is not a directory).
  /// Frame files and the scene.json of an earlier run in the same folder are removed so the
  /// folder describes one run only.
  explicit RunOutput(std::string dir);

  /// Writes frames/NNNN.vtu with the current node positions and a "displacement" point field
  /// (x − rest) plus any extra fields.
  void write_frame(int frame, const Points& rest, const Points& x, const Tets& tets,
                   const std::vector<VtuField>& point_fields = {}, const std::vector<VtuField>& cell_fields = {});
  /// Writes surfaces/NNNN.EXT (EXT = "obj" or "ply").
  void write_surface(int frame, const SurfaceMesh& surface, const std::string& ext);
  /// Writes obstacles/NNNN.EXT: the kinematic obstacles' triangles where they stand.
  void write_obstacles(int frame, const SurfaceMesh& obstacles, const std::string& ext);

  /// Appends one frame's statistics and rewrites stats.json.
  void append_stats(const nlohmann::ordered_json& frame_stats);
  /// Top-level metadata stored next to "frames" (scene name, mesh counts, ...).
  void set_metadata(const std::string& key, const nlohmann::ordered_json& value);

  /// Writes scene.json (atomically): what the viewer draws on top of the frames, e.g.
  /// {"attachments": [...], "selections": {...}, "obstacles": []}. Written once per run.
  void write_scene_overlay(const nlohmann::ordered_json& overlay);

  const std::string& dir() const { return dir_; }
  std::string frame_path(int frame) const;

 private:
  void flush_stats();
  std::string dir_;
  nlohmann::ordered_json stats_;
};

}  // namespace xpd::io
