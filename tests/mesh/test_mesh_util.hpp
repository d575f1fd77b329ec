#pragma once
// TEST-ONLY helpers for the mesh tests: a minimal OBJ/OFF surface reader (gzip through
// io::read_file_bytes). The product readers live in xpd/io; this exists only so the mesh tests
// can load real surfaces independently of them. No error recovery: malformed files throw.
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>
#include <xpd/io/file.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::test {

/// Reads a triangle surface from .obj / .off (optionally .gz). Polygons are fan-triangulated;
/// OBJ "v/vt/vn" references and negative (relative) indices are handled.
inline SurfaceMesh read_test_surface(const std::string& path) {
  const std::string data = io::read_file_bytes(path);
  const std::string ext = io::format_extension(path);
  std::vector<double> xyz;
  std::vector<int> tri;
  const auto add_polygon = [&](const std::vector<int>& poly) {
    for (std::size_t k = 1; k + 1 < poly.size(); ++k) tri.insert(tri.end(), {poly[0], poly[k], poly[k + 1]});
  };
  std::istringstream in(data);
  if (ext == "obj") {
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string tag;
      ls >> tag;
      if (tag == "v") {
        double x, y, z;
        ls >> x >> y >> z;
        xyz.insert(xyz.end(), {x, y, z});
      } else if (tag == "f") {
        std::vector<int> poly;
        std::string ref;
        while (ls >> ref) {
          int i = std::stoi(ref.substr(0, ref.find('/')));
          poly.push_back(i < 0 ? int(xyz.size() / 3) + i : i - 1);
        }
        add_polygon(poly);
      }
    }
  } else if (ext == "off") {
    std::string header;
    in >> header;
    if (header != "OFF") throw std::runtime_error(path + ": not an OFF file");
    int nv, nf, ne;
    in >> nv >> nf >> ne;
    xyz.resize(std::size_t(3 * nv));
    for (double& x : xyz) in >> x;
    for (int f = 0; f < nf; ++f) {
      int n;
      in >> n;
      std::vector<int> poly(static_cast<std::size_t>(n));
      for (int& i : poly) in >> i;
      add_polygon(poly);
    }
    if (!in) throw std::runtime_error(path + ": truncated OFF file");
  } else {
    throw std::runtime_error(path + ": test reader handles .obj and .off only");
  }
  SurfaceMesh s;
  s.nodes = Eigen::Map<const Points>(xyz.data(), Eigen::Index(xyz.size() / 3), 3);
  s.triangles = Eigen::Map<const Triangles>(tri.data(), Eigen::Index(tri.size() / 3), 3);
  return s;
}

/// Relative-with-floor tolerance check helper: |a − b| ≤ rel · max(|a|, |b|, floor).
inline bool near_rel(double a, double b, double rel, double floor = 1e-300) {
  return std::abs(a - b) <= rel * std::max({std::abs(a), std::abs(b), floor});
}

}  // namespace xpd::test
