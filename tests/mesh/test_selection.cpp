// Selections on a structured box, checked against independent brute-force loops over the grid.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {
namespace {

// 5 × 4 × 3 nodes with unit spacing: [0,4] × [0,3] × [0,2]; node (i,j,k) = i + 5 (j + 4 k).
constexpr int NX = 5, NY = 4, NZ = 3;
TetMesh grid() { return make_box(NX, NY, NZ, Vec3::Zero(), Vec3(NX - 1, NY - 1, NZ - 1)); }

// Brute force: the nodes (i,j,k) of the grid satisfying `pred`, as sorted indices.
std::vector<int> grid_nodes(const std::function<bool(int, int, int)>& pred) {
  std::vector<int> r;
  for (int k = 0; k < NZ; ++k)
    for (int j = 0; j < NY; ++j)
      for (int i = 0; i < NX; ++i)
        if (pred(i, j, k)) r.push_back(i + NX * (j + NY * k));
  std::sort(r.begin(), r.end());
  return r;
}
bool on_grid_boundary(int i, int j, int k) {
  return i == 0 || j == 0 || k == 0 || i == NX - 1 || j == NY - 1 || k == NZ - 1;
}

TEST(SceneSelection, BoxSphereHalfSpaceMatchBruteForce) {
  const TetMesh mesh = grid();
  const SelectionMap none;
  const BoxSelection box{Vec3(0.5, -1, 1), Vec3(2.5, 2, 10)};
  EXPECT_EQ(select_nodes(box, none, mesh),
            grid_nodes([](int i, int j, int k) { return i >= 1 && i <= 2 && j <= 2 && k >= 1; }));
  const SphereSelection ball{Vec3(2, 1.5, 1), 1.2};
  const auto in_ball = [](int i, int j, int k) {
    return (i - 2.0) * (i - 2.0) + (j - 1.5) * (j - 1.5) + (k - 1.0) * (k - 1.0) <= 1.44;
  };
  const std::vector<int> expected_ball = grid_nodes(in_ball);
  EXPECT_EQ(expected_ball.size(),
            10u);  // 2 × 2 × 1 at k = 1 distance ≤ 0.71, plus (2, {1,2}, {0,2}) and (1|3, {1,2}, 1)
  EXPECT_EQ(select_nodes(ball, none, mesh), expected_ball);
  // x + y <= 3 (normal (1,1,0)/sqrt(2), offset 3/sqrt(2)).
  const HalfSpaceSelection plane{Vec3(1, 1, 0).normalized(), 3 / std::sqrt(2.0)};
  EXPECT_EQ(select_nodes(plane, none, mesh), grid_nodes([](int i, int j, int) { return i + j <= 3; }));
  EXPECT_EQ(select_nodes(AllSelection{}, none, mesh).size(), static_cast<std::size_t>(NX * NY * NZ));
  EXPECT_TRUE(select_nodes(SphereSelection{Vec3(10, 10, 10), 1}, none, mesh).empty());
  // A zero-radius sphere on a node selects exactly that node.
  EXPECT_EQ(select_nodes(SphereSelection{Vec3(1, 2, 1), 0}, none, mesh), (std::vector<int>{1 + NX * (2 + NY * 1)}));
}

TEST(SceneSelection, CapsuleMatchesBruteForce) {
  const TetMesh mesh = grid();
  const SelectionMap none;
  // Segment from (0.5, 1, 1) to (2.5, 1, 1), radius 1: |j − 1|² + |k − 1|² ≤ 1 within the span,
  // spherical caps beyond it.
  const CapsuleSelection cap{Vec3(0.5, 1, 1), Vec3(2.5, 1, 1), 1.0};
  EXPECT_EQ(select_nodes(cap, none, mesh), grid_nodes([](int i, int j, int k) {
              const double s = std::clamp(i - 0.5, 0.0, 2.0);
              const double dx = i - (0.5 + s);
              return dx * dx + (j - 1.0) * (j - 1.0) + (k - 1.0) * (k - 1.0) <= 1.0;
            }));
  // a = b is a ball.
  EXPECT_EQ(select_nodes(CapsuleSelection{Vec3(2, 1.5, 1), Vec3(2, 1.5, 1), 1.2}, none, mesh),
            select_nodes(SphereSelection{Vec3(2, 1.5, 1), 1.2}, none, mesh));
}

TEST(SceneSelection, SurfacePatches) {
  const TetMesh mesh = grid();
  SelectionMap named;
  named["slab"] = BoxSelection{Vec3(-1, -1, -1), Vec3(1.5, 10, 10)};
  const std::vector<int> boundary = grid_nodes(on_grid_boundary);
  EXPECT_EQ(boundary.size(), static_cast<std::size_t>(NX * NY * NZ - (NX - 2) * (NY - 2) * (NZ - 2)));
  EXPECT_EQ(select_nodes(SurfaceSelection{}, named, mesh), boundary);
  // Boundary within a box.
  EXPECT_EQ(select_nodes(SurfaceSelection{"slab", std::nullopt}, named, mesh),
            grid_nodes([](int i, int j, int k) { return on_grid_boundary(i, j, k) && i <= 1; }));
  // Normal cone: only the interior nodes of the top face have a normal within 10° of +z (edge and
  // corner normals average two or three faces and lean at least ~35° away).
  const SurfaceSelection top{"", SurfaceSelection::Cone{Vec3::UnitZ(), 10}};
  EXPECT_EQ(select_nodes(top, named, mesh),
            grid_nodes([](int i, int j, int k) { return k == NZ - 1 && i > 0 && i < NX - 1 && j > 0 && j < NY - 1; }));
  // Cone of 90° with -x: the x = 0 face and every node whose averaged normal has a -x component.
  const SurfaceSelection left{"", SurfaceSelection::Cone{-Vec3::UnitX(), 89}};
  EXPECT_EQ(select_nodes(left, named, mesh), grid_nodes([](int i, int, int) { return i == 0; }));
}

TEST(SceneSelection, IndicesAndSetOperations) {
  const TetMesh mesh = grid();
  SelectionMap named;
  named["a"] = IndexSelection{{7, 3, 3, 59}, ""};
  named["low"] = HalfSpaceSelection{Vec3::UnitZ(), 0.5};
  named["front"] = HalfSpaceSelection{Vec3::UnitY(), 0.5};
  EXPECT_EQ(select_nodes("a", named, mesh), (std::vector<int>{3, 7, 59}));
  const std::vector<int> low = grid_nodes([](int, int, int k) { return k == 0; });
  const std::vector<int> front = grid_nodes([](int, int j, int) { return j == 0; });
  std::vector<int> expected;
  std::set_union(low.begin(), low.end(), front.begin(), front.end(), std::back_inserter(expected));
  EXPECT_EQ(select_nodes(SetSelection{SetSelection::Op::Union, {"low", "front"}}, named, mesh), expected);
  EXPECT_EQ(select_nodes(SetSelection{SetSelection::Op::Intersection, {"low", "front"}}, named, mesh),
            grid_nodes([](int, int j, int k) { return j == 0 && k == 0; }));
  EXPECT_EQ(select_nodes(SetSelection{SetSelection::Op::Difference, {"all", "low", "front"}}, named, mesh),
            grid_nodes([](int, int j, int k) { return j > 0 && k > 0; }));
  // Errors: index out of range, unknown name, cycle.
  named["bad"] = IndexSelection{{60}, "bad.txt"};
  EXPECT_THROW(select_nodes("bad", named, mesh), Error);
  EXPECT_THROW(select_nodes("nope", named, mesh), Error);
  named["c1"] = SetSelection{SetSelection::Op::Union, {"c2"}};
  named["c2"] = SurfaceSelection{"c1", std::nullopt};
  EXPECT_THROW(select_nodes("c1", named, mesh), Error);
}

TEST(SceneSelection, TetRegionsByCentroidOrAllNodes) {
  const TetMesh mesh = grid();
  SelectionMap named;
  EXPECT_EQ(select_tets(AllSelection{}, named, mesh).size(), static_cast<std::size_t>(mesh.tets.rows()));
  // Brute force over tets.
  const auto tets_where = [&](const std::function<bool(const Vec3&, const std::array<int, 4>&)>& pred) {
    std::vector<int> r;
    for (int e = 0; e < mesh.tets.rows(); ++e) {
      Vec3 c = Vec3::Zero();
      std::array<int, 4> v{};
      for (int k = 0; k < 4; ++k) {
        v[static_cast<std::size_t>(k)] = mesh.tets(e, k);
        c += mesh.nodes.row(mesh.tets(e, k)).transpose() / 4.0;
      }
      if (pred(c, v)) r.push_back(e);
    }
    return r;
  };
  const BoxSelection box{Vec3(1, 0, 0), Vec3(3, 3, 1)};
  const std::vector<int> in_box = tets_where(
      [](const Vec3& c, const std::array<int, 4>&) { return c.x() >= 1 && c.x() <= 3 && c.y() <= 3 && c.z() <= 1; });
  EXPECT_EQ(in_box.size(), 6u * 2 * 3 * 1);  // the cells of the box, whole
  EXPECT_EQ(select_tets(box, named, mesh), in_box);
  // Node lists select the tets whose four nodes are all selected: nodes with i <= 1 -> cells i = 0.
  std::vector<int> nodes = grid_nodes([](int i, int, int) { return i <= 1; });
  named["left_nodes"] = IndexSelection{nodes, ""};
  const std::vector<int> left_tets = select_tets("left_nodes", named, mesh);
  EXPECT_EQ(left_tets.size(), 6u * (NY - 1) * (NZ - 1));
  EXPECT_EQ(left_tets, tets_where([](const Vec3& c, const std::array<int, 4>&) { return c.x() < 1; }));
  // Set operations combine tet sets.
  named["box"] = box;
  EXPECT_EQ(
      select_tets(SetSelection{SetSelection::Op::Union, {"box", "left_nodes"}}, named, mesh),
      tets_where([](const Vec3& c, const std::array<int, 4>&) { return c.x() <= 3 && (c.x() < 1 || c.z() <= 1); }));
}

TEST(SceneSelection, BoundaryTrianglesAreClosedAndOutward) {
  const TetMesh mesh = grid();
  const Triangles tris = boundary_faces(mesh.tets);
  EXPECT_EQ(tris.rows(), 2 * 2 * ((NX - 1) * (NY - 1) + (NX - 1) * (NZ - 1) + (NY - 1) * (NZ - 1)));
  // Divergence theorem: sum over faces of (x · n) A / 3 = volume, only with outward normals.
  double volume = 0;
  for (int f = 0; f < tris.rows(); ++f) {
    const Vec3 a = mesh.nodes.row(tris(f, 0)), b = mesh.nodes.row(tris(f, 1)), c = mesh.nodes.row(tris(f, 2));
    volume += a.dot((b - a).cross(c - a)) / 6.0;
  }
  EXPECT_NEAR(volume, (NX - 1) * (NY - 1) * (NZ - 1), 1e-12);
  // Lumped area of the top face nodes is the top face's area.
  const std::vector<int> top = grid_nodes([](int, int, int k) { return k == NZ - 1; });
  const std::vector<double> area = lumped_boundary_area(mesh, top);
  double total = 0;
  for (double a : area) total += a;
  EXPECT_NEAR(total, (NX - 1) * (NY - 1), 1e-12);
  // An interior top node touches 6 or fewer top triangles; each corner node gets a positive share.
  EXPECT_GT(area.front(), 0);
}

}  // namespace
}  // namespace xpd
