// The GPU solve's schedule, run on the host (gpu::solve_reference), against CHOLMOD's own solve:
// the levels, relative maps, inverted diagonal blocks and chunked partial sums must reproduce
// A⁻¹ b to round-off on a factor whose top supernodes span several tiles and chunks.
#include <gtest/gtest.h>

#include <random>
#include <xpd/core/error.hpp>
#include <xpd/gpu/supernodal_plan.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/schur.hpp>

namespace xpd {

namespace {
Model box_model(int n) {
  ModelDesc d;
  d.mesh = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  for (int i = 0; i < n * n; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  return build_model(d);
}
}  // namespace

TEST(SupernodalPlan, HostReferenceEqualsCholmodOnBox20) {
  const Model model = box_model(20);
  const SupernodalFactorView view = model.factor().supernodal_factor();
  ASSERT_GT(view.nsuper, 0) << "the default CHOLMOD factor is supernodal";
  const gpu::SupernodalPlan plan = gpu::make_supernodal_plan(view);
  // The schedule must exercise what the kernels do: several levels, a top supernode wider than one
  // forward chunk and one backward row chunk, children gathered into parents.
  int widest = 0;
  for (int s = 0; s < plan.nsuper; ++s) widest = std::max(widest, plan.ncols[s]);
  EXPECT_GT(widest, gpu::SupernodalTiles::kRowChunk);
  EXPECT_GE(plan.levels, 5);
  EXPECT_EQ(plan.level_offsets.back(), plan.nsuper);

  const long n = model.num_nodes();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const int k : {1, 3, 5}) {
    Eigen::MatrixXd B(n, k);
    for (long i = 0; i < B.size(); ++i) B.data()[i] = u(rng);
    Eigen::MatrixXd X = B, ref = B;
    gpu::solve_reference(plan, X.data(), k);
    model.factor().solve_in_place(ref);
    EXPECT_LE((X - ref).norm() / ref.norm(), 1e-12) << "k = " << k;
    const double residual = (model.matrix() * X - B).norm() / B.norm();
    EXPECT_LE(residual, 1e-12) << "k = " << k;
  }
}

// The x2-last factor of the Schur factorization (the device's Algorithm 1 uploads it): the plan
// solves K, its trailing m rows are the region in factor_position order, and its trailing block is
// the L22 that SchurFactorization extracted (so the device's g2 = L22 y2 is the CPU's).
TEST(SupernodalPlan, SchurFactorizationsFactorSolvesKWithTheRegionLast) {
  const Model model = box_model(12);
  const long n = model.num_nodes();
  std::vector<int> region;
  for (int i = 0; i < n; ++i)
    if (model.rest_positions()(i, 2) > 0.75) region.push_back(i);
  const SchurFactorization S(model.matrix(), region);
  const SupernodalFactorCopy copy = S.supernodal_factor();
  ASSERT_GT(copy.nsuper, 0);
  const SupernodalFactorView view = copy.view();
  const int m = S.m();
  const long n1 = n - m;
  for (int i = 0; i < m; ++i) ASSERT_EQ(view.perm[n1 + S.factor_position(i)], region[static_cast<size_t>(i)]);
  const gpu::SupernodalPlan plan = gpu::make_supernodal_plan(view);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::MatrixXd B(n, 3);
  for (long i = 0; i < B.size(); ++i) B.data()[i] = u(rng);
  Eigen::MatrixXd X = B;
  gpu::solve_reference(plan, X.data(), 3);
  EXPECT_LE((model.matrix() * X - B).norm() / B.norm(), 1e-12);
  // L22 read straight from the supernodal values equals schur_factor().
  double worst = 0;
  for (long sn = 0; sn < view.nsuper; ++sn) {
    const long nrows = view.pi[sn + 1] - view.pi[sn];
    for (long c = view.super[sn]; c < view.super[sn + 1]; ++c) {
      if (c < n1) continue;
      for (long r = 0; r < nrows; ++r) {
        const long row = view.s[view.pi[sn] + r];
        if (row < c) continue;
        const double v = view.x[view.px[sn] + (c - view.super[sn]) * nrows + r];
        worst = std::max(worst, std::abs(v - S.schur_factor()(row - n1, c - n1)));
      }
    }
  }
  EXPECT_LE(worst, 1e-12 * S.schur_factor().cwiseAbs().maxCoeff());
}

TEST(SupernodalPlan, RefusesAFactorThatIsNotSupernodal) {
  EXPECT_THROW(gpu::make_supernodal_plan(SupernodalFactorView{}), SolverError);
  ModelDesc d;
  d.mesh = make_box(4, 4, 4, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  for (int i = 0; i < 16; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  d.backend = CholeskyBackend::Eigen;
  const Model model = build_model(d);
  EXPECT_EQ(model.factor().supernodal_factor().nsuper, 0);
  EXPECT_THROW(gpu::make_supernodal_plan(model.factor().supernodal_factor()), SolverError);
}

}  // namespace xpd
