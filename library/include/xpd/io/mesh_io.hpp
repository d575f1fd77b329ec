#pragma once
// Reading and writing meshes by file name. The format follows the extension (".gz" is looked
// through: "a.mesh.gz" is Medit); gzip content is detected from its magic bytes whatever the name.
#include <string>
#include <xpd/io/file.hpp>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd::io {

struct ReadOptions {
  bool validate = true;          ///< run validate_tet_mesh / validate_surface after parsing
  ValidationOptions validation;  ///< e.g. fix_orientation (CLI --fix-orientation)
  std::uint64_t max_bytes = kMaxInputBytes;
};

/// Tet mesh formats: .msh (Gmsh v1, v2.2 ASCII/binary, v4.1 ASCII/binary), .mesh (Medit),
/// .node/.ele (TetGen; given either, the sibling is found, also as NAME.node.gz), .vtu (VTK XML,
/// ASCII/binary/appended). Throws IoError (parse) or MeshError (validation); unknown extensions
/// are an IoError listing the supported ones.
TetMesh read_tet_mesh(const std::string& path, const ReadOptions& options = {});

/// Surface formats: .obj, .off, .ply (ASCII, binary little/big endian), .stl (ASCII/binary).
/// Polygons are fan-triangulated. Throws IoError / MeshError.
SurfaceMesh read_surface(const std::string& path, const ReadOptions& options = {});

/// Writes a surface as .obj or .ply (binary little endian), atomically.
void write_surface(const std::string& path, const SurfaceMesh& surface);

}  // namespace xpd::io
