#pragma once
// Regions of a skin surface for the surgical tools (Wang 2025, ch. 5): undermining frees the skin of
// a region from the tissue below it, the region being what a flood fill on the skin reaches from a
// point the surgeon picks, bounded by incisions and by a drawn boundary line.
//
// An incision bounds the fill by itself: a face-separating cut splits the skin vertices along it
// (topology/face_cut.hpp), so the skin triangles on its two sides no longer share an edge. Where the
// region is not closed by incisions (the base of a flap), the caller names the boundary's edges.
#include <array>
#include <vector>
#include <xpd/mesh/shell.hpp>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

/// The triangles reachable from `seed` through shared edges (two triangles are adjacent when they
/// share both vertices of an edge) without crossing an edge of `barrier` (vertex pairs, either
/// order). Returned ascending, `seed` included. Throws MeshError when `seed` or a barrier vertex is
/// out of range.
std::vector<int> flood_fill_triangles(const Triangles& triangles, int seed,
                                      const std::vector<std::array<int, 2>>& barrier = {});

/// The skin triangles of a cut prism shell (mesh/shell.hpp: node ℓ·S + v is surface vertex v at
/// layer ℓ): the boundary faces of the cutter's mesh whose three nodes descend from layer-0 nodes.
Triangles shell_skin(const Shell& shell, const FaceCutter& cutter);

/// The deep-side nodes (current ids, descending from layer `shell.layers`) under a set of skin
/// triangles of a cut shell: the nodes of the region's tets, those reached from the triangles
/// through faces the tets still share, stepping into the tets of the region's prism columns and
/// into the tets of other skin triangles' columns that a cut has separated from their own skin
/// triangle. A face cut follows the faces between tets on either side of the blade, so beside an
/// incision it zigzags across the columns: a column whose skin triangle lies outside the region
/// may hold tets on the region's side, and their deep nodes (copies that inherited the
/// attachments of the nodes they duplicate) are the region's. A column across the region's base
/// line, which no cut separates from its skin, stays outside, and only columns that share a surface
/// vertex with the region's are taken (a cut elsewhere that separates tets from their skin, e.g. a
/// dissection under the skin beyond the base line, joins at most that one ring). Ascending,
/// unique. Undermining the region releases the attachments of these nodes.
std::vector<int> shell_nodes_below(const Shell& shell, const FaceCutter& cutter, const Triangles& skin,
                                   const std::vector<int>& region);

/// The boundary nodes that a skin hook of radius `radius` about `centre` (rest space) grips: the
/// nodes within the radius reached from `seed` (the nodes of the tet holding the hook's point)
/// through tets, stepping only between nodes of one tet that both lie within the radius, so never
/// across a cut (a face-separating cut gives the two sides different nodes), kept when they are
/// on the mesh's boundary. Ascending; empty when no such node lies within the radius. Throws
/// MeshError for a seed node out of range or a radius that is not finite and > 0.
std::vector<int> hook_grip_nodes(const TetMesh& mesh, const std::array<int, 4>& seed, const Vec3& centre,
                                 double radius);

}  // namespace xpd
