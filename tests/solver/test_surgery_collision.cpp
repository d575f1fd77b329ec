// A surgery session with localized collisions (SurgerySession::enable_collision): the collision
// region's Schur factorization carried through topology events by SchurFactorization::modify,
// against a session that refactors the model and builds the collision model anew at every event
// (the oracle). Positions agree in every frame; the region's Σ⁻¹ equals dpotri of a fresh one;
// events that change the region's nodes rebuild; splits and excisions are refused.
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
    o.solver = test::anderson_options(1000, 1e-11);
    SurgerySession s(desc, o);
    s.enable_collision(collision);
    return s;
  }
};

double max_node_distance(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

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
  EXPECT_LT(worst, 1e-8);
  EXPECT_LT(inv_err, 1e-9);
  // The same iterations up to round-off (the frames' contact sets agree): a stale Σ⁻¹ would still
  // converge, to the same equilibrium, in other counts.
  EXPECT_LE(std::abs(iterations_prog - iterations_ref), iterations_ref / 100);
  EXPECT_EQ(contact_frames, events + 1);
}

TEST(SurgeryCollision, SplitsAndExcisionsAreRefusedWithCollisionsOn) {
  const PressedBar bar;
  SurgerySession s = bar.session(FactorUpdate::Progressive);
  s.step();
  const Points x = s.state().x;
  const long events = s.stats().topology_events;
  EXPECT_THROW(s.excise({0}), SolverError);
  const auto ball = sphere_cut_surface(Vec3(0.5, 0.2, 0.35), 0.08);
  EXPECT_THROW(s.excise_inside(*ball), SolverError);
  EXPECT_THROW(s.split(*ball), SolverError);
  EXPECT_EQ(s.stats().topology_events, events);
  EXPECT_EQ(s.mesh().tets.rows(), bar.box.tets.rows());
  EXPECT_TRUE(s.state().x == x);
  // The collision method must be the Schur one.
  SurgeryCollision c = bar.collision;
  c.options.method = CollisionMethod::Pcg;
  SurgerySession t(bar.desc);
  EXPECT_THROW(t.enable_collision(c), SolverError);
  EXPECT_EQ(t.collision_model(), nullptr);
}

}  // namespace
}  // namespace xpd
