#pragma once
// Rest data of a set of tetrahedral PD elements, shared by the tet terms (corotated, strain
// limiting, shape targeting). Elements are stored grouped by colour: no two elements of one colour
// share a node, so a colour's force scatter runs in parallel without atomics and the summation
// order per node is fixed (deterministic results for any thread schedule).
#include <array>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// 9×9 matrices acting on vec(F) (index 3·row + col): density Hessians ∂²ψ/∂F².
using Mat9 = Eigen::Matrix<double, 9, 9>;

struct TetElements {
  std::vector<std::array<int, 4>> nodes;  ///< element → mesh nodes
  std::vector<Mat3> Dm_inv;               ///< inverse rest edge matrix [X1−X0, X2−X0, X3−X0]⁻¹
  std::vector<double> volume;             ///< rest volume
  std::vector<double> weight;             ///< PD weight w = 2 · stiffness · volume
  std::vector<int> source;                ///< element → index in the list given to the builder
  std::vector<int> color_offsets;         ///< colour c owns elements [offsets[c], offsets[c+1])

  int size() const { return static_cast<int>(nodes.size()); }
  int num_colors() const { return static_cast<int>(color_offsets.size()) - 1; }
};

/// Builds elements for the mesh tets `tet_ids` (any order, no duplicates) with per-entry stiffness
/// `stiffness[k]` (μ or μ′, > 0) for tet_ids[k]: F = Ds · Dm_inv, w = 2 stiffness Vol.
/// Throws MeshError for a non-positive rest volume, SolverError for a non-positive stiffness.
TetElements make_tet_elements(const TetMesh& mesh, const std::vector<int>& tet_ids,
                              const std::vector<double>& stiffness);

/// Rest shape of one mesh tet: Dm⁻¹ and Vol = det(Dm)/6, Dm = [X1−X0, X2−X0, X3−X0]. The one
/// formula behind make_tet_elements (and the factor updates of topology changes, which must
/// reproduce the assembler's weights exactly). Throws MeshError for a non-positive volume.
struct TetRestShape {
  Mat3 Dm_inv;
  double volume = 0;
};
TetRestShape tet_rest_shape(const TetMesh& mesh, int t);

/// Gradient rows g_a (a = 0..3) of F = Ds Dm⁻¹ with respect to node a (F = Σ_a x_a g_aᵀ), from
/// B = Dm⁻¹: g_1..3 are the rows of B, g_0 = −(g_1 + g_2 + g_3). An element's PD matrix entries are
/// w g_a · g_b.
inline void shape_gradients(const Mat3& B, Vec3 g[4]) {
  g[1] = B.row(0).transpose();
  g[2] = B.row(1).transpose();
  g[3] = B.row(2).transpose();
  g[0] = -(g[1] + g[2] + g[3]);
}

/// Deformation gradient of element k at positions x: F = [x1−x0, x2−x0, x3−x0] Dm⁻¹.
inline Mat3 deformation_gradient(const TetElements& e, int k, const Points& x) {
  const auto& n = e.nodes[static_cast<size_t>(k)];
  const Vec3 x0 = x.row(n[0]).transpose();
  Mat3 Ds;
  Ds.col(0) = x.row(n[1]).transpose() - x0;
  Ds.col(1) = x.row(n[2]).transpose() - x0;
  Ds.col(2) = x.row(n[3]).transpose() - x0;
  return Ds * e.Dm_inv[static_cast<size_t>(k)];
}

}  // namespace xpd
