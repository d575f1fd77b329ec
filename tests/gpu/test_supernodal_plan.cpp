// The GPU solve's schedule, run on the host (gpu::solve_reference), against CHOLMOD's own solve:
// the levels, relative maps, inverted diagonal blocks and chunked partial sums must reproduce
// A⁻¹ b to round-off on a factor whose top supernodes span several tiles and chunks.
#include <gtest/gtest.h>

#include <random>
#include <xpd/core/error.hpp>
#include <xpd/gpu/supernodal_plan.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>

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
