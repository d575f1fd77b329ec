// Conformance of the sparse Cholesky backends (CHOLMOD supernodal vs Eigen SimplicialLLT).
#include <gtest/gtest.h>

#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

#include "solver/pd_fixtures.hpp"

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
