#pragma once
// Parsers of tetrahedral mesh formats from in-memory data (already gunzipped). `name` is used in
// error messages (IoError "NAME:LINE: cause"). They parse only; validation is separate
// (validate_tet_mesh). They never crash and never allocate more than the data can justify: a
// header count larger than the remaining bytes can hold is an error before allocation.
#include <string>
#include <string_view>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::io {

/// Gmsh .msh: v1 ($NOD/$ELM), v2.2 ASCII and binary, v4.1 ASCII and binary. Keeps tets (type 4)
/// and boundary triangles (type 2); other element types are skipped. Node tags may be sparse.
/// Binary files may be of either byte order (detected from the int 1 after the header).
/// TetMesh::region is the physical tag (v1: reg-phys, v2: first tag, 0 without tags) or, for
/// v4.1, the entity tag of the element block. Unknown sections ($Entities, $Surface, ...) are
/// skipped; elements must come after $Nodes.
TetMesh parse_msh(std::string_view data, const std::string& name);

/// Medit/INRIA .mesh (ASCII): Vertices, Triangles, Tetrahedra (1-based; the reference column
/// becomes TetMesh::region). Keywords are case-insensitive, '#' starts a comment; sections of
/// known width (Edges, Corners, Ridges, Required*, Quadrilaterals, Normals, ...) are skipped and an
/// unknown keyword is an error. Only Dimension 3.
TetMesh parse_medit(std::string_view data, const std::string& name);

/// TetGen .node + .ele. Index base (0 or 1) is taken from the .node file's first index; node
/// indices must then be consecutive. Node attributes and markers are read and dropped; the first
/// tet attribute (rounded) becomes TetMesh::region; 10-node tets keep their 4 corners.
/// Errors name `node_name` or `ele_name`, whichever holds the defect.
TetMesh parse_tetgen(std::string_view node, std::string_view ele, const std::string& node_name,
                     const std::string& ele_name);

/// VTK XML UnstructuredGrid .vtu with tetra cells (type 10): ASCII, binary (base64, optionally
/// zlib-compressed) and appended (raw or base64) data arrays; UInt32/UInt64 headers; either
/// byte_order. Points Float32/Float64; connectivity/offsets/types any integer type. Triangle
/// cells (type 5) become TetMesh::boundary; any other cell type is an error naming it. One Piece.
TetMesh parse_vtu(std::string_view data, const std::string& name);

}  // namespace xpd::io
