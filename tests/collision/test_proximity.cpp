// Proximity search (collision/proximity.hpp): the spatial hash returns exactly the pairs of the
// brute-force oracle on random triangles and a connected mesh, and on the scalable-CCD simulation
// frames (Belgrod et al. 2023) exactly the pairs of the sort-and-sweep broad phase (itself checked
// against brute force in test_broad_phase.cpp) filtered by distance: 100 % recall.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/distance.hpp>
#include <xpd/collision/proximity.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>

#include "collision/collision_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

using test::verbose;

void expect_same(const ProximityPairs& a, const ProximityPairs& b) {
  EXPECT_TRUE(a.vertex_triangle == b.vertex_triangle) << a.vertex_triangle.size() << " vs " << b.vertex_triangle.size();
  EXPECT_TRUE(a.edge_edge == b.edge_edge) << a.edge_edge.size() << " vs " << b.edge_edge.size();
  EXPECT_EQ(a.vertex_triangle_distance, b.vertex_triangle_distance);
  EXPECT_EQ(a.edge_edge_distance, b.edge_edge_distance);
}

// The sweep's candidates at one position, inflated by D, kept when their distance is below D.
ProximityPairs sweep_then_filter(const Points& x, const Triangles& faces, const Edges& edges, double D) {
  const SurfaceCandidates c = swept_candidates(x, x, faces, edges, D);
  ProximityPairs out;
  for (const auto& [v, f] : c.vertex_face) {
    const double d =
        std::sqrt(point_triangle_squared_distance(x.row(v).transpose(), x.row(faces(f, 0)).transpose(),
                                                  x.row(faces(f, 1)).transpose(), x.row(faces(f, 2)).transpose()));
    if (d < D) out.vertex_triangle.push_back({v, f}), out.vertex_triangle_distance.push_back(d);
  }
  for (const auto& [a, b] : c.edge_edge) {
    const double d =
        std::sqrt(edge_edge_squared_distance(x.row(edges(a, 0)).transpose(), x.row(edges(a, 1)).transpose(),
                                             x.row(edges(b, 0)).transpose(), x.row(edges(b, 1)).transpose()));
    if (d < D) out.edge_edge.push_back({a, b}), out.edge_edge_distance.push_back(d);
  }
  return out;
}

TEST(Proximity, HashEqualsBruteForceOnRandomTriangles) {
  const test::TriangleSoup soup = test::triangle_soup(600, 0.04, 0.0, 7);
  const Edges edges = unique_edges(soup.faces);
  for (const double D : {0.005, 0.02, 0.1}) {
    SCOPED_TRACE(D);
    const ProximityPairs hash = proximity_search(soup.x0, soup.faces, edges, D);
    const ProximityPairs brute = brute_force_proximity(soup.x0, soup.faces, edges, D);
    EXPECT_GT(brute.vertex_triangle.size(), 0u);
    EXPECT_GT(brute.edge_edge.size(), 0u);
    expect_same(hash, brute);
  }
}

// A connected closed surface (adjacent primitives excluded) with a second sphere nearly touching it.
TEST(Proximity, HashEqualsBruteForceOnTwoSpheres) {
  const SurfaceMesh a = test::icosphere(3, Vec3::Zero(), 1.0), b = test::icosphere(3, Vec3(2.01, 0.003, 0), 1.0);
  Points x(a.nodes.rows() + b.nodes.rows(), 3);
  x << a.nodes, b.nodes;
  Triangles faces(a.triangles.rows() + b.triangles.rows(), 3);
  faces << a.triangles, b.triangles.array() + static_cast<int>(a.nodes.rows());
  const Edges edges = unique_edges(faces);
  for (const double D : {0.02, 0.1, 0.3}) {
    SCOPED_TRACE(D);
    const ProximityPairs hash = proximity_search(x, faces, edges, D);
    const ProximityPairs brute = brute_force_proximity(x, faces, edges, D);
    EXPECT_GT(brute.vertex_triangle.size(), 0u);
    expect_same(hash, brute);
    for (std::size_t q = 0; q < hash.vertex_triangle.size(); ++q) EXPECT_LT(hash.vertex_triangle_distance[q], D);
  }
}

// 100 % recall on simulation frames at D = 1e-3 × the bounding-box diagonal (and a larger D).
TEST(Proximity, HashEqualsSweepOnSimulationFrames) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "112 s under ASan; the hash and the sweep run there in Proximity.HashEqualsBruteForceOn*");
  struct Case {
    const char* file;
    Eigen::Index vertices;
  };
  for (const Case& c : {Case{"cloth-funnel/frames/227.ply", 9450}, Case{"rod-twist/frames/3036.ply.gz", 39940},
                        Case{"cloth-ball/frames/cloth_ball92.ply.gz", 46598}}) {
    SCOPED_TRACE(c.file);
    const SurfaceMesh s = io::read_surface(test::data_path(std::string("scalable-ccd-sample/") + c.file));
    ASSERT_EQ(s.nodes.rows(), c.vertices);
    const Edges edges = unique_edges(s.triangles);
    const double diag = (s.nodes.colwise().maxCoeff() - s.nodes.colwise().minCoeff()).norm();
    for (const double rel : {1e-3, 5e-3}) {
      if (rel > 1e-3 && c.vertices > 10000) continue;  // millions of pairs: seconds, not more coverage
      const double D = rel * diag;
      const auto t0 = std::chrono::steady_clock::now();
      const ProximityPairs hash = proximity_search(s.nodes, s.triangles, edges, D);
      const auto t1 = std::chrono::steady_clock::now();
      const ProximityPairs sweep = sweep_then_filter(s.nodes, s.triangles, edges, D);
      const auto t2 = std::chrono::steady_clock::now();
      expect_same(hash, sweep);
      if (verbose())
        std::printf("  %s D = %g x diag: %zu VT + %zu EE pairs; hash %.1f ms, sweep + filter %.1f ms\n", c.file, rel,
                    hash.vertex_triangle.size(), hash.edge_edge.size(),
                    std::chrono::duration<double, std::milli>(t1 - t0).count(),
                    std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  }
}

TEST(Proximity, RefusesBadInput) {
  const SurfaceMesh a = test::icosphere(1);
  const Edges edges = unique_edges(a.triangles);
  EXPECT_THROW(proximity_search(a.nodes, a.triangles, edges, 0.0), Error);
  EXPECT_THROW(proximity_search(a.nodes, a.triangles, edges, std::nan("")), Error);
  Points bad = a.nodes;
  bad(0, 0) = std::numeric_limits<double>::infinity();
  EXPECT_THROW(proximity_search(bad, a.triangles, edges, 0.1), Error);
  Triangles out = a.triangles;
  out(0, 0) = static_cast<int>(a.nodes.rows());
  EXPECT_THROW(proximity_search(a.nodes, out, edges, 0.1), Error);
  EXPECT_EQ(proximity_search(a.nodes, Triangles(0, 3), Edges(0, 2), 0.1).size(), 0u);
}

}  // namespace
}  // namespace xpd
