#pragma once
// Body-centred cubic (BCC) lattice tetrahedralization of a box: the embedding lattice of
// Wang et al. 2021 (localized collisions in PD) and of Molino et al. 2003 ("A crystalline,
// red green strategy for meshing highly deformable objects with tetrahedra").
//
// Geometry. A grid of n_x × n_y × n_z cubic cells of side h starting at `origin`. Nodes are the
// cell corners ((n_x+1)(n_y+1)(n_z+1), corner (i,j,k) at origin + h (i,j,k)) and the cell centres
// (n_x n_y n_z, centre (i,j,k) at origin + h (i+½, j+½, k+½)). Every square face shared by two
// cells c and c + e_a, together with the two centres, spans an octahedron that is split into
// 4 tets (C_c, C_{c+e_a}, K_e, K_{e+1}), one per edge K_e K_{e+1} of the square face. Edges:
// centre–centre h, corner–corner h, centre–corner (√3/2) h; every tet is congruent, with volume
// h³/12 and dihedral angles 60° and 90°. Tets of neighbouring octahedra share faces, so the
// lattice is conforming. An interior cell owns 12 tets (6 faces × 4 tets / 2 cells), Σ = h³.
// Only faces between two cells of the grid carry tets, so the half-octahedra (pyramids) on the
// outer faces of the grid are missing: the lattice covers every interior cell completely.
//
// Tet ids. The tet of the face between cell c and c + e_a with square edge e ∈ {0..3} has id
// 12·cell_index(c) + 4a + e; it exists iff c_a + 1 < n_a.
#include <array>
#include <cstdint>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// A BCC grid: cells, node numbering and tets. Node index: corners first
/// (i + (n_x+1)(j + (n_y+1) k)), then centres (#corners + i + n_x (j + n_y k)).
struct BccGrid {
  Vec3 origin = Vec3::Zero();                       ///< corner (0,0,0)
  double cell_size = 1;                             ///< h
  Eigen::Vector3i cells = Eigen::Vector3i::Ones();  ///< n_x, n_y, n_z (each ≥ 1)

  std::int64_t num_cells() const { return std::int64_t(cells[0]) * cells[1] * cells[2]; }
  std::int64_t num_corners() const { return std::int64_t(cells[0] + 1) * (cells[1] + 1) * (cells[2] + 1); }
  std::int64_t num_nodes() const { return num_corners() + num_cells(); }
  /// Upper bound (exclusive) of tet ids: 12 · #cells (ids on the grid's upper faces do not exist).
  std::int64_t num_tet_ids() const { return 12 * num_cells(); }
  std::int64_t cell_index(int i, int j, int k) const {
    return i + std::int64_t(cells[0]) * (j + std::int64_t(cells[1]) * k);
  }
  std::int64_t corner_index(int i, int j, int k) const {
    return i + std::int64_t(cells[0] + 1) * (j + std::int64_t(cells[1] + 1) * k);
  }
  std::int64_t center_index(int i, int j, int k) const { return num_corners() + cell_index(i, j, k); }
  /// Position of grid node `node` (corner or centre index as above).
  Vec3 node_position(std::int64_t node) const;
  /// True when tet `id` exists (its face is shared by two cells of the grid).
  bool tet_exists(std::int64_t id) const;
  /// The 4 grid node indices of tet `id`, positively oriented (det[x1−x0, x2−x0, x3−x0] = h³/2).
  std::array<std::int64_t, 4> tet_nodes(std::int64_t id) const;
  /// Positions of the 4 nodes of tet `id`, in tet_nodes order (computed from the cell and the
  /// tet template directly; cheaper than node_position of each node).
  std::array<Vec3, 4> tet_positions(std::int64_t id) const;
  /// Cell containing p (floor of (p − origin)/h), clamped to the grid.
  Eigen::Vector3i cell_of(const Vec3& p) const;

  /// Grid whose interior cells (index 1 … n−2 on every axis) contain `box`, with at least one
  /// full cell of margin on each side, centred on the box: n_a = ⌊extent_a / h⌋ + 3.
  static BccGrid covering(const Eigen::AlignedBox3d& box, double h);
};

/// All tets of the grid as a TetMesh (tets in ascending id order; nodes used by no tet removed,
/// remaining nodes in ascending grid order). #T = 4 · Σ_a (interior faces normal to a).
TetMesh make_bcc_lattice(const BccGrid& grid);

/// Tets with the given ids (ascending, existing) as a TetMesh with only their nodes, in ascending
/// grid node order. `grid_node_of` (optional) receives, for every mesh node, its grid node index.
TetMesh make_bcc_submesh(const BccGrid& grid, const std::vector<std::int64_t>& tet_ids,
                         std::vector<std::int64_t>* grid_node_of = nullptr);

}  // namespace xpd
