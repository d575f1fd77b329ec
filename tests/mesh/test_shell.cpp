// Prism shells (mesh/shell.hpp): counts and numbering, conformity (the boundary is a closed
// manifold enclosing exactly the tets' volume, so no gaps and no overlaps), exact volume of a flat
// sheet, the thin-part limit on a thin slab, the convexity limit on a sphere, errors, and the ICT
// face of scenes/face_jaw.json.
#include <gtest/gtest.h>

#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/shell.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/validate.hpp>

#include "collision/collision_fixtures.hpp"

namespace xpd {
namespace {

// n × n vertices on [0, 1]² at z = 0, triangles counter-clockwise seen from +z, with the diagonal
// of each cell chosen by a checkerboard (so the prism splits meet both diagonal directions).
SurfaceMesh grid(int n, double z = 0) {
  SurfaceMesh s;
  s.nodes.resize(n * n, 3);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) s.nodes.row(i + n * j) = Vec3(double(i) / (n - 1), double(j) / (n - 1), z).transpose();
  s.triangles.resize(2 * (n - 1) * (n - 1), 3);
  int f = 0;
  for (int j = 0; j + 1 < n; ++j)
    for (int i = 0; i + 1 < n; ++i) {
      const int a = i + n * j, b = a + 1, c = a + n + 1, d = a + n;
      if ((i + j) % 2) {
        s.triangles.row(f++) = Eigen::RowVector3i(a, b, c);
        s.triangles.row(f++) = Eigen::RowVector3i(a, c, d);
      } else {
        s.triangles.row(f++) = Eigen::RowVector3i(a, b, d);
        s.triangles.row(f++) = Eigen::RowVector3i(b, c, d);
      }
    }
  return s;
}

double total_volume(const TetMesh& m) {
  double v = 0;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t)
    v += signed_volume(m.nodes.row(m.tets(t, 0)), m.nodes.row(m.tets(t, 1)), m.nodes.row(m.tets(t, 2)),
                       m.nodes.row(m.tets(t, 3)));
  return v;
}

double min_volume(const TetMesh& m) {
  double v = 1e300;
  for (Eigen::Index t = 0; t < m.tets.rows(); ++t)
    v = std::min(v, signed_volume(m.nodes.row(m.tets(t, 0)), m.nodes.row(m.tets(t, 1)), m.nodes.row(m.tets(t, 2)),
                                  m.nodes.row(m.tets(t, 3))));
  return v;
}

// Conformity: the boundary faces of the tets form a closed manifold that encloses exactly their
// summed volume (a face not shared by the neighbouring prism would leave a hole; overlapping tets
// would enclose less than they sum to).
void expect_conforming(const TetMesh& m, double tol) {
  const Triangles faces = boundary_faces(m.tets);
  EXPECT_TRUE(is_closed_manifold(faces));
  EXPECT_NEAR(enclosed_volume(m.nodes, faces), total_volume(m), tol);
}

}  // namespace

TEST(MeshShell, FlatSheetIsAnExactConformingSlabBehindTheSurface) {
  const SurfaceMesh s = grid(6);
  ShellOptions o;
  o.thickness = 0.1;
  o.layers = 3;
  const Shell sh = make_shell(s, o);
  const int nv = 36, nf = 50;
  ASSERT_EQ(sh.mesh.nodes.rows(), 4 * nv);
  ASSERT_EQ(sh.mesh.tets.rows(), 3 * 3 * nf);
  EXPECT_EQ(sh.surface_vertices, nv);
  // Node (layer, v) = layer · nv + v: layer ℓ lies ℓ/3 of the thickness behind the surface (−z).
  for (int l = 0; l <= 3; ++l)
    for (int v = 0; v < nv; ++v) {
      const Vec3 expect = s.nodes.row(v).transpose() - Vec3(0, 0, 0.1 * l / 3.0);
      ASSERT_LT((sh.mesh.nodes.row(l * nv + v).transpose() - expect).norm(), 1e-15) << l << " " << v;
    }
  for (Eigen::Index t = 0; t < sh.mesh.tets.rows(); ++t) {
    EXPECT_EQ(sh.mesh.region[static_cast<std::size_t>(t)], static_cast<int>(t / (3 * nf)));
  }
  EXPECT_GT(min_volume(sh.mesh), 0.0);
  EXPECT_NEAR(total_volume(sh.mesh), 0.1, 1e-14);  // 1 × 1 × 0.1
  expect_conforming(sh.mesh, 1e-14);
}

TEST(MeshShell, ThinSlabTakesAtMostTheThinFractionOfItsGapFromEachSide) {
  // The closed surface of a box 1 × 1 × 0.04: the top and bottom faces face away from each other;
  // a shell 0.05 deep would cross the slab, so each side takes thin_fraction × 0.04.
  SurfaceMesh s;
  TetMesh box;
  {
    const SurfaceMesh top = grid(9, 0.04);
    SurfaceMesh bottom = grid(9, 0.0);
    for (Eigen::Index f = 0; f < bottom.triangles.rows(); ++f)
      std::swap(bottom.triangles(f, 1), bottom.triangles(f, 2));
    // Only the two sheets (no side walls): an open surface of two components.
    s.nodes.resize(top.nodes.rows() + bottom.nodes.rows(), 3);
    s.nodes << top.nodes, bottom.nodes;
    s.triangles.resize(top.triangles.rows() + bottom.triangles.rows(), 3);
    s.triangles << top.triangles, bottom.triangles.array() + static_cast<int>(top.nodes.rows());
  }
  ShellOptions o;
  o.thickness = 0.05;
  o.thin_fraction = 0.45;
  o.layers = 2;
  const Shell sh = make_shell(s, o);
  const int nv = static_cast<int>(s.nodes.rows());
  double deepest = 0;
  for (int v = 0; v < nv; ++v) deepest = std::max(deepest, sh.depth[static_cast<std::size_t>(v)]);
  EXPECT_NEAR(deepest, 0.45 * 0.04, 1e-12);
  // The two shells do not meet: the top one stays above z = 0.04 − 0.018, the bottom one below 0.018.
  for (int v = 0; v < 81; ++v) EXPECT_GT(sh.mesh.nodes(2 * nv + v, 2), 0.04 - 0.018 - 1e-12);
  for (int v = 81; v < nv; ++v) EXPECT_LT(sh.mesh.nodes(2 * nv + v, 2), 0.018 + 1e-12);
  EXPECT_GT(min_volume(sh.mesh), 0.0);
  EXPECT_NEAR(total_volume(sh.mesh), 2 * 0.018, 1e-12);
  expect_conforming(sh.mesh, 1e-12);
}

TEST(MeshShell, ConvexSurfaceLimitsTheDepthSoTetsKeepTheirVolume) {
  // A closed sphere of radius 1 (outward triangles): a shell 2 deep would pass the centre; the depth
  // shrinks until every tet keeps min_volume_ratio of its straight-prism volume.
  const SurfaceMesh sphere = test::icosphere(3);
  ShellOptions o;
  o.thickness = 2.0;
  o.layers = 2;
  const Shell sh = make_shell(sphere, o);
  double deepest = 0;
  for (const double d : sh.depth) deepest = std::max(deepest, d);
  EXPECT_LT(deepest, 1.0);  // inside the centre
  EXPECT_GT(deepest, 0.3);
  EXPECT_GT(min_volume(sh.mesh), 0.0);
  expect_conforming(sh.mesh, 1e-10);
  // Every extrusion direction points inwards.
  for (int v = 0; v < sh.surface_vertices; ++v)
    EXPECT_LT(sh.direction.row(v).dot(sphere.nodes.row(v).normalized()), -0.99);
}

TEST(MeshShell, InvalidSurfacesAndOptionsAreErrors) {
  SurfaceMesh s = grid(3);
  ShellOptions o;
  o.thickness = 0.1;
  EXPECT_NO_THROW(make_shell(s, o));
  ShellOptions bad = o;
  bad.thickness = 0;
  EXPECT_THROW(make_shell(s, bad), Error);
  bad = o;
  bad.layers = 0;
  EXPECT_THROW(make_shell(s, bad), Error);
  bad = o;
  bad.thin_fraction = 0.6;
  EXPECT_THROW(make_shell(s, bad), Error);
  SurfaceMesh flipped = s;  // one triangle against its neighbours
  std::swap(flipped.triangles(0, 1), flipped.triangles(0, 2));
  try {
    make_shell(flipped, o);
    ADD_FAILURE() << "inconsistent orientation accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("same direction"), std::string::npos) << e.what();
  }
  SurfaceMesh unused = s;  // a vertex no triangle uses
  unused.nodes.conservativeResize(unused.nodes.rows() + 1, 3);
  unused.nodes.row(unused.nodes.rows() - 1) = Vec3(5, 5, 5).transpose();
  try {
    make_shell(unused, o);
    ADD_FAILURE() << "unused vertex accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to no triangle"), std::string::npos) << e.what();
  }
}

// The skin of scenes/face_jaw.json: every tet positive, conforming, no surface vertex without depth.
TEST(MeshShell, IctFaceMakesAValidConformingShell) {
  const SurfaceMesh face = io::read_surface(std::string(XPD_SOURCE_DIR) + "/scenes/data/ict-face-jawopen.obj.gz");
  ShellOptions o;
  o.thickness = 0.012;
  o.layers = 2;
  const Shell sh = make_shell(face, o);
  EXPECT_EQ(sh.surface_vertices, 9409);
  EXPECT_EQ(sh.mesh.tets.rows(), 3 * 2 * face.triangles.rows());
  EXPECT_GT(min_volume(sh.mesh), 0.0);
  TetMesh copy = sh.mesh;
  EXPECT_EQ(validate_tet_mesh(copy, {}, "face shell").flipped_tets, 0);
  // Conformity of the tets' faces (the face folds onto itself at the eyes' and mouth's corners,
  // where the two sides' shells overlap, so the enclosed volume is not compared).
  EXPECT_TRUE(is_closed_manifold(boundary_faces(sh.mesh.tets)));
  // Every extrusion direction lies well inside the cone of its triangles' normals (shell.cpp: the
  // area-weighted normal had a cosine below 0.2 with some triangle at 10 vertices of this face).
  double worst_cos = 1;
  for (Eigen::Index f = 0; f < face.triangles.rows(); ++f) {
    const Vec3 a = face.nodes.row(face.triangles(f, 0)), b = face.nodes.row(face.triangles(f, 1)),
               c = face.nodes.row(face.triangles(f, 2));
    const Vec3 n = (b - a).cross(c - a).normalized();
    for (int k = 0; k < 3; ++k) worst_cos = std::min(worst_cos, -sh.direction.row(face.triangles(f, k)).dot(n));
  }
  EXPECT_GE(worst_cos, 0.5);
  // The depth stays within (0, thickness] and is slope-limited along every surface edge.
  for (int v = 0; v < sh.surface_vertices; ++v) {
    EXPECT_GT(sh.depth[static_cast<std::size_t>(v)], 0.0);
    EXPECT_LE(sh.depth[static_cast<std::size_t>(v)], o.thickness);
  }
  for (Eigen::Index f = 0; f < face.triangles.rows(); ++f)
    for (int k = 0; k < 3; ++k) {
      const int a = face.triangles(f, k), b = face.triangles(f, (k + 1) % 3);
      const double len = (face.nodes.row(a) - face.nodes.row(b)).norm();
      ASSERT_LE(std::abs(sh.depth[static_cast<std::size_t>(a)] - sh.depth[static_cast<std::size_t>(b)]),
                o.max_slope * len * (1 + 1e-12))
          << "edge " << a << "-" << b;
    }
}

}  // namespace xpd
