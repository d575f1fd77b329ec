// Conformance of the sparse Cholesky backends (CHOLMOD supernodal vs Eigen SimplicialLLT).
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <cstring>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

#include "solver/pd_fixtures.hpp"
#include "solver/pd_like_matrix.hpp"
#include "test_util.hpp"

using namespace xpd;

namespace {
Eigen::SparseMatrix<double> pd_matrix(int n) {
  ModelDesc d = test::loaded_desc(test::jittered_box(n));
  return build_model(d).matrix();
}
}  // namespace

TEST(SolverCholesky, BackendsAgreeOnThreeRightHandSides) {
  const Eigen::SparseMatrix<double> K = pd_matrix(6);
  Eigen::MatrixXd B = Eigen::MatrixXd::Random(K.rows(), 3);
  SparseCholesky a(CholeskyBackend::Cholmod), b(CholeskyBackend::Eigen);
  a.compute(K);
  b.compute(K);
  const Eigen::MatrixXd Xa = a.solve(B), Xb = b.solve(B);
  const double rel_a = (K * Xa - B).norm() / B.norm();
  const double rel_b = (K * Xb - B).norm() / B.norm();
  test::report("cholmod residual", rel_a, 1e-10);
  test::report("eigen residual", rel_b, 1e-10);
  EXPECT_LE(rel_a, 1e-10);
  EXPECT_LE(rel_b, 1e-10);
  EXPECT_LE((Xa - Xb).norm(), 1e-9 * Xa.norm());
  EXPECT_GT(a.info().nnz_L, 0);
  // Refactorization with new values keeps working (same pattern).
  Eigen::SparseMatrix<double> K2 = 2.0 * K;
  a.factorize(K2);
  EXPECT_LE((a.solve(B) - 0.5 * Xa).norm(), 1e-9 * Xa.norm());
  // Repeated in-place solves reuse workspaces and give identical results.
  Eigen::MatrixXd C = B;
  a.solve_in_place(C);
  Eigen::MatrixXd D = B;
  a.solve_in_place(D);
  EXPECT_EQ(0, std::memcmp(C.data(), D.data(), sizeof(double) * static_cast<size_t>(C.size())));
}

// The licence option decides the factor kind: supernodal by default (CHOLMOD's GPL Supernodal
// module), simplicial with XPD_CHOLMOD_LGPL_ONLY. Both solve to the same accuracy (test above).
TEST(SolverCholesky, FactorKindFollowsTheLicenceOption) {
  const Eigen::SparseMatrix<double> K = pd_matrix(8);
  SparseCholesky a(CholeskyBackend::Cholmod);
  a.compute(K);
  EXPECT_EQ(a.info().supernodal, !XPD_CHOLMOD_LGPL_ONLY) << "XPD_CHOLMOD_LGPL_ONLY = " << XPD_CHOLMOD_LGPL_ONLY;
  SparseCholesky e(CholeskyBackend::Eigen);
  e.compute(K);
  EXPECT_FALSE(e.info().supernodal);
}

TEST(SolverCholesky, NotPositiveDefiniteNamesTheColumn) {
  Eigen::SparseMatrix<double> A(4, 4);
  std::vector<Triplet> t = {{0, 0, 4.0}, {1, 1, 4.0}, {2, 2, -1.0}, {3, 3, 2.0}, {1, 0, 1.0}, {0, 1, 1.0}};
  A.setFromTriplets(t.begin(), t.end());
  for (auto backend : {CholeskyBackend::Cholmod, CholeskyBackend::Eigen}) {
    SparseCholesky c(backend);
    try {
      c.compute(A);
      FAIL() << "expected SolverError for " << to_string(backend);
    } catch (const SolverError& e) {
      EXPECT_NE(std::string(e.what()).find("not positive definite"), std::string::npos) << e.what();
      if (backend == CholeskyBackend::Cholmod) {
        EXPECT_NE(std::string(e.what()).find("column 2"), std::string::npos) << e.what();
      }
    }
  }
}

TEST(SolverCholesky, SolveBeforeFactorizeThrows) {
  SparseCholesky c;
  Eigen::MatrixXd B = Eigen::MatrixXd::Ones(3, 1);
  EXPECT_THROW(c.solve_in_place(B), SolverError);
}

// The tree-parallel substitution (default for a supernodal factor) against CHOLMOD's own serial
// cholmod_l_solve2 on the same factor: equal to round-off for 1, 3, 7 and 16 columns, on a jittered box
// and on the real Armadillo13K mesh (13K nodes, many supernodes and subtree tasks); bit-identical on
// one and on two threads; a strided block of a larger matrix is solved in place like a packed one.
TEST(SolverCholesky, TreeParallelSolveEqualsCholmodSerialOnAnyThreadCount) {
  if (XPD_CHOLMOD_LGPL_ONLY) GTEST_SKIP() << "simplicial factor: the tree-parallel solve needs a supernodal one";
  const TetMesh arm = io::read_tet_mesh(test::data_path("ipc-tetmeshes/Armadillo13K.msh.gz"));
  std::vector<int> attached;
  for (Eigen::Index i = 0; i < arm.nodes.rows(); ++i)
    if (arm.nodes(i, 1) < arm.nodes.col(1).minCoeff() + 10.0) attached.push_back(static_cast<int>(i));
  ASSERT_FALSE(attached.empty());
  const std::vector<std::pair<std::string, Eigen::SparseMatrix<double>>> cases = {
      {"box:12", pd_matrix(12)}, {"Armadillo13K", test::pd_like_matrix(arm, 1e4, attached, 1e6)}};
  for (const auto& [name, K] : cases) {
    SparseCholesky f(CholeskyBackend::Cholmod);
    f.compute(K);
    ASSERT_TRUE(f.parallel_solve());
    EXPECT_GE(f.info().solve_tasks, 8) << name;  // enough subtrees to keep 2+ threads busy
    EXPECT_GT(f.info().factor_bytes, 8.0 * f.info().nnz_L) << name;
    for (int k : {1, 3, 7, 16}) {  // 16: every supernode through BLAS (many right-hand sides)
      const Eigen::MatrixXd B = Eigen::MatrixXd::Random(K.rows(), k);
      f.set_parallel_solve(false);
      const Eigen::MatrixXd ref = f.solve(B);
      f.set_parallel_solve(true);
      Eigen::MatrixXd one, two;
      {
        tbb::global_control c(tbb::global_control::max_allowed_parallelism, 1);
        one = f.solve(B);
      }
      {
        tbb::global_control c(tbb::global_control::max_allowed_parallelism, 2);
        two = f.solve(B);
      }
      const double diff = (one - ref).norm() / ref.norm();
      const double res = (K * one - B).norm() / B.norm();
      test::report((name + " tree vs cholmod, k = " + std::to_string(k)).c_str(), diff, 1e-12);
      EXPECT_LE(diff, 1e-12) << name << " k = " << k;
      EXPECT_LE(res, 1e-10) << name << " k = " << k;
      EXPECT_EQ(0, std::memcmp(one.data(), two.data(), sizeof(double) * static_cast<size_t>(one.size())))
          << name << " k = " << k << ": 1 and 2 threads differ";
      // A block with an outer stride (rows of a taller matrix).
      Eigen::MatrixXd tall = Eigen::MatrixXd::Zero(K.rows() + 5, k);
      tall.topRows(K.rows()) = B;
      f.solve_in_place(tall.topRows(K.rows()));
      EXPECT_EQ(0, std::memcmp(tall.topRows(K.rows()).eval().data(), one.data(),
                               sizeof(double) * static_cast<size_t>(one.size())))
          << name << " k = " << k << ": strided block";
      EXPECT_TRUE(tall.bottomRows(5).isZero()) << name;
    }
  }
}
