// The run folder served by `xpd view` and `xpd render` (run_folder.hpp).
#include "run_folder.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <system_error>
#include <xpd/core/error.hpp>

namespace xpd::cli {

namespace fs = std::filesystem;

bool is_frame_name(const std::string& name, const std::string& ext) {
  if (name.size() <= ext.size() + 1 || name.compare(name.size() - ext.size(), ext.size(), ext) != 0) return false;
  const std::string stem = name.substr(0, name.size() - ext.size() - 1);
  if (name[stem.size()] != '.') return false;
  return !stem.empty() && std::all_of(stem.begin(), stem.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::vector<std::pair<long, std::string>> list_frames(const fs::path& run) {
  std::vector<std::pair<long, std::string>> frames;
  std::error_code ec;
  for (fs::directory_iterator it(run / "frames", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_frame_name(name, "vtu")) frames.emplace_back(std::stol(name.substr(0, name.size() - 4)), name);
  }
  std::sort(frames.begin(), frames.end());
  return frames;
}

fs::path check_run_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(fmt::format("run folder '{}' does not exist", dir));
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("'{}' is not a directory (expected the OUT folder of `xpd run SCENE -o OUT`)", dir));
  const fs::path run = fs::canonical(dir);
  if (list_frames(run).empty())
    throw Error(fmt::format(
        "'{}' is not an xpd run folder: it has no frames/NNNN.vtu (write one with `xpd run SCENE -o {}`)", dir, dir));
  return run;
}

std::string run_index_json(const fs::path& run) {
  nlohmann::ordered_json j;
  j["name"] = run.filename().string();
  j["stats"] = fs::is_regular_file(run / "stats.json");
  j["scene"] = fs::is_regular_file(run / "scene.json");
  nlohmann::ordered_json frames = nlohmann::ordered_json::array();
  for (const auto& [number, name] : list_frames(run)) {
    nlohmann::ordered_json f;
    f["frame"] = number;
    f["vtu"] = "frames/" + name;
    const std::string stem = name.substr(0, name.size() - 4);
    f["surface"] = nullptr;
    for (const char* ext : {"obj", "ply"}) {
      if (fs::is_regular_file(run / "surfaces" / (stem + "." + ext))) {
        f["surface"] = "surfaces/" + stem + "." + ext;
        break;
      }
    }
    frames.push_back(f);
  }
  j["frames"] = frames;
  return j.dump();
}

}  // namespace xpd::cli
