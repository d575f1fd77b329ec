// SurgerySession: PD frames solved with a DynamicLdlt that follows topology events (progressive
// Cholesky, Li, Liu, Kavan & Chen 2021) against the same frames solved with a fresh factorization
// of each new model: a scripted sequence of 200 cut events, and sutures that close an incision;
// failed events leave the session unchanged. Also the bad input of the spring columns and of
// PdStep's factor override.
#include <gtest/gtest.h>

#include <Eigen/SparseCholesky>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/solver/surgery_session.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

#include "pd_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

// A block with both x-ends attached and pulled apart by `pull` each (random per-tet μ), so a cut
// through the middle opens.
ModelDesc pulled_desc(const TetMesh& mesh, double pull, double attach_stiffness) {
  return test::ends_attached_desc(mesh, 1e4, attach_stiffness, pull, 3);
}

// The force scale of a pulled block: the residual at rest (frames after an event start near their
// equilibrium, so their tolerance is absolute: 1e-10 of this).
double force_scale(const ModelDesc& d) {
  const Model m = build_model(d);
  State s = make_state(m);
  return load_norm(m, s) + (evaluate(m, s), s.force.norm());
}

double max_node_distance(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

// The session's updated factor against a fresh LDLᵀ of its model's matrix on random right-hand
// sides: (relative difference of the solutions, relative residual of the factor's solution).
// The progressive session's factor against a fresh factorization of the matrix the refactorizing
// session `assembled` assembled from its model description (the progressive session's own K is
// changed by each event's FactorModification, as its factor is, so it is no independent oracle).
std::pair<double, double> factor_vs_fresh(const SurgerySession& s, const SurgerySession& assembled) {
  const Eigen::SparseMatrix<double>& K = assembled.model().matrix();
  const Eigen::MatrixXd b = Eigen::MatrixXd::Random(K.rows(), 3);
  Eigen::MatrixXd x = b;
  s.factor().solve_in_place(x);
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> fresh(K);
  EXPECT_EQ(fresh.info(), Eigen::Success);
  const Eigen::MatrixXd y = fresh.solve(b);
  return {(x - y).norm() / y.norm(), (K * x - b).norm() / b.norm()};
}

// ‖K − K_assembled‖_F / ‖K_assembled‖_F: the progressive session's matrix (the previous one changed
// by each event's FactorModification, build_model's second form) against the refactorizing
// session's, assembled from the terms.
double matrix_vs_assembled(const SurgerySession& s, const SurgerySession& assembled) {
  const Eigen::SparseMatrix<double>& K = assembled.model().matrix();
  return (s.model().matrix() - K).norm() / K.norm();
}

// A cantilever under gravity: `box` with shear modulus `mu`, clamped at x = 0 (stiffness 1e7).
ModelDesc hanging_desc(const TetMesh& box, double mu) {
  ModelDesc d;
  d.mesh = box;
  d.mu = {mu};
  d.gravity = Vec3(0, 0, -9.81);
  test::attach_min_face(d, 0, 1e7);
  return d;
}

// Two sessions of one model: a fresh factorization per event (the oracle) and progressive updates;
// frames stop at 1e-10 of the model's force scale (Anderson).
struct SessionPair {
  SurgerySession ref, prog;
};
SessionPair session_pair(const ModelDesc& d) {
  SurgeryOptions o;
  o.solver = test::anderson_options(3000, 1e-10);
  o.solver.abs_tolerance = 1e-10 * force_scale(d);
  o.factor_update = FactorUpdate::Refactor;
  SurgerySession ref(d, o);
  o.factor_update = FactorUpdate::Progressive;
  return {std::move(ref), SurgerySession(d, o)};
}

// 200 events, one face each, of a plane cut through a 7 × 11 × 11 block pulled apart at its ends,
// until the halves separate, run by two sessions: progressive updates of one DynamicLdlt (the model
// built without a factorization) and a fresh CHOLMOD factorization per event. Every frame is
// solved to equilibrium by both; positions agree to 1e-8 of the bounding-box diagonal in every
// frame, and the cut opens.
TEST(SurgerySession, CutSequenceGivesTheRefactorizedPositionsInEveryFrame) {
  const TetMesh box = make_box(7, 11, 11, Vec3::Zero(), Vec3(0.6, 1.0, 1.0));
  const ModelDesc d0 = pulled_desc(box, 0.02, 1e6);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.3, Vec3(0.0, 1.0, 0.01));
  ASSERT_EQ(faces.size(), 2u * 10u * 10u);
  auto [ref, prog] = session_pair(d0);
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  EXPECT_FALSE(prog.model().has_factor());
  EXPECT_TRUE(ref.model().has_factor());
  const double diag = test::bbox_diagonal(box.nodes);
  double worst = 0, worst_matrix = 0;
  int events = 0, iterations_ref = 0, iterations_prog = 0;
  for (size_t i = 0; i < faces.size(); ++i) {
    const CutEvent ev = prog.cut({faces[i]});
    ASSERT_EQ(ev.faces_cut, 1);
    ASSERT_EQ(ref.cut({faces[i]}).copy_of, ev.copy_of);
    ++events;
    const FrameStats sr = ref.step(), sp = prog.step();
    ASSERT_TRUE(sr.converged && sp.converged) << "event " << i << ": " << sr.iterations << " / " << sp.iterations;
    iterations_ref += sr.iterations;
    iterations_prog += sp.iterations;
    worst = std::max(worst, max_node_distance(ref.state().x, prog.state().x) / diag);
    worst_matrix = std::max(worst_matrix, matrix_vs_assembled(prog, ref));
  }
  EXPECT_GE(events, 200);
  test::report("200 cuts: K changed by the events vs assembled", worst_matrix, 1e-13);
  EXPECT_LT(worst_matrix, 1e-13);
  // The fill check after the halves separated: its fresh ordering is the separated mesh's (that of
  // the assembled matrix), not one that still couples the halves by the cancelled entries'
  // round-off residues; the policy refactors, and the factor still solves the assembled matrix.
  DynamicLdlt separated;
  separated.compute(ref.model().matrix());
  const RefillResult fill = prog.check_fill();
  if (test::verbose())
    std::printf("  fill check: nnz(L) %.0f, fresh ordering %.0f (assembled matrix %.0f), %s\n", fill.nnz_L,
                fill.nnz_L_fresh, separated.info().nnz_L, fill.refactored ? fill.reason : "kept");
  EXPECT_LE(fill.nnz_L_fresh, 1.01 * separated.info().nnz_L);
  EXPECT_TRUE(fill.refactored);
  EXPECT_LT(factor_vs_fresh(prog, ref).first, 1e-9);
  EXPECT_EQ(prog.stats().topology_events, 200);
  EXPECT_EQ(prog.stats().factor_fallback, 0);
  // The cut opened: every split node's copy has left its twin.
  const Eigen::Index n0 = box.nodes.rows(), n = prog.mesh().nodes.rows();
  ASSERT_EQ(n - n0, 11 * 11);  // the plane's nodes, each split once
  double min_gap = 1e300;
  for (Eigen::Index c = n0; c < n; ++c)
    for (Eigen::Index v = 0; v < n0; ++v)
      if ((prog.mesh().nodes.row(v) - prog.mesh().nodes.row(c)).norm() < 1e-12)
        min_gap = std::min(min_gap, (prog.state().x.row(c) - prog.state().x.row(v)).norm());
  test::report("progressive vs refactorized positions / bbox", worst, 1e-8);
  if (test::verbose())
    std::printf(
        "  %d events, %ld -> %ld nodes, PD iterations %d (refactorized) / %d (progressive), smallest "
        "opening %.3e (pull %.2f per side); factor updates %.1f ms in all, nnz(L) %.0f\n",
        events, static_cast<long>(n0), static_cast<long>(n), iterations_ref, iterations_prog, min_gap, 0.02,
        prog.stats().factor_update_ms_total, prog.stats().nnz_L);
  EXPECT_LT(worst, 1e-8);
  // A wrong factor still converges to the same equilibrium (PD's matrix only preconditions the
  // fixed point) but in other iteration counts: with ΔK's off-diagonal entries scaled by 0.99 the
  // totals were 1,723 / 1,698 and the positions 1.6e-8 apart.
  EXPECT_LE(std::abs(iterations_prog - iterations_ref), iterations_ref / 200);
  EXPECT_GT(min_gap, 0.02);
}

// An incision in a 9³ block pulled apart at its ends opens; zero-rest-length sutures across it
// (copy ↔ the node it duplicates, rank-1 updates) close it. The sutured equilibrium of the
// progressive session equals the refactorizing one's, the stitches close the wound to within f/k
// (f: the force the wound pulls with when held shut, read from a 100× stiffer suture where the gap
// is nearly closed), and removing the stitches restores the open wound.
TEST(SurgerySession, SuturesCloseAnIncisionToForceOverStiffness) {
  const TetMesh box = make_box(9, 9, 9, Vec3::Zero(), Vec3::Ones());
  std::vector<TetPair> incision;
  for (const auto& fc : faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ())) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(fc.first, a)).transpose() / 4.0;
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(fc.second, a)).transpose() / 4.0;
    c /= 2.0;
    if (c.z() > 0.5 && c.y() > 0.25 && c.y() < 0.75) incision.push_back(fc);
  }
  const ModelDesc d0 = pulled_desc(box, 0.05, 1e7);
  auto [ref, prog] = session_pair(d0);
  const CutEvent ev = prog.cut(incision);
  ASSERT_EQ(ev.copy_of.size(), 12u);
  ref.cut(incision);
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  const Points open_x = prog.state().x;
  const double diag = test::bbox_diagonal(prog.mesh().nodes);

  // Gap vectors (copy − twin), one row per stitch.
  auto gaps = [&](const Points& x) {
    Points g(static_cast<Eigen::Index>(ev.copy_of.size()), 3);
    for (size_t k = 0; k < ev.copy_of.size(); ++k)
      g.row(static_cast<Eigen::Index>(k)) = x.row(ev.nodes_before + static_cast<int>(k)) - x.row(ev.copy_of[k]);
    return g;
  };
  // Sutures every split node with stiffness k in both sessions, solves, and removes the stitches;
  // returns the sutured gaps and the largest position difference / diagonal.
  auto sutured = [&](double k, Points& g) {
    std::vector<int> ids;
    for (size_t c = 0; c < ev.copy_of.size(); ++c) {
      const BaryPoint a = BaryPoint::node(ev.nodes_before + static_cast<int>(c)), b = BaryPoint::node(ev.copy_of[c]);
      ids.push_back(prog.add_suture(a, b, k));
      EXPECT_EQ(ref.add_suture(a, b, k), ids.back());
    }
    EXPECT_EQ(prog.num_sutures(), 12);
    EXPECT_TRUE(ref.step().converged);
    EXPECT_TRUE(prog.step().converged);
    g = gaps(prog.state().x);
    const double diff = max_node_distance(ref.state().x, prog.state().x) / diag;
    for (int id : ids) {
      prog.remove_suture(id);
      ref.remove_suture(id);
    }
    return diff;
  };

  const Points g_open = gaps(open_x);
  const double k = 1e4;
  Points g_k, g_stiff;
  const double diff_k = sutured(k, g_k);
  const double diff_stiff = sutured(100 * k, g_stiff);
  EXPECT_EQ(prog.num_sutures(), 0);
  EXPECT_EQ(prog.stats().factor_fallback, 0);
  // f: the stitches' forces when the wound is nearly shut (a 100× stiffer suture). For a linear
  // wound response F(g) = F₀ − K_w g (K_w ⪰ 0) the stitches hold g = (kI + K_w)⁻¹F₀, and in K_w's
  // eigenbasis each component of g_k·k is at most that of g_100k·100k: ‖g_k‖ ≤ ‖f‖/k.
  const Points force_closed = 100 * k * g_stiff;
  const Eigen::VectorXd open_len = g_open.rowwise().norm(), k_len = g_k.rowwise().norm();
  test::report("sutured: progressive vs refactorized / bbox", std::max(diff_k, diff_stiff), 1e-8);
  test::report("sutured: ||gaps|| k / ||f||", g_k.norm() * k / force_closed.norm(), 1.0);
  if (test::verbose())
    std::printf("  gaps open %.3e..%.3e; sutured k = %.0e: %.3e..%.3e (||g|| %.3e, ||f||/k %.3e); k = %.0e: max %.3e\n",
                open_len.minCoeff(), open_len.maxCoeff(), k, k_len.minCoeff(), k_len.maxCoeff(), g_k.norm(),
                force_closed.norm() / k, 100 * k, g_stiff.rowwise().norm().maxCoeff());
  EXPECT_LT(diff_k, 1e-8);
  EXPECT_LT(diff_stiff, 1e-8);
  EXPECT_GT(open_len.minCoeff(), 1e-3);
  for (Eigen::Index c = 0; c < k_len.size(); ++c) EXPECT_LT(k_len(c), 0.2 * open_len(c)) << "stitch " << c;
  EXPECT_LE(g_k.norm(), force_closed.norm() / k);  // the sutures close the wound to within f/k
  EXPECT_LT(g_stiff.rowwise().norm().maxCoeff(), 0.02 * open_len.minCoeff());  // a stiff suture nearly shuts it

  // With the stitches removed both sessions solve the open wound again (from the last sutured
  // state; the same equilibrium as before to the solver's tolerance).
  ASSERT_TRUE(prog.step().converged);
  ASSERT_TRUE(ref.step().converged);
  EXPECT_LT(max_node_distance(prog.state().x, ref.state().x) / diag, 1e-8);
  EXPECT_LT((gaps(prog.state().x) - g_open).norm(), 1e-6 * g_open.norm());
}

// A cut that would leave a fragment without attachment (quasistatic: K singular) is refused with a
// SolverError naming the component; mesh, factor and state stay as they were, and the session
// goes on. Bad sutures are refused the same way.
TEST(SurgerySession, AnEventThatFailsLeavesTheSessionUnchanged) {
  const TetMesh box = make_box(5, 5, 5, Vec3::Zero(), Vec3::Ones());
  ModelDesc d;
  d.mesh = box;
  d.mu = {1e4};
  for (Eigen::Index i = 0; i < box.nodes.rows(); ++i)
    if (box.nodes(i, 0) < 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e7, box.nodes.row(i).transpose()});
  SurgeryOptions o;
  o.solver = test::anderson_options(3000, 1e-9);
  SurgerySession s(d, o);
  s.state().inputs.gravity = Vec3(0, 0, -9.81);  // a frame input, carried through the events
  ASSERT_TRUE(s.step().converged);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ());
  ASSERT_EQ(faces.size(), 32u);
  s.cut(std::vector<TetPair>(faces.begin(), faces.begin() + 16));  // half the plane: still one piece
  ASSERT_TRUE(s.step().converged);
  const Points x = s.state().x;
  const double nnz = s.stats().nnz_L;
  const long events = s.stats().topology_events;
  // The factor before the failed events: its order and a solve, to compare bit for bit after them.
  const std::vector<int> order = s.factor().elimination_order();
  const Eigen::MatrixXd b = Eigen::MatrixXd::Random(s.factor().rows(), 3);
  Eigen::MatrixXd solved = b;
  s.factor().solve_in_place(solved);
  try {
    s.cut(std::vector<TetPair>(faces.begin() + 16, faces.end()));  // the rest: the free half falls off
    ADD_FAILURE() << "a cut leaving an unattached fragment was accepted";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("component"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.mesh().nodes.rows(), x.rows());
  EXPECT_EQ(s.state().x, x);
  EXPECT_EQ(s.stats().nnz_L, nnz);
  EXPECT_EQ(s.stats().topology_events, events);
  EXPECT_EQ(s.state().inputs.gravity, Vec3(0, 0, -9.81));  // frame inputs carried through the cut
  EXPECT_THROW(s.add_suture(BaryPoint::node(3), BaryPoint::node(3), 1e3), SolverError);
  EXPECT_THROW(s.add_suture(BaryPoint::node(3), BaryPoint::node(100000), 1e3), SolverError);
  EXPECT_THROW(s.remove_suture(0), SolverError);
  EXPECT_EQ(s.stats().topology_events, events);
  EXPECT_EQ(s.factor().elimination_order(), order);
  Eigen::MatrixXd again = b;
  s.factor().solve_in_place(again);
  EXPECT_EQ(again, solved);
  // The session goes on: a part of the rest of the plane that keeps the block in one piece.
  s.cut(std::vector<TetPair>(faces.begin() + 16, faces.begin() + 24));
  ASSERT_TRUE(s.step().converged);
  EXPECT_EQ(s.stats().topology_events, events + 1);
  // What the session does not support is refused at construction (implicit Euler is supported:
  // SurgerySession.ImplicitEulerFramesFollowCutsSplitsAndExcisions).
  ModelDesc st = d;
  st.shape_targets.push_back({0, {}});
  EXPECT_THROW(SurgerySession{st}, SolverError);
  ModelDesc sl = d;
  sl.strain_limits.push_back({static_cast<int>(box.tets.rows()), 1e4, 0.9, 1.1});  // no such tet
  EXPECT_THROW(SurgerySession{sl}, SolverError);
  ModelDesc fr = d;
  fr.allow_unattached = true;
  EXPECT_THROW(SurgerySession{fr}, SolverError);
}

// Biphasic (strain-limited) tissue, Wang 2025 §3: every other tet of a block stretched by ~33%
// carries a strain limit σ ∈ [0.95, 1.05] with μ′ = 5 μ, so the limits are active. A partial cut,
// then an excision, in a progressive and a refactorizing session: equal positions after each event;
// the progressive factor solves like a fresh factorization of the session's model matrix (which
// has the limits' G_tᵀ G_t blocks); and the limits matter (positions far from unlimited tissue's).
TEST(SurgerySession, StrainLimitedTissueFollowsCutsAndExcisions) {
  const TetMesh box = make_box(7, 7, 7, Vec3::Zero(), Vec3(0.6, 1.0, 1.0));
  ModelDesc d = pulled_desc(box, 0.1, 1e7);
  const ModelDesc unlimited = d;
  for (int t = 0; t < box.tets.rows(); t += 2)
    d.strain_limits.push_back({t, 5 * d.mu[static_cast<size_t>(t)], 0.95, 1.05});
  auto [ref, prog] = session_pair(d);
  auto [free_ref, free_prog] = session_pair(unlimited);
  const double diag = test::bbox_diagonal(box.nodes);
  auto check_event = [&](const char* what) {
    ASSERT_TRUE(ref.step().converged) << what;
    ASSERT_TRUE(prog.step().converged) << what;
    ASSERT_TRUE(free_prog.step().converged) << what;
    const double diff = max_node_distance(ref.state().x, prog.state().x) / diag;
    test::report((std::string("strain-limited ") + what + ": progressive vs refactorized / bbox").c_str(), diff, 1e-8);
    EXPECT_LT(diff, 1e-8) << what;
    // The factor against a fresh one of the model's matrix, on random right-hand sides.
    const auto [rel, res] = factor_vs_fresh(prog, ref);
    test::report((std::string("strain-limited ") + what + ": factor vs fresh LDLT").c_str(), rel, 1e-9);
    EXPECT_LT(rel, 1e-9) << what;
    EXPECT_LT(res, 1e-10) << what;
    const double effect = max_node_distance(prog.state().x, free_prog.state().x) / diag;
    if (test::verbose()) std::printf("  %s: the limits move the equilibrium by %.3e of the diagonal\n", what, effect);
    EXPECT_GT(effect, 1e-3) << what;
  };
  check_event("before any event");
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.3, Vec3(0.0, 1.0, 0.01));
  const std::vector<TetPair> half(faces.begin(), faces.begin() + static_cast<long>(faces.size() / 2));
  ASSERT_EQ(prog.cut(half).copy_of, ref.cut(half).copy_of);
  free_prog.cut(half);
  check_event("after a partial cut");
  std::vector<int> bite;
  for (int t = 0; t < box.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += prog.mesh().nodes.row(prog.mesh().tets(t, a)).transpose() / 4.0;
    if ((c - Vec3(0.45, 0.5, 1.0)).norm() < 0.2) bite.push_back(t);
  }
  ASSERT_GT(bite.size(), 10u);
  ASSERT_EQ(prog.excise(bite).orphaned, ref.excise(bite).orphaned);
  free_prog.excise(bite);
  check_event("after an excision");
  EXPECT_EQ(prog.stats().factor_fallback, 0);
}

// Hooks (springs to targets) and released attachments (undermining's factor side) on a cantilever
// under gravity, in a progressive and a refactorizing session: equal solutions after every event; a
// hook lifts the tip and follows its target (a frame input, no factor change); removing it restores
// the unhooked equilibrium; releasing half of the clamped face frees exactly those nodes; releasing
// every attachment is refused with the session unchanged.
TEST(SurgerySession, HooksAndReleasedAttachmentsFollowTheRefactorizedModel) {
  const TetMesh box = make_box(7, 3, 3, Vec3::Zero(), Vec3(1.2, 0.3, 0.3));
  const ModelDesc d = hanging_desc(box, 1e5);
  auto [ref, prog] = session_pair(d);
  const double diag = test::bbox_diagonal(box.nodes);
  double worst = 0;
  auto solve = [&](const char* what) {
    EXPECT_TRUE(ref.step().converged) << what;
    EXPECT_TRUE(prog.step().converged) << what;
    worst = std::max(worst, max_node_distance(ref.state().x, prog.state().x) / diag);
  };
  solve("start");
  const Points unhooked = prog.state().x;
  int tip = 0;  // the top node of the free end, middle of its edge
  for (int i = 0; i < box.nodes.rows(); ++i)
    if ((box.nodes.row(i) - Eigen::RowVector3d(1.2, 0.15, 0.3)).norm() < 1e-9) tip = i;
  const Vec3 lift = box.nodes.row(tip).transpose() + Vec3(0, 0, 0.1);
  const int hook = prog.add_hook(BaryPoint::node(tip), lift, 1e4);
  EXPECT_EQ(ref.add_hook(BaryPoint::node(tip), lift, 1e4), hook);
  EXPECT_EQ(prog.num_attachments(), static_cast<int>(d.attachments.size()) + 1);
  solve("hooked");
  const double z_hooked = prog.state().x(tip, 2);
  EXPECT_GT(z_hooked, unhooked(tip, 2) + 1e-3);
  for (SurgerySession* s : {&ref, &prog})  // move the hook: a frame input
    s->state().inputs.attachment_targets.row(s->attachment_row(hook)) += Eigen::RowVector3d(0, 0, 0.1);
  solve("hook moved");
  EXPECT_GT(prog.state().x(tip, 2), z_hooked + 1e-3);
  ref.remove_attachments({hook});
  prog.remove_attachments({hook});
  EXPECT_EQ(prog.attachment_row(hook), -1);
  solve("hook removed");
  EXPECT_LT(max_node_distance(prog.state().x, unhooked) / diag, 1e-6);

  // Release the clamp's upper half (z > 0.15): exactly those nodes leave their targets.
  std::vector<int> upper;
  for (size_t a = 0; a < d.attachments.size(); ++a)
    if (box.nodes(d.attachments[a].point.nodes[0], 2) > 0.15 + 1e-9) upper.push_back(static_cast<int>(a));
  ASSERT_FALSE(upper.empty());
  ref.remove_attachments(upper);
  prog.remove_attachments(upper);
  EXPECT_EQ(prog.num_attachments(), static_cast<int>(d.attachments.size() - upper.size()));
  solve("released");
  // Attached nodes move by their springs' stretch (load / 1e7); released ones by the bending.
  double max_attached = 0, min_released = 1e300;
  for (size_t a = 0; a < d.attachments.size(); ++a) {
    const int v = d.attachments[a].point.nodes[0];
    const double moved = (prog.state().x.row(v) - box.nodes.row(v)).norm();
    const bool released = std::find(upper.begin(), upper.end(), static_cast<int>(a)) != upper.end();
    if (released)
      min_released = std::min(min_released, moved);
    else
      max_attached = std::max(max_attached, moved);
    EXPECT_EQ(prog.attachment_row(static_cast<int>(a)) < 0, released);
  }
  if (test::verbose())
    std::printf("  clamp half released: attached nodes moved <= %.3e, released ones >= %.3e\n", max_attached,
                min_released);
  EXPECT_GT(min_released, 10 * max_attached);
  test::report("hooks and releases: progressive vs refactorized / bbox", worst, 1e-8);
  EXPECT_LT(worst, 1e-8);

  // Bad input: unknown or repeated keys, a non-finite target, releasing every attachment.
  const Points x = prog.state().x;
  const int rows = prog.num_attachments();
  const long events = prog.stats().topology_events;
  std::vector<int> rest;
  for (size_t a = 0; a < d.attachments.size(); ++a)
    if (prog.attachment_row(static_cast<int>(a)) >= 0) rest.push_back(static_cast<int>(a));
  EXPECT_THROW(prog.remove_attachments({9999}), SolverError);
  EXPECT_THROW(prog.remove_attachments({rest[0], rest[0]}), SolverError);
  EXPECT_THROW(prog.add_hook(BaryPoint::node(tip), Vec3(0, std::nan(""), 0), 1e4), SolverError);
  EXPECT_THROW(prog.remove_attachments(rest), SolverError);  // nothing would hold the block
  EXPECT_EQ(prog.num_attachments(), rows);
  EXPECT_EQ(prog.stats().topology_events, events);
  EXPECT_EQ(prog.state().x, x);
  EXPECT_TRUE(prog.step().converged);
}

// A cut through a clamp: a 7 × 5 × 5 cantilever clamped at x = 0 (node attachments), gravity, cut
// along the plane z = 0.5 through its whole length. The 5 clamp nodes on that plane split; their
// copies get the same attachment, so each layer hangs from its whole share of the clamp. Oracle: a
// model built directly from the cut mesh with every node at x = 0 attached (copies included).
TEST(SurgerySession, CopiesOfAttachedNodesKeepTheirAttachments) {
  const TetMesh box = make_box(7, 5, 5, Vec3::Zero(), Vec3(1.2, 1.0, 1.0));
  const ModelDesc d = hanging_desc(box, 1e4);
  auto [ref, prog] = session_pair(d);
  for (SurgerySession* s : {&ref, &prog}) (void)s->cut(faces_across_plane(box, Vec3::UnitZ(), 0.5, Vec3::UnitX()));
  EXPECT_EQ(prog.num_attachments(), 25 + 5);
  EXPECT_EQ(ref.num_attachments(), 25 + 5);
  for (int key : prog.attachment_keys()) {
    const int node = prog.attachment_point(key).nodes[0];
    EXPECT_LT(prog.mesh().nodes(node, 0), 1e-9) << "key " << key;
    if (key >= 25) {
      EXPECT_GE(node, static_cast<int>(box.nodes.rows()));  // a copy
      EXPECT_LT(prog.attachment_origin(key), 25);
    }
  }
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  ModelDesc direct = d;
  direct.mesh = prog.mesh();
  direct.attachments.clear();
  test::attach_min_face(direct, 0, 1e7);
  ASSERT_EQ(direct.attachments.size(), 30u);
  const Model m = build_model(direct);
  State st = make_state(m);
  st.inputs.gravity = d.gravity;
  SolverOptions o = test::anderson_options(3000, 1e-10);
  o.abs_tolerance = 1e-10 * force_scale(d);
  ASSERT_TRUE(step(m, st, o).converged);
  const double diag = test::bbox_diagonal(box.nodes);
  const double vs_direct = max_node_distance(prog.state().x, st.x) / diag,
               vs_refactor = max_node_distance(prog.state().x, ref.state().x) / diag;
  test::report("cut clamp: session vs model built with every clamp node attached", vs_direct, 1e-8);
  test::report("cut clamp: progressive vs refactor", vs_refactor, 1e-8);
  EXPECT_LT(vs_direct, 1e-8);
  EXPECT_LT(vs_refactor, 1e-8);
  // The copies stay at the clamp like their originals (within their springs' stretch).
  double clamp_moved = 0;
  for (int key : prog.attachment_keys()) {
    const int node = prog.attachment_point(key).nodes[0];
    clamp_moved = std::max(clamp_moved, (prog.state().x.row(node) - prog.mesh().nodes.row(node)).norm());
  }
  EXPECT_LT(clamp_moved, 1e-3 * (prog.state().x - prog.mesh().nodes).rowwise().norm().maxCoeff());
}

// Excision of a bite out of a cantilever's top (the tets whose centroid lies in a sphere), in a
// progressive and a refactorizing session: the lumped mass drops by exactly the removed tets'
// mass, the nodes left without a tet become inactive and stay where they were, a suture on the
// excised tissue goes with it, both sessions give the same positions; hooks or sutures on excised
// nodes, excising everything, or cutting the body off its clamp are refused with the session
// unchanged.
TEST(SurgerySession, ExcisionRemovesTheTissueAndExactlyItsMass) {
  const TetMesh box = make_box(7, 7, 7, Vec3::Zero(), Vec3::Ones());
  ModelDesc d = hanging_desc(box, 1e5);
  d.density.resize(static_cast<size_t>(box.tets.rows()));  // per tet: 1000, 1500, 2000 kg/m³
  for (size_t t = 0; t < d.density.size(); ++t) d.density[t] = 1000.0 * (1.0 + 0.5 * double((t * 7) % 3));
  auto [ref, prog] = session_pair(d);
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  const Vec3 centre(0.7, 0.5, 1.0);
  std::vector<int> bite;
  double bite_mass = 0;
  for (int t = 0; t < box.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(t, a)).transpose() / 4.0;
    if ((c - centre).norm() < 0.3) {
      bite.push_back(t);
      const Vec3 e1 = (box.nodes.row(box.tets(t, 1)) - box.nodes.row(box.tets(t, 0))).transpose(),
                 e2 = (box.nodes.row(box.tets(t, 2)) - box.nodes.row(box.tets(t, 0))).transpose(),
                 e3 = (box.nodes.row(box.tets(t, 3)) - box.nodes.row(box.tets(t, 0))).transpose();
      bite_mass += d.density[static_cast<size_t>(t)] * std::abs(e1.dot(e2.cross(e3))) / 6.0;
    }
  }
  ASSERT_GT(bite.size(), 20u);
  // A suture inside the bite goes with it.
  int inner = -1;
  for (int v = 0; v < box.nodes.rows(); ++v)
    if ((box.nodes.row(v).transpose() - centre).norm() < 0.17 && box.nodes(v, 2) > 0.99) inner = v;
  ASSERT_GE(inner, 0);
  prog.add_suture(BaryPoint::node(inner), BaryPoint::node(inner - 1), 1e3);
  ref.add_suture(BaryPoint::node(inner), BaryPoint::node(inner - 1), 1e3);
  const double mass0 = prog.model().masses().sum();
  const Points x0 = prog.state().x;
  const ExcisionEvent ev = prog.excise(bite);
  ASSERT_EQ(ref.excise(bite).orphaned, ev.orphaned);
  ASSERT_FALSE(ev.orphaned.empty());
  EXPECT_EQ(prog.mesh().tets.rows(), box.tets.rows() - static_cast<Eigen::Index>(bite.size()));
  const double mass_change = std::abs(prog.model().masses().sum() - (mass0 - bite_mass)) / mass0;
  EXPECT_LT(mass_change, 1e-12);
  EXPECT_EQ(check_cut_mesh(prog.mesh(), true), "");
  EXPECT_NE(check_cut_mesh(prog.mesh()), "");  // the orphans are unused nodes
  EXPECT_EQ(prog.num_sutures(), 0);
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  const double diag = test::bbox_diagonal(box.nodes);
  const double diff = max_node_distance(ref.state().x, prog.state().x) / diag;
  double orphan_moved = 0;
  for (int j : ev.orphaned) orphan_moved = std::max(orphan_moved, (prog.state().x.row(j) - x0.row(j)).norm());
  test::report("excision: progressive vs refactorized / bbox", diff, 1e-8);
  test::report("excision: lumped mass vs mass - excised", mass_change, 1e-12);
  if (test::verbose())
    std::printf("  excised %zu tets (%.4g kg of %.4g), %zu nodes left inactive (moved <= %.1e)\n", bite.size(),
                bite_mass, mass0, ev.orphaned.size(), orphan_moved);
  EXPECT_LT(diff, 1e-8);
  EXPECT_LT(orphan_moved, 1e-12 * diag);
  EXPECT_GT((prog.state().x - x0).norm(), 1e-6);  // the lighter body sags less

  // Bad input: the session is unchanged after each.
  const Points x = prog.state().x;
  const long events = prog.stats().topology_events;
  const double nnz = prog.stats().nnz_L;
  const int j = ev.orphaned.front();
  EXPECT_THROW(prog.add_hook(BaryPoint::node(j), Vec3::Zero(), 1e3), SolverError);
  EXPECT_THROW(prog.add_suture(BaryPoint::node(j), BaryPoint::node(0), 1e3), SolverError);
  std::vector<int> all(static_cast<size_t>(prog.mesh().tets.rows()));
  for (size_t t = 0; t < all.size(); ++t) all[t] = static_cast<int>(t);
  EXPECT_THROW(prog.excise(all), MeshError);
  EXPECT_TRUE(prog.excise({}).removed.empty());  // nothing to excise: no event
  EXPECT_THROW(prog.excise({0, 0}), MeshError);
  std::vector<int> clamp_layer;  // every tet touching the clamped face: the rest would fall off
  for (int t = 0; t < prog.mesh().tets.rows(); ++t) {
    double cx = 0;
    for (int a = 0; a < 4; ++a) cx += prog.mesh().nodes(prog.mesh().tets(t, a), 0) / 4.0;
    if (cx < 1.0 / 6.0) clamp_layer.push_back(t);
  }
  EXPECT_THROW(prog.excise(clamp_layer), SolverError);
  EXPECT_EQ(prog.state().x, x);
  EXPECT_EQ(prog.stats().topology_events, events);
  EXPECT_EQ(prog.stats().nnz_L, nnz);
  EXPECT_EQ(prog.mesh().tets.rows(), box.tets.rows() - static_cast<Eigen::Index>(bite.size()));
  ASSERT_TRUE(prog.step().converged);
}

TEST(SurgerySession, BadSpringsAndFactorsAreRefused) {
  const TetMesh box = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  const int nv = static_cast<int>(box.nodes.rows());
  EXPECT_THROW(spring_column({BaryPoint::node(2), BaryPoint::node(2), 1.0, 0.0}, nv), SolverError);   // same node
  EXPECT_THROW(spring_column({BaryPoint::node(2), BaryPoint::node(nv), 1.0, 0.0}, nv), SolverError);  // out of range
  EXPECT_THROW(spring_column({BaryPoint::node(1), BaryPoint::node(2), 0.0, 0.0}, nv), SolverError);   // stiffness
  EXPECT_THROW(attachment_column(BaryPoint::node(-1), 1.0, nv), SolverError);                         // no node
  EXPECT_THROW(attachment_column(BaryPoint::node(0), std::nan(""), nv), SolverError);
  // Two points sharing nodes: the shared node's weights merge into one row.
  BaryPoint a{{0, 1, -1, -1}, {0.5, 0.5, 0, 0}}, b{{1, 2, -1, -1}, {0.5, 0.5, 0, 0}};
  const SparseColumn col = spring_column({a, b, 4.0, 0.0}, nv);
  ASSERT_EQ(col.rows.size(), 2u);  // node 1 cancels
  EXPECT_EQ(col.rows[0], 0);
  EXPECT_DOUBLE_EQ(col.values[0], 1.0);
  EXPECT_EQ(col.rows[1], 2);
  EXPECT_DOUBLE_EQ(col.values[1], -1.0);

  ModelDesc d = pulled_desc(box, 0.0, 1e5);
  d.factorize = false;
  const Model m = build_model(d);
  EXPECT_FALSE(m.has_factor());
  EXPECT_THROW(m.factor(), SolverError);
  DynamicLdlt f;
  const Model small = build_model(pulled_desc(make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones()), 0.0, 1e5));
  f.compute(small.matrix());
  EXPECT_THROW(PdStep(m, f), SolverError);  // order 8 against 27 nodes
  // Inactive nodes (left by an excision) must be unused, in range, with a finite δ > 0.
  ModelDesc di = pulled_desc(box, 0.0, 1e5);
  di.inactive_nodes = {{13, 1.0}};  // the middle node is used by tets
  EXPECT_THROW(build_model(di), SolverError);
  di.mesh.nodes.conservativeResize(nv + 1, Eigen::NoChange);
  di.mesh.nodes.row(nv) = Eigen::RowVector3d(2, 2, 2);
  di.inactive_nodes = {{nv, 0.0}};
  EXPECT_THROW(build_model(di), SolverError);
  di.inactive_nodes.clear();
  EXPECT_THROW(build_model(di), SolverError);  // an unused node that is not declared inactive
  di.inactive_nodes = {{nv, 1.0}};
  EXPECT_EQ(build_model(di).matrix().coeff(nv, nv), 1.0);
  ModelDesc dl = pulled_desc(box, 0.0, 1e5);
  dl.lambda = {1e4};  // coupled 3n × 3n global step
  const Model coupled = build_model(dl);
  DynamicLdlt g;
  g.compute(m.matrix());
  EXPECT_THROW(PdStep(coupled, g), SolverError);
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// A blade that does not follow the mesh's faces (element splitting, FaceCutter::split): a slanted
// plane x = 0.47 + 0.1 y swept down through a 11 × 6 × 6 block pulled apart at its ends, in three
// advancing events, then a ball of tissue taken out of the left half (excise_inside). Progressive
// updates against a fresh factorization per event: equal positions in every frame; the factor
// equals the new matrix; the halves come apart; the mass is conserved by the cuts and drops by
// exactly the inside fragments' share.
TEST(SurgerySession, ElementSplitsAndABallExcisionFollowTheRefactorizedModel) {
  const TetMesh box = make_box(11, 6, 6, Vec3::Zero(), Vec3(1.0, 0.5, 0.5));
  const double pull = 0.02, rho = 1000;
  ModelDesc d0 = pulled_desc(box, pull, 1e6);
  d0.density = {rho};
  auto [ref, prog] = session_pair(d0);
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  const double diag = test::bbox_diagonal(box.nodes), volume = 0.25;
  double worst = 0, worst_factor = 0;
  auto factor_error = [&](const SurgerySession& s) {
    // L D Lᵀ against the matrix of a model assembled from scratch (the refactorizing session's).
    const Eigen::MatrixXd k = Eigen::MatrixXd(ref.model().matrix());
    return (Eigen::MatrixXd(s.factor().product()) - k).norm() / k.norm();
  };
  int splits = 0;
  for (const double depth : {0.3, 0.12, -0.1}) {
    SweptPath blade;
    blade.points = {Vec3(0.45, -0.2, 0.7), Vec3(0.55, 0.8, 0.7)};
    blade.sweep = {Vec3(0, 0, depth - 0.7)};
    const auto surface = swept_cut_surface(blade);
    const CutEvent ev = prog.split(*surface);
    ASSERT_GT(ev.tets_split, 0);
    splits += ev.tets_split;
    const CutEvent er = ref.split(*surface);
    ASSERT_EQ(er.copy_of, ev.copy_of);
    ASSERT_EQ(er.tet_copy_of, ev.tet_copy_of);
    worst_factor = std::max(worst_factor, factor_error(prog));
    const FrameStats sr = ref.step(), sp = prog.step();
    ASSERT_TRUE(sr.converged && sp.converged) << "depth " << depth;
    worst = std::max(worst, max_node_distance(ref.state().x, prog.state().x) / diag);
    // Cuts conserve the mass: the fragments' fractions share each tet's.
    EXPECT_NEAR(prog.model().masses().sum(), rho * volume, 1e-12 * rho * volume);
  }
  EXPECT_EQ(prog.stats().factor_fallback, 0);
  // The halves came apart: every copy has left its twin by nearly the pull of both ends.
  const Eigen::Index n0 = box.nodes.rows(), n = prog.mesh().nodes.rows();
  ASSERT_GT(n, n0);
  double min_gap = 1e300;
  for (Eigen::Index c = n0; c < n; ++c) {
    const int v = prog.cutter().original(static_cast<int>(c));
    min_gap = std::min(min_gap, (prog.state().x.row(c) - prog.state().x.row(v)).norm());
  }
  EXPECT_GT(min_gap, 1.9 * pull);

  // A ball from the left half: its inside fragments' share of the mass goes, exactly.
  const Vec3 centre(0.25, 0.27, 0.24);
  const double radius = 0.13;
  const auto ball = sphere_cut_surface(centre, radius);
  FaceCutter probe = prog.cutter();
  probe.split(*ball);
  double inside = 0;
  for (int t : probe.tets_inside(*ball)) {
    const TetMesh& m = probe.mesh();
    inside += probe.fraction(t) * signed_volume(m.nodes.row(m.tets(t, 0)), m.nodes.row(m.tets(t, 1)),
                                                m.nodes.row(m.tets(t, 2)), m.nodes.row(m.tets(t, 3)));
  }
  ASSERT_GT(inside, 0.5 * 4.0 / 3.0 * 3.14159 * radius * radius * radius);
  const ExcisionEvent ev = prog.excise_inside(*ball);
  ASSERT_EQ(ref.excise_inside(*ball).orphaned, ev.orphaned);
  ASSERT_FALSE(ev.removed.empty());
  EXPECT_NEAR(prog.model().masses().sum(), rho * (volume - inside), 1e-12 * rho * volume);
  EXPECT_EQ(check_cut_mesh(prog.mesh(), true).find("volume"), std::string::npos);
  worst_factor = std::max(worst_factor, factor_error(prog));
  ASSERT_TRUE(ref.step().converged);
  ASSERT_TRUE(prog.step().converged);
  worst = std::max(worst, max_node_distance(ref.state().x, prog.state().x) / diag);
  // Nothing inside any more: no event.
  const long events = prog.stats().topology_events;
  EXPECT_TRUE(prog.excise_inside(*ball).removed.empty());
  EXPECT_EQ(prog.stats().topology_events, events);
  test::report("element splits: progressive vs refactorized / bbox", worst, 1e-8);
  test::report("element splits: L D L^T vs K (relative)", worst_factor, 1e-11);
  if (test::verbose())
    std::printf(
        "  %d tets split in 3 events, %ld -> %ld nodes, smallest opening %.3e (pull %.2f per side); "
        "ball: %zu fragments out, %zu nodes inactive\n",
        splits, static_cast<long>(n0), static_cast<long>(n), min_gap, pull, ev.removed.size(), ev.orphaned.size());
  EXPECT_LT(worst, 1e-8);
  EXPECT_LT(worst_factor, 1e-11);
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// Splits of strain-limited tissue (the biphasic skin a blade meets in a lattice): a blade half way
// down a block whose every other tet is limited, then a ball taken out. After each event the
// session's matrix equals one assembled by hand from the cut mesh (each fragment: its source tet's
// μ and limit stiffness × its volume fraction), the progressive session equals the refactorizing
// one, and the factor solves like a fresh LDLᵀ of the matrix.
TEST(SurgerySession, StrainLimitedTissueFollowsSplits) {
  const TetMesh box = make_box(7, 7, 7, Vec3::Zero(), Vec3(0.6, 1.0, 1.0));
  ModelDesc d = pulled_desc(box, 0.1, 1e7);
  for (int t = 0; t < box.tets.rows(); t += 2)
    d.strain_limits.push_back({t, 5 * d.mu[static_cast<size_t>(t)], 0.95, 1.05});
  auto [ref, prog] = session_pair(d);
  const double diag = test::bbox_diagonal(box.nodes);
  auto check_event = [&](const char* what) {
    // The matrix by hand: fragments weigh their fraction of their source tet's μ and limit.
    const FaceCutter& c = prog.cutter();
    ModelDesc h = d;
    h.mesh = prog.mesh();
    h.mu.assign(static_cast<size_t>(h.mesh.tets.rows()), 0.0);
    h.strain_limits.clear();
    for (int t = 0; t < h.mesh.tets.rows(); ++t) {
      const int s = c.source_tet(t);
      h.mu[static_cast<size_t>(t)] = d.mu[static_cast<size_t>(s)] * c.fraction(t);
      if (s % 2 == 0) h.strain_limits.push_back({t, 5 * d.mu[static_cast<size_t>(s)] * c.fraction(t), 0.95, 1.05});
    }
    h.density.assign(static_cast<size_t>(h.mesh.tets.rows()), 0.0);
    for (int t = 0; t < h.mesh.tets.rows(); ++t) h.density[static_cast<size_t>(t)] = d.density.front() * c.fraction(t);
    // The same attachment points (copies of split attached nodes inherit theirs: 1e7 each), and the
    // nodes an excision left without a tet as placeholders with the session's diagonal.
    h.attachments.clear();
    for (const int key : prog.attachment_keys())
      h.attachments.push_back({prog.attachment_point(key), 1e7, Vec3::Zero()});
    const Eigen::SparseMatrix<double>& K = prog.model().matrix();
    std::vector<char> used(static_cast<size_t>(h.mesh.nodes.rows()), 0);
    for (int t = 0; t < h.mesh.tets.rows(); ++t)
      for (int a = 0; a < 4; ++a) used[static_cast<size_t>(h.mesh.tets(t, a))] = 1;
    h.inactive_nodes.clear();
    for (int j = 0; j < h.mesh.nodes.rows(); ++j)
      if (!used[static_cast<size_t>(j)]) h.inactive_nodes.emplace_back(j, K.coeff(j, j));
    h.factorize = false;
    const Eigen::SparseMatrix<double> Kh = build_model(h).matrix();
    const double by_hand = (Eigen::MatrixXd(K) - Eigen::MatrixXd(Kh)).norm() / Eigen::MatrixXd(K).norm();
    test::report((std::string("strain-limited split ") + what + ": K vs by hand").c_str(), by_hand, 1e-12);
    EXPECT_LT(by_hand, 1e-12) << what;
    ASSERT_TRUE(ref.step().converged) << what;
    ASSERT_TRUE(prog.step().converged) << what;
    const double diff = max_node_distance(ref.state().x, prog.state().x) / diag;
    test::report((std::string("strain-limited split ") + what + ": progressive vs refactorized / bbox").c_str(), diff,
                 1e-8);
    EXPECT_LT(diff, 1e-8) << what;
    const double rel = factor_vs_fresh(prog, ref).first;
    test::report((std::string("strain-limited split ") + what + ": factor vs fresh LDLT").c_str(), rel, 1e-9);
    EXPECT_LT(rel, 1e-9) << what;
  };
  SweptPath blade;
  blade.points = {Vec3(0.27, -0.1, 1.2), Vec3(0.33, 1.1, 1.2)};
  blade.sweep = {Vec3(0, 0, -0.7)};
  const auto surface = swept_cut_surface(blade);
  const CutEvent ev = prog.split(*surface);
  ASSERT_GT(ev.tets_split, 0);
  ASSERT_EQ(ref.split(*surface).tet_copy_of, ev.tet_copy_of);
  check_event("after a blade half way down");
  const auto ball = sphere_cut_surface(Vec3(0.45, 0.5, 0.95), 0.2);
  ASSERT_FALSE(prog.excise_inside(*ball).removed.empty());
  ref.excise_inside(*ball);
  check_event("after a ball excision");
  EXPECT_EQ(prog.stats().factor_fallback, 0);
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// `xpd bench cut --split` on a small box: every depth reported with the tets it split and the
// update's time, and the updated factor solving the model assembled from the split mesh.
TEST(SurgerySession, BenchCutSplitReportsEveryDepthAndAConsistentFactor) {
  const std::filesystem::path dir = test::scratch_dir("bench_cut_split");
  const std::string cmd = std::string("\"") + XPD_CLI_PATH + "\" bench cut --box 10 --split --repeats 1 --json > \"" +
                          (dir / "out.json").string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json j = test::read_json_file(dir / "out.json");
  ASSERT_TRUE(j.contains("splits"));
  ASSERT_EQ(j["splits"].size(), 5u);  // d = 1, 2, 4, 8 and N − 1 = 9
  int previous = 0;
  for (const auto& s : j["splits"]) {
    EXPECT_GT(s["depth_cells"].get<int>(), previous);
    previous = s["depth_cells"].get<int>();
    EXPECT_GT(s["tets_split"].get<double>(), 0.0);
    EXPECT_GE(s["update_ms"].get<double>(), 0.0);
  }
  EXPECT_GT(j["nodes_end"].get<int>(), j["nodes_start"].get<int>());
  EXPECT_GT(j["tets_end"].get<int>(), j["tets_start"].get<int>());
  EXPECT_LT(j["residual_end"].get<double>(), 1e-12);
  EXPECT_GT(j["refactor_ms"].get<double>(), 0.0);
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// Implicit Euler: splits and excisions change the lumped masses, whose M/h² is part of the PD
// matrix. A bar clamped at its left end swings down under gravity while a blade half way down and
// then a ball excision change it; the progressive session equals the refactorizing one frame by
// frame, the factor solves like a fresh LDLᵀ of the matrix, and a copy starts where its twin is,
// with its velocity.
TEST(SurgerySession, ImplicitEulerFramesFollowCutsSplitsAndExcisions) {
  const TetMesh box = make_box(13, 4, 4, Vec3::Zero(), Vec3(1.2, 0.3, 0.3));
  ModelDesc d = hanging_desc(box, 1e5);
  d.integrator = Integrator::ImplicitEuler;
  d.time_step = 1.0 / 60.0;
  SurgeryOptions o;
  o.solver = test::anderson_options(3000, 1e-10);
  o.factor_update = FactorUpdate::Refactor;
  SurgerySession ref(d, o);
  o.factor_update = FactorUpdate::Progressive;
  SurgerySession prog(d, o);
  const double diag = test::bbox_diagonal(box.nodes);
  double worst = 0, worst_factor = 0, worst_matrix = 0;
  auto frame = [&](const char* what) {
    ASSERT_TRUE(ref.step().converged) << what;
    ASSERT_TRUE(prog.step().converged) << what;
    worst = std::max(worst, max_node_distance(ref.state().x, prog.state().x) / diag);
    worst_factor = std::max(worst_factor, factor_vs_fresh(prog, ref).first);
    worst_matrix = std::max(worst_matrix, matrix_vs_assembled(prog, ref));
  };
  for (int f = 0; f < 3; ++f) frame("before the events");
  // A blade through the bar at x = 0.47 + 0.1 y, half way down.
  SweptPath blade;
  blade.points = {Vec3(0.45, -0.1, 0.5), Vec3(0.49, 0.4, 0.5)};
  blade.sweep = {Vec3(0, 0, -0.35)};
  const auto surface = swept_cut_surface(blade);
  ASSERT_GT(prog.split(*surface).tets_split, 0);
  ASSERT_GT(ref.split(*surface).tets_split, 0);
  for (const Eigen::Index c : {prog.mesh().nodes.rows() - 1}) {  // a copy starts where its twin is, moving alike
    const int v = prog.cutter().original(static_cast<int>(c));
    EXPECT_EQ(prog.state().x.row(c), prog.state().x.row(v));
    EXPECT_EQ(prog.state().velocity.row(c), prog.state().velocity.row(v));
  }
  for (int f = 0; f < 2; ++f) frame("after the blade");
  ASSERT_FALSE(prog.excise_inside(*sphere_cut_surface(Vec3(0.9, 0.15, 0.3), 0.12)).removed.empty());
  ASSERT_FALSE(ref.excise_inside(*sphere_cut_surface(Vec3(0.9, 0.15, 0.3), 0.12)).removed.empty());
  for (int f = 0; f < 2; ++f) frame("after the excision");
  EXPECT_EQ(prog.stats().factor_fallback, 0);
  test::report("implicit Euler surgery: progressive vs refactorized / bbox", worst, 1e-8);
  test::report("implicit Euler surgery: factor vs fresh LDLT", worst_factor, 1e-9);
  test::report("implicit Euler surgery: K changed by the events (masses too) vs assembled", worst_matrix, 1e-13);
  EXPECT_LT(worst_matrix, 1e-13);
  EXPECT_LT(worst, 1e-8);
  EXPECT_LT(worst_factor, 1e-9);
}

}  // namespace
}  // namespace xpd
