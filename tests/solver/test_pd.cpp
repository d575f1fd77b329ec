// PD drivers: monotone energy, patch test, invariances, determinism, agreement with Newton,
// shape targeting, implicit Euler properties.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <numeric>
#include <random>
#include <xpd/core/error.hpp>
#include <xpd/core/threads.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "bench_collisions.hpp"
#include "bench_core.hpp"
#include "solver/pd_fixtures.hpp"
#include "test_util.hpp"

using namespace xpd;

namespace {

double max_node_distance(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

SolverOptions tight(int max_iterations = 20000, bool anderson = true) {
  SolverOptions o;
  o.max_iterations = max_iterations;
  o.rel_tolerance = 1e-12;
  o.anderson = anderson;
  return o;
}

// An unattached jittered box integrated by implicit Euler (no loads).
// variant 0: λ = 0; 1, 2: the volume term (λ = 2μ) with the coupled / isotropic matrix.
ModelDesc free_body_desc(int variant = 0) {
  ModelDesc d;
  d.mesh = test::jittered_box(5);
  d.mu = {500.0};
  if (variant > 0) {
    d.lambda = {1000.0};
    d.volume_matrix = variant == 1 ? VolumeMatrix::Coupled : VolumeMatrix::Isotropic;
  }
  d.density = {50.0};
  d.integrator = Integrator::ImplicitEuler;
  d.time_step = 0.01;
  return d;
}
const char* const kVariants[] = {"lambda = 0", "volume term, coupled matrix", "volume term, isotropic matrix"};

}  // namespace

TEST(SolverPd, EnergyNeverIncreasesAcrossLocalAndGlobalSteps) {
  for (bool strain_limit : {false, true}) {
    ModelDesc d = test::loaded_desc(test::jittered_box(5), 200.0);
    if (strain_limit)
      for (int t = 0; t < d.mesh.tets.rows(); t += 2) d.strain_limits.push_back({t, 5e3, 0.95, 1.05});
    for (int t = 0; t < d.mesh.tets.rows(); t += 5) d.shape_targets.push_back({t, {0.1, 0.02, 0, -0.05, 0, 0.03}});
    const Model model = build_model(d);
    State s = make_state(model);
    test::expect_monotone_pd_energy(model, s, 30);
  }
}

TEST(SolverPd, AndersonKeepsEnergyMonotoneAndConvergesFaster) {
  const ModelDesc d = test::loaded_desc(test::jittered_box(5), 300.0);
  const Model model = build_model(d);
  SolverOptions plain;
  plain.max_iterations = 5000;
  plain.rel_tolerance = 1e-8;
  SolverOptions aa = plain;
  aa.anderson = true;
  State s1 = make_state(model), s2 = make_state(model);
  const FrameStats a = step(model, s1, plain);
  const FrameStats b = step(model, s2, aa);
  EXPECT_TRUE(a.converged);
  EXPECT_TRUE(b.converged);
  EXPECT_LT(b.iterations, a.iterations);
  EXPECT_LE(max_node_distance(s1.x, s2.x), 1e-5 * test::bbox_diagonal(s1.x));
  if (test::verbose())
    std::printf("  plain %d iterations, anderson %d (%d rejected)\n", a.iterations, b.iterations,
                b.anderson_rejections);
  // Energy along the accelerated iterates never increases.
  State s3 = make_state(model);
  double prev = std::numeric_limits<double>::infinity();
  for (int k = 1; k <= 40; ++k) {
    State s = make_state(model);
    SolverOptions o = aa;
    o.max_iterations = k;
    o.rel_tolerance = 0.0;
    const FrameStats st = step(model, s, o);
    EXPECT_LE(st.energy, prev + 1e-12 * std::abs(prev));
    prev = st.energy;
  }
}

TEST(SolverPd, PatchTestReproducesAffineBoundaryMotion) {
  ModelDesc d;
  d.mesh = test::jittered_box(5, 0.2);
  d.mu = {1e3};
  const Mat3 A = Eigen::AngleAxisd(0.4, Vec3(0.2, 1, 0.5).normalized()).toRotationMatrix() *
                 (Mat3() << 1.2, 0.1, 0.0, 0.05, 0.9, 0.1, 0.0, 0.0, 1.1).finished();
  const test::PatchTestResult r = test::patch_test(d, A, Vec3(0.1, -0.2, 0.3), tight());
  test::report("interior force at affine state", r.interior_force, 1e-12);
  EXPECT_LE(r.interior_force, 1e-12);
  EXPECT_TRUE(r.converged);
  test::report("patch test", r.error, 1e-10);
  EXPECT_LE(r.error, 1e-10);
}

TEST(SolverPd, RenumberingAndGlobalRotationGiveTheRotatedResult) {
  const ModelDesc d = test::loaded_desc(test::jittered_box(5), 150.0);
  const Model m1 = build_model(d);
  State s1 = make_state(m1);
  EXPECT_TRUE(step(m1, s1, tight()).converged);

  // Rotate everything and renumber nodes and tets randomly.
  const Mat3 Q = Eigen::AngleAxisd(1.1, Vec3(-0.3, 0.8, 0.4).normalized()).toRotationMatrix();
  const Vec3 shift(3, -1, 2);
  const int nv = static_cast<int>(d.mesh.nodes.rows()), nt = static_cast<int>(d.mesh.tets.rows());
  std::vector<int> perm(static_cast<size_t>(nv)), tperm(static_cast<size_t>(nt));
  std::iota(perm.begin(), perm.end(), 0);
  std::iota(tperm.begin(), tperm.end(), 0);
  std::mt19937 rng(17);
  std::shuffle(perm.begin(), perm.end(), rng);  // old node i → new node perm[i]
  std::shuffle(tperm.begin(), tperm.end(), rng);
  auto move = [&](const Vec3& p) { return Vec3(Q * p + shift); };
  ModelDesc d2 = d;
  for (int i = 0; i < nv; ++i)
    d2.mesh.nodes.row(perm[static_cast<size_t>(i)]) = move(d.mesh.nodes.row(i).transpose()).transpose();
  for (int t = 0; t < nt; ++t) {
    const int nt2 = tperm[static_cast<size_t>(t)];
    for (int a = 0; a < 4; ++a) d2.mesh.tets(nt2, a) = perm[static_cast<size_t>(d.mesh.tets(t, a))];
    d2.mu[static_cast<size_t>(nt2)] = d.mu[static_cast<size_t>(t)];
  }
  for (auto& a : d2.attachments) {
    a.point.nodes[0] = perm[static_cast<size_t>(a.point.nodes[0])];
    a.target = move(a.target);
  }
  d2.gravity = Q * d.gravity;
  const Model m2 = build_model(d2);
  State s2 = make_state(m2);
  EXPECT_TRUE(step(m2, s2, tight()).converged);
  double err = 0;
  for (int i = 0; i < nv; ++i)
    err = std::max(err, (s2.x.row(perm[static_cast<size_t>(i)]).transpose() - move(s1.x.row(i).transpose())).norm());
  err /= test::bbox_diagonal(s1.x);
  test::report("renumber+rotate", err, 1e-10);
  EXPECT_LE(err, 1e-10);
  EXPECT_GT(max_node_distance(s1.x, m1.rest_positions()), 1e-3);  // the load did deform the body
}

TEST(SolverPd, BitwiseDeterministicAtFixedThreadCount) {
  ModelDesc d = test::loaded_desc(test::jittered_box(9), 200.0);
  for (int t = 0; t < d.mesh.tets.rows(); t += 3) d.strain_limits.push_back({t, 5e3, 0.9, 1.1});
  const Model model = build_model(d);
  auto run = [&](int threads) {
    tbb::global_control c(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
    State s = make_state(model);
    SolverOptions o;
    o.max_iterations = 15;
    o.anderson = true;
    for (int f = 0; f < 3; ++f) {
      s.inputs.attachment_targets.col(2).array() += 0.01;
      step(model, s, o);
    }
    return s.x;
  };
  const Points a = run(2), b = run(2), c = run(1);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())));
  // The colouring + fixed-grain reduction make results independent of the thread count too.
  EXPECT_EQ(0, std::memcmp(a.data(), c.data(), sizeof(double) * static_cast<size_t>(a.size())));
}

TEST(SolverPd, ConvergedEquilibriumMatchesNewton) {
  for (bool strain_limit : {false, true}) {
    SCOPED_TRACE(strain_limit ? "with strain limiting" : "corotated only");
    ModelDesc d = test::loaded_desc(test::jittered_box(6), 400.0);
    d.nodal_forces = Points::Zero(d.mesh.nodes.rows(), 3);
    d.nodal_forces(d.mesh.nodes.rows() - 1, 1) = 20.0;  // a point load at the far corner
    if (strain_limit)
      for (int t = 0; t < d.mesh.tets.rows(); ++t) d.strain_limits.push_back({t, 2e4, 0.9, 1.1});
    const Model model = build_model(d);
    const test::PdNewtonResult r = test::pd_vs_newton(model, test::anderson_options(20000, 1e-11));
    EXPECT_TRUE(r.pd.converged) << "residual " << r.pd.residual << " after " << r.pd.iterations;
    EXPECT_TRUE(r.newton.converged) << "Newton gradient " << r.newton.gradient_norm;
    test::report(strain_limit ? "PD vs Newton (strain limit)" : "PD vs Newton", r.error, 1e-6);
    EXPECT_LE(r.error, 1e-6);
    EXPECT_GT(r.displacement, 0.02);  // large deformation
    if (test::verbose()) std::printf("  PD %d iterations, Newton %d\n", r.pd.iterations, r.newton.iterations);
  }
}

TEST(SolverPd, ShapeTargetScalesAnUnattachedBodyUniformly) {
  const double s_target = 1.25;
  ModelDesc d;
  d.mesh = test::jittered_box(5);
  d.mu = {100.0};
  for (int t = 0; t < d.mesh.tets.rows(); ++t)
    d.shape_targets.push_back({t, {s_target - 1, 0, 0, s_target - 1, 0, s_target - 1}});
  EXPECT_THROW(build_model(d), SolverError);  // no attachment: singular without the exception
  d.allow_unattached = true;
  const Model model = build_model(d);
  State s = make_state(model);
  EXPECT_TRUE(step(model, s, tight(2000)).converged);
  const auto* term = dynamic_cast<const TetTerm*>(model.terms()[0].get());
  ASSERT_NE(term, nullptr);
  double err = 0;
  for (int k = 0; k < term->elements().size(); ++k)
    err = std::max(err, (deformation_gradient(term->elements(), k, s.x) - s_target * Mat3::Identity()).norm());
  test::report("shape target F - sI", err, 1e-8);
  EXPECT_LE(err, 1e-8);
}

TEST(SolverImplicitEuler, ConservesLinearMomentumOfAFreeBody) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(kVariants[variant]);
    const Model model = build_model(free_body_desc(variant));
    State s = make_state(model);
    std::mt19937 rng(2);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (Eigen::Index i = 0; i < s.velocity.size(); ++i) s.velocity.data()[i] = u(rng);
    const Eigen::RowVector3d p0 = model.masses().transpose() * s.velocity;
    SolverOptions o;
    o.max_iterations = 30;
    for (int f = 0; f < 20; ++f) step(model, s, o);
    const Eigen::RowVector3d p1 = model.masses().transpose() * s.velocity;
    const double scale = (model.masses().transpose() * s.velocity.cwiseAbs()).norm();
    test::report("momentum drift", (p1 - p0).norm() / scale, 1e-10);
    EXPECT_LE((p1 - p0).norm(), 1e-10 * scale);
  }
}

TEST(SolverImplicitEuler, EnergyDecaysWithoutExternalForces) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(kVariants[variant]);
    const Model model = build_model(free_body_desc(variant));
    State s = make_state(model);
    s.x = 1.2 * s.x;  // released from a stretched state
    auto total = [&] {
      double e = 0;
      for (Eigen::Index i = 0; i < s.x.rows(); ++i) e += 0.5 * model.masses()(i) * s.velocity.row(i).squaredNorm();
      for (const auto& t : model.terms())
        if (t->name() == "corotated" || t->name() == "volume") e += t->energy(s.x, s.inputs);
      return e;
    };
    double prev = total();
    const double e0 = prev;
    SolverOptions o;
    o.max_iterations = 200;
    o.rel_tolerance = 1e-9;
    for (int f = 0; f < 40; ++f) {
      step(model, s, o);
      const double e = total();
      EXPECT_LE(e, prev * (1 + 1e-9)) << "frame " << f;
      prev = e;
    }
    EXPECT_LT(prev, 0.5 * e0);
  }
}

TEST(SolverPd, PerFrameTargetsAndLoadsWithoutRefactorization) {
  const ModelDesc d = test::loaded_desc(test::jittered_box(4), 0.0);
  const Model model = build_model(d);
  State s = make_state(model);
  const double factor_ms = model.factor().info().factorize_ms;
  SolverOptions o = tight(5000);
  for (int f = 0; f < 3; ++f) {
    s.inputs.attachment_targets.col(1).array() += 0.05;  // drag the attached face sideways
    const FrameStats st = step(model, s, o);
    EXPECT_TRUE(st.converged);
    EXPECT_GE(st.timings_ms.local, 0.0);
    EXPECT_GT(st.wall_ms, 0.0);
  }
  // Rigid translation of the whole body follows the targets (no other load).
  const double dy = 0.15;
  EXPECT_LE((s.x.col(1).array() - model.rest_positions().col(1).array() - dy).abs().maxCoeff(), 1e-9);
  EXPECT_EQ(factor_ms, model.factor().info().factorize_ms);
}

TEST(SolverPd, NonFiniteInputsThrowTypedErrors) {
  const ModelDesc d = test::loaded_desc(test::jittered_box(3));
  const Model model = build_model(d);
  State s = make_state(model);
  s.inputs.attachment_targets(0, 0) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(step(model, s), SolverError);
  State s2 = make_state(model);
  s2.x(3, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THROW(step(model, s2), SolverError);
}

TEST(SolverBench, CoreBenchRunsOnASmallBox) {
  const CoreBenchResult r = bench_core(6, 3, 1);
  EXPECT_EQ(r.nodes, 216);
  EXPECT_EQ(r.tets, 750);
  EXPECT_GT(r.pd_iteration_ms, 0.0);
  EXPECT_GT(r.solve_3rhs_ms, 0.0);
  EXPECT_NE(r.to_json().find("\"pd_iteration_ms\""), std::string::npos);
  // With the volume term: the coupled factor is of order 3n, the isotropic one of order n.
  const CoreBenchResult c = bench_core(6, 3, 1, 2e4, VolumeMatrix::Coupled);
  const CoreBenchResult i = bench_core(6, 3, 1, 2e4, VolumeMatrix::Isotropic);
  EXPECT_GT(c.nnz_L, 3.0 * r.nnz_L);
  EXPECT_EQ(i.nnz_L, r.nnz_L);
  EXPECT_GT(c.solve_3rhs_ms, 0.0);
  EXPECT_NE(c.to_json().find("\"volume_matrix\": \"coupled\""), std::string::npos);
}

// `xpd bench core --mesh FILE --scaling`: a real mesh, timed on 1 thread (TBB and OpenBLAS both
// capped, restored afterwards) and on 2, with the factor bandwidth and CHOLMOD's serial solve
// measured beside the default one.
TEST(SolverBench, CoreScalingOnAMeshFileCapsBothThreadPools) {
  const int blas_before = blas_threads();
  CoreBenchConfig c;
  c.mesh = test::data_path("libigl-tutorial-data/octopus-low.mesh");
  c.iterations = 2;
  c.threads = 2;
  const CoreScalingResult s = bench_core_scaling(c);
  EXPECT_EQ(s.one.mesh, "octopus-low.mesh");
  EXPECT_GT(s.one.nodes, 0);
  EXPECT_EQ(s.one.threads, 1);
  EXPECT_EQ(s.many.threads, 2);
  if (blas_before > 0) {  // OpenBLAS: capped to 1 in the one-thread leg, given back afterwards
    EXPECT_EQ(s.one.blas_threads, 1);
    EXPECT_EQ(blas_threads(), blas_before);
  }
  for (const CoreBenchResult* r : {&s.one, &s.many}) {
    EXPECT_GT(r->pd_iteration_ms, 0.0);
    EXPECT_GT(r->solve_gbps, 0.0);
    EXPECT_GT(r->cholmod_solve_3rhs_ms, 0.0);
  }
  EXPECT_GT(s.iteration_speedup, 0.0);
  EXPECT_NE(s.to_json().find("\"one_thread\""), std::string::npos);
  CoreBenchConfig bad = c;
  bad.up = 3;
  EXPECT_THROW(bench_core(bad), Error);
}

// `xpd bench collisions --scene FILE`: the Figure-4 phases on a scene's first contact state (the
// lips touch at frame 5), the plain PD iteration of the same model measured in the same run.
TEST(SolverBench, CollisionBenchOnASceneMeasuresItsFirstContactState) {
  SceneCollisionBenchOptions o;
  o.scene = std::string(XPD_SOURCE_DIR) + "/scenes/lips.json";
  o.iterations = 2;
  o.extra_inner = 1;
  const CollisionBenchResult r = bench_collisions_scene(o);
  EXPECT_EQ(r.frame, 5);
  EXPECT_GT(r.active_proxies, 0);
  EXPECT_GT(r.collision_nodes, 0);
  EXPECT_DOUBLE_EQ(r.sigma_inv_bytes, 2.0 * 8.0 * r.collision_nodes * static_cast<double>(r.collision_nodes));
  EXPECT_GT(r.nnz_L, r.nnz_L_unconstrained);  // the region ordered last costs fill
  EXPECT_GT(r.plain_iteration_ms, 0.0);
  EXPECT_GT(r.outer_1inner_ms, 0.0);
  EXPECT_GT(r.phases_1inner.forward, 0.0);
  EXPECT_GT(r.phases_1inner.schur_solve, 0.0);
  EXPECT_NE(r.to_json().find("\"scene\""), std::string::npos);
  o.frame = 99;
  EXPECT_THROW(bench_collisions_scene(o), Error);
  o.frame = 2;  // before the lobes touch
  EXPECT_THROW(bench_collisions_scene(o), Error);
  o.frame = 0;
  o.scene = std::string(XPD_SOURCE_DIR) + "/scenes/twist.json";  // no collision handling
  EXPECT_THROW(bench_collisions_scene(o), Error);
}
