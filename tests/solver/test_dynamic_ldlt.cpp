// DynamicLdlt (progressive Cholesky, Li et al. 2021) against fresh factorizations: the explicit
// product L D Lᵀ against the assembled matrix, solves against CHOLMOD's, after updates, downdates,
// insertions of new unknowns and a long sequence of face-separating cuts; rollback on a loss of
// definiteness; malformed input refused with the factor unchanged.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <xpd/core/error.hpp>
#include <xpd/core/threads.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/sparse_cholesky.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/face_cut.hpp>

#include "pd_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

using Sparse = Eigen::SparseMatrix<double>;

double rel_diff(const Sparse& A, const Sparse& B) { return Sparse(A - B).norm() / B.norm(); }

// Box model with both x-ends attached (stays SPD when a cut separates it in the middle).
ModelDesc bar_desc(const TetMesh& mesh, unsigned seed = 5) {
  return test::ends_attached_desc(mesh, 1e3, 1e5, 0.0, seed);
}

// ‖K x − b‖/‖b‖ and ‖x − x_fresh‖/‖x_fresh‖ for 3 random right-hand sides.
std::pair<double, double> solve_errors(const DynamicLdlt& f, const Sparse& K, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd b(K.rows(), 3);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = g(rng);
  Eigen::MatrixXd x = b;
  f.solve_in_place(x);
  SparseCholesky fresh;
  fresh.compute(K);
  Eigen::MatrixXd xf = b;
  fresh.solve_in_place(xf);
  return {(K * x - b).norm() / b.norm(), (x - xf).norm() / xf.norm()};
}

TEST(DynamicLdlt, BuildEqualsMatrixAndSolvesLikeCholmod) {
  const Model model = build_model(bar_desc(test::jittered_box(7)));
  DynamicLdlt f;
  f.compute(model.matrix());
  EXPECT_EQ(f.rows(), model.num_nodes());
  const double prod = rel_diff(f.product(), model.matrix());
  test::report("build: L D Lt vs K", prod, 1e-13);
  EXPECT_LT(prod, 1e-13);
  const auto [res, fresh] = solve_errors(f, model.matrix(), 1);
  test::report("build: residual", res, 1e-12);
  test::report("build: vs CHOLMOD", fresh, 1e-12);
  EXPECT_LT(res, 1e-12);
  EXPECT_LT(fresh, 1e-12);
  // The tree-parallel substitution gives the same bits on one and on two threads.
  EXPECT_GT(f.info().solve_tasks, 1);
  EXPECT_GT(f.info().solve_panel_fraction, 0.1);  // the dense-panel path is the one checked above
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(f.rows(), 3), x1 = b, x2 = b;
  {
    ThreadLimit one(1);
    f.solve_in_place(x1);
  }
  {
    ThreadLimit two(2);
    f.solve_in_place(x2);
  }
  EXPECT_EQ(std::memcmp(x1.data(), x2.data(), sizeof(double) * static_cast<size_t>(x1.size())), 0);
  // The order is a permutation.
  auto order = f.elimination_order();
  std::sort(order.begin(), order.end());
  for (int i = 0; i < f.rows(); ++i) ASSERT_EQ(order[static_cast<size_t>(i)], i);
}

// Springs between random far-apart nodes: rank-1 updates that create fill, then their downdates
// (patterns keep numerical zeros), and new unknowns hung on springs.
TEST(DynamicLdlt, UpdatesDowndatesAndInsertionsMatchFreshFactorizations) {
  const Model model = build_model(bar_desc(test::jittered_box(6)));
  Sparse K = model.matrix();
  DynamicLdlt f;
  f.compute(K);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> node(0, model.num_nodes() - 1);
  std::uniform_real_distribution<double> stiff(10.0, 1e4);
  std::vector<SparseColumn> springs;
  double worst_prod = 0, worst_res = 0, worst_fresh = 0;
  const double nnz0 = f.info().nnz_L;
  auto check = [&](unsigned seed) {
    worst_prod = std::max(worst_prod, rel_diff(f.product(), K));
    const auto [res, fresh] = solve_errors(f, K, seed);
    worst_res = std::max(worst_res, res);
    worst_fresh = std::max(worst_fresh, fresh);
  };
  auto spring = [&](int a, int b, double k) {
    const double s = std::sqrt(k);
    return SparseColumn{{a, b}, {s, -s}};
  };
  auto add_outer = [&](const SparseColumn& w, double sign) {
    Sparse W(K.rows(), 1);
    for (size_t e = 0; e < w.rows.size(); ++e) W.insert(w.rows[e], 0) = w.values[e];
    K = K + sign * Sparse(W * Sparse(W.transpose()));
  };
  for (int step = 0; step < 20; ++step) {
    FactorModification m;
    for (int r = 0; r < 1 + step % 11; ++r) {  // ranks 1 … 11 (more than one numeric pass)
      int a = node(rng), b = node(rng);
      while (b == a) b = node(rng);
      m.added.push_back(spring(a, b, stiff(rng)));
    }
    ASSERT_TRUE(f.modify(m));
    for (const auto& w : m.added) {
      add_outer(w, 1.0);
      springs.push_back(w);
    }
    check(static_cast<unsigned>(step));
  }
  EXPECT_GT(f.info().nnz_L, nnz0);  // the springs created fill
  // Remove every spring again, a few per modification.
  while (!springs.empty()) {
    FactorModification m;
    for (int r = 0; r < 5 && !springs.empty(); ++r) {
      m.removed.push_back(springs.back());
      springs.pop_back();
    }
    ASSERT_TRUE(f.modify(m));
    for (const auto& w : m.removed) add_outer(w, -1.0);
    check(100u + static_cast<unsigned>(springs.size()));
  }
  // New unknowns: each hung on two old nodes (and the second one on the first new one).
  for (int step = 0; step < 5; ++step) {
    const int n = f.rows();
    FactorModification m;
    m.new_dofs = 2;
    m.added.push_back(spring(n, node(rng), 500.0));
    m.added.push_back(spring(n, node(rng), 800.0));
    m.added.push_back(spring(n + 1, n, 300.0));
    m.added.push_back(spring(n + 1, node(rng), 700.0));
    ASSERT_TRUE(f.modify(m));
    K.conservativeResize(n + 2, n + 2);
    for (const auto& w : m.added) add_outer(w, 1.0);
    check(200u + static_cast<unsigned>(step));
  }
  EXPECT_EQ(f.rows(), model.num_nodes() + 10);
  test::report("springs: L D Lt vs K", worst_prod, 1e-11);
  test::report("springs: residual", worst_res, 1e-10);
  test::report("springs: vs CHOLMOD", worst_fresh, 1e-9);
  EXPECT_LT(worst_prod, 1e-11);
  EXPECT_LT(worst_res, 1e-10);
  EXPECT_LT(worst_fresh, 1e-9);
}

// A downdate past definiteness (removing an attachment twice): false, and the factor is exactly as
// before — same product, same solution bit for bit, same size.
TEST(DynamicLdlt, LossOfDefinitenessRollsBackExactly) {
  ModelDesc d = bar_desc(test::jittered_box(5));
  const Model model = build_model(d);
  DynamicLdlt f;
  f.compute(model.matrix());
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(f.rows(), 3);
  Eigen::MatrixXd x0 = b;
  f.solve_in_place(x0);
  const Sparse P0 = f.product();
  const int a = d.attachments.front().point.nodes[0];
  FactorModification bad;
  bad.new_dofs = 1;  // also inserts an unknown that must disappear again
  bad.added.push_back(SparseColumn{{f.rows(), a}, {1.0, -1.0}});
  // Remove the whole diagonal of `a` and more: K(a,a) − 2 K(a,a) < 0.
  bad.removed.push_back(SparseColumn{{a}, {std::sqrt(2.0 * model.matrix().coeff(a, a))}});
  EXPECT_FALSE(f.modify(bad));
  EXPECT_EQ(f.info().rollbacks, 1);
  EXPECT_EQ(f.rows(), model.num_nodes());
  Eigen::MatrixXd x1 = b;
  f.solve_in_place(x1);
  EXPECT_EQ((x1 - x0).cwiseAbs().maxCoeff(), 0.0);
  EXPECT_EQ(Sparse(f.product() - P0).norm(), 0.0);
  // And it keeps working afterwards.
  FactorModification ok;
  ok.added.push_back(SparseColumn{{a, a + 1}, {10.0, -10.0}});
  EXPECT_TRUE(f.modify(ok));
}

TEST(DynamicLdlt, MalformedModificationsAreRefusedWithTheFactorUnchanged) {
  const Model model = build_model(bar_desc(test::jittered_box(4)));
  DynamicLdlt f;
  f.compute(model.matrix());
  const Sparse P0 = f.product();
  const int n = f.rows();
  auto refuses = [&](const FactorModification& m, const char* what) {
    try {
      f.modify(m);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const SolverError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_EQ(f.rows(), n);
    EXPECT_EQ(Sparse(f.product() - P0).norm(), 0.0);
  };
  FactorModification m;
  m.added.push_back(SparseColumn{{0, n}, {1.0, 1.0}});
  refuses(m, "outside");
  m.added = {SparseColumn{{1, 1}, {1.0, 1.0}}};
  refuses(m, "repeats row 1");
  m.added = {SparseColumn{{1}, {std::nan("")}}};
  refuses(m, "non-finite");
  m.added.clear();
  m.new_dofs = 1;
  refuses(m, "no positive diagonal");
  m.new_dofs = 1;
  m.added = {SparseColumn{{n, 0}, {1.0, -1.0}}};
  m.removed = {SparseColumn{{n + 1}, {1.0}}};
  refuses(m, "outside");
  m = FactorModification{};
  m.change = {Eigen::Triplet<double>(0, n, 1.0)};
  refuses(m, "outside");
  m.change = {Eigen::Triplet<double>(0, 1, std::nan(""))};
  refuses(m, "not finite");
  EXPECT_THROW(DynamicLdlt().modify(FactorModification{}), SolverError);
  Sparse indefinite = model.matrix();
  indefinite.coeffRef(3, 3) = -1.0;
  EXPECT_THROW(DynamicLdlt().compute(indefinite), SolverError);
}

// A plane cut advancing one face per event through a 12³ bar (both ends attached) until it has
// separated the halves: after every event the factor solves like a fresh CHOLMOD factorization of
// the re-assembled model; the explicit product after the last of ≥ 200 events; mesh invariants
// and lumped mass after each.
TEST(DynamicLdlt, FaceCutSequenceEqualsRefactorizationAfterEveryEvent) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "a fresh factorization after every event; the updates run there in the other DynamicLdlt tests and "
      "SurgerySession.*");
  const TetMesh box = make_box(12, 12, 12, Vec3::Zero(), Vec3(1.1, 1.0, 1.0));
  const ModelDesc d0 = bar_desc(box);
  const Model m0 = build_model(d0);
  const double mass0 = m0.masses().sum();
  DynamicLdlt f;
  f.compute(m0.matrix());
  FaceCutter cutter(box);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3(0.0, 1.0, 0.01));
  ASSERT_EQ(faces.size(), 2u * 11u * 11u);
  double worst_res = 0, worst_fresh = 0, worst_mass = 0;
  int events = 0;
  Sparse K;
  for (size_t i = 0; i < faces.size(); ++i) {
    const CutEvent ev = cutter.cut({faces[i]});
    ASSERT_EQ(ev.faces_cut, 1);
    ASSERT_EQ(check_cut_mesh(cutter.mesh()), "") << "after face " << i;
    ModelDesc d = d0;
    d.mesh = cutter.mesh();
    const Model m = build_model(d);
    worst_mass = std::max(worst_mass, std::abs(m.masses().sum() - mass0) / mass0);
    ASSERT_TRUE(f.modify(cut_modification(ev, cutter.mesh(), d0.mu))) << "event " << i;
    ++events;
    K = m.matrix();
    const auto [res, fresh] = solve_errors(f, K, static_cast<unsigned>(i));
    worst_res = std::max(worst_res, res);
    worst_fresh = std::max(worst_fresh, fresh);
  }
  EXPECT_GE(events, 200);
  // The solves above ran on the columns (panels are rebuilt at the 8th solve after a change); the
  // panels of the updated factor solve the same.
  EXPECT_FALSE(f.info().solve_panels_built);
  Eigen::MatrixXd warm = Eigen::MatrixXd::Ones(f.rows(), 3);
  for (int r = 0; r < 6; ++r) f.solve_in_place(warm);
  const auto [res_p, fresh_p] = solve_errors(f, K, 999u);
  EXPECT_TRUE(f.info().solve_panels_built);
  EXPECT_GT(f.info().solve_panel_fraction, 0.5);
  test::report("cut: panel solve vs CHOLMOD after all events", fresh_p, 1e-9);
  EXPECT_LT(res_p, 1e-10);
  EXPECT_LT(fresh_p, 1e-9);
  EXPECT_GT(cutter.mesh().nodes.rows(), box.nodes.rows() + 100);  // the plane's nodes were split
  const double prod = rel_diff(f.product(), K);
  test::report("cut: worst residual", worst_res, 1e-10);
  test::report("cut: worst vs CHOLMOD", worst_fresh, 1e-9);
  test::report("cut: L D Lt vs K after all events", prod, 1e-11);
  test::report("cut: lumped mass change", worst_mass, 1e-12);
  EXPECT_LT(worst_res, 1e-10);
  EXPECT_LT(worst_fresh, 1e-9);
  EXPECT_LT(prod, 1e-11);
  EXPECT_LT(worst_mass, 1e-12);
  DynamicLdlt fresh;
  fresh.compute(K);
  if (test::verbose())
    std::printf("  %d events, %ld nodes, nnz(L) %.0f -> %.0f (fresh METIS %.0f)\n", events,
                static_cast<long>(cutter.mesh().nodes.rows()), f.info().nnz_L_build, f.info().nnz_L,
                fresh.info().nnz_L);
}

// The numeric passes' fast paths against the plain ones on a mesh whose top columns are long
// enough to be split between two threads: the vector kernel (AVX2 + FMA) against the scalar one
// (same algorithm, fused rounding: equal to round-off, both equal to the re-assembled matrix and to
// CHOLMOD), and the two-thread passes against one thread (bitwise equal by construction: the
// same kernel on the same entries).
TEST(DynamicLdlt, VectorKernelAndSplitColumnsAgreeWithThePlainPasses) {
  const TetMesh box = make_box(22, 22, 22, Vec3::Zero(), Vec3(1.1, 1.0, 1.0));
  const ModelDesc d0 = bar_desc(box);
  const Model m0 = build_model(d0);
  DynamicLdlt fast, one_thread, scalar;
  fast.compute(m0.matrix());
  one_thread.compute(m0.matrix());
  scalar.compute(m0.matrix());
  const bool vector = fast.use_vector_kernel(true);
  (void)one_thread.use_vector_kernel(true);
  EXPECT_FALSE(scalar.use_vector_kernel(false));
  const double h = box.nodes(1, 0) - box.nodes(0, 0);
  const double x_cut = h * std::round(0.5 * box.nodes.col(0).maxCoeff() / h);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), x_cut, Vec3(0.0, 1.0, 0.01));
  FaceCutter cutter(box);
  long split = 0, helped = 0;
  double worst_kernels = 0, worst_res = 0;
  Sparse K;
  const size_t per_event = 2 * 21 + 24;  // the first event completes a row: nodes split from then on
  for (size_t next = 0; next + per_event <= faces.size() && next < 8 * per_event; next += per_event) {
    const CutEvent ev = cutter.cut(std::vector<TetPair>(faces.begin() + static_cast<long>(next),
                                                        faces.begin() + static_cast<long>(next + per_event)));
    const FactorModification mod = cut_modification(ev, cutter.mesh(), d0.mu);
    ASSERT_TRUE(fast.modify(mod));
    split += fast.info().last_split_columns;
    helped += fast.info().last_helper_columns;
    {
      const ThreadLimit one(1);
      ASSERT_TRUE(one_thread.modify(mod));
      EXPECT_EQ(one_thread.info().last_split_columns, 0);
    }
    ASSERT_TRUE(scalar.modify(mod));
    ModelDesc d = d0;
    d.mesh = cutter.mesh();
    K = build_model(d).matrix();
    Eigen::MatrixXd b = Eigen::MatrixXd::Random(K.rows(), 3), xf = b, x1 = b, xs = b;
    fast.solve_in_place(xf);
    one_thread.solve_in_place(x1);
    scalar.solve_in_place(xs);
    ASSERT_EQ(std::memcmp(xf.data(), x1.data(), sizeof(double) * static_cast<size_t>(xf.size())), 0)
        << "two-thread passes differ from one thread after " << next + per_event << " faces";
    worst_kernels = std::max(worst_kernels, (xf - xs).norm() / xs.norm());
    worst_res = std::max({worst_res, (K * xf - b).norm() / b.norm(), (K * xs - b).norm() / b.norm()});
  }
  const double prod_fast = rel_diff(fast.product(), K), prod_scalar = rel_diff(scalar.product(), K);
  test::report("vector vs scalar kernel: solves", worst_kernels, 1e-12);
  test::report("vector kernel: L D Lt vs K", prod_fast, 1e-11);
  test::report("scalar kernel: L D Lt vs K", prod_scalar, 1e-11);
  EXPECT_LT(worst_kernels, 1e-12);
  EXPECT_LT(worst_res, 1e-10);
  EXPECT_LT(prod_fast, 1e-11);
  EXPECT_LT(prod_scalar, 1e-11);
  const auto [res, vs_cholmod] = solve_errors(fast, K, 7u);
  EXPECT_LT(res, 1e-10);
  EXPECT_LT(vs_cholmod, 1e-9);
  if (!vector) std::printf("  [ NOTE ] no AVX2 + FMA on this CPU: the vector kernel was not compared\n");
  if (tbb_threads() >= 2) {
    EXPECT_GT(split, 0) << "no column was long enough to split: the test does not cover the helper";
    EXPECT_GT(helped, 0) << "the helper thread never ran a half: the bitwise check covered one thread only";
  } else
    std::printf("  [ NOTE ] one thread here: the split columns were not exercised\n");
}

}  // namespace
}  // namespace xpd

namespace xpd {
namespace {

// The fill policy: a cut whose copies enter the order by the paper's rule (before their earliest
// neighbour) fills L well beyond a fresh ordering's; refill() then refactors with a fresh METIS
// ordering (nnz equal to a fresh factor's, solves equal CHOLMOD's), keeps the factor untouched
// when the fill is within the ratio, and refactors after the modification limit.
TEST(DynamicLdlt, RefillRefactorsWhenTheFillOrTheModificationCountPassesThePolicy) {
  const TetMesh box = make_box(8, 8, 8, Vec3::Zero(), Vec3(1.1, 1.0, 1.0));
  const ModelDesc d0 = bar_desc(box);
  DynamicLdlt f;
  f.compute(build_model(d0).matrix());
  FaceCutter cutter(box);
  const auto faces = faces_across_plane(box, Vec3::UnitX(), 4.0 * 1.1 / 7.0, Vec3(0.0, 1.0, 0.01));
  ASSERT_EQ(faces.size(), 2u * 7u * 7u);
  ModelDesc d = d0;
  for (size_t i = 0; i < faces.size(); i += 7) {
    const CutEvent ev = cutter.cut(std::vector<TetPair>(faces.begin() + long(i), faces.begin() + long(i + 7)));
    FactorModification mod = cut_modification(ev, cutter.mesh(), d0.mu);
    mod.place_before.clear();  // the paper's rule: more fill than before the twin
    ASSERT_TRUE(f.modify(mod));
  }
  d.mesh = cutter.mesh();
  const Sparse K = build_model(d).matrix();
  DynamicLdlt fresh;
  fresh.compute(K);
  const double grown = f.info().nnz_L;
  ASSERT_GT(grown, 1.15 * fresh.info().nnz_L);  // the fixture fills

  // Within a looser ratio: analyzed, kept bit for bit.
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(K.rows(), 3), x0 = b;
  f.solve_in_place(x0);
  const RefillResult keep = f.refill(K, FillPolicy{1.1 * grown / fresh.info().nnz_L, 0});
  EXPECT_FALSE(keep.refactored);
  EXPECT_STREQ(keep.reason, "");
  EXPECT_EQ(keep.nnz_L, grown);
  EXPECT_EQ(keep.nnz_L_fresh, fresh.info().nnz_L);  // the symbolic count is the fresh factor's
  Eigen::MatrixXd x1 = b;
  f.solve_in_place(x1);
  EXPECT_EQ(std::memcmp(x0.data(), x1.data(), sizeof(double) * size_t(x0.size())), 0);
  EXPECT_EQ(f.info().nnz_L, grown);

  // Past the ratio: refactored with the fresh ordering.
  const RefillResult r = f.refill(K, FillPolicy{});
  EXPECT_TRUE(r.refactored);
  EXPECT_STREQ(r.reason, "fill");
  EXPECT_EQ(f.info().nnz_L, fresh.info().nnz_L);
  EXPECT_EQ(f.info().modifications, 0);
  const auto [res, vs_fresh] = solve_errors(f, K, 7u);
  EXPECT_LT(res, 1e-12);
  EXPECT_LT(vs_fresh, 1e-12);
  if (test::verbose())
    std::printf("  refill: nnz(L) %.0f -> %.0f (fresh ordering %.0f), analyze %.1f ms, factorize %.1f ms\n", r.nnz_L,
                f.info().nnz_L, r.nnz_L_fresh, r.analyze_ms, r.factorize_ms);

  // The modification limit.
  FactorModification spring;
  spring.added.push_back(SparseColumn{{0, 5}, {1.0, -1.0}});
  ASSERT_TRUE(f.modify(spring));
  spring.removed = spring.added;
  spring.added.clear();
  ASSERT_TRUE(f.modify(spring));
  EXPECT_FALSE(f.refill(K, FillPolicy{1.15, 3}).refactored);
  const RefillResult lim = f.refill(K, FillPolicy{1.15, 2});
  EXPECT_TRUE(lim.refactored);
  EXPECT_STREQ(lim.reason, "modifications");

  // Bad input: another order, a bad policy; the factor is unchanged.
  const double nnz = f.info().nnz_L;
  EXPECT_THROW(f.refill(build_model(d0).matrix(), FillPolicy{}), SolverError);
  EXPECT_THROW(f.refill(K, FillPolicy{0.5, 0}), SolverError);
  EXPECT_EQ(f.info().nnz_L, nnz);
  DynamicLdlt empty;
  EXPECT_THROW(empty.refill(K, FillPolicy{}), SolverError);
}

}  // namespace
}  // namespace xpd
