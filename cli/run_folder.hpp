#pragma once
// The run folder (OUT of `xpd run SCENE -o OUT`) as `xpd view` and `xpd render` serve it: its
// frames/NNNN.vtu, and the /data/index.json the viewer loads first.
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace xpd::cli {

/// True for "NNNN.ext": one or more digits, a dot, then `ext`.
bool is_frame_name(const std::string& name, const std::string& ext);

/// (frame number, file name) of every frames/NNNN.vtu in `run`, sorted by number.
std::vector<std::pair<long, std::string>> list_frames(const std::filesystem::path& run);

/// The canonical run folder `dir`; throws xpd::Error when it does not exist, is not a directory or
/// has no frames/NNNN.vtu.
std::filesystem::path check_run_folder(const std::string& dir);

/// The body of /data/index.json: the run's name, whether stats.json and scene.json (the
/// attachment / selection overlay) exist, and the frames with their surface file (or null).
std::string run_index_json(const std::filesystem::path& run);

}  // namespace xpd::cli
