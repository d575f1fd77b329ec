#pragma once
// Internal helpers shared by the surface readers (OBJ, OFF, PLY, STL): token-to-number conversion
// with IoError reporting, and conversion of growable coordinate / index buffers into a SurfaceMesh.
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io::detail {

/// Parses a whole token as a double (a leading '+' is accepted; "nan"/"inf" parse and are left to
/// validation). Empty optional when the token is not a number.
inline std::optional<double> to_double(std::string_view t) {
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  double v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec == std::errc::result_out_of_range) return std::nullopt;
  if (ec != std::errc() || p != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

/// Parses a whole token as a signed 64-bit integer (leading '+' accepted).
inline std::optional<std::int64_t> to_int(std::string_view t) {
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty()) return std::nullopt;
  return v;
}

/// True when a 0-based index fits the `int` of Triangles. Values outside it cannot be stored;
/// values inside it but out of the vertex range are left to validate_surface.
inline bool fits_int(std::int64_t v) {
  return v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max();
}

/// Appends the fan triangulation (p0,p1,p2), (p0,p2,p3), ... of a polygon to `tris`.
inline void append_fan(std::vector<int>& tris, const int* poly, std::size_t n) {
  for (std::size_t k = 1; k + 1 < n; ++k) {
    tris.push_back(poly[0]);
    tris.push_back(poly[k]);
    tris.push_back(poly[k + 1]);
  }
}

/// Packs flat xyz / triangle buffers into a SurfaceMesh.
inline SurfaceMesh make_surface(const std::vector<double>& xyz, const std::vector<int>& tris) {
  SurfaceMesh s;
  s.nodes.resize(static_cast<Eigen::Index>(xyz.size() / 3), 3);
  for (std::size_t i = 0; i < xyz.size(); ++i) s.nodes.data()[i] = xyz[i];
  s.triangles.resize(static_cast<Eigen::Index>(tris.size() / 3), 3);
  for (std::size_t i = 0; i < tris.size(); ++i) s.triangles.data()[i] = tris[i];
  return s;
}

}  // namespace xpd::io::detail
