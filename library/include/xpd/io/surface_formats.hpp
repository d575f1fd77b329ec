#pragma once
// Parsers of surface formats from in-memory data (already gunzipped), and writers. Same error
// contract as tet_formats.hpp.
#include <iosfwd>
#include <string>
#include <string_view>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io {

SurfaceMesh parse_obj(std::string_view data,
                      const std::string& name);  ///< v / f (v, v/t, v/t/n, v//n, negative indices)
SurfaceMesh parse_off(std::string_view data, const std::string& name);  ///< OFF (ASCII)
SurfaceMesh parse_ply(std::string_view data,
                      const std::string& name);  ///< ASCII, binary_little_endian, binary_big_endian
SurfaceMesh parse_stl(std::string_view data, const std::string& name);  ///< ASCII or binary; vertices are merged

void write_obj(std::ostream& out, const SurfaceMesh& surface);
void write_ply(std::ostream& out, const SurfaceMesh& surface);  ///< binary little endian

}  // namespace xpd::io
