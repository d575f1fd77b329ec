#pragma once
// Element quality of tetrahedral meshes: dihedral angles, aspect ratio, volumes, edge lengths.
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Shape measures of one tetrahedron.
struct TetShape {
  double volume = 0;            ///< signed volume det[b−a, c−a, d−a] / 6
  double min_dihedral_deg = 0;  ///< smallest of the 6 interior dihedral angles (degrees)
  double max_dihedral_deg = 0;  ///< largest of the 6 interior dihedral angles (degrees)
  double aspect_ratio = 0;      ///< l_max / (2√6 · r_in), see tet_aspect_ratio; +inf if degenerate
  double longest_edge = 0;      ///< l_max
};

/// Shape of tet (a,b,c,d).
///
/// Dihedral angle at the edge shared by faces i and j: θ_ij = π − ∠(n_i, n_j) with n_i, n_j the
/// outward face normals, i.e. cos θ_ij = −n̂_i · n̂_j. A regular tet has all six equal to
/// arccos(1/3) = 70.5288°.
///
/// Aspect ratio: ρ = l_max / (2√6 · r_in), with r_in = 3|V| / Σ_f A_f the inradius. The factor
/// 2√6 is l / r_in of the regular tet, so ρ = 1 for a regular tet, ρ > 1 otherwise, and ρ → ∞ as
/// the tet flattens (slivers included, unlike edge-ratio measures).
TetShape tet_shape(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d);

/// Aspect ratio ρ = l_max / (2√6 · r_in) of tet (a,b,c,d) (1 for the regular tet).
double tet_aspect_ratio(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d);

/// Quality summary of a whole tet mesh.
struct MeshQuality {
  Eigen::Index num_nodes = 0;
  Eigen::Index num_tets = 0;
  double min_dihedral_deg = 0;   ///< over all tets (degrees)
  double max_dihedral_deg = 0;   ///< over all tets (degrees)
  double max_aspect_ratio = 0;   ///< max over tets of ρ (see tet_shape); 1 = all regular
  double mean_aspect_ratio = 0;  ///< mean over tets of ρ
  double min_volume = 0;         ///< smallest signed tet volume (≤ 0 means an inverted/flat tet)
  double max_volume = 0;         ///< largest signed tet volume
  double total_volume = 0;       ///< Σ signed volumes
  double mean_edge_length = 0;   ///< mean over unique edges (each edge counted once)
  int num_inverted = 0;          ///< tets with signed volume ≤ 0
  Vec3 bbox_min = Vec3::Zero();  ///< bounding box of the nodes used by tets
  Vec3 bbox_max = Vec3::Zero();
};

/// Computes MeshQuality over all tets (in parallel with TBB). Tets with zero volume contribute
/// ρ = +inf and their (0° / 180°) dihedral angles. Throws MeshError on an empty mesh or an index
/// out of range. Measured 40–80 ms for 83K tets (box:25) on a shared, loaded 2-core machine.
MeshQuality mesh_quality(const TetMesh& mesh);

}  // namespace xpd
