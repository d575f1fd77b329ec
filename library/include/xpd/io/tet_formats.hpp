#pragma once
// Parsers of tetrahedral mesh formats from in-memory data (already gunzipped). `name` is used in
// error messages (IoError "NAME:LINE: cause"). They parse only; validation is separate
// (validate_tet_mesh). They never crash and never allocate more than the data can justify: a
// header count larger than the remaining bytes can hold is an error before allocation.
#include <xpd/mesh/tet_mesh.hpp>

#include <string>
#include <string_view>

namespace xpd::io {

/// Gmsh .msh: v1 ($NOD/$ELM), v2.2 ASCII and binary, v4.1 ASCII and binary. Keeps tets (type 4)
/// and boundary triangles (type 2); other element types are skipped. Node tags may be sparse.
TetMesh parse_msh(std::string_view data, const std::string& name);

/// Medit/INRIA .mesh (ASCII): Vertices, Triangles, Tetrahedra (1-based; the reference column
/// becomes TetMesh::region).
TetMesh parse_medit(std::string_view data, const std::string& name);

/// TetGen .node + .ele. Index base (0 or 1) is taken from the .node file's first index.
TetMesh parse_tetgen(std::string_view node, std::string_view ele, const std::string& node_name,
                     const std::string& ele_name);

/// VTK XML UnstructuredGrid .vtu with tetra cells (type 10): ASCII, binary (base64, optionally
/// zlib-compressed) and appended (raw or base64) data arrays.
TetMesh parse_vtu(std::string_view data, const std::string& name);

}  // namespace xpd::io
