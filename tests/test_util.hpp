#pragma once
// Shared helpers for the test suite: where the shared data and tiny fixtures live.
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace xpd::test {

/// The shared data folder: $XPD_DATA_DIR, default ../shared/data next to the project root.
inline std::string data_dir() {
  if (const char* env = std::getenv("XPD_DATA_DIR"); env && *env) return env;
  return XPD_DEFAULT_DATA_DIR;
}
/// Path of a file in the shared data folder, e.g. data_path("ipc-tetmeshes/tet.msh").
inline std::string data_path(const std::string& rel) { return data_dir() + "/" + rel; }
/// Path of a small fixture kept in the tree under tests/data/.
inline std::string fixture_path(const std::string& rel) { return std::string(XPD_SOURCE_DIR) + "/tests/data/" + rel; }
/// A fresh, empty scratch directory for one test.
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("xpd_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace xpd::test
