#pragma once
// Where `xpd view` and `xpd render` find the bundled browser viewer (viewer/dist: index.html,
// viewer.js, ...). First match wins, a folder holding index.html and viewer.js:
//   1. $XPD_VIEWER_DIST (an error when set to a folder without the viewer files);
//   2. <folder of the xpd executable>/../viewer/dist (the build tree, where the xpd_viewer CMake
//      target bundles them);
//   3. <exe folder>/../share/xpd/viewer (an install);
//   4. XPD_VIEWER_DIST_DIR and 5. XPD_VIEWER_SOURCE_DIR/dist: compile definitions that
//      viewer/CMakeLists.txt sets on xpd_cli (the configured build folder, and a `node
//      viewer/build.mjs` in the source tree). This file is therefore compiled into xpd_cli itself.
#include <filesystem>
#include <vector>

namespace xpd::cli {

/// True when `p` holds the viewer files (index.html and viewer.js).
bool is_viewer_dist(const std::filesystem::path& p);

/// The folders looked in, in order (whether or not they exist).
std::vector<std::filesystem::path> viewer_dist_candidates();

/// The first candidate holding the viewer files, canonical; throws xpd::Error naming every folder
/// looked in (and how to get the viewer) when there is none.
std::filesystem::path find_viewer_dist();

}  // namespace xpd::cli
