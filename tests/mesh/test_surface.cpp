#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

TEST(MeshSurface, BoxBoundaryIsClosedOutwardManifold) {
  const int nx = 4, ny = 5, nz = 6;
  const Vec3 lo(0, 0, 0), hi(1, 2, 3);
  const TetMesh m = make_box(nx, ny, nz, lo, hi);
  const Triangles faces = boundary_faces(m.tets);
  // Two triangles per boundary quad, two sides per axis.
  EXPECT_EQ(faces.rows(), 2 * 2 * ((nx - 1) * (ny - 1) + (ny - 1) * (nz - 1) + (nx - 1) * (nz - 1)));
  EXPECT_TRUE(is_closed_manifold(faces));
  EXPECT_NEAR(enclosed_volume(m.nodes, faces), 6.0, 1e-12);
  EXPECT_NEAR(surface_area(m.nodes, faces), 2.0 * (2 + 6 + 3), 1e-12);
  // Every face lies on one side of the box and its normal is that side's outward axis.
  for (Eigen::Index f = 0; f < faces.rows(); ++f) {
    const Vec3 a = m.nodes.row(faces(f, 0)), b = m.nodes.row(faces(f, 1)), c = m.nodes.row(faces(f, 2));
    const Vec3 n = (b - a).cross(c - a).normalized();
    const Vec3 centroid = (a + b + c) / 3;
    Vec3 outward = Vec3::Zero();
    for (int k = 0; k < 3; ++k) {
      if (std::abs(centroid[k] - lo[k]) < 1e-12) outward[k] = -1;
      if (std::abs(centroid[k] - hi[k]) < 1e-12) outward[k] = 1;
    }
    ASSERT_DOUBLE_EQ(outward.norm(), 1.0) << "face " << f << " is not on the box surface";
    EXPECT_NEAR(n.dot(outward), 1.0, 1e-12) << "face " << f;
  }
  EXPECT_EQ(boundary_nodes(faces).size(), std::size_t(nx * ny * nz - (nx - 2) * (ny - 2) * (nz - 2)));
  EXPECT_EQ(boundary_nodes(m.tets), boundary_nodes(faces));
}

TEST(MeshSurface, SingleTetFacesInDocumentedOrder) {
  Tets t(1, 4);
  t << 0, 1, 2, 3;
  const Triangles f = boundary_faces(t);
  Triangles expected(4, 3);
  expected << 1, 2, 3, 0, 3, 2, 0, 1, 3, 0, 2, 1;
  EXPECT_EQ(f, expected);
  // Outward: each face's normal points away from the omitted node.
  Points x(4, 3);
  x << 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1;
  for (int k = 0; k < 4; ++k) {
    const Vec3 a = x.row(f(k, 0)), b = x.row(f(k, 1)), c = x.row(f(k, 2)), opposite = x.row(k);
    EXPECT_LT((b - a).cross(c - a).dot(opposite - a), 0) << "face " << k;
  }
  EXPECT_NEAR(enclosed_volume(x, f), 1.0 / 6.0, 1e-15);
}

TEST(MeshSurface, RejectsNonManifoldAndInconsistentTets) {
  Tets three(3, 4);  // three tets on face (0,1,2)
  three << 0, 1, 2, 3, 0, 2, 1, 4, 0, 1, 2, 5;
  EXPECT_THROW(boundary_faces(three), MeshError);
  Tets same(2, 4);  // both list face (0,1,2) with the same orientation
  same << 0, 1, 2, 3, 0, 1, 2, 4;
  EXPECT_THROW(boundary_faces(same), MeshError);
  Tets ok(2, 4);
  ok << 0, 1, 2, 3, 0, 2, 1, 4;
  EXPECT_EQ(boundary_faces(ok).rows(), 6);
}

TEST(MeshSurface, UniqueEdgesAndMeanEdgeLength) {
  // One Kuhn-split cube: 12 cube edges, 6 face diagonals, 1 main diagonal.
  const TetMesh m = make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones());
  EXPECT_EQ(unique_edges(m.tets).rows(), 19);
  EXPECT_NEAR(mean_edge_length(m.nodes, m.tets), (12 + 6 * std::sqrt(2.0) + std::sqrt(3.0)) / 19, 1e-15);
  const Triangles faces = boundary_faces(m.tets);
  EXPECT_EQ(unique_edges(faces).rows(), 18);  // the main diagonal is interior
  EXPECT_NEAR(mean_edge_length(m.nodes, faces), (12 + 6 * std::sqrt(2.0)) / 18, 1e-15);
}

TEST(MeshSurface, ClosedManifoldCheck) {
  const TetMesh m = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  Triangles faces = boundary_faces(m.tets);
  EXPECT_TRUE(is_closed_manifold(faces));
  Triangles open = faces.topRows(faces.rows() - 1);
  EXPECT_FALSE(is_closed_manifold(open));
  Triangles flipped = faces;
  std::swap(flipped(0, 1), flipped(0, 2));
  EXPECT_FALSE(is_closed_manifold(flipped));
  EXPECT_FALSE(is_closed_manifold(Triangles(0, 3)));
}

TEST(MeshSurface, InsideClosedSurfaceOfBox) {
  const TetMesh m = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  const SurfaceMesh s{m.nodes, boundary_faces(m.tets)};
  EXPECT_TRUE(inside_closed_surface(s, Vec3(0.5, 0.5, 0.5)));  // on grid lines of the triangulation
  EXPECT_TRUE(inside_closed_surface(s, Vec3(0.1, 0.9, 0.3)));
  EXPECT_FALSE(inside_closed_surface(s, Vec3(1.5, 0.5, 0.5)));
  EXPECT_FALSE(inside_closed_surface(s, Vec3(-0.1, 0.2, 0.3)));
  SurfaceMesh inverted = s;
  inverted.triangles.col(1).swap(inverted.triangles.col(2));
  EXPECT_TRUE(inside_closed_surface(inverted, Vec3(0.5, 0.5, 0.5)));
}

// Midpoint subdivision keeps a closed box surface closed, oriented and the same shape (volume and
// area exact), multiplies the triangles by 4 per level and halves the edges; a crop keeps exactly
// the triangles whose vertices lie in the ball.
TEST(MeshSurface, MidpointSubdivisionAndCrop) {
  const TetMesh box = make_box(3, 3, 3, Vec3::Zero(), Vec3(2, 1, 1));
  const SurfaceMesh s{box.nodes, boundary_faces(box.tets)};
  const double volume = enclosed_volume(s.nodes, s.triangles), area = surface_area(s.nodes, s.triangles);
  const SurfaceMesh d = subdivide_midpoint(s, 2);
  EXPECT_EQ(d.triangles.rows(), 16 * s.triangles.rows());
  EXPECT_TRUE(is_closed_manifold(d.triangles));
  // Euler characteristic of a sphere (the box's interior node stays, unused, so count used vertices)
  EXPECT_EQ(static_cast<Eigen::Index>(boundary_nodes(d.triangles).size()) - unique_edges(d.triangles).rows() +
                d.triangles.rows(),
            2);
  EXPECT_NEAR(enclosed_volume(d.nodes, d.triangles), volume, 1e-12 * volume);
  EXPECT_NEAR(surface_area(d.nodes, d.triangles), area, 1e-12 * area);
  EXPECT_NEAR(mean_edge_length(d.nodes, d.triangles), mean_edge_length(s.nodes, s.triangles) / 4, 1e-12);
  EXPECT_EQ(subdivide_midpoint(s, 0).triangles, s.triangles);
  EXPECT_THROW(subdivide_midpoint(s, -1), MeshError);

  const Vec3 c(0, 0, 0);
  const SurfaceMesh cropped = crop_surface(d, c, 0.8);
  int expected = 0;
  for (Eigen::Index f = 0; f < d.triangles.rows(); ++f) {
    bool in = true;
    for (int k = 0; k < 3; ++k) in = in && (d.nodes.row(d.triangles(f, k)).transpose() - c).norm() <= 0.8;
    expected += in;
  }
  ASSERT_GT(expected, 0);
  EXPECT_EQ(cropped.triangles.rows(), expected);
  EXPECT_LE((cropped.nodes.rowwise() - c.transpose()).rowwise().norm().maxCoeff(), 0.8);
  EXPECT_EQ(cropped.triangles.maxCoeff() + 1, cropped.nodes.rows());  // every vertex used, none missing
  // The kept triangles, in their order, are the same triangles in space.
  for (Eigen::Index f = 0, k = 0; f < d.triangles.rows(); ++f) {
    bool in = true;
    for (int c = 0; c < 3; ++c) in = in && (d.nodes.row(d.triangles(f, c)).transpose() - Vec3::Zero()).norm() <= 0.8;
    if (!in) continue;
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(cropped.nodes.row(cropped.triangles(k, c)), d.nodes.row(d.triangles(f, c))) << "triangle " << f;
    ++k;
  }
  EXPECT_THROW(crop_surface(d, Vec3(10, 10, 10), 0.1), MeshError);
}

// Icosphere: closed, outward (positive enclosed volume), every vertex on the sphere, the counts and
// edge lengths of the header, and the inscribed polyhedron's volume below the ball's by the
// expected chord error (relative deficit ≈ 3 · sagitta / r at most).
TEST(Surface, IcosphereIsAClosedOutwardSphereMesh) {
  const Vec3 c(0.3, -0.2, 1.1);
  const double r = 0.7;
  for (int levels = 0; levels <= 4; ++levels) {
    SCOPED_TRACE(levels);
    const SurfaceMesh s = make_icosphere(c, r, levels);
    const double p = std::pow(4.0, levels);
    EXPECT_EQ(s.nodes.rows(), static_cast<Eigen::Index>(10 * p + 2));
    EXPECT_EQ(s.triangles.rows(), static_cast<Eigen::Index>(20 * p));
    EXPECT_TRUE(is_closed_manifold(s.triangles));
    for (Eigen::Index i = 0; i < s.nodes.rows(); ++i) EXPECT_NEAR((s.nodes.row(i).transpose() - c).norm(), r, 1e-12);
    const Edges e = unique_edges(s.triangles);
    double longest = 0;
    for (Eigen::Index k = 0; k < e.rows(); ++k)
      longest = std::max(longest, (s.nodes.row(e(k, 0)) - s.nodes.row(e(k, 1))).norm());
    EXPECT_LE(longest, (levels == 0 ? 1.06 : 1.33) * r / std::ldexp(1.0, levels));
    const double ball = 4.0 / 3.0 * M_PI * r * r * r, v = enclosed_volume(s.nodes, s.triangles);
    EXPECT_GT(v, 0.0);
    EXPECT_LT(v, ball);
    EXPECT_GT(v, ball * (1 - 3 * longest * longest / (8 * r * r)));
  }
  EXPECT_THROW(make_icosphere(c, 0.0, 1), MeshError);
  EXPECT_THROW(make_icosphere(c, 1.0, -1), MeshError);
}

// Face neighbours against the brute-force count of common nodes on a box, and a face held by three
// tets (split fragments beside an uncut tet): each is the others' neighbour.
TEST(MeshSurface, TetFaceNeighboursEqualBruteForce) {
  const TetMesh m = make_box(4, 3, 3, Vec3(0, 0, 0), Vec3(1, 1, 1));
  const std::vector<std::vector<int>> next = tet_face_neighbours(m.tets);
  ASSERT_EQ(next.size(), static_cast<std::size_t>(m.tets.rows()));
  for (int a = 0; a < m.tets.rows(); ++a) {
    std::vector<int> want;
    for (int b = 0; b < m.tets.rows(); ++b) {
      int common = 0;
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) common += m.tets(a, i) == m.tets(b, j) ? 1 : 0;
      if (b != a && common == 3) want.push_back(b);
    }
    EXPECT_EQ(next[static_cast<std::size_t>(a)], want) << "tet " << a;
  }
  Tets three(3, 4);
  three << 0, 1, 2, 3, 0, 2, 1, 4, 0, 1, 2, 5;
  const auto n3 = tet_face_neighbours(three);
  EXPECT_EQ(n3[0], (std::vector<int>{1, 2}));
  EXPECT_EQ(n3[1], (std::vector<int>{0, 2}));
  EXPECT_EQ(n3[2], (std::vector<int>{0, 1}));
}

}  // namespace xpd
