// The floating-point surface intersection test (collision/intersection.hpp) against exact rational
// predicates (exact_intersection.hpp) on nearly flat surfaces, where every orientation is close to
// zero: a flat grid of triangles with small height noise, the state of a slab that has recovered
// its rest shape (scenes/sphere_slab_ipc.json, whose frame 16 was refused as intersecting before
// the one-endpoint-in-plane case was decided in the plane).
#include <gtest/gtest.h>

#include <random>
#include <xpd/collision/intersection.hpp>
#include <xpd/mesh/surface.hpp>

#include "collision/exact_intersection.hpp"

namespace xpd {
namespace {

// n × n nodes with spacing h in the plane z = 0, two triangles per cell (alternating diagonals),
// heights uniform in [−noise, noise].
SurfaceMesh noisy_grid(int n, double h, double noise, unsigned seed) {
  SurfaceMesh s;
  s.nodes.resize(n * n, 3);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) s.nodes.row(i + n * j) << 0.2 + h * i, 0.2 + h * j, 0.25 + u(rng);
  s.triangles.resize(2 * (n - 1) * (n - 1), 3);
  int f = 0;
  for (int j = 0; j + 1 < n; ++j)
    for (int i = 0; i + 1 < n; ++i) {
      const int a = i + n * j, b = a + 1, c = a + n, d = c + 1;
      if ((i + j) % 2 == 0) {
        s.triangles.row(f++) << a, b, d;
        s.triangles.row(f++) << a, d, c;
      } else {
        s.triangles.row(f++) << a, b, c;
        s.triangles.row(f++) << b, d, c;
      }
    }
  return s;
}

TEST(SurfaceIntersection, NearlyFlatSurfacesAgreeWithExactPredicates) {
  for (const double noise : {0.0, 1e-15, 1e-13, 1e-11, 1e-9, 1e-7, 1e-5, 1e-3}) {
    for (unsigned seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(::testing::Message() << "noise " << noise << ", seed " << seed);
      const SurfaceMesh s = noisy_grid(25, 0.025, noise, seed);
      ASSERT_EQ(test::count_intersections(s.nodes, s.triangles), 0);  // a height field never intersects itself
      const auto hit = find_surface_intersection(s.nodes, s.triangles, unique_edges(s.triangles));
      EXPECT_FALSE(hit.has_value()) << (hit ? hit->description : "");
    }
  }
}

// A real crossing in a nearly flat surface is still found: one vertex of the grid pushed through
// the triangles of a second, slightly lower copy.
TEST(SurfaceIntersection, FindsACrossingOfTwoNearlyFlatSheets) {
  const SurfaceMesh a = noisy_grid(9, 0.025, 1e-9, 7);
  SurfaceMesh b = noisy_grid(9, 0.025, 1e-9, 8);
  b.nodes.col(0).array() += 0.0071;  // generic offset against a
  b.nodes.col(1).array() += 0.0043;
  b.nodes.col(2).array() -= 1e-4;
  SurfaceMesh both;
  both.nodes.resize(a.nodes.rows() + b.nodes.rows(), 3);
  both.nodes << a.nodes, b.nodes;
  both.triangles.resize(a.triangles.rows() + b.triangles.rows(), 3);
  both.triangles << a.triangles, b.triangles.array() + static_cast<int>(a.nodes.rows());
  const Edges edges = unique_edges(both.triangles);
  ASSERT_EQ(test::count_intersections(both.nodes, both.triangles), 0);
  EXPECT_FALSE(find_surface_intersection(both.nodes, both.triangles, edges).has_value());
  both.nodes(40, 2) -= 2e-4;  // an interior vertex of sheet a pushed through b (1e-4 below a)
  ASSERT_GT(test::count_intersections(both.nodes, both.triangles), 0);
  EXPECT_TRUE(find_surface_intersection(both.nodes, both.triangles, edges).has_value());
}

}  // namespace
}  // namespace xpd
