// SchurFactorization::modify() (the collision region's Σ and Σ⁻¹ kept by low-rank updates through
// topology events) against fresh factorizations of the changed matrix: Σ⁻¹ against dpotri of the
// fresh Schur complement, Σ against the fresh one, full solves against the assembled matrix, and
// the collision solves (forward, Woodbury / dense refactor, backward) against the fresh
// factorization's, after each of more than 200 events (face cuts through and beside the region,
// sutures and hooks added and removed); the fallbacks (rank, definiteness) and malformed input.
#include <gtest/gtest.h>

#include <random>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/schur.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/face_cut.hpp>

#include "pd_fixtures.hpp"
#include "pd_like_matrix.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

using Sparse = Eigen::SparseMatrix<double>;

double rel(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) { return (a - b).norm() / b.norm(); }

// Σ c cᵀ over the columns, n × n.
Sparse outer(const std::vector<SparseColumn>& columns, int n) {
  std::vector<Eigen::Triplet<double>> t;
  for (const SparseColumn& c : columns)
    for (size_t a = 0; a < c.rows.size(); ++a)
      for (size_t b = 0; b < c.rows.size(); ++b) t.emplace_back(c.rows[a], c.rows[b], c.values[a] * c.values[b]);
  Sparse s(n, n);
  s.setFromTriplets(t.begin(), t.end());
  return s;
}
Sparse outer(const SparseColumn& c, int n) { return outer(std::vector<SparseColumn>{c}, n); }

Eigen::MatrixXd random_block(Eigen::Index rows, Eigen::Index cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  Eigen::MatrixXd b(rows, cols);
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = g(rng);
  return b;
}

// A bar (both x-ends attached) with a collision region under a patch of its top face that the
// plane x = 0.5 crosses, so that cuts split region nodes (their copies join x1) and nodes beside it.
struct Bar {
  TetMesh box = make_box(12, 12, 12, Vec3::Zero(), Vec3(1.1, 1.0, 1.0));
  ModelDesc desc = test::ends_attached_desc(box, 1e3, 1e5, 0.0, 5);
  std::vector<int> region, beta;
  Bar() {
    std::vector<int> seeds;
    for (Eigen::Index i = 0; i < box.nodes.rows(); ++i) {
      const Vec3 p = box.nodes.row(i).transpose();
      if (p.z() > 1.0 - 1e-9 && p.x() > 0.2 && p.x() < 0.9 && p.y() > 0.15 && p.y() < 0.85)
        seeds.push_back(static_cast<int>(i));
    }
    region = test::region_from_seeds(box, seeds, &beta);
  }
};

// Forward, a collision solve with `proxies` by `method`, backward: the whole Algorithm 1 global
// step of one inner iteration.
Eigen::MatrixXd collision_step_solve(SchurFactorization& s, const std::vector<SchurProxy>& proxies,
                                     const Eigen::MatrixXd& f, SchurSolveMethod method) {
  Eigen::MatrixXd y1, g2;
  s.forward(f, y1, g2);
  const Eigen::MatrixXd u2 = s.solve_collision_system(proxies, g2, method);
  return s.backward(y1, u2);
}

TEST(SchurModify, CutsSuturesAndHooksEqualFreshFactorizationsAfterEveryEvent) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "a fresh factorization after every event; the Schur updates run there in the other SchurModify tests and "
      "SurgeryCollision.*");
  const Bar bar;
  const int m = static_cast<int>(bar.region.size());
  ASSERT_GT(m, 120);
  Sparse K = build_model(bar.desc).matrix();
  SchurFactorization schur(K, bar.region);
  FaceCutter cutter(bar.box);
  const auto faces = faces_across_plane(bar.box, Vec3::UnitX(), 0.5, Vec3(0.0, 1.0, 0.01));
  ASSERT_EQ(faces.size(), 2u * 11u * 11u);
  std::vector<SparseColumn> springs;  // sutures and hooks in place
  std::mt19937 rng(11);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  double worst_inv = 0, worst_sigma = 0, worst_res = 0, worst_step = 0;
  int events = 0, cut_events = 0, spring_events = 0, new_dofs = 0, max_rank = 0;
  double solve_ms = 0, dense_ms = 0, factor_ms = 0;
  for (size_t i = 0; i < faces.size(); ++i) {
    for (int kind = 0; kind < 2; ++kind) {
      const int n = schur.n();
      FactorModification mod;
      if (kind == 0) {
        const CutEvent ev = cutter.cut({faces[i]});
        ASSERT_EQ(ev.faces_cut, 1);
        mod = cut_modification(ev, cutter.mesh(), bar.desc.mu);
        new_dofs += mod.new_dofs;
        ++cut_events;
      } else if (i % 4 == 1) {  // a suture from a region node to any node
        const int a = bar.region[static_cast<size_t>(pick(m))];
        int b = pick(n);
        if (b == a) b = (a + 1) % n;
        springs.push_back(spring_column({BaryPoint::node(a), BaryPoint::node(b), 50.0 + pick(100), 0.0}, n));
        mod.added.push_back(springs.back());
        ++spring_events;
      } else if (i % 4 == 2) {  // a hook on any node
        springs.push_back(attachment_column(BaryPoint::node(pick(n)), 200.0, n));
        mod.added.push_back(springs.back());
        ++spring_events;
      } else if (i % 4 == 3 && !springs.empty()) {  // cut a random stitch / release a hook
        const size_t s = static_cast<size_t>(pick(static_cast<int>(springs.size())));
        mod.removed.push_back(springs[s]);
        springs.erase(springs.begin() + static_cast<std::ptrdiff_t>(s));
        ++spring_events;
      } else {
        continue;
      }
      ModelDesc d = bar.desc;
      d.mesh = cutter.mesh();
      d.factorize = false;
      K = build_model(d).matrix();
      K += outer(springs, static_cast<int>(K.rows()));
      const SchurModifyResult res = schur.modify(mod, K);
      ASSERT_FALSE(res.rebuilt) << "event " << events << ": " << res.reason;
      ++events;
      max_rank = std::max(max_rank, res.rank);
      solve_ms += res.solve_ms;
      dense_ms += res.dense_ms;
      factor_ms += res.factor_ms;
      ASSERT_EQ(schur.n(), K.rows());
      // Spec test (e): Σ⁻¹ after the update against dpotri of the fresh Schur complement.
      SchurFactorization fresh(K, bar.region);
      worst_inv = std::max(worst_inv, rel(schur.schur_inverse(), fresh.schur_inverse()));
      worst_sigma = std::max(worst_sigma, rel(schur.schur_complement(), fresh.schur_complement()));
      if (events % 8 == 0) {
        const Eigen::MatrixXd f = random_block(schur.n(), 3, static_cast<unsigned>(events));
        const Eigen::MatrixXd x = schur.solve(f);
        worst_res = std::max(worst_res, (K * x - f).norm() / f.norm());
        const auto proxies = test::random_proxies(bar.box, bar.beta, schur, 25, 1e3, static_cast<unsigned>(events),
                                                  /*two_sided=*/events % 16 == 0);
        for (const SchurSolveMethod method : {SchurSolveMethod::Woodbury, SchurSolveMethod::DenseRefactor})
          worst_step = std::max(worst_step, rel(collision_step_solve(schur, proxies, f, method),
                                                collision_step_solve(fresh, proxies, f, method)));
      }
    }
  }
  test::report("Schur modify: Σ⁻¹ vs dpotri of the fresh Σ", worst_inv, 1e-9);
  test::report("Schur modify: Σ vs fresh", worst_sigma, 1e-9);
  test::report("Schur modify: full-solve residual", worst_res, 1e-10);
  test::report("Schur modify: collision step vs fresh factorization", worst_step, 1e-9);
  if (test::verbose())
    std::printf(
        "  %d events (%d cuts, %d springs), %d new unknowns, m = %d, largest rank %d; per event: solves "
        "%.2f ms, factor %.2f ms, dense %.2f ms\n",
        events, cut_events, spring_events, new_dofs, m, max_rank, solve_ms / events, factor_ms / events,
        dense_ms / events);
  EXPECT_GE(events, 200);
  EXPECT_GT(new_dofs, 100);
  EXPECT_GT(spring_events, 100);
  EXPECT_EQ(schur.stats().modifications, events);
  EXPECT_EQ(schur.stats().rebuilds, 0);
  EXPECT_TRUE(schur.stats().updatable);
  EXPECT_LT(worst_inv, 1e-9);
  EXPECT_LT(worst_sigma, 1e-9);
  EXPECT_LT(worst_res, 1e-10);
  EXPECT_LT(worst_step, 1e-9);
}

TEST(SchurModify, AChangeAboveTheRankLimitRebuildsAndLaterChangesUpdateAgain) {
  const Bar bar;
  const Sparse K0 = build_model(bar.desc).matrix();
  const int n = static_cast<int>(K0.rows());
  SchurFactorization schur(K0, bar.region);
  // More hooks than max_update_rank() in one event.
  FactorModification big;
  for (int j = 0; j < schur.max_update_rank() + 5; ++j)
    big.added.push_back(attachment_column(BaryPoint::node((j * 37) % n), 100.0, n));
  Sparse K = K0;
  K += outer(big.added, n);
  const SchurModifyResult r1 = schur.modify(big, K);
  EXPECT_TRUE(r1.rebuilt);
  EXPECT_STREQ(r1.reason, "rank");
  EXPECT_EQ(schur.stats().rebuilds, 1);
  EXPECT_FALSE(schur.stats().updatable);
  SchurFactorization fresh(K, bar.region);
  EXPECT_LT(rel(schur.schur_inverse(), fresh.schur_inverse()), 1e-12);
  // A small change afterwards is an update again (the DynamicLdlt is built from the rebuilt K).
  FactorModification small;
  small.added.push_back(spring_column({BaryPoint::node(bar.region[3]), BaryPoint::node(7), 80.0, 0.0}, n));
  K += outer(small.added[0], n);
  const SchurModifyResult r2 = schur.modify(small, K);
  EXPECT_FALSE(r2.rebuilt);
  EXPECT_GT(r2.updatable_ms, 0.0);
  EXPECT_EQ(r2.rank, 1);
  SchurFactorization fresh2(K, bar.region);
  EXPECT_LT(rel(schur.schur_inverse(), fresh2.schur_inverse()), 1e-9);
  EXPECT_LT(rel(schur.schur_complement(), fresh2.schur_complement()), 1e-9);
  EXPECT_EQ(schur.stats().modifications, 1);
  EXPECT_EQ(schur.stats().rebuilds, 1);
}

TEST(SchurModify, MalformedOrIndefiniteChangesLeaveTheFactorizationAsItWas) {
  const Bar bar;
  const Sparse K = build_model(bar.desc).matrix();
  const int n = static_cast<int>(K.rows());
  SchurFactorization schur(K, bar.region);
  // Made updatable by a first (empty-rank) change: an added and removed equal column.
  FactorModification noop;
  noop.added.push_back(attachment_column(BaryPoint::node(bar.region[0]), 10.0, n));
  noop.removed = noop.added;
  const SchurModifyResult r0 = schur.modify(noop, K);
  EXPECT_FALSE(r0.rebuilt);
  EXPECT_EQ(r0.rank, 0);
  ASSERT_TRUE(schur.stats().updatable);
  const Eigen::MatrixXd inv = schur.schur_inverse(), sigma = schur.schur_complement();
  const Eigen::MatrixXd f = random_block(n, 3, 3);
  const Eigen::MatrixXd x = schur.solve(f);

  FactorModification out_of_range;
  out_of_range.added.push_back({{0, n + 2}, {1.0, -1.0}});
  EXPECT_THROW(schur.modify(out_of_range, K), SolverError);
  FactorModification fine;
  fine.added.push_back(attachment_column(BaryPoint::node(2), 10.0, n));
  EXPECT_THROW(schur.modify(fine, Sparse(n + 1, n + 1)), SolverError);  // K_new of the wrong order
  FactorModification new_dof_without_entry;
  new_dof_without_entry.new_dofs = 1;
  EXPECT_THROW(schur.modify(new_dof_without_entry, Sparse(n + 1, n + 1)), SolverError);
  // Removing more than the matrix holds at a region node: K_new indefinite. The sparse factor
  // rolls back, the rebuild from K_new fails, and the factorization stays that of K.
  const int j = bar.region[5];
  FactorModification indefinite;
  indefinite.removed.push_back({{j}, {std::sqrt(2.0 * K.coeff(j, j))}});
  Sparse K_bad = K;
  K_bad.coeffRef(j, j) -= 2.0 * K.coeff(j, j);
  EXPECT_THROW(schur.modify(indefinite, K_bad), SolverError);

  EXPECT_EQ(schur.n(), n);
  EXPECT_TRUE(schur.schur_inverse() == inv);
  EXPECT_TRUE(schur.schur_complement() == sigma);
  EXPECT_LT(rel(schur.solve(f), x), 1e-13);  // the same factor (column or panel solves: last bits)
  EXPECT_EQ(schur.stats().modifications, 1);
  // refactorize() belongs to the constant factorization.
  EXPECT_THROW(schur.refactorize(K), SolverError);
}

}  // namespace
}  // namespace xpd
