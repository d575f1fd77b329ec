#pragma once
// Embedding of a surface in a tetrahedral mesh: every surface vertex s is bound to one tet t(s)
// with barycentric weights w(s), so that x_s = Σ_k w_k(s) x_{tets(t(s), k)}, i.e. x_S = W x with
// the sparse #S × #V matrix W. This is the coarse-simulation / high-resolution-surface coupling
// of Wang et al. 2021 (localized collisions in PD), who embed the collision surface in a BCC
// lattice; the same weights give the collision proxies of DESIGN.md §3.
#include <Eigen/SparseCore>
#include <vector>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/bcc_lattice.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Resolution of a BCC embedding lattice.
struct BccOptions {
  double cell_size = 0;  ///< cube side h; when > 0 it wins over `resolution`
  int resolution = 32;   ///< cells along the longest side of the surface's bounding box (h = L / resolution)
};

/// A surface embedded in a lattice cut from a BCC grid.
struct Embedding {
  TetMesh lattice;                         ///< kept lattice tets (positive), unused nodes removed
  std::vector<int> tet_of_vertex;          ///< #S: lattice tet containing each surface vertex
  BarycentricWeights weights;              ///< #S × 4: weights of each surface vertex in its tet
  BccGrid grid;                            ///< the grid the lattice was cut from
  std::vector<std::int64_t> grid_node_of;  ///< #V: grid node index of each lattice node
};

/// Builds a BCC lattice around a closed surface and embeds the surface's vertices in it.
///
/// Steps: (1) a BccGrid covering the surface's bounding box with one cell of margin
/// (BccGrid::covering); (2) inside/outside of every grid node by the winding number along a +x
/// ray — one ray per grid line, crossings of all triangles sorted along it, signed by the
/// triangle's normal; lines passing within round-off of a triangle edge or vertex, or whose net
/// crossing count is not zero, are redone node by node with rays in generic directions; (3) keep
/// every tet with a node inside, every tet that intersects a surface triangle (separating-axis
/// test, conservative by 1e-10 relative: touching counts), and the tet chosen for each surface
/// vertex — so the kept tets cover the whole solid, not only the vertices; (4) compact;
/// (5) for every surface vertex, among the 24 tets overlapping its cell the one maximizing the
/// smallest barycentric weight, so every weight lies in [−ε, 1 + ε] with ε at round-off level.
///
/// `closed` must be watertight (geometrically closed; seams with duplicated vertices are fine);
/// its orientation does not matter (non-zero winding rule). Throws MeshError on an invalid
/// surface or an absurd resolution (more than 4096 cells along an axis or 16M cells in total;
/// memory is about 14 bytes per cell during construction).
/// Cost: O(#cells + #F · cells per triangle); parallel with TBB.
Embedding make_bcc_embedding(const SurfaceMesh& closed, const BccOptions& options = {});

/// x_S = W x: embedded positions (#S × 3) from node positions (#V × 3) of the mesh `tets`, for
/// points bound to tets `tet_of` (#S) with weights (#S × 4). Throws MeshError when a point has
/// no tet (−1) or an index is out of range.
Points embedded_positions(const Tets& tets, const std::vector<int>& tet_of, const BarycentricWeights& weights,
                          const Points& nodes);

/// embedded_positions for a BCC embedding: lattice node positions (#lattice nodes × 3).
Points embedded_positions(const Embedding& embedding, const Points& lattice_positions);

/// The sparse embedding matrix W (#S × num_nodes): row s holds weights(s, k) in column
/// tets(tet_of[s], k). Rows sum to 1; the same W applies to each coordinate. Zero weights are
/// kept as explicit entries so the pattern does not depend on values (4 entries per row).
Eigen::SparseMatrix<double> embedding_matrix(const Tets& tets, const std::vector<int>& tet_of,
                                             const BarycentricWeights& weights, Eigen::Index num_nodes);

/// embedding_matrix for a BCC embedding (#S × #lattice nodes).
Eigen::SparseMatrix<double> embedding_matrix(const Embedding& embedding);

/// Options of embed_points.
struct EmbedPointsOptions {
  /// A point is inside a tet when all its barycentric weights are ≥ −tolerance.
  double tolerance = 1e-9;
  /// Points outside every tet: false leaves them unbound (tet −1, zero weights); true binds them
  /// to the nearest tet (Euclidean distance) with extrapolated weights — some negative, still
  /// summing to 1 and still reproducing the point exactly (the affine map of the tet extended
  /// outside it). Either way they are listed in `outside`.
  bool snap_outside = false;
};

/// Result of embed_points.
struct PointEmbedding {
  std::vector<int> tet_of_point;         ///< #P: containing (or, snapped, nearest) tet; −1 if unbound
  BarycentricWeights weights;            ///< #P × 4
  std::vector<int> outside;              ///< indices of the points outside every tet (ascending)
  std::vector<double> outside_distance;  ///< distance of each `outside` point to its nearest tet
  bool all_inside() const { return outside.empty(); }
};

/// Embeds points (#P × 3) in an existing tet mesh using a TetLocator: each point gets the most
/// interior tet containing it (see TetLocator::find_tet). Points outside by more than the
/// tolerance are reported in `outside` and handled per EmbedPointsOptions::snap_outside.
/// Parallel over points; deterministic.
PointEmbedding embed_points(const TetMesh& mesh, const Points& points, const EmbedPointsOptions& options = {});

/// Binds points (#P × 3) to given tets (`tet_of_point`, #P indices into mesh.tets) instead of
/// locating them: the weights are each point's barycentric coordinates in its tet at rest,
/// extrapolated (some negative, still summing to 1 and reproducing the point) when it lies outside
/// it. For meshes whose tets overlap at rest, where locating is ambiguous: a mesh cut by
/// duplicating nodes (the virtual node algorithm, Molino, Bao and Fedkiw 2004) has a copy of each
/// cut tet per side, and a point on one side belongs to that side's copy. Points outside their tet
/// by more than `tolerance` (in barycentric weight) are listed in `outside` with their distance to
/// it. Throws MeshError naming the point when the counts differ, an index is out of range or a
/// point is not finite.
PointEmbedding bind_points(const TetMesh& mesh, const Points& points, const std::vector<int>& tet_of_point,
                           double tolerance = 1e-9);

}  // namespace xpd
