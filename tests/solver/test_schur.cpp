// Schur localisation vs. slow oracles: full sparse solves, the Schur complement from an independent
// K11 factorization, and the sparse full-matrix penalty baseline (STYLE 9).
#include <gtest/gtest.h>

#include <Eigen/SparseCholesky>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/threads.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/schur.hpp>

#include "pd_like_matrix.hpp"
#include "solver/symmetric_kernel.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

// Named tolerances (relative, with a floor on the reference norm).
constexpr double kSolveTol = 1e-10;     // partial forward/backward + reduced solve vs. full solve
constexpr double kSchurTol = 1e-10;     // Σ vs. K22 − K21 K11⁻¹ K12
constexpr double kCollisionTol = 1e-8;  // refactor vs. Woodbury vs. sparse penalty baseline

double rel_error(const Eigen::MatrixXd& a, const Eigen::MatrixXd& ref) {
  const double err = (a - ref).norm() / std::max(ref.norm(), 1e-300);
  if (std::getenv("XPD_PRINT_RESIDUALS")) std::printf("  relative error %.3e\n", err);
  return err;
}

struct Problem {
  TetMesh mesh;
  Eigen::SparseMatrix<double> K;
  std::vector<int> region;
  std::vector<int> beta_tets;
};

// A PD-like matrix on the mesh: attached on the bottom 10 % (z), region = tets touching the top 10 %.
Problem make_problem(const std::string& spec) {
  Problem p;
  p.mesh = is_generator_spec(spec) ? make_box_from_spec(spec) : io::read_tet_mesh(test::data_path(spec));
  const std::vector<int> attached = test::nodes_in_band(p.mesh, 2, 0.1, false);
  p.K = test::pd_like_matrix(p.mesh, 1.0, attached, 10.0);
  p.region = test::region_from_seeds(p.mesh, test::nodes_in_band(p.mesh, 2, 0.1, true), &p.beta_tets);
  return p;
}

Eigen::MatrixXd random_rhs(Eigen::Index n, Eigen::Index r, unsigned seed) {
  std::srand(seed);
  return Eigen::MatrixXd::Random(n, r);
}

Eigen::MatrixXd sparse_solve(const Eigen::SparseMatrix<double>& K, const Eigen::MatrixXd& f) {
  Eigen::SimplicialLDLT<Eigen::SparseMatrix<double>> ldlt(K);
  EXPECT_EQ(ldlt.info(), Eigen::Success);
  return ldlt.solve(f);
}

class SchurMeshes : public ::testing::TestWithParam<std::string> {};

TEST_P(SchurMeshes, PermutationKeepsRegionLast) {
  const Problem p = make_problem(GetParam());
  SchurOptions opt;
  opt.compare_unconstrained_ordering = true;
  SchurFactorization schur(p.K, p.region, opt);
  const int n = schur.n(), m = schur.m();
  ASSERT_EQ(m, static_cast<int>(p.region.size()));
  ASSERT_GT(m, 0);
  std::vector<int> sorted = schur.permutation();
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(static_cast<size_t>(n));
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  std::vector<int> fpos(static_cast<size_t>(m));
  for (int i = 0; i < m; ++i) {
    fpos[static_cast<size_t>(i)] = schur.factor_position(i);
    EXPECT_EQ(schur.permutation()[static_cast<size_t>(n - m + schur.factor_position(i))],
              p.region[static_cast<size_t>(i)]);
    EXPECT_EQ(schur.region_index(p.region[static_cast<size_t>(i)]), i);
  }
  std::sort(fpos.begin(), fpos.end());
  for (int i = 0; i < m; ++i) EXPECT_EQ(fpos[static_cast<size_t>(i)], i);
  for (int q = 0; q < n - m; ++q) EXPECT_EQ(schur.region_index(schur.permutation()[static_cast<size_t>(q)]), -1);
  const SchurStats& s = schur.stats();
  EXPECT_GT(s.nnz_L, 0);
  EXPECT_GT(s.nnz_L_unconstrained, 0);
  std::printf("  %s: n = %d, m = %d, nnz(L) = %.0f, unconstrained METIS %.0f (%+.1f %%)\n", GetParam().c_str(), n, m,
              s.nnz_L, s.nnz_L_unconstrained, 100.0 * (s.nnz_L / s.nnz_L_unconstrained - 1.0));
}

TEST_P(SchurMeshes, SchurComplementMatchesK11Oracle) {
  const Problem p = make_problem(GetParam());
  SchurFactorization schur(p.K, p.region);
  const int n = schur.n(), m = schur.m(), n1 = n - m;
  // Independent Σ: split K by the region, factor K11 with Eigen, Σ = K22 − K21 K11⁻¹ K12.
  std::vector<int> pos(static_cast<size_t>(n), -1);
  int next = 0;
  for (int i = 0; i < n; ++i)
    if (schur.region_index(i) < 0) pos[static_cast<size_t>(i)] = next++;
  std::vector<Eigen::Triplet<double>> t11, t12;
  Eigen::MatrixXd k22 = Eigen::MatrixXd::Zero(m, m);
  for (int j = 0; j < n; ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(p.K, j); it; ++it) {
      const int ri = schur.region_index(static_cast<int>(it.row())), rj = schur.region_index(j);
      if (ri < 0 && rj < 0)
        t11.emplace_back(pos[static_cast<size_t>(it.row())], pos[static_cast<size_t>(j)], it.value());
      else if (ri < 0 && rj >= 0)
        t12.emplace_back(pos[static_cast<size_t>(it.row())], rj, it.value());
      else if (ri >= 0 && rj >= 0)
        k22(ri, rj) = it.value();
    }
  Eigen::SparseMatrix<double> k11(n1, n1), k12(n1, m);
  k11.setFromTriplets(t11.begin(), t11.end());
  k12.setFromTriplets(t12.begin(), t12.end());
  Eigen::SimplicialLLT<Eigen::SparseMatrix<double>> llt(k11);
  ASSERT_EQ(llt.info(), Eigen::Success);
  const Eigen::MatrixXd k12d = Eigen::MatrixXd(k12);
  const Eigen::MatrixXd sigma_ref = k22 - k12d.transpose() * llt.solve(k12d);
  EXPECT_LT(rel_error(schur.schur_complement(), sigma_ref), kSchurTol);
  // Σ = L22 L22ᵀ and L22 is lower triangular.
  const Eigen::MatrixXd& l22 = schur.schur_factor();
  EXPECT_EQ(Eigen::MatrixXd(l22.triangularView<Eigen::StrictlyUpper>()).norm(), 0.0);
  const Eigen::MatrixXd ll = l22 * l22.transpose();
  Eigen::MatrixXd ll_region(m, m);
  for (int j = 0; j < m; ++j)
    for (int i = 0; i < m; ++i) ll_region(i, j) = ll(schur.factor_position(i), schur.factor_position(j));
  EXPECT_LT(rel_error(ll_region, sigma_ref), kSchurTol);
  // apply_schur is Σ u2.
  const Eigen::MatrixXd u2 = random_rhs(m, 3, 7);
  EXPECT_LT(rel_error(schur.apply_schur(u2), sigma_ref * u2), kSchurTol);
}

// Both ways of the partial substitutions: over the x1 supernodes only (the default when the
// supernodal factor splits at column n1) and through CHOLMOD's full solve with L22 multiplied back.
TEST_P(SchurMeshes, PartialSubstitutionsEqualFullSolve) {
  for (const bool partial : {true, false}) {
    SCOPED_TRACE(partial ? "x1 supernodes only" : "full CHOLMOD solve");
    const Problem p = make_problem(GetParam());
    SchurOptions so;
    so.partial_sweeps = partial;
    SchurFactorization schur(p.K, p.region, so);
    // CHOLMOD's supernodes end at column n1 on these meshes (the x2 block is ordered last and dense).
    if (!XPD_CHOLMOD_LGPL_ONLY) {
      EXPECT_EQ(schur.stats().partial_sweeps, partial);
      // Tree-parallel: the subtrees of L11 (none when off).
      if (partial) {
        EXPECT_GT(schur.stats().partial_sweep_tasks, 1);
      }
    }
    const Eigen::MatrixXd f = random_rhs(schur.n(), 3, 1);
    const Eigen::MatrixXd u_ref = sparse_solve(p.K, f);
    EXPECT_LT(rel_error(schur.solve(f), u_ref), kSolveTol);

    Eigen::MatrixXd y1, g2;
    schur.forward(f, y1, g2);
    ASSERT_EQ(y1.rows(), schur.n() - schur.m());
    ASSERT_EQ(g2.rows(), schur.m());
    // g2 = f2 − K21 K11⁻¹ f1 = Σ u2_ref, the reduced right-hand side.
    Eigen::MatrixXd u2_ref(schur.m(), 3);
    for (int i = 0; i < schur.m(); ++i) u2_ref.row(i) = u_ref.row(p.region[static_cast<size_t>(i)]);
    EXPECT_LT(rel_error(g2, schur.schur_complement() * u2_ref), kSolveTol);
    const Eigen::MatrixXd u2 = schur.solve_collision_system({}, g2);
    EXPECT_LT(rel_error(u2, u2_ref), kSolveTol);
    EXPECT_LT(rel_error(schur.backward(y1, u2), u_ref), kSolveTol);
  }
}

TEST_P(SchurMeshes, RefactorWoodburyAndSparseBaselineAgree) {
  const Problem p = make_problem(GetParam());
  SchurFactorization schur(p.K, p.region);
  const int m = schur.m();
  const double kdiag = p.K.diagonal().mean();
  const Eigen::MatrixXd f = random_rhs(schur.n(), 3, 3);
  // One-sided springs (a proxy held to a point in space) and two-sided ones (a proxy joined to a
  // point of another tet, w = W_p − B_s over 8 nodes).
  for (const bool two_sided : {false, true})
    for (int k : {1, std::max(2, m / 10), m / 2 + 1}) {
      SCOPED_TRACE(two_sided ? "two-sided springs" : "one-sided springs");
      const std::vector<SchurProxy> proxies =
          test::random_proxies(p.mesh, p.beta_tets, schur, k, 100.0 * kdiag, 11u + static_cast<unsigned>(k), two_sided);
      // Baseline: the springs added into the sparse K, refactorized, full solve.
      const Eigen::SparseMatrix<double> c22 = collision_matrix(m, proxies);
      std::vector<Eigen::Triplet<double>> trip;
      for (int j = 0; j < m; ++j)
        for (Eigen::SparseMatrix<double>::InnerIterator it(c22, j); it; ++it)
          trip.emplace_back(p.region[static_cast<size_t>(it.row())], p.region[static_cast<size_t>(j)], it.value());
      Eigen::SparseMatrix<double> cfull(p.K.rows(), p.K.cols());
      cfull.setFromTriplets(trip.begin(), trip.end());
      const Eigen::SparseMatrix<double> kc = p.K + cfull;
      const Eigen::MatrixXd u_ref = sparse_solve(kc, f);

      Eigen::MatrixXd y1, g2;
      schur.forward(f, y1, g2);
      const Eigen::MatrixXd u2_dense = schur.solve_collision_system(proxies, g2, SchurSolveMethod::DenseRefactor);
      EXPECT_EQ(schur.last_method(), SchurSolveMethod::DenseRefactor);
      const Eigen::MatrixXd u2_wood = schur.solve_collision_system(proxies, g2, SchurSolveMethod::Woodbury);
      EXPECT_EQ(schur.last_method(), SchurSolveMethod::Woodbury);
      const Eigen::MatrixXd u2_auto = schur.solve_collision_system(proxies, g2);
      EXPECT_LT(rel_error(u2_wood, u2_dense), kCollisionTol) << "k = " << k;
      EXPECT_LT(rel_error(u2_auto, u2_dense), kCollisionTol) << "k = " << k;
      EXPECT_LT(rel_error(schur.backward(y1, u2_dense), u_ref), kCollisionTol) << "k = " << k;
      EXPECT_LT(rel_error(schur.backward(y1, u2_wood), u_ref), kCollisionTol) << "k = " << k;

      // The same baseline through CHOLMOD: numeric refactorization on the analyzed pattern (one-sided
      // proxies live in E_β tets, so WᵀCW adds no entries outside the pattern of K).
      if (two_sided) continue;
      SchurFactorization plain(p.K, {});
      plain.refactorize(kc);
      EXPECT_LT(rel_error(plain.solve(f), u_ref), kCollisionTol) << "k = " << k;
    }
}

// The IPC reduced system (Σ ⊗ I₃ + E_N U Uᵀ E_Nᵀ) u2 = g2 by the 3-D low-rank Woodbury with one
// refinement step, against a dense 3m × 3m Cholesky of the same matrix and against the full sparse
// system K ⊗ I₃ + (the term on the global nodes) through forward/backward, with barrier-like terms
// (rank 3 on 4 nodes per pair, as a projected pair Hessian) from κ = 10³ ‖Σ‖ to 100 κ, in the
// factored form U and as the dense block U Uᵀ.
TEST_P(SchurMeshes, LowRankWoodburyEqualsDenseAndFullSparseAtAnyStiffness) {
  const Problem p = make_problem(GetParam());
  SchurFactorization schur(p.K, p.region);
  const int m = schur.m(), n = schur.n();
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> pick(0, m - 1);
  std::normal_distribution<double> N(0, 1);
  // ~m/8 pairs of 4 distinct region nodes each.
  std::vector<std::array<int, 4>> pairs;
  for (int k = 0; k < std::max(2, m / 8); ++k) {
    std::array<int, 4> a{};
    for (int i = 0; i < 4; ++i) {
      do {
        a[static_cast<size_t>(i)] = pick(rng);
      } while (std::find(a.begin(), a.begin() + i, a[static_cast<size_t>(i)]) != a.begin() + i);
    }
    pairs.push_back(a);
  }
  SchurLowRank base;
  std::vector<int> slot(static_cast<size_t>(m), -1);
  for (const auto& a : pairs)
    for (const int node : a)
      if (slot[static_cast<size_t>(node)] < 0) {
        slot[static_cast<size_t>(node)] = static_cast<int>(base.nodes.size());
        base.nodes.push_back(node);
      }
  const int q = static_cast<int>(base.nodes.size());
  base.u.setZero(3 * q, 3 * static_cast<Eigen::Index>(pairs.size()));
  for (size_t k = 0; k < pairs.size(); ++k)
    for (int col = 0; col < 3; ++col)
      for (const int node : pairs[k])
        for (int c = 0; c < 3; ++c)
          base.u(3 * slot[static_cast<size_t>(node)] + c, 3 * static_cast<Eigen::Index>(k) + col) = N(rng);
  const double sigma_scale = schur.schur_complement().diagonal().mean();
  const Eigen::MatrixXd f = random_rhs(n, 3, 5);
  Eigen::MatrixXd y1, g2;
  schur.forward(f, y1, g2);
  for (const double kappa : {1e3, 1e4, 1e5}) {
    SCOPED_TRACE(kappa);
    SchurLowRank term = base;
    term.u *= std::sqrt(kappa * sigma_scale / (base.u.rowwise().squaredNorm().maxCoeff()));
    Eigen::MatrixXd u2;
    schur.solve_low_rank_system(term, g2, u2);
    // The same term given as the dense block U Uᵀ (the dense-block form: a Cholesky of ℬ_N + B⁻¹ ⊗ I₃).
    SchurLowRank as_block;
    as_block.nodes = term.nodes;
    as_block.block = term.u * term.u.transpose();
    Eigen::MatrixXd u2_block;
    schur.solve_low_rank_system(as_block, g2, u2_block);
    // Dense oracle, node-major 3m unknowns.
    Eigen::MatrixXd big = Eigen::MatrixXd::Zero(3 * m, 3 * m);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j)
        for (int c = 0; c < 3; ++c) big(3 * i + c, 3 * j + c) = schur.schur_complement()(i, j);
    const Eigen::MatrixXd uut = term.u * term.u.transpose();
    for (int a = 0; a < q; ++a)
      for (int b = 0; b < q; ++b)
        big.block<3, 3>(3 * term.nodes[static_cast<size_t>(a)], 3 * term.nodes[static_cast<size_t>(b)]) +=
            uut.block<3, 3>(3 * a, 3 * b);
    Eigen::VectorXd g_flat(3 * m);
    for (int i = 0; i < m; ++i) g_flat.segment<3>(3 * i) = g2.row(i).transpose();
    const Eigen::VectorXd dense = big.llt().solve(g_flat);
    Eigen::MatrixXd u2_dense(m, 3);
    for (int i = 0; i < m; ++i) u2_dense.row(i) = dense.segment<3>(3 * i).transpose();
    EXPECT_LT(rel_error(u2, u2_dense), 1e-9);
    EXPECT_LT(rel_error(u2_block, u2_dense), 1e-9);
    // Full sparse oracle: K ⊗ I₃ plus the term on the global nodes.
    std::vector<Eigen::Triplet<double>> trip;
    for (int j = 0; j < n; ++j)
      for (Eigen::SparseMatrix<double>::InnerIterator it(p.K, j); it; ++it)
        for (int c = 0; c < 3; ++c) trip.emplace_back(3 * static_cast<int>(it.row()) + c, 3 * j + c, it.value());
    for (int a = 0; a < q; ++a)
      for (int b = 0; b < q; ++b)
        for (int c = 0; c < 3; ++c)
          for (int e = 0; e < 3; ++e)
            trip.emplace_back(3 * p.region[static_cast<size_t>(term.nodes[static_cast<size_t>(a)])] + c,
                              3 * p.region[static_cast<size_t>(term.nodes[static_cast<size_t>(b)])] + e,
                              uut(3 * a + c, 3 * b + e));
    Eigen::SparseMatrix<double> k3(3 * n, 3 * n);
    k3.setFromTriplets(trip.begin(), trip.end());
    Eigen::VectorXd f_flat(3 * n);
    for (int i = 0; i < n; ++i) f_flat.segment<3>(3 * i) = f.row(i).transpose();
    const Eigen::VectorXd full = sparse_solve(k3, f_flat);
    Eigen::MatrixXd u_ref(n, 3);
    for (int i = 0; i < n; ++i) u_ref.row(i) = full.segment<3>(3 * i).transpose();
    EXPECT_LT(rel_error(schur.backward(y1, u2), u_ref), 1e-9);
    EXPECT_LT(rel_error(schur.backward(y1, u2_block), u_ref), 1e-9);
    // Without refinement, for the record (XPD_PRINT_RESIDUALS=1).
    Eigen::MatrixXd u2_raw;
    schur.solve_low_rank_system(term, g2, u2_raw, 0);
    (void)rel_error(u2_raw, u2_dense);
  }
}

INSTANTIATE_TEST_SUITE_P(Schur, SchurMeshes,
                         ::testing::Values("box:10", "box:7,9,12", "ipc-tetmeshes/bunny.msh",
                                           "ipc-tetmeshes/cow_head.msh", "ipc-tetmeshes/sphere1K.msh"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return s;
                         });

TEST(SchurEdgeCases, EmptyRegionIsPlainSolve) {
  const Problem p = make_problem("box:8");
  SchurFactorization schur(p.K, {});
  EXPECT_EQ(schur.m(), 0);
  EXPECT_EQ(schur.schur_complement().size(), 0);
  const Eigen::MatrixXd f = random_rhs(schur.n(), 3, 5);
  const Eigen::MatrixXd u_ref = sparse_solve(p.K, f);
  Eigen::MatrixXd y1, g2;
  schur.forward(f, y1, g2);
  EXPECT_EQ(y1.rows(), schur.n());
  EXPECT_EQ(g2.rows(), 0);
  const Eigen::MatrixXd u2 = schur.solve_collision_system({}, g2);
  EXPECT_EQ(u2.rows(), 0);
  EXPECT_LT(rel_error(schur.backward(y1, u2), u_ref), kSolveTol);
  EXPECT_LT(rel_error(schur.solve(f), u_ref), kSolveTol);
}

TEST(SchurEdgeCases, BudgetIsCheckedBeforeAllocation) {
  const Problem p = make_problem("box:10");
  SchurOptions opt;
  opt.dense_memory_budget_bytes = 1000;
  try {
    SchurFactorization schur(p.K, p.region, opt);
    FAIL() << "expected SolverError";
  } catch (const SolverError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("m = " + std::to_string(p.region.size())), std::string::npos) << what;
    EXPECT_NE(what.find("1000 bytes"), std::string::npos) << what;
  }
  // A region of 30,000 nodes would need 4 × 7.2 GB: rejected by the default 2 GiB budget long
  // before anything is factored or allocated.
  const TetMesh big = make_box(31, 31, 32, Vec3::Zero(), Vec3::Ones());
  std::vector<int> region(30000);
  std::iota(region.begin(), region.end(), 0);
  Eigen::SparseMatrix<double> eye(big.nodes.rows(), big.nodes.rows());
  eye.setIdentity();
  EXPECT_THROW(SchurFactorization(eye, region), SolverError);
}

TEST(SchurEdgeCases, LowRankBadInputIsAnError) {
  const Problem p = make_problem("box:6");
  SchurFactorization schur(p.K, p.region);
  const int m = schur.m();
  Eigen::MatrixXd u2;
  SchurLowRank t;
  t.nodes = {0, 1};
  t.u = Eigen::MatrixXd::Ones(6, 2);
  EXPECT_THROW(schur.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 2), u2), SolverError);  // not m × 3
  t.nodes = {0, 0};
  EXPECT_THROW(schur.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 3), u2), SolverError);  // repeated
  t.nodes = {0, m};
  EXPECT_THROW(schur.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 3), u2), SolverError);  // out of range
  t.nodes = {0, 1, 2};
  EXPECT_THROW(schur.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 3), u2), SolverError);  // U rows
  t.nodes = {0, 1};
  t.block = Eigen::MatrixXd::Identity(5, 5);
  EXPECT_THROW(schur.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 3), u2), SolverError);  // block size
  t.block.resize(0, 0);
  SchurOptions no_inverse;
  no_inverse.precompute_inverse = false;
  SchurFactorization bare(p.K, p.region, no_inverse);
  t.nodes = {0, 1};
  EXPECT_THROW(bare.solve_low_rank_system(t, Eigen::MatrixXd::Zero(m, 3), u2), SolverError);  // no Σ⁻¹
  // An empty term is Σ⁻¹ g.
  const Eigen::MatrixXd g = random_rhs(m, 3, 2);
  schur.solve_low_rank_system(SchurLowRank{}, g, u2);
  EXPECT_LT(rel_error(schur.apply_schur(u2), g), 1e-10);
}

TEST(SchurEdgeCases, BadInputIsAnError) {
  const Problem p = make_problem("box:6");
  EXPECT_THROW(SchurFactorization(p.K, {0, 0}), SolverError);
  EXPECT_THROW(SchurFactorization(p.K, {-1}), SolverError);
  EXPECT_THROW(SchurFactorization(p.K, {static_cast<int>(p.K.rows())}), SolverError);
  // Not positive definite: the unattached Laplacian minus a shift.
  Eigen::SparseMatrix<double> bad = test::pd_like_matrix(p.mesh, 1.0, {}, 0.0);
  Eigen::SparseMatrix<double> shift(bad.rows(), bad.cols());
  shift.setIdentity();
  bad -= 1e-3 * shift;
  EXPECT_THROW(SchurFactorization(bad, p.region), SolverError);
  // Wrong shapes and bad proxies.
  SchurFactorization schur(p.K, p.region);
  EXPECT_THROW(schur.solve(Eigen::MatrixXd::Ones(3, 3)), SolverError);
  SchurProxy bad_proxy;
  bad_proxy.nodes = {schur.m(), 0, 0, 0};
  bad_proxy.weights = {1, 0, 0, 0};
  bad_proxy.stiffness = 1;
  EXPECT_THROW(schur.solve_collision_system({bad_proxy}, Eigen::MatrixXd::Zero(schur.m(), 3)), SolverError);
  bad_proxy.nodes = {0, 0, 0, 0};
  bad_proxy.stiffness = -1;
  EXPECT_THROW(schur.solve_collision_system({bad_proxy}, Eigen::MatrixXd::Zero(schur.m(), 3)), SolverError);
  // refactorize needs the analyzed pattern.
  Eigen::SparseMatrix<double> eye(p.K.rows(), p.K.cols());
  eye.setIdentity();
  EXPECT_THROW(schur.refactorize(eye), SolverError);
}

TEST(SchurEdgeCases, RefactorizeTracksNewValues) {
  const Problem p = make_problem("box:8");
  SchurFactorization schur(p.K, p.region);
  const Eigen::MatrixXd sigma = schur.schur_complement();
  schur.refactorize(2.5 * p.K);
  EXPECT_LT(rel_error(schur.schur_complement(), 2.5 * sigma), kSchurTol);
  const Eigen::MatrixXd f = random_rhs(schur.n(), 3, 9);
  EXPECT_LT(rel_error(schur.solve(f), sparse_solve(2.5 * p.K, f)), kSolveTol);
}

TEST(SchurEdgeCases, AutomaticChoiceFollowsCostModel) {
  const Problem p = make_problem("box:10");
  SchurFactorization schur(p.K, p.region);
  const int m = schur.m();
  std::vector<SchurProxy> few = test::random_proxies(p.mesh, p.beta_tets, schur, std::max(1, m / 20), 1.0, 1);
  std::vector<SchurProxy> many = test::random_proxies(p.mesh, p.beta_tets, schur, 3 * m, 1.0, 2);
  EXPECT_EQ(schur.choose_method(few), SchurSolveMethod::Woodbury);
  EXPECT_EQ(schur.choose_method(many), SchurSolveMethod::DenseRefactor);
  // Without Σ⁻¹ only the refactor is possible.
  SchurOptions opt;
  opt.precompute_inverse = false;
  SchurFactorization no_inv(p.K, p.region, opt);
  EXPECT_EQ(no_inv.choose_method(few), SchurSolveMethod::DenseRefactor);
  EXPECT_THROW(no_inv.solve_collision_system(few, Eigen::MatrixXd::Zero(m, 3), SchurSolveMethod::Woodbury),
               SolverError);
}

// The three-column symmetric product (solver/symmetric_kernel.hpp) against Eigen's dense product of
// the full matrix: orders around the vector width and the parallel threshold, odd and even column
// counts per slice, x with a leading dimension above m, α ≠ 1, accumulating or not. The upper
// triangle holds garbage: the kernel must read the lower one only.
TEST(SymmetricKernel, EqualsDenseProductReadingTheLowerTriangleOnly) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> scratch;  // one for all sizes: reused after larger ones, as in a workspace
  for (const int m : {1, 2, 3, 4, 5, 6, 7, 9, 31, 255, 256, 257, 1000, 300}) {
    Eigen::MatrixXd a(m, m);
    for (int j = 0; j < m; ++j)
      for (int i = j; i < m; ++i) a(i, j) = a(j, i) = u(rng);
    Eigen::MatrixXd stored = a;
    for (int j = 1; j < m; ++j)
      for (int i = 0; i < j; ++i) stored(i, j) = std::numeric_limits<double>::quiet_NaN();
    const int ldx = m + 3;
    Eigen::MatrixXd x(ldx, 3);
    for (Eigen::Index k = 0; k < x.size(); ++k) x.data()[k] = u(rng);
    const Eigen::MatrixXd xm = x.topRows(m);
    Eigen::MatrixXd start(m, 3);
    for (Eigen::Index k = 0; k < start.size(); ++k) start.data()[k] = u(rng);
    for (const bool accumulate : {false, true}) {
      const double alpha = -0.75;
      Eigen::MatrixXd out = start;
      detail::symmetric_times3(m, stored.data(), x.data(), ldx, alpha, out.data(), accumulate, scratch);
      const Eigen::MatrixXd ref = alpha * a * xm + (accumulate ? start : Eigen::MatrixXd::Zero(m, 3));
      // Sums of m products of numbers in [−1, 1]: a few ulps of m.
      EXPECT_LT((out - ref).cwiseAbs().maxCoeff(), 1e-14 * m) << "m = " << m << ", accumulate " << accumulate;
    }
  }
}

TEST(SymmetricKernel, DoesNotDependOnTheThreadCount) {
  const int m = 700;
  Eigen::MatrixXd a = Eigen::MatrixXd::Random(m, m);
  a = (a + a.transpose()).eval();
  const Eigen::MatrixXd x = Eigen::MatrixXd::Random(m, 3);
  Eigen::MatrixXd one(m, 3), two(m, 3);
  std::vector<double> scratch;
  {
    const ThreadLimit limit(1);
    detail::symmetric_times3(m, a.data(), x.data(), m, 1.0, one.data(), false, scratch);
  }
  {
    const ThreadLimit limit(2);
    detail::symmetric_times3(m, a.data(), x.data(), m, 1.0, two.data(), false, scratch);
  }
  EXPECT_EQ((one - two).cwiseAbs().maxCoeff(), 0.0);
}

}  // namespace
}  // namespace xpd
