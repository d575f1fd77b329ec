// xpd_count_intersections: exact count of intersecting (edge, triangle) pairs of run surfaces, the
// oracle of "intersection-free" (collision/exact_intersection.hpp: GMP rational orientation tests,
// broad-phase candidates) for whole runs, outside the test suite.
//
//   xpd_count_intersections RUN        every frame of RUN/surfaces/NNNN.{obj,ply}, each merged with
//                                      RUN/obstacles/NNNN.* when present (two-way obstacles)
//   xpd_count_intersections FILE...    each surface file on its own
//
// Prints one line per surface and a summary; exits 1 if any surface intersects itself, 2 on an
// error (unreadable file, no surfaces).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>
#include <xpd/io/mesh_io.hpp>

#include "collision/exact_intersection.hpp"

namespace fs = std::filesystem;

namespace {

xpd::SurfaceMesh merged(const std::vector<std::string>& files) {
  xpd::SurfaceMesh out;
  for (const std::string& f : files) {
    const xpd::SurfaceMesh s = xpd::io::read_surface(f);
    const auto n0 = out.nodes.rows(), f0 = out.triangles.rows();
    out.nodes.conservativeResize(n0 + s.nodes.rows(), 3);
    out.nodes.bottomRows(s.nodes.rows()) = s.nodes;
    out.triangles.conservativeResize(f0 + s.triangles.rows(), 3);
    out.triangles.bottomRows(s.triangles.rows()) = s.triangles.array() + static_cast<int>(n0);
  }
  return out;
}

// The file of frame `stem` (e.g. "0007") in `dir` with any extension, or "".
std::string frame_file(const fs::path& dir, const std::string& stem) {
  if (!fs::is_directory(dir)) return "";
  for (const char* ext : {".obj", ".ply", ".off", ".stl"})
    if (fs::exists(dir / (stem + ext))) return (dir / (stem + ext)).string();
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s RUN | FILE...\n", argv[0]);
    return 2;
  }
  try {
    std::vector<std::pair<std::string, std::vector<std::string>>> jobs;  // label, files merged
    if (argc == 2 && fs::is_directory(argv[1])) {
      const fs::path run = argv[1];
      std::vector<std::string> stems;
      for (const auto& entry : fs::directory_iterator(run / "surfaces"))
        if (entry.is_regular_file()) stems.push_back(entry.path().stem().string());
      std::sort(stems.begin(), stems.end());
      stems.erase(std::unique(stems.begin(), stems.end()), stems.end());
      for (const std::string& stem : stems) {
        std::vector<std::string> files{frame_file(run / "surfaces", stem)};
        if (const std::string o = frame_file(run / "obstacles", stem); !o.empty()) files.push_back(o);
        jobs.emplace_back("frame " + stem, files);
      }
    } else {
      for (int i = 1; i < argc; ++i) jobs.emplace_back(argv[i], std::vector<std::string>{argv[i]});
    }
    if (jobs.empty()) throw std::runtime_error(fmt::format("no surfaces under {}/surfaces", argv[1]));
    int bad = 0;
    long long total = 0;
    for (const auto& [label, files] : jobs) {
      const xpd::SurfaceMesh s = merged(files);
      const int count = xpd::test::count_intersections_broad_phase(s.nodes, s.triangles);
      std::printf("%s: %d intersecting edge-triangle pairs (%td triangles%s)\n", label.c_str(), count,
                  static_cast<std::ptrdiff_t>(s.triangles.rows()), files.size() > 1 ? ", obstacles merged" : "");
      bad += count > 0;
      total += count;
    }
    std::printf("%d of %zu surfaces intersect; %lld intersecting pairs in all\n", bad, jobs.size(), total);
    return bad > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xpd_count_intersections: %s\n", e.what());
    return 2;
  }
}
