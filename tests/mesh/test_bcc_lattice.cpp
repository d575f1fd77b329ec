#include <gtest/gtest.h>

#include <xpd/core/error.hpp>
#include <xpd/mesh/bcc_lattice.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd {

TEST(MeshBccLattice, ConformingPositiveCongruentTets) {
  BccGrid g;
  g.origin = Vec3(-1, 0.5, 2);
  g.cell_size = 0.5;
  g.cells = Eigen::Vector3i(3, 4, 5);
  TetMesh m = make_bcc_lattice(g);
  const int nx = 3, ny = 4, nz = 5;
  // 4 tets per interior face: (nx−1)·ny·nz faces normal to x, etc.
  EXPECT_EQ(m.tets.rows(), 4 * ((nx - 1) * ny * nz + nx * (ny - 1) * nz + nx * ny * (nz - 1)));
  const double h3 = 0.125;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t) {
    const double v = signed_volume(m.nodes.row(m.tets(t, 0)), m.nodes.row(m.tets(t, 1)), m.nodes.row(m.tets(t, 2)),
                                   m.nodes.row(m.tets(t, 3)));
    ASSERT_NEAR(v, h3 / 12, 1e-15) << "tet " << t;
  }
  const MeshQuality q = mesh_quality(m);
  EXPECT_NEAR(q.min_dihedral_deg, 60.0, 1e-9);
  EXPECT_NEAR(q.max_dihedral_deg, 90.0, 1e-9);
  EXPECT_NEAR(q.max_aspect_ratio, q.mean_aspect_ratio, 1e-12);
  // The union is the cells minus the outer half-octahedra (pyramids of volume h³/6 on each
  // boundary cell face). Conformity: the boundary is a closed manifold enclosing exactly the
  // summed tet volume (overlaps or gaps would break one of the two).
  const double expected = h3 * (nx * ny * nz - 2.0 * (nx * ny + ny * nz + nx * nz) / 6.0);
  EXPECT_NEAR(q.total_volume, expected, 1e-12);
  const Triangles faces = boundary_faces(m.tets);
  EXPECT_TRUE(is_closed_manifold(faces));
  EXPECT_NEAR(enclosed_volume(m.nodes, faces), expected, 1e-12);
  const ValidationReport report = validate_tet_mesh(m, {}, "bcc");
  EXPECT_EQ(report.flipped_tets, 0);
  EXPECT_EQ(report.unreferenced_nodes, 0);
}

TEST(MeshBccLattice, CoveringGridHasMarginAndIds) {
  const Eigen::AlignedBox3d box(Vec3(0, 0, 0), Vec3(1, 0.5, 0.25));
  const BccGrid g = BccGrid::covering(box, 0.1);
  for (int a = 0; a < 3; ++a) {
    EXPECT_GE(box.min()[a] - g.origin[a], 0.1 - 1e-12);
    EXPECT_GE(g.origin[a] + g.cells[a] * 0.1 - box.max()[a], 0.1 - 1e-12);
  }
  EXPECT_EQ(g.cells, Eigen::Vector3i(13, 8, 5));
  EXPECT_TRUE(g.tet_exists(0));
  EXPECT_FALSE(g.tet_exists(12 * g.cell_index(g.cells[0] - 1, 0, 0)));  // +x face of the last cell
  EXPECT_FALSE(g.tet_exists(-1));
  EXPECT_FALSE(g.tet_exists(g.num_tet_ids()));
  EXPECT_EQ(g.node_position(g.center_index(1, 2, 3)), g.origin + 0.1 * Vec3(1.5, 2.5, 3.5));
  EXPECT_EQ(g.node_position(g.corner_index(1, 2, 3)), g.origin + 0.1 * Vec3(1, 2, 3));
  EXPECT_THROW(BccGrid::covering(box, 0.0), MeshError);
  EXPECT_THROW(BccGrid::covering(box, 1e-6), MeshError);  // > 4096 cells per axis
}

}  // namespace xpd
