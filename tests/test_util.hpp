#pragma once
// Shared helpers for the test suite: where the shared data and tiny fixtures live.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

// Keeps a long test out of the sanitizer stage (make sanitize), visibly: there it reports SKIPPED
// with `why`, which names its time under AddressSanitizer and the shorter tests that run the same
// code under the sanitizers. The plain build's stage runs it as usual. The times in the reasons were
// measured on 2026-12-02 with a build running beside the tests on the 2 cores: read them as
// upper bounds (about twice the time alone).
#if defined(__SANITIZE_ADDRESS__)
#define XPD_SKIP_IN_SANITIZER_STAGE(why) GTEST_SKIP() << "kept out of the sanitizer stage: " << why
#else
#define XPD_SKIP_IN_SANITIZER_STAGE(why) static_cast<void>(0)
#endif

namespace xpd::test {

/// XPD_TEST_VERBOSE=1 (any value but empty or 0) prints measured figures, e.g. next to their
/// tolerances (report()).
inline bool verbose() {
  const char* v = std::getenv("XPD_TEST_VERBOSE");
  return v != nullptr && *v != '\0' && *v != '0';
}
inline void report(const char* what, double value, double tolerance) {
  if (verbose()) std::printf("  [tol] %-40s %.3e (tol %.3e)\n", what, value, tolerance);
}

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

/// Parses a JSON file (empty json and a test failure when it cannot be opened).
inline nlohmann::json read_json_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in.good()) return nlohmann::json{};
  return nlohmann::json::parse(in);
}
/// Parses a JSON file that may contain // comments (the shipped scenes).
inline nlohmann::json read_json_with_comments(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
}
/// scenes/sphere_slab.json on a 21 x 21 x 6 box instead of its 41 x 41 x 11: the same contact from
/// frame 1, for tests whose checks do not depend on the mesh size (its base dir is scenes/).
inline nlohmann::json coarse_sphere_slab() {
  nlohmann::json j = read_json_with_comments(std::string(XPD_SOURCE_DIR) + "/scenes/sphere_slab.json");
  j["mesh"]["nodes"] = {21, 21, 6};
  return j;
}
/// Every regular file under `dir` whose name contains ".tmp" (write_file_atomic's temporaries).
inline std::vector<std::string> temporaries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

}  // namespace xpd::test
