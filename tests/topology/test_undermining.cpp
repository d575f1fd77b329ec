// Undermining on a prism skin shell: a U-shaped incision through the shell plus a drawn base line
// bound a flap; the flood fill on the skin reaches exactly the flap's triangles, the deep-side
// nodes below them are exactly those of the flap's tets (copies on the incision lines, not the
// originals across it), and releasing their attachments (SurgerySession) frees the flap: a hook then
// lifts it far more than before, while the rest stays attached.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <xpd/core/error.hpp>
#include <xpd/mesh/shell.hpp>
#include <xpd/solver/surgery_session.hpp>
#include <xpd/topology/face_cut.hpp>
#include <xpd/topology/surface_region.hpp>

#include "../solver/pd_fixtures.hpp"

namespace xpd {
namespace {

constexpr int kGrid = 9;  // vertices per side of the skin patch [0, 1]², spacing 1/8

SurfaceMesh skin_patch() {
  SurfaceMesh s;
  s.nodes.resize(kGrid * kGrid, 3);
  for (int j = 0; j < kGrid; ++j)
    for (int i = 0; i < kGrid; ++i) s.nodes.row(j * kGrid + i) << i / 8.0, j / 8.0, 0.0;
  s.triangles.resize(2 * (kGrid - 1) * (kGrid - 1), 3);
  int f = 0;
  for (int j = 0; j + 1 < kGrid; ++j)
    for (int i = 0; i + 1 < kGrid; ++i) {
      const int a = j * kGrid + i, b = a + 1, c = a + kGrid + 1, d = a + kGrid;
      s.triangles.row(f++) << a, b, c;  // counter-clockwise seen from +z: the shell grows to −z
      s.triangles.row(f++) << a, c, d;
    }
  return s;
}

// Centroid of the face shared by two tets.
Vec3 face_centroid(const TetMesh& m, const TetPair& p) {
  Vec3 c = Vec3::Zero();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      if (m.tets(p.first, a) == m.tets(p.second, b)) c += m.nodes.row(m.tets(p.first, a)).transpose() / 3.0;
  return c;
}

bool inside(double v, double lo, double hi) { return v > lo + 1e-9 && v < hi - 1e-9; }

TEST(Undermining, FloodFillBoundedByAnIncisionAndABaseLineReleasesExactlyTheFlap) {
  ShellOptions so;
  so.thickness = 0.1;
  so.layers = 2;
  const Shell shell = make_shell(skin_patch(), so);
  const int S = shell.surface_vertices;
  ASSERT_EQ(S, kGrid * kGrid);
  // The U: planes x = 0.25 and x = 0.75 for y in (0.25, 0.75), plane y = 0.75 for x in (0.25,
  // 0.75), through the whole thickness; the flap is [0.25, 0.75]², its base the line y = 0.25.
  std::vector<TetPair> u;
  for (const auto& f : faces_across_plane(shell.mesh, Vec3::UnitX(), 0.25, Vec3::UnitY()))
    if (inside(face_centroid(shell.mesh, f).y(), 0.25, 0.75)) u.push_back(f);
  for (const auto& f : faces_across_plane(shell.mesh, Vec3::UnitX(), 0.75, Vec3::UnitY()))
    if (inside(face_centroid(shell.mesh, f).y(), 0.25, 0.75)) u.push_back(f);
  for (const auto& f : faces_across_plane(shell.mesh, Vec3::UnitY(), 0.75, Vec3::UnitX()))
    if (inside(face_centroid(shell.mesh, f).x(), 0.25, 0.75)) u.push_back(f);

  ModelDesc d;
  d.mesh = shell.mesh;
  d.mu = {1e4};
  for (int v = 0; v < S; ++v)  // the deep side is attached to the tissue below
    d.attachments.push_back({BaryPoint::node(2 * S + v), 1e6, shell.mesh.nodes.row(2 * S + v).transpose()});
  SurgeryOptions o;
  o.solver = test::anderson_options(3000, 1e-9);
  SurgerySession session(d, o);
  FaceCutter cutter(shell.mesh);
  const CutEvent ev = cutter.cut(u);
  ASSERT_GT(ev.copy_of.size(), 0u);
  ASSERT_EQ(session.cut(u).copy_of, ev.copy_of);

  // The flood fill from the flap's middle, with the base line's 4 skin edges as the barrier.
  const Triangles skin = shell_skin(shell, cutter);
  ASSERT_EQ(skin.rows(), 2 * (kGrid - 1) * (kGrid - 1));
  const Points& x0 = cutter.mesh().nodes;
  auto centroid = [&](int f) { return ((x0.row(skin(f, 0)) + x0.row(skin(f, 1)) + x0.row(skin(f, 2))) / 3.0).eval(); };
  int seed = 0;
  for (int f = 0; f < skin.rows(); ++f)
    if ((centroid(f) - Eigen::RowVector3d(0.45, 0.45, 0)).norm() <
        (centroid(seed) - Eigen::RowVector3d(0.45, 0.45, 0)).norm())
      seed = f;
  std::vector<std::array<int, 2>> base;
  for (int i = 2; i < 6; ++i) base.push_back({2 * kGrid + i, 2 * kGrid + i + 1});
  const std::vector<int> region = flood_fill_triangles(skin, seed, base);
  std::set<int> expected;
  for (int f = 0; f < skin.rows(); ++f)
    if (inside(centroid(f)(0), 0.25, 0.75) && inside(centroid(f)(1), 0.25, 0.75)) expected.insert(f);
  EXPECT_EQ(expected.size(), 32u);
  EXPECT_EQ(std::set<int>(region.begin(), region.end()), expected);
  // Without the base line the fill leaks round the incision's ends to the whole skin.
  EXPECT_EQ(flood_fill_triangles(skin, seed).size(), static_cast<size_t>(skin.rows()));

  // The deep nodes below the flap: exactly the deep-layer nodes of the tets inside the flap (by
  // their centroids) — on the incision lines these are the flap side's copies.
  const std::vector<int> below = shell_nodes_below(shell, cutter, skin, region);
  std::set<int> expected_below;
  const TetMesh& cm = cutter.mesh();
  for (int t = 0; t < cm.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += cm.nodes.row(cm.tets(t, a)).transpose() / 4.0;
    if (inside(c.x(), 0.25, 0.75) && inside(c.y(), 0.25, 0.75))
      for (int a = 0; a < 4; ++a)
        if (cutter.original(cm.tets(t, a)) >= 2 * S) expected_below.insert(cm.tets(t, a));
  }
  EXPECT_EQ(expected_below.size(), 25u);
  EXPECT_EQ(std::set<int>(below.begin(), below.end()), expected_below);

  // A hook on the flap's middle skin node pulls it up, before and after undermining.
  const int middle = 4 * kGrid + 4;
  const Vec3 target = shell.mesh.nodes.row(middle).transpose() + Vec3(0, 0, 0.05);
  const int hook = session.add_hook(BaryPoint::node(middle), target, 1e3);
  ASSERT_TRUE(session.step().converged);
  const double lift_attached = session.state().x(middle, 2);
  // Undermining releases the attachments of those nodes: the originals' (key = index = surface
  // vertex v of node 2S + v) and, on the incision lines, the flap side's copies' (a cut gives each
  // copy of an attached node the same attachment); the originals across the incision keep theirs.
  const std::vector<int> keys_before = session.attachment_keys();
  std::vector<int> release;
  for (int key : keys_before)
    if (session.attachment_point(key).nodes[0] >= 0 && expected_below.count(session.attachment_point(key).nodes[0]))
      release.push_back(key);
  const int released = static_cast<int>(release.size());
  EXPECT_EQ(released, 25);  // every deep node under the flap was attached, copies included
  EXPECT_GT(static_cast<int>(keys_before.size()), S + 1);  // copies of attached nodes carry attachments
  for (int key : keys_before)
    if (key >= S && key != hook) {
      EXPECT_LT(session.attachment_origin(key), S) << "key " << key;
    }
  session.remove_attachments(release);
  EXPECT_EQ(session.num_attachments(), static_cast<int>(keys_before.size()) - released);  // the hook stays
  for (int key : keys_before)  // an attachment is gone exactly when its node is under the flap
    if (key != hook) {
      const bool under = std::find(release.begin(), release.end(), key) != release.end();
      EXPECT_EQ(session.attachment_row(key) < 0, under) << "key " << key;
    }
  ASSERT_TRUE(session.step().converged);
  const double lift_free = session.state().x(middle, 2);
  // The attached deep nodes outside the flap stay (their springs' stretch), the outside's copies
  // on the incision lines too (they inherited their originals' attachments).
  double outside_moved = 0, outside_copies_moved = 0;
  for (int v = 0; v < S; ++v)
    if (!expected_below.count(2 * S + v))
      outside_moved = std::max(outside_moved, (session.state().x.row(2 * S + v) - cm.nodes.row(2 * S + v)).norm());
  for (Eigen::Index n = S * (so.layers + 1); n < cm.nodes.rows(); ++n)
    if (cutter.original(static_cast<int>(n)) >= 2 * S && !expected_below.count(static_cast<int>(n)))
      outside_copies_moved = std::max(outside_copies_moved, (session.state().x.row(n) - cm.nodes.row(n)).norm());
  if (test::verbose())
    std::printf(
        "  %d attachments released (of 25 deep nodes under the flap); flap middle lifted %.3e attached, "
        "%.3e undermined; attached deep nodes outside moved <= %.3e (their copies %.3e)\n",
        released, lift_attached, lift_free, outside_moved, outside_copies_moved);
  EXPECT_GT(lift_free, 3 * lift_attached);
  EXPECT_LT(outside_moved, 1e-3 * lift_free);
  EXPECT_LT(outside_copies_moved, 1e-3 * lift_free);
  EXPECT_GE(session.attachment_row(hook), 0);

  EXPECT_THROW(flood_fill_triangles(skin, static_cast<int>(skin.rows())), MeshError);
  EXPECT_THROW(flood_fill_triangles(skin, 0, {{0, 1 << 20}}), MeshError);
  EXPECT_THROW(cutter.original(static_cast<int>(x0.rows())), MeshError);
}

// A U flap whose arms do not follow the skin's grid (x = 0.3 and x = 0.7, between the grid lines
// x = 0.25, 0.375 and 0.625, 0.75, for y in (0.25, 0.75); the top y = 0.75 for x in (0.25, 0.75),
// overlapping the arms at the corners), cut through a prism shell with `extra` faces; the region
// flooded on the skin from the flap's middle, bounded by the base line y = 0.25 from x = 0.25 to
// 0.75.
struct OffGridFlap {
  Shell shell;
  FaceCutter cutter;
  Triangles skin;
  std::vector<int> region;

  explicit OffGridFlap(const std::vector<TetPair>& extra = {}) : shell(thin_shell()), cutter(shell.mesh) {
    std::vector<TetPair> u = extra;
    for (const double x : {0.3, 0.7})
      for (const auto& f : faces_across_plane(shell.mesh, Vec3::UnitX(), x, Vec3::UnitY()))
        if (inside(face_centroid(shell.mesh, f).y(), 0.25, 0.75)) u.push_back(f);
    for (const auto& f : faces_across_plane(shell.mesh, Vec3::UnitY(), 0.75, Vec3::UnitX()))
      if (inside(face_centroid(shell.mesh, f).x(), 0.25, 0.75)) u.push_back(f);
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    (void)cutter.cut(u);
    skin = shell_skin(shell, cutter);
    int seed = -1;
    for (int f = 0; f < skin.rows() && seed < 0; ++f)
      if ((centroid(std::array<int, 3>{skin(f, 0), skin(f, 1), skin(f, 2)}) - Vec3(0.45, 0.45, 0)).norm() < 0.06)
        seed = f;
    if (seed < 0) throw MeshError("OffGridFlap: no skin triangle at the flap's middle");
    std::vector<std::array<int, 2>> base;
    for (int i = 2; i < 6; ++i) base.push_back({2 * kGrid + i, 2 * kGrid + i + 1});
    region = flood_fill_triangles(skin, seed, base);
  }
  static Shell thin_shell() {
    ShellOptions so;
    so.thickness = 0.1;
    so.layers = 2;
    return make_shell(skin_patch(), so);
  }
  template <class Nodes>
  Vec3 centroid(const Nodes& nodes) const {
    Vec3 c = Vec3::Zero();
    for (const int v : nodes) c += cutter.mesh().nodes.row(v).transpose();
    return Vec3(c / static_cast<double>(nodes.size()));
  }
};

// A face cut separates tets by the side of their centroids, so beside the arms it zigzags across the
// prism columns, and a column whose skin triangle lies outside the flap may hold tets on the flap's
// side (cut off from that skin). Their deep nodes are the flap's too (copies that inherited
// attachments): left attached, they tie the flap to the skin beside it (scenes/face_flap.json's
// flap stopped 1.6–2.6 mm short of its hooks' targets with the arms lengthened; docs/validation.md
// §11).
TEST(Undermining, ArmsAcrossThePrismColumnsReleaseTheFlapSideOfEveryColumn) {
  const OffGridFlap g;
  const int S = g.shell.surface_vertices;
  ASSERT_LT(g.region.size(), static_cast<size_t>(g.skin.rows()));  // the incisions and the base close it
  const TetMesh& cm = g.cutter.mesh();
  auto flap = [](const Vec3& c) { return inside(c.x(), 0.3, 0.7) && inside(c.y(), 0.25, 0.75); };
  // The flap's tets: centroids inside (the cut separates by the centroids' sides); some of them in
  // columns whose skin triangle lies outside the flap, else this test would not exercise the case.
  std::set<int> expected_below;
  int cut_off = 0;
  for (int t = 0; t < cm.tets.rows(); ++t) {
    const std::array<int, 4> v{cm.tets(t, 0), cm.tets(t, 1), cm.tets(t, 2), cm.tets(t, 3)};
    if (!flap(g.centroid(v))) continue;
    for (const int a : v)
      if (g.cutter.original(a) >= 2 * S) expected_below.insert(a);
    // The column's skin triangle: the footprint's 3 surface vertices at layer 0.
    std::set<int> column;
    for (const int a : v) column.insert(g.cutter.original(a) % S);
    Vec3 top = Vec3::Zero();
    for (const int w : column) top += g.shell.mesh.nodes.row(w).transpose() / 3.0;
    cut_off += flap(top) ? 0 : 1;
  }
  EXPECT_GT(cut_off, 0);
  const std::vector<int> below = shell_nodes_below(g.shell, g.cutter, g.skin, g.region);
  EXPECT_EQ(std::set<int>(below.begin(), below.end()), expected_below);
}

// A cut elsewhere that separates tets from their skin (a dissection under the skin beyond the flap's
// base line, mid-depth, across the whole patch) must not carry the region away: the base line is
// no cut, so the deep tets under the dissection are joined to the flap's, but only the columns
// beside the region's (sharing a surface vertex with one) may join it; nothing two rows of the grid
// beyond the base is released.
TEST(Undermining, ADissectionBeyondTheBaseLineDoesNotCarryTheRegionAway) {
  // The dissection: the faces between the two layers of prisms (z = −0.05) for y < 0.25.
  const Shell plain = OffGridFlap::thin_shell();
  std::vector<TetPair> dissection;
  for (const auto& f : faces_across_plane(plain.mesh, Vec3::UnitZ(), -0.05, Vec3::UnitX()))
    if (face_centroid(plain.mesh, f).y() < 0.25) dissection.push_back(f);
  ASSERT_FALSE(dissection.empty());
  const OffGridFlap g(dissection);
  ASSERT_LT(g.region.size(), static_cast<size_t>(g.skin.rows()));
  const std::vector<int> below = shell_nodes_below(g.shell, g.cutter, g.skin, g.region);
  ASSERT_FALSE(below.empty());
  double lowest = 1;
  for (const int v : below) {
    EXPECT_GE(g.cutter.original(v), 2 * g.shell.surface_vertices);
    lowest = std::min(lowest, g.cutter.mesh().nodes(v, 1));
  }
  EXPECT_GE(lowest, 0.125 - 1e-12);  // the base row y = 0.25 and at most the next one
}

}  // namespace
}  // namespace xpd
