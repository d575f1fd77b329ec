// PD frames solved with a DynamicLdlt that follows topology events (progressive Cholesky, Li, Liu,
// Kavan & Chen 2021) against the same frames solved with a fresh factorization of each new model:
// a scripted sequence of 200 cut events, and sutures that close an incision. Also the bad input of
// the spring columns and of PdStep's factor override.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/face_cut.hpp>

#include "pd_fixtures.hpp"

namespace xpd {
namespace {

// A block with both x-ends attached and pulled apart by `pull` each (random per-tet μ), so a cut
// through the middle opens.
ModelDesc pulled_desc(const TetMesh& mesh, double pull, double attach_stiffness, unsigned seed = 3) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  d.mu.resize(static_cast<size_t>(mesh.tets.rows()));
  for (auto& m : d.mu) m = 1e4 * u(rng);
  const double lo = mesh.nodes.col(0).minCoeff(), hi = mesh.nodes.col(0).maxCoeff();
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i) {
    const double x = mesh.nodes(i, 0);
    if (x < lo + 1e-9 || x > hi - 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), attach_stiffness,
                               mesh.nodes.row(i).transpose() + Vec3((x < 0.5 * (lo + hi) ? -1 : 1) * pull, 0, 0)});
  }
  return d;
}

// A state of `model` that continues `prev` (the positions before a topology event): old nodes keep
// their positions, each new node starts at the position of the node it duplicates.
State continue_state(const Model& model, const State& prev, const std::vector<int>& copy_of) {
  State s = make_state(model);
  const Eigen::Index n0 = prev.x.rows();
  s.x.topRows(n0) = prev.x;
  for (size_t k = 0; k < copy_of.size(); ++k) s.x.row(n0 + static_cast<Eigen::Index>(k)) = prev.x.row(copy_of[k]);
  return s;
}

double max_node_distance(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

// 200 events, one face each, of a plane cut through a 7 × 11 × 11 block pulled apart at its ends,
// until the halves separate. Every frame is solved to equilibrium twice: with the model's own
// fresh CHOLMOD factorization (build_model of the cut mesh) and with one DynamicLdlt updated by
// each event (the model built without a factorization). Positions agree to 1e-8 of the bounding-
// box diagonal in every frame, and the cut opens.
TEST(ProgressivePd, CutSequenceGivesTheRefactorizedPositionsInEveryFrame) {
  const TetMesh box = make_box(7, 11, 11, Vec3::Zero(), Vec3(0.6, 1.0, 1.0));
  const ModelDesc d0 = pulled_desc(box, 0.02, 1e6);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.3, Vec3(0.0, 1.0, 0.01));
  ASSERT_EQ(faces.size(), 2u * 10u * 10u);
  SolverOptions opt = test::anderson_options(3000, 1e-10);
  const Model m0 = build_model(d0);
  State ref = make_state(m0);
  const FrameStats s0 = step(m0, ref, opt);
  ASSERT_TRUE(s0.converged);
  // A frame after one event starts near equilibrium: its tolerance is absolute, relative to the
  // force scale of the pulled block (the first frame's initial residual).
  opt.abs_tolerance = 1e-10 * s0.initial_residual;
  State prog = ref;
  DynamicLdlt f;
  f.compute(m0.matrix());
  FaceCutter cutter(box);
  const double diag = test::bbox_diagonal(box.nodes);
  double worst = 0;
  int events = 0, iterations_ref = 0, iterations_prog = 0;
  for (size_t i = 0; i < faces.size(); ++i) {
    const CutEvent ev = cutter.cut({faces[i]});
    ASSERT_EQ(ev.faces_cut, 1);
    ModelDesc d = d0;
    d.mesh = cutter.mesh();
    const Model m_ref = build_model(d);
    d.factorize = false;
    const Model m_prog = build_model(d);
    ASSERT_FALSE(m_prog.has_factor());
    ASSERT_TRUE(f.modify(cut_modification(ev, cutter.mesh(), d0.mu))) << "event " << i;
    ++events;
    ref = continue_state(m_ref, ref, ev.copy_of);
    prog = continue_state(m_prog, prog, ev.copy_of);
    const FrameStats sr = step(m_ref, ref, opt);
    PdStep pd(m_prog, f);
    const FrameStats sp = run_frame(m_prog, prog, pd, opt);
    ASSERT_TRUE(sr.converged && sp.converged) << "event " << i << ": " << sr.iterations << " / " << sp.iterations;
    iterations_ref += sr.iterations;
    iterations_prog += sp.iterations;
    worst = std::max(worst, max_node_distance(ref.x, prog.x) / diag);
  }
  EXPECT_GE(events, 200);
  // The cut opened: every split node's copy has left its twin.
  const Eigen::Index n0 = box.nodes.rows(), n = cutter.mesh().nodes.rows();
  ASSERT_EQ(n - n0, 11 * 11);  // the plane's nodes, each split once
  double min_gap = 1e300;
  for (Eigen::Index c = n0; c < n; ++c)
    for (Eigen::Index v = 0; v < n0; ++v)
      if ((cutter.mesh().nodes.row(v) - cutter.mesh().nodes.row(c)).norm() < 1e-12)
        min_gap = std::min(min_gap, (prog.x.row(c) - prog.x.row(v)).norm());
  test::report("progressive vs refactorized positions / bbox", worst, 1e-8);
  if (test::verbose())
    std::printf(
        "  %d events, %ld -> %ld nodes, PD iterations %d (refactorized) / %d (progressive), smallest "
        "opening %.3e (pull %.2f per side)\n",
        events, static_cast<long>(n0), static_cast<long>(n), iterations_ref, iterations_prog, min_gap, 0.02);
  EXPECT_LT(worst, 1e-8);
  // A wrong factor still converges to the same equilibrium (PD's matrix only preconditions the
  // fixed point) but in other iteration counts: with ΔK's off-diagonal entries scaled by 0.99 the
  // totals were 1,723 / 1,698 and the positions 1.6e-8 apart.
  EXPECT_LE(std::abs(iterations_prog - iterations_ref), iterations_ref / 200);
  EXPECT_GT(min_gap, 0.02);
}

// An incision in a 9³ block pulled apart at its ends opens; zero-rest-length sutures across it
// (copy ↔ the node it duplicates), placed in the factor as rank-1 columns, close it. The sutured
// equilibrium with the updated factor equals a fresh factorization's, each stitch closes its gap to
// within f/k (f: the force the wound pulls with when held shut, read from a 100× stiffer suture
// where the gap is nearly closed), and removing the stitches restores the open wound.
TEST(ProgressivePd, SuturesCloseAnIncisionToForceOverStiffness) {
  const TetMesh box = make_box(9, 9, 9, Vec3::Zero(), Vec3::Ones());
  std::vector<TetPair> incision;
  for (const auto& fc : faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3::UnitZ())) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(fc.first, a)).transpose() / 4.0;
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(fc.second, a)).transpose() / 4.0;
    c /= 2.0;
    if (c.z() > 0.5 && c.y() > 0.25 && c.y() < 0.75) incision.push_back(fc);
  }
  FaceCutter cutter(box);
  const CutEvent ev = cutter.cut(incision);
  ASSERT_EQ(ev.copy_of.size(), 12u);
  ModelDesc d = pulled_desc(cutter.mesh(), 0.05, 1e7);
  const int nv = static_cast<int>(cutter.mesh().nodes.rows());
  SolverOptions opt = test::anderson_options(3000, 1e-10);
  const double diag = test::bbox_diagonal(cutter.mesh().nodes);

  const Model open_model = build_model(d);
  State open = make_state(open_model);
  const FrameStats s0 = step(open_model, open, opt);
  ASSERT_TRUE(s0.converged);
  opt.abs_tolerance = 1e-10 * s0.initial_residual;  // frames below start near their equilibrium
  DynamicLdlt f;
  f.compute(open_model.matrix());

  // Gap vectors (copy − twin), one row per stitch.
  auto gaps = [&](const State& s) {
    Points g(static_cast<Eigen::Index>(ev.copy_of.size()), 3);
    for (size_t k = 0; k < ev.copy_of.size(); ++k)
      g.row(static_cast<Eigen::Index>(k)) = s.x.row(ev.nodes_before + static_cast<int>(k)) - s.x.row(ev.copy_of[k]);
    return g;
  };
  // Solves the sutured block with stiffness k twice (fresh factorization / the DynamicLdlt updated
  // by the stitches' columns); returns the gaps and the largest position difference / diagonal.
  auto sutured = [&](double k, Points& g) {
    ModelDesc ds = d;
    FactorModification stitches;
    for (size_t c = 0; c < ev.copy_of.size(); ++c) {
      const PointSpring s{BaryPoint::node(ev.nodes_before + static_cast<int>(c)), BaryPoint::node(ev.copy_of[c]), k,
                          0.0};
      ds.springs.push_back(s);
      stitches.added.push_back(spring_column(s, nv));
    }
    const Model m_ref = build_model(ds);
    State ref = make_state(m_ref);
    ref.x = open.x;
    EXPECT_TRUE(step(m_ref, ref, opt).converged);
    ds.factorize = false;
    const Model m_prog = build_model(ds);
    EXPECT_TRUE(f.modify(stitches));
    State prog = make_state(m_prog);
    prog.x = open.x;
    PdStep pd(m_prog, f);
    EXPECT_TRUE(run_frame(m_prog, prog, pd, opt).converged);
    // Cutting the stitches (removing their columns) restores the open wound's factor.
    FactorModification cut_stitches;
    cut_stitches.removed = stitches.added;
    EXPECT_TRUE(f.modify(cut_stitches));
    g = gaps(prog);
    return max_node_distance(ref.x, prog.x) / diag;
  };

  const Points g_open = gaps(open);
  const double k = 1e4;
  Points g_k, g_stiff;
  const double diff_k = sutured(k, g_k);
  const double diff_stiff = sutured(100 * k, g_stiff);
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

  // After the stitches are removed the factor solves the open wound again.
  State reopened = open;
  PdStep pd(open_model, f);
  ASSERT_TRUE(run_frame(open_model, reopened, pd, opt).converged);
  EXPECT_LT(max_node_distance(reopened.x, open.x) / diag, 1e-8);
}

TEST(ProgressivePd, BadSpringsAndFactorsAreRefused) {
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
  ModelDesc dl = pulled_desc(box, 0.0, 1e5);
  dl.lambda = {1e4};  // coupled 3n × 3n global step
  const Model coupled = build_model(dl);
  DynamicLdlt g;
  g.compute(m.matrix());
  EXPECT_THROW(PdStep(coupled, g), SolverError);
}

}  // namespace
}  // namespace xpd
