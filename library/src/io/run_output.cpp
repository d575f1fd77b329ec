#include <fmt/format.h>

#include <filesystem>
#include <ostream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/run_output.hpp>

namespace xpd::io {
namespace fs = std::filesystem;

RunOutput::RunOutput(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw IoError(dir_, 0, "output path exists and is not a folder");
  fs::create_directories(fs::path(dir_) / "frames", ec);
  if (ec) throw IoError(dir_, 0, "cannot create output folder: " + ec.message());
  // A previous run's frames would mix with this one's: remove them (only our own file pattern).
  for (const char* sub : {"frames", "surfaces", "obstacles"}) {
    const fs::path d = fs::path(dir_) / sub;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& entry : fs::directory_iterator(d, ec)) {
      const std::string ext = entry.path().extension().string();
      if (ext == ".vtu" || ext == ".obj" || ext == ".ply") fs::remove(entry.path(), ec);
    }
  }
  fs::remove(fs::path(dir_) / "scene.json", ec);
  stats_["frames"] = nlohmann::ordered_json::array();
}

std::string RunOutput::frame_path(int frame) const { return fmt::format("{}/frames/{:04d}.vtu", dir_, frame); }

void RunOutput::write_frame(int frame, const Points& rest, const Points& x, const Tets& tets,
                            const std::vector<VtuField>& point_fields, const std::vector<VtuField>& cell_fields) {
  std::vector<VtuField> fields;
  fields.reserve(point_fields.size() + 1);
  VtuField disp{"displacement", 3, std::vector<double>(static_cast<std::size_t>(x.size()))};
  Eigen::Map<Points>(disp.values.data(), x.rows(), 3) = x - rest;
  fields.push_back(std::move(disp));
  fields.insert(fields.end(), point_fields.begin(), point_fields.end());
  write_vtu(frame_path(frame), x, tets, fields, cell_fields);
}

void RunOutput::write_surface(int frame, const SurfaceMesh& surface, const std::string& ext) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "surfaces", ec);
  io::write_surface(fmt::format("{}/surfaces/{:04d}.{}", dir_, frame, ext), surface);
}

void RunOutput::write_obstacles(int frame, const SurfaceMesh& obstacles, const std::string& ext) {
  std::error_code ec;
  fs::create_directories(fs::path(dir_) / "obstacles", ec);
  io::write_surface(fmt::format("{}/obstacles/{:04d}.{}", dir_, frame, ext), obstacles);
}

void RunOutput::append_stats(const nlohmann::ordered_json& frame_stats) {
  stats_["frames"].push_back(frame_stats);
  flush_stats();
}

void RunOutput::set_metadata(const std::string& key, const nlohmann::ordered_json& value) {
  stats_[key] = value;
  flush_stats();
}

void RunOutput::write_scene_overlay(const nlohmann::ordered_json& overlay) {
  write_file_atomic(dir_ + "/scene.json", [&](std::ostream& out) { out << overlay.dump() << "\n"; });
}

void RunOutput::flush_stats() {
  write_file_atomic(dir_ + "/stats.json", [&](std::ostream& out) { out << stats_.dump(1) << "\n"; });
}

}  // namespace xpd::io
