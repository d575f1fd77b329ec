// A surgery session with localized collisions (SurgerySession::enable_collision): the collision
// region's Schur factorization carried through topology events by SchurFactorization::modify,
// against a session that refactors the model and builds the collision model anew at every event
// (the oracle). Positions agree in every frame; the region's Σ⁻¹ equals dpotri of a fresh one;
// events that change the region's nodes rebuild; proxies follow splits and excisions.
#include <gtest/gtest.h>

#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/surgery_session.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

#include "pd_fixtures.hpp"

namespace xpd {
namespace {

// A bar clamped at both x-ends, pressed 0.01 up from below by a large ball under its middle (5
// bottom nodes in contact); collision proxies on the bottom face's nodes.
struct PressedBar {
  TetMesh box = make_box(11, 5, 5, Vec3::Zero(), Vec3(1.0, 0.4, 0.4));
  ModelDesc desc;
  SurgeryCollision collision;
  PressedBar() {
    desc.mesh = box;
    desc.mu = {1e3};
    for (Eigen::Index i = 0; i < box.nodes.rows(); ++i) {
      const double x = box.nodes(i, 0);
      if (x < 1e-9 || x > 1.0 - 1e-9)
        desc.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e6, box.nodes.row(i).transpose()});
    }
    std::vector<int> bottom;
    for (Eigen::Index i = 0; i < box.nodes.rows(); ++i)
      if (box.nodes(i, 2) < 1e-9) bottom.push_back(static_cast<int>(i));
    collision.proxies = proxies_from_nodes(box, bottom);
    for (int p = 0; p < collision.proxies.size(); ++p) collision.region.push_back(p);
    collision.obstacles.push_back({Sphere{Vec3(0.5, 0.2, -1.99), 2.0}, {}});
    collision.options.stiffness = 1e4;
    collision.options.inner_iterations = 2;
  }
  SurgerySession session(FactorUpdate update) const {
    SurgeryOptions o;
    o.factor_update = update;
    o.solver = test::anderson_options(1000, 1e-9);
    SurgerySession s(desc, o);
    s.enable_collision(collision);
    return s;
  }
};

double max_node_distance(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

// Proxy p's rest position from its tet's rest nodes and its weights.
Vec3 rest_of(const SurgerySession& s, int p) {
  const ProxySet& px = s.collision_model()->proxies();
  Vec3 x = Vec3::Zero();
  for (int a = 0; a < 4; ++a)
    x += px.weights(p, a) * s.mesh().nodes.row(s.mesh().tets(px.tet[static_cast<size_t>(p)], a)).transpose();
  return x;
}

TEST(SurgeryCollision, CutsAndSuturesAboveTheContactGiveTheRebuiltSessionsPositionsInEveryFrame) {
  const PressedBar bar;
  SurgerySession prog = bar.session(FactorUpdate::Progressive), ref = bar.session(FactorUpdate::Refactor);
  const double diag = test::bbox_diagonal(bar.box.nodes);
  // Top faces first: the first half of the cut stays above the region's tets (the bottom layer).
  const auto faces = faces_across_plane(bar.box, Vec3::UnitX(), 0.5, Vec3(0.0, 0.01, -1.0));
  ASSERT_EQ(faces.size(), 2u * 4u * 4u);
  double worst = 0;
  int events = 0, contact_frames = 0, iterations_prog = 0, iterations_ref = 0;
  auto frame = [&](const char* what) {
    const FrameStats sp = prog.step(), sr = ref.step();
    EXPECT_TRUE(sp.converged && sr.converged) << what << " (event " << events << ")";
    iterations_prog += sp.iterations;
    iterations_ref += sr.iterations;
    worst = std::max(worst, max_node_distance(prog.state().x, ref.state().x) / diag);
    contact_frames += prog.last_collision_stats().active_proxies > 0 ? 1 : 0;
  };
  frame("start");
  ASSERT_GT(prog.last_collision_stats().active_proxies, 0);
  const int m0 = prog.collision_model()->schur()->m();
  // The upper three rows of cells (24 faces): no node of a bottom tet is split.
  for (size_t i = 0; i < 24; ++i) {
    const CutEvent ev = prog.cut({faces[i]});
    ASSERT_EQ(ref.cut({faces[i]}).copy_of, ev.copy_of);
    ++events;
    frame("cut");
  }
  EXPECT_EQ(prog.collision_model()->schur()->m(), m0);
  EXPECT_EQ(prog.stats().schur_rebuilds, 0);
  EXPECT_EQ(prog.stats().schur_updates, events);
  EXPECT_TRUE(prog.collision_model()->schur()->stats().updatable);
  // Sutures across the incision (each copy to the node it duplicates): rank-1 changes.
  const Eigen::Index n0 = bar.box.nodes.rows();
  for (Eigen::Index c = n0; c < prog.mesh().nodes.rows(); c += 3) {
    const int twin = prog.cutter().original(static_cast<int>(c));
    prog.add_suture(BaryPoint::node(static_cast<int>(c)), BaryPoint::node(twin), 1e4);
    ref.add_suture(BaryPoint::node(static_cast<int>(c)), BaryPoint::node(twin), 1e4);
    ++events;
    frame("suture");
  }
  EXPECT_EQ(prog.stats().schur_rebuilds, 0);
  // The region's Σ⁻¹ after these events against dpotri of the fresh one the oracle built.
  const SchurFactorization& s_prog = *prog.collision_model()->schur();
  const SchurFactorization& s_ref = *ref.collision_model()->schur();
  const double inv_err = (s_prog.schur_inverse() - s_ref.schur_inverse()).norm() / s_ref.schur_inverse().norm();
  // The last row reaches the bottom layer: its split nodes change the region, which is rebuilt.
  for (size_t i = 24; i < faces.size(); ++i) {
    const CutEvent ev = prog.cut({faces[i]});
    ASSERT_EQ(ref.cut({faces[i]}).copy_of, ev.copy_of);
    ++events;
    frame("cut through the region");
  }
  EXPECT_GT(prog.stats().schur_rebuilds, 0);
  test::report("surgery with collision: progressive vs rebuilt positions / bbox", worst, 1e-8);
  test::report("surgery with collision: Σ⁻¹ after cuts and sutures vs fresh dpotri", inv_err, 1e-9);
  if (test::verbose())
    std::printf(
        "  %d events, %d frames with contact, m = %d, Schur updates %ld, rebuilds %ld, last update %.2f ms; "
        "PD iterations %d (progressive) / %d (rebuilt)\n",
        events, contact_frames, m0, prog.stats().schur_updates, prog.stats().schur_rebuilds,
        prog.stats().schur_update_ms, iterations_prog, iterations_ref);
  // (solved to 1e-9, above the frames' round-off floor, so that they stop by the tolerance and
  // their iteration counts compare; the runs differ by about 6e-11 of the diagonal)
  EXPECT_LT(worst, 1e-8);
  EXPECT_LT(inv_err, 1e-9);
  // The same iterations up to round-off (the frames' contact sets agree): a stale Σ⁻¹ would still
  // converge, to the same equilibrium, in other counts.
  EXPECT_LE(std::abs(iterations_prog - iterations_ref), iterations_ref / 100);
  EXPECT_EQ(contact_frames, events + 1);
}

// An element split through the bar's top and an excision of tets at its bottom, with collisions
// on: a proxy of a cut tet moves to the fragment that holds its point (same rest position, inside
// the fragment's material), proxies in excised tets go and the others follow the renumbering; the
// session still matches the rebuilding one frame by frame.
TEST(SurgeryCollision, SplitsAndExcisionsMoveTheProxies) {
  const PressedBar bar;
  SurgerySession prog = bar.session(FactorUpdate::Progressive), ref = bar.session(FactorUpdate::Refactor);
  const double diag = test::bbox_diagonal(bar.box.nodes);
  ASSERT_TRUE(prog.step().converged && ref.step().converged);
  // A blade across the bar from the top down to z = 0.25, between node layers (x = 0.53).
  SweptPath blade;
  blade.points = {Vec3(0.53, -0.1, 0.45), Vec3(0.53, 0.5, 0.45)};
  blade.sweep = {Vec3(0, 0, -0.2)};
  const auto surface = swept_cut_surface(blade);
  const int proxies0 = prog.collision_model()->proxies().size();
  const CutEvent ev = prog.split(*surface);
  ASSERT_GT(ev.tets_split, 0);
  ASSERT_EQ(ref.split(*surface).tets_split, ev.tets_split);
  const ProxySet& after = prog.collision_model()->proxies();
  double worst_rest = 0, worst_margin = 0;
  for (int p = 0; p < after.size(); ++p) {
    worst_rest = std::max(worst_rest, (rest_of(prog, p) - after.rest.row(p).transpose()).norm());
    worst_margin = std::min(worst_margin, prog.cutter().material_margin(after.tet[static_cast<size_t>(p)],
                                                                        after.weights.row(p).transpose()));
  }
  EXPECT_LT(worst_rest, 1e-12);
  EXPECT_GE(worst_margin, -1e-12);
  ASSERT_TRUE(prog.step().converged && ref.step().converged);
  double worst = max_node_distance(prog.state().x, ref.state().x) / diag;
  // Excise the bottom tets at x < 0.2 (away from the ball): their proxies go.
  std::vector<int> tets;
  for (Eigen::Index t = 0; t < prog.mesh().tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += 0.25 * prog.mesh().nodes.row(prog.mesh().tets(t, a)).transpose();
    if (c.x() > 0.1 && c.x() < 0.2 && c.z() < 0.1) tets.push_back(static_cast<int>(t));
  }
  ASSERT_FALSE(tets.empty());
  const int before_excision = prog.collision_model()->proxies().size();
  std::vector<char> removed(static_cast<size_t>(prog.mesh().tets.rows()), 0);
  for (const int t : tets) removed[static_cast<size_t>(t)] = 1;
  int in_removed = 0;
  for (const int t : prog.collision_model()->proxies().tet) in_removed += removed[static_cast<size_t>(t)];
  ASSERT_GT(in_removed, 0);
  prog.excise(tets);
  ref.excise(tets);
  EXPECT_EQ(prog.collision_model()->proxies().size(), before_excision - in_removed);
  for (int p = 0; p < prog.collision_model()->proxies().size(); ++p)
    worst_rest =
        std::max(worst_rest, (rest_of(prog, p) - prog.collision_model()->proxies().rest.row(p).transpose()).norm());
  EXPECT_LT(worst_rest, 1e-12);
  ASSERT_TRUE(prog.step().converged && ref.step().converged);
  worst = std::max(worst, max_node_distance(prog.state().x, ref.state().x) / diag);
  EXPECT_GT(prog.last_collision_stats().active_proxies, 0);
  test::report("surgery with collision, split and excision: progressive vs rebuilt / bbox", worst, 1e-8);
  EXPECT_LT(worst, 1e-8);
  if (test::verbose())
    std::printf("  proxies %d -> %d (split) -> %d (excision of %zu tets); Schur updates %ld, rebuilds %ld\n", proxies0,
                before_excision, prog.collision_model()->proxies().size(), tets.size(), prog.stats().schur_updates,
                prog.stats().schur_rebuilds);

  // The collision method must be the Schur one.
  SurgeryCollision c = bar.collision;
  c.options.method = CollisionMethod::Pcg;
  SurgerySession t(bar.desc);
  EXPECT_THROW(t.enable_collision(c), SolverError);
  EXPECT_EQ(t.collision_model(), nullptr);
}

// An excision inside a sphere that reaches through the bar's bottom face (a split and an excision
// in one event, excise_inside), with collisions on: the proxies inside the sphere go with its
// tissue, every proxy outside it keeps its rest point (rebound to the fragment holding it, then
// renumbered), and the session matches the rebuilding one frame by frame.
TEST(SurgeryCollision, AnExcisionInsideASphereDropsItsProxiesAndRebindsTheRest) {
  const PressedBar bar;
  SurgerySession prog = bar.session(FactorUpdate::Progressive), ref = bar.session(FactorUpdate::Refactor);
  const double diag = test::bbox_diagonal(bar.box.nodes);
  ASSERT_TRUE(prog.step().converged && ref.step().converged);
  // The bottom nodes (spacing 0.1) lie 0.03, 0.104, 0.145, ... from the centre: every proxy is
  // clear of the sphere by more than the split's snapping distance (5% of the mean edge).
  const Vec3 center(0.8, 0.2, 0.03);
  const double radius = 0.125, clear = 0.015;
  const ProxySet before = prog.collision_model()->proxies();
  std::vector<Vec3> outside;  // rest points of the proxies that must survive
  int inside = 0;
  for (int p = 0; p < before.size(); ++p) {
    const double d = (before.rest.row(p).transpose() - center).norm() - radius;
    ASSERT_GT(std::abs(d), clear);
    if (d > 0)
      outside.push_back(before.rest.row(p).transpose());
    else
      ++inside;
  }
  ASSERT_GT(inside, 0);
  const auto ball = sphere_cut_surface(center, radius);
  CutEvent split;
  const ExcisionEvent ev = prog.excise_inside(*ball, &split);
  ASSERT_GT(split.tets_split, 0);
  ASSERT_FALSE(ev.orphaned.empty());
  ref.excise_inside(*ball);
  const ProxySet& after = prog.collision_model()->proxies();
  double worst_rest = 0, worst_margin = 0, nearest_inside = 1.0;
  for (int p = 0; p < after.size(); ++p) {
    const Vec3 r = after.rest.row(p).transpose();
    worst_rest = std::max(worst_rest, (rest_of(prog, p) - r).norm());
    worst_margin = std::min(worst_margin, prog.cutter().material_margin(after.tet[static_cast<size_t>(p)],
                                                                        after.weights.row(p).transpose()));
    nearest_inside = std::min(nearest_inside, (r - center).norm() - radius);
  }
  EXPECT_LT(worst_rest, 1e-12);
  EXPECT_GE(worst_margin, -1e-12);
  EXPECT_GT(nearest_inside, clear);  // no proxy left in the removed tissue
  int kept = 0;
  for (const Vec3& r : outside)
    for (int p = 0; p < after.size(); ++p)
      if ((after.rest.row(p).transpose() - r).norm() < 1e-12) {
        ++kept;
        break;
      }
  EXPECT_EQ(kept, static_cast<int>(outside.size()));
  EXPECT_EQ(ref.collision_model()->proxies().size(), after.size());
  double worst = 0;
  for (int f = 0; f < 2; ++f) {
    ASSERT_TRUE(prog.step().converged && ref.step().converged);
    worst = std::max(worst, max_node_distance(prog.state().x, ref.state().x) / diag);
  }
  EXPECT_GT(prog.last_collision_stats().active_proxies, 0);
  test::report("surgery with collision, excision inside a sphere: progressive vs rebuilt / bbox", worst, 1e-8);
  EXPECT_LT(worst, 1e-8);
  if (test::verbose())
    std::printf("  proxies %d -> %d (%d inside the sphere; %d tets split, %zu nodes orphaned)\n", before.size(),
                after.size(), inside, split.tets_split, ev.orphaned.size());
}

}  // namespace
}  // namespace xpd
