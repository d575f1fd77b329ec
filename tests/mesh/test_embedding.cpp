#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/mesh/tetrahedralize.hpp>
#include <xpd/mesh/validate.hpp>

#include "mesh/test_mesh_util.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

double bbox_diagonal(const Points& x) { return (x.colwise().maxCoeff() - x.colwise().minCoeff()).norm(); }

// The checks every embedding must pass, with tolerances:
//  - weights: each in [−1e−9, 1 + 1e−9], Σ = 1 within 1e−12 (they are exact barycentric weights);
//  - reproduction: W x_rest = x_surface within 1e−12 · (bbox diagonal): both sides are affine
//    combinations of lattice nodes a few cells from the vertex, so the error is a few ulps of the
//    coordinates (coordinates reach 155 units in the bunny, hence relative to the model size).
void expect_valid_embedding(const SurfaceMesh& s, const Embedding& e) {
  const Eigen::Index ns = s.nodes.rows();
  ASSERT_EQ(Eigen::Index(e.tet_of_vertex.size()), ns);
  ASSERT_EQ(e.weights.rows(), ns);
  const double h = e.grid.cell_size;
  for (Eigen::Index t = 0; t < e.lattice.tets.rows(); ++t) {
    const double v =
        signed_volume(e.lattice.nodes.row(e.lattice.tets(t, 0)), e.lattice.nodes.row(e.lattice.tets(t, 1)),
                      e.lattice.nodes.row(e.lattice.tets(t, 2)), e.lattice.nodes.row(e.lattice.tets(t, 3)));
    ASSERT_NEAR(v, h * h * h / 12, 1e-9 * h * h * h) << "lattice tet " << t;
  }
  for (Eigen::Index s_i = 0; s_i < ns; ++s_i) {
    const int t = e.tet_of_vertex[std::size_t(s_i)];
    ASSERT_GE(t, 0);
    ASSERT_LT(t, e.lattice.tets.rows());
    const Vec4 w = e.weights.row(s_i).transpose();
    ASSERT_GE(w.minCoeff(), -1e-9) << "vertex " << s_i;
    ASSERT_LE(w.maxCoeff(), 1 + 1e-9) << "vertex " << s_i;
    ASSERT_NEAR(w.sum(), 1.0, 1e-12) << "vertex " << s_i;
    // The vertex lies in its tet: recomputed weights agree and are non-negative to round-off.
    const Vec4 again = barycentric(s.nodes.row(s_i).transpose(), e.lattice.nodes, e.lattice.tets, t);
    ASSERT_LT((again - w).norm(), 1e-12);
  }
  const double tol = 1e-12 * bbox_diagonal(s.nodes);
  const Points x = embedded_positions(e, e.lattice.nodes);
  EXPECT_LT((x - s.nodes).cwiseAbs().maxCoeff(), tol);
  const Eigen::SparseMatrix<double> W = embedding_matrix(e);
  ASSERT_EQ(W.rows(), ns);
  ASSERT_EQ(W.cols(), e.lattice.nodes.rows());
  const Eigen::MatrixXd Wx = W * Eigen::MatrixXd(e.lattice.nodes);
  EXPECT_LT((Wx - Eigen::MatrixXd(s.nodes)).cwiseAbs().maxCoeff(), tol);
  const Eigen::VectorXd row_sums = W * Eigen::VectorXd::Ones(W.cols());
  EXPECT_LT((row_sums.array() - 1.0).abs().maxCoeff(), 1e-12);
}

}  // namespace

class MeshBccEmbedding : public ::testing::TestWithParam<std::tuple<const char*, int>> {};

TEST_P(MeshBccEmbedding, EveryVertexIsInItsTetAndTheSolidIsCovered) {
  const auto [file, resolution] = GetParam();
  const SurfaceMesh s = test::read_test_surface(test::data_path(file));
  const auto t0 = std::chrono::steady_clock::now();
  const Embedding e = make_bcc_embedding(s, {.cell_size = 0, .resolution = resolution});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] BCC embedding %s res %d: %ld verts -> %ld nodes, %ld tets in %.0f ms\n", file, resolution,
              long(s.nodes.rows()), long(e.lattice.nodes.rows()), long(e.lattice.tets.rows()), 1e3 * secs);
  expect_valid_embedding(s, e);
  TetMesh lattice = e.lattice;
  const ValidationReport report = validate_tet_mesh(lattice, {}, file);
  EXPECT_EQ(report.flipped_tets, 0);
  EXPECT_EQ(report.unreferenced_nodes, 0);

  // The kept tets cover the solid and stay within one lattice edge (h) of it:
  // V_surface ≤ V_lattice ≤ V_surface + A·h·(1 + margin) (the h-offset of the solid).
  const double h = e.grid.cell_size;
  const double vs = std::abs(enclosed_volume(s.nodes, s.triangles)), area = surface_area(s.nodes, s.triangles);
  const double vl = mesh_quality(e.lattice).total_volume;
  EXPECT_GE(vl, vs);
  EXPECT_LE(vl, vs + 1.5 * area * h);

  // Random points inside the surface (brute-force winding oracle) all lie in kept tets.
  const TetLocator locator(e.lattice.nodes, e.lattice.tets);
  std::mt19937 rng(17);
  const Vec3 lo = s.nodes.colwise().minCoeff(), hi = s.nodes.colwise().maxCoeff();
  int inside = 0;
  for (int i = 0; i < 300; ++i) {
    Vec3 p;
    for (int k = 0; k < 3; ++k) p[k] = std::uniform_real_distribution<double>(lo[k], hi[k])(rng);
    if (!inside_closed_surface(s, p)) continue;
    ++inside;
    EXPECT_TRUE(locator.find_tet(p).found()) << "interior point " << p.transpose() << " not covered";
  }
  EXPECT_GT(inside, 10);
}

INSTANTIATE_TEST_SUITE_P(MeshReal, MeshBccEmbedding,
                         ::testing::Combine(::testing::Values("libigl-tutorial-data/decimated-knight.off",
                                                              "sofa-meshes/liver-smooth.obj",
                                                              "libigl-tutorial-data/arm.obj",
                                                              "diffpd-assets/bunny_watertight_simplified.obj"),
                                            ::testing::Values(8, 24)));

TEST(MeshBccEmbeddingProps, DeterministicAndOrientationAgnostic) {
  const SurfaceMesh s = test::read_test_surface(test::data_path("libigl-tutorial-data/decimated-knight.off"));
  const Embedding a = make_bcc_embedding(s, {.cell_size = 0, .resolution = 12});
  const Embedding b = make_bcc_embedding(s, {.cell_size = 0, .resolution = 12});
  EXPECT_EQ(a.lattice.tets, b.lattice.tets);
  EXPECT_EQ(a.tet_of_vertex, b.tet_of_vertex);
  EXPECT_EQ(a.weights, b.weights);
  SurfaceMesh inverted = s;
  inverted.triangles.col(1).swap(inverted.triangles.col(2));
  const Embedding c = make_bcc_embedding(inverted, {.cell_size = 0, .resolution = 12});
  EXPECT_EQ(a.lattice.tets, c.lattice.tets);
  // Explicit cell size wins over resolution.
  const Embedding d = make_bcc_embedding(s, {.cell_size = 0.05, .resolution = 3});
  EXPECT_DOUBLE_EQ(d.grid.cell_size, 0.05);
  EXPECT_THROW(make_bcc_embedding(SurfaceMesh{}), MeshError);
  EXPECT_THROW(make_bcc_embedding(s, {.cell_size = 0, .resolution = 0}), MeshError);
}

TEST(MeshBccEmbeddingProps, AxisAlignedCubeOnLatticePlanes) {
  // A cube whose faces, edges and vertices fall exactly on lattice planes and lines: the
  // ray-parity degeneracies the inside test must resolve. The kept tets must still cover the
  // cube and embed every vertex.
  const TetMesh box = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  const SurfaceMesh s{box.nodes, boundary_faces(box.tets)};
  const Embedding e = make_bcc_embedding(s, {.cell_size = 0.25, .resolution = 0});
  expect_valid_embedding(s, e);
  const double vl = mesh_quality(e.lattice).total_volume;
  EXPECT_GE(vl, 1.0 - 1e-12);
  const TetLocator locator(e.lattice.nodes, e.lattice.tets);
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(locator.find_tet(Vec3(u(rng), u(rng), u(rng))).found());
}

// The per-line ray casting of the inside pass against the brute-force oracle: every lattice tet
// with a grid node inside the surface must be kept, and every kept tet must have a node inside
// or come within the bounding box of some surface triangle.
TEST(MeshBccEmbeddingProps, KeptTetsMatchTheInsideOracle) {
  const SurfaceMesh s = test::read_test_surface(test::data_path("libigl-tutorial-data/decimated-knight.off"));
  const Embedding e = make_bcc_embedding(s, {.cell_size = 0, .resolution = 14});
  const BccGrid& g = e.grid;
  std::vector<char> inside(std::size_t(g.num_nodes()));
  for (std::int64_t n = 0; n < g.num_nodes(); ++n)
    inside[std::size_t(n)] = inside_closed_surface(s, g.node_position(n));
  std::set<std::array<std::int64_t, 4>> kept;
  for (Eigen::Index t = 0; t < e.lattice.tets.rows(); ++t) {
    std::array<std::int64_t, 4> key;
    for (int k = 0; k < 4; ++k) key[std::size_t(k)] = e.grid_node_of[std::size_t(e.lattice.tets(t, k))];
    std::sort(key.begin(), key.end());
    kept.insert(key);
  }
  std::vector<Eigen::AlignedBox3d> tri_boxes;
  for (Eigen::Index f = 0; f < s.triangles.rows(); ++f) {
    Eigen::AlignedBox3d b;
    for (int k = 0; k < 3; ++k) b.extend(s.nodes.row(s.triangles(f, k)).transpose());
    tri_boxes.push_back(b);
  }
  int with_inside_node = 0;
  for (std::int64_t id = 0; id < g.num_tet_ids(); ++id) {
    if (!g.tet_exists(id)) continue;
    std::array<std::int64_t, 4> key = g.tet_nodes(id);
    bool any_inside = false;
    for (const std::int64_t n : key) any_inside = any_inside || inside[std::size_t(n)];
    std::sort(key.begin(), key.end());
    const bool is_kept = kept.count(key) > 0;
    if (any_inside) {
      ++with_inside_node;
      EXPECT_TRUE(is_kept) << "tet " << id << " has a node inside but was dropped";
    } else if (is_kept) {
      Eigen::AlignedBox3d tb;
      for (const Vec3& x : g.tet_positions(id)) tb.extend(x);
      const bool near_surface = std::any_of(tri_boxes.begin(), tri_boxes.end(),
                                            [&](const Eigen::AlignedBox3d& b) { return b.intersects(tb); });
      EXPECT_TRUE(near_surface) << "tet " << id << " is kept but lies away from the surface and the solid";
    }
  }
  EXPECT_GT(with_inside_node, 100);
}

TEST(MeshEmbedPoints, InsideOutsideAndSnapping) {
  const SurfaceMesh s = test::read_test_surface(test::data_path("libigl-tutorial-data/decimated-knight.off"));
  const TetMesh m = tetrahedralize(s);
  // The surface vertices are mesh nodes (TetGen keeps them first), so all are inside.
  const PointEmbedding all = embed_points(m, s.nodes);
  EXPECT_TRUE(all.all_inside());
  const double tol = 1e-12 * bbox_diagonal(s.nodes);
  EXPECT_LT((embedded_positions(m.tets, all.tet_of_point, all.weights, m.nodes) - s.nodes).cwiseAbs().maxCoeff(), tol);

  // Move three vertices beyond the bounding box (certainly outside every tet).
  Points moved = s.nodes;
  const Vec3 hi = s.nodes.colwise().maxCoeff();
  const std::vector<int> pushed{3, 100, 400};
  for (int k = 0; k < 3; ++k)
    moved.row(pushed[std::size_t(k)]) = hi.transpose() + 0.02 * (k + 1) * Vec3(1, 0.5, 0.25).transpose();
  const PointEmbedding report = embed_points(m, moved);
  ASSERT_EQ(report.outside, pushed);
  for (std::size_t k = 0; k < pushed.size(); ++k) {
    EXPECT_EQ(report.tet_of_point[std::size_t(pushed[k])], -1);
    EXPECT_GT(report.outside_distance[k], 0);
  }
  EXPECT_THROW(embedding_matrix(m.tets, report.tet_of_point, report.weights, m.nodes.rows()), MeshError);

  const PointEmbedding snapped = embed_points(m, moved, {.tolerance = 1e-9, .snap_outside = true});
  ASSERT_EQ(snapped.outside, pushed);
  for (int v : pushed) {
    const int t = snapped.tet_of_point[std::size_t(v)];
    ASSERT_GE(t, 0);
    EXPECT_LT(snapped.weights.row(v).minCoeff(), 0);  // extrapolated
    EXPECT_NEAR(snapped.weights.row(v).sum(), 1.0, 1e-12);
    // Nearest tet by brute force.
    const TetLocation oracle = nearest_tet_brute_force(m.nodes, m.tets, moved.row(v).transpose());
    EXPECT_EQ(t, oracle.tet);
  }
  const Eigen::SparseMatrix<double> W = embedding_matrix(m.tets, snapped.tet_of_point, snapped.weights, m.nodes.rows());
  const Eigen::MatrixXd Wx = W * Eigen::MatrixXd(m.nodes);
  EXPECT_LT((Wx - Eigen::MatrixXd(moved)).cwiseAbs().maxCoeff(), 1e-11 * bbox_diagonal(s.nodes));
}

// bind_points takes the tets as given: bound to the tet that embed_points locates, a point gets
// the same weights; bound to another tet, weights extrapolated from it that still reproduce the
// point, the point listed as outside with its distance; counts and indices are checked.
TEST(MeshBindPoints, GivenTetsReproduceThePointsAndReportOutside) {
  const TetMesh m = make_box(4, 3, 3, Vec3(0, 0, 0), Vec3(1, 0.5, 0.5));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.01, 0.49);
  Points p(50, 3);
  for (Eigen::Index i = 0; i < p.rows(); ++i) p.row(i) << 2 * u(rng), u(rng), u(rng);
  const PointEmbedding located = embed_points(m, p);
  ASSERT_TRUE(located.all_inside());
  const PointEmbedding same = bind_points(m, p, located.tet_of_point);
  EXPECT_TRUE(same.all_inside());
  EXPECT_EQ(same.tet_of_point, located.tet_of_point);
  EXPECT_LT((same.weights - located.weights).cwiseAbs().maxCoeff(), 1e-14);

  // Every point bound to tet 0 (a corner tet): all but those inside it are outside, exactly
  // reproduced, at the distance the brute-force oracle measures to that tet.
  const std::vector<int> zero(static_cast<std::size_t>(p.rows()), 0);
  const PointEmbedding forced = bind_points(m, p, zero);
  EXPECT_LT((embedded_positions(m.tets, forced.tet_of_point, forced.weights, m.nodes) - p).cwiseAbs().maxCoeff(),
            1e-13);
  std::vector<int> outside;
  for (Eigen::Index i = 0; i < p.rows(); ++i)
    if (located.tet_of_point[std::size_t(i)] != 0) outside.push_back(int(i));
  ASSERT_EQ(forced.outside, outside);
  ASSERT_FALSE(outside.empty());
  for (std::size_t k = 0; k < outside.size(); ++k) {
    const Vec3 x = p.row(outside[k]).transpose();
    EXPECT_LT(forced.weights.row(outside[k]).minCoeff(), 0);
    const Tets t0 = m.tets.topRows(1);
    EXPECT_NEAR(forced.outside_distance[k], nearest_tet_brute_force(m.nodes, t0, x).distance, 1e-14);
    EXPECT_GT(forced.outside_distance[k], 0);
  }

  EXPECT_THROW(bind_points(m, p, std::vector<int>(3, 0)), MeshError);  // count
  std::vector<int> bad = located.tet_of_point;
  bad[5] = static_cast<int>(m.tets.rows());
  try {
    bind_points(m, p, bad);
    ADD_FAILURE() << "an out-of-range tet was accepted";
  } catch (const MeshError& e) {
    EXPECT_NE(std::string(e.what()).find("point 5"), std::string::npos) << e.what();
  }
}

TEST(MeshBccEmbeddingProps, ArmadilloTimings) {
  const SurfaceMesh s = test::read_test_surface(test::data_path("libigl-tutorial-data/armadillo.obj.gz"));
  for (const int res : {16, 32, 64, 128}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Embedding e = make_bcc_embedding(s, {.cell_size = 0, .resolution = res});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ timing   ] BCC embedding armadillo (%ld verts, %ld tris) res %d: %ld nodes, %ld tets in %.0f ms\n",
                long(s.nodes.rows()), long(s.triangles.rows()), res, long(e.lattice.nodes.rows()),
                long(e.lattice.tets.rows()), 1e3 * secs);
    if (res == 32) expect_valid_embedding(s, e);
  }
}

}  // namespace xpd
