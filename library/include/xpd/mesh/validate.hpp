#pragma once
// Validation of tetrahedral meshes on load. Every reader runs it by default (io::ReadOptions).
#include <string>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

struct ValidationOptions {
  /// Swap two nodes of every negatively oriented tet instead of failing. A mesh whose tets are
  /// *all* negative (a file written with the opposite convention) is always flipped as a whole.
  bool fix_orientation = false;
  /// A tet is degenerate when |vol| <= degenerate_tolerance * l_max^3 (l_max its longest edge);
  /// a regular tet has vol / l^3 = 0.118, so 1e-10 only rejects truly flat or collapsed tets.
  double degenerate_tolerance = 1e-10;
  /// Reject two referenced nodes with bitwise identical coordinates.
  bool reject_duplicate_nodes = true;
};

/// What validation changed or noticed without failing.
struct ValidationReport {
  int flipped_tets = 0;        ///< tets reoriented (fix_orientation, or the global-flip rule)
  int unreferenced_nodes = 0;  ///< nodes used by no tet (kept; harmless for the solver)
};

/// Checks, in order: non-empty, finite coordinates, indices in range, no repeated index within a
/// tet, orientation, degenerate volume, duplicate referenced nodes. Throws MeshError naming
/// `source`, the element (node or tet index, 0-based) and the cause. May reorient tets (see
/// ValidationOptions::fix_orientation).
ValidationReport validate_tet_mesh(TetMesh& mesh, const ValidationOptions& options, const std::string& source);

/// Checks a surface: non-empty, finite coordinates, triangle indices in range, no repeated index
/// within a triangle. Throws MeshError naming `source`.
void validate_surface(const SurfaceMesh& surface, const std::string& source);

}  // namespace xpd
