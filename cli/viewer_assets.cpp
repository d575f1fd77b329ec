// Locating the bundled browser viewer (viewer_assets.hpp).
#include "viewer_assets.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <system_error>
#include <xpd/core/error.hpp>

namespace xpd::cli {

namespace fs = std::filesystem;

bool is_viewer_dist(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p / "index.html", ec) && fs::is_regular_file(p / "viewer.js", ec);
}

std::vector<fs::path> viewer_dist_candidates() {
  std::vector<fs::path> c;
  if (const char* env = std::getenv("XPD_VIEWER_DIST"); env && *env) c.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    c.push_back(exe.parent_path().parent_path() / "viewer" / "dist");
    c.push_back(exe.parent_path().parent_path() / "share" / "xpd" / "viewer");
  }
#ifdef XPD_VIEWER_DIST_DIR
  c.emplace_back(XPD_VIEWER_DIST_DIR);
#endif
#ifdef XPD_VIEWER_SOURCE_DIR
  c.push_back(fs::path(XPD_VIEWER_SOURCE_DIR) / "dist");
#endif
  return c;
}

fs::path find_viewer_dist() {
  if (const char* env = std::getenv("XPD_VIEWER_DIST"); env && *env && !is_viewer_dist(env))
    throw Error(fmt::format("XPD_VIEWER_DIST='{}' does not contain the viewer files (index.html, viewer.js)", env));
  const auto candidates = viewer_dist_candidates();
  for (const auto& p : candidates)
    if (is_viewer_dist(p)) return fs::canonical(p);
  std::string looked;
  for (const auto& p : candidates) looked += "\n  " + p.string();
  throw Error("the viewer files (index.html, viewer.js) were not found; looked in:" + looked +
              "\nRun scripts/setup (which installs the viewer's npm packages) and rebuild, or set XPD_VIEWER_DIST");
}

}  // namespace xpd::cli
