#pragma once
// Boundary surfaces of tetrahedral meshes and measures of triangle surfaces: boundary extraction,
// boundary nodes, unique edges, mean edge length, closedness and enclosed volume.
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// #E × 2 undirected edges (i < j), sorted lexicographically.
using Edges = Eigen::Matrix<int, Eigen::Dynamic, 2, Eigen::RowMajor>;

/// Boundary triangles of a tet mesh: the faces used by exactly one tet.
///
/// `tets` is #T × 4 with positive orientation (det[x1−x0, x2−x0, x3−x0] > 0). For tet (a,b,c,d)
/// the outward faces are (b,c,d), (a,d,c), (a,b,d), (a,c,b) — local face f omits node f — so the
/// returned #B × 3 triangles are counter-clockwise seen from outside (normal points out).
/// Order is deterministic: by tet index, then local face index (the order the faces appear).
/// Throws MeshError when a face is shared by more than two tets (non-manifold) or when the two
/// tets sharing a face list it with the same orientation (inconsistently oriented tets).
/// Cost: one sort of 4·#T face keys (parallel).
Triangles boundary_faces(const Tets& tets);

/// For each tet, the tets that share one of its faces (three nodes in common), ascending. Where a
/// face is held by more than two tets (the fragments of a split element beside an uncut one) each
/// is the others' neighbour. Cost: one sort of 4·#T face keys, as boundary_faces.
std::vector<std::vector<int>> tet_face_neighbours(const Tets& tets);

/// Sorted, unique node indices referenced by the triangles (#F × 3).
std::vector<int> boundary_nodes(const Triangles& faces);

/// Sorted, unique node indices on the boundary of a tet mesh: boundary_nodes(boundary_faces(tets)).
std::vector<int> boundary_nodes(const Tets& tets);

/// Unique undirected edges of a tet mesh (6 per tet before de-duplication), sorted.
Edges unique_edges(const Tets& tets);

/// Unique undirected edges of a triangle surface (3 per triangle before de-duplication), sorted.
Edges unique_edges(const Triangles& triangles);

/// Mean length of the given edges: (1/#E) Σ |x_i − x_j|. 0 for no edges.
double mean_edge_length(const Points& nodes, const Edges& edges);

/// Mean length of the unique edges of a tet mesh (each edge counted once).
double mean_edge_length(const Points& nodes, const Tets& tets);

/// Mean length of the unique edges of a triangle surface (each edge counted once).
double mean_edge_length(const Points& nodes, const Triangles& triangles);

/// True when the triangles form a closed, consistently oriented 2-manifold (combinatorially):
/// every directed edge (i→j) occurs exactly once and its reverse (j→i) exactly once, so every
/// undirected edge is shared by exactly two triangles with opposite orientations. Geometry
/// (self-intersections) is not checked. False for an empty list.
bool is_closed_manifold(const Triangles& triangles);

/// Volume enclosed by a closed triangle surface by the divergence theorem:
/// V = (1/6) Σ_f x_a · (x_b × x_c). Positive for outward (counter-clockwise from outside)
/// orientation, negative for inward; meaningless for an open surface.
double enclosed_volume(const Points& nodes, const Triangles& triangles);

/// Total area of the triangles: Σ_f |(x_b − x_a) × (x_c − x_a)| / 2.
double surface_area(const Points& nodes, const Triangles& triangles);

/// Whether p lies inside a closed (watertight) surface: non-zero winding number, counted as
/// Σ sign(n_f · d) over the triangles crossed by the ray p + t d, t > 0. Up to five fixed generic
/// directions d are tried until one passes no triangle edge or vertex within round-off (relative
/// 1e-10); a point on the surface itself counts as degenerate for every ray. Orientation-agnostic.
/// O(#F) per query: an oracle and a fallback, not for bulk queries.
bool inside_closed_surface(const SurfaceMesh& surface, const Vec3& p);

/// The triangles of `surface` whose three vertices lie in the ball (center, radius), with the
/// vertices they use renumbered in their original order (a region of a larger skin, e.g. one cheek
/// of a face for a shell). Throws MeshError when no triangle is left.
SurfaceMesh crop_surface(const SurfaceMesh& surface, const Vec3& center, double radius);

/// `levels` rounds of midpoint subdivision: each triangle (a, b, c) becomes four, (a, ab, ca),
/// (ab, b, bc), (ca, bc, c), (ab, bc, ca), with one new vertex per edge shared by its triangles
/// (appended after the old vertices, edges in unique_edges order). Orientation and the surface's
/// shape (piecewise linear) are kept; edge lengths halve per level.
SurfaceMesh subdivide_midpoint(const SurfaceMesh& surface, int levels);

/// Sphere of `radius` > 0 about `center` as an icosphere: the regular icosahedron (12 vertices,
/// 20 outward triangles) with `levels` ≥ 0 rounds of subdivide_midpoint, every vertex projected to
/// the sphere after each round. 10·4^L + 2 vertices, 20·4^L triangles; the longest edge is
/// 1.05 r at L = 0 and below 1.33 r / 2^L after (projection stretches the central triangles; 1.26 r / 2^L
/// measured at L = 4), and the surface lies inside the sphere, at most e²/(8r) below it (e the edge).
/// Throws MeshError on a non-positive radius or negative levels.
SurfaceMesh make_icosphere(const Vec3& center, double radius, int levels);

}  // namespace xpd
