#pragma once
// Prism-shell meshes: a flesh volume behind an open surface (a face's skin). The surface is
// extruded against its triangles' normals (counter-clockwise winding seen from the front, so the
// shell grows behind the skin) in `layers` layers of prisms, each prism split into 3 tets. The
// split of every prism follows the global vertex order (the diagonal of each side quad joins the
// higher-numbered vertex's lower node to the lower-numbered vertex's upper node), so neighbouring
// prisms share their side faces and the mesh is conforming (Dompierre et al. 1999, "How to
// subdivide pyramids, prisms and hexahedra into tetrahedra").
//
// The depth is `thickness` wherever it fits: per vertex it is reduced where the surface is thin
// (a lip: the skin behind faces back, so the depth is at most `thin_fraction` of the gap along
// the extrusion direction, so the two sides' shells do not overlap) and where it is strongly
// convex (the extruded layers converge: a prism's tets must keep at least `min_volume_ratio` of
// the straight prism's volume), and it varies by at most `max_slope` per unit of surface length;
// the thin-part limit never takes it below `min_depth` × thickness (where the surface comes closer
// than that to itself, as at an eye's corner, the shells of the two sides overlap), the convexity
// limit may (down to 1% of that floor, at the tip of a sharp ridge).
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

struct ShellOptions {
  double thickness = 0;           ///< largest depth [length], > 0
  int layers = 1;                 ///< prism layers, ≥ 1
  double thin_fraction = 0.45;    ///< depth ≤ this × the gap to the surface's other side, in (0, 0.5]
  double min_volume_ratio = 0.2;  ///< each tet ≥ this × its straight-prism volume, in (0, 1)
  double min_depth = 0.1;         ///< the thin-part limit keeps depth ≥ this × thickness, in (0, 1]
  double max_slope = 0.5;         ///< |depth(u) − depth(v)| ≤ this × |x_u − x_v| along edges, > 0
};

/// A shell mesh and how it was built. Node (ℓ, v) — surface vertex v at layer ℓ ∈ [0, layers] — has
/// index ℓ·#surface vertices + v: layer 0 is the surface itself (the skin), layer `layers` the deep
/// side. Tet region tags are the layer 0…layers−1 (0 = the one under the skin).
struct Shell {
  TetMesh mesh;
  int surface_vertices = 0;
  int layers = 0;
  std::vector<double> depth;  ///< per surface vertex: the depth used [length]
  Points direction;           ///< per surface vertex: unit extrusion direction (into the shell)
};

/// Extrudes `surface` (triangles; every vertex used; every edge shared by at most two consistently
/// oriented triangles) into a prism shell. Coincident vertices are not welded (a seam of duplicated
/// vertices stays a crack in the shell), and the thin-part limit looks at the surface's vertices, not
/// its triangles (an opposite side coarser than the thickness can be missed). Throws Error on invalid options or
/// surface, or when no depth keeps every tet positive (a fold of the surface), naming the triangle.
Shell make_shell(const SurfaceMesh& surface, const ShellOptions& options);

}  // namespace xpd
