// The λ volume term of corotated elasticity (energy/volume.hpp) and the line-searched global step it
// needs (pd_solver.hpp): PD equals the Newton oracle, monotone energy, patch test, the isotropic
// matrix is the rotation average of the coupled one, and the refusals (Chebyshev, collisions).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <xpd/collision/contact.hpp>
#include <xpd/core/error.hpp>
#include <xpd/energy/volume.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "energy/tet_kernel.hpp"
#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {

struct NoContacts final : ContactDetector {
  void detect(const Points&, double, std::vector<ProxyContact>& contacts) override { contacts.clear(); }
};

const char* name_of(VolumeMatrix m) { return m == VolumeMatrix::Coupled ? "coupled" : "isotropic"; }

// Loaded cantilever-like box with λ = 2 μ per tet (ν = 1/3) and a point load.
// The load is large (several element lengths of sag) but inverts no tet: the corotated volume term
// has twist-mode Hessian eigenvalues 2λ(Σσ − 3)/(σ_i + σ_j), unbounded below near inversion under
// compression, and at 2–4× this load neither PD nor Newton converges on this box.
ModelDesc volume_desc(VolumeMatrix matrix, double gravity = 100.0) {
  ModelDesc d = test::loaded_desc(test::jittered_box(6), gravity);
  d.lambda.resize(d.mu.size());
  for (size_t t = 0; t < d.mu.size(); ++t) d.lambda[t] = 2.0 * d.mu[t];
  d.nodal_forces = Points::Zero(d.mesh.nodes.rows(), 3);
  d.nodal_forces(d.mesh.nodes.rows() - 1, 1) = 20.0;
  d.volume_matrix = matrix;
  return d;
}

}  // namespace

TEST(SolverVolume, ModelSwitchesToTheCoupledMatrixOnlyWhenAsked) {
  ModelDesc d = volume_desc(VolumeMatrix::Coupled);
  const Model coupled = build_model(d);
  EXPECT_TRUE(coupled.coupled());
  EXPECT_TRUE(coupled.has_volume_term());
  EXPECT_EQ(coupled.matrix3().rows(), 3 * coupled.num_nodes());
  EXPECT_EQ(coupled.factor().rows(), 3 * coupled.num_nodes());
  // matrix3 = matrix ⊗ I₃ + the volume term's rest Hessian, which couples the coordinates.
  const Eigen::SparseMatrix<double>& K3 = coupled.matrix3();
  EXPECT_LE((K3 - Eigen::SparseMatrix<double>(K3.transpose())).norm(), 1e-12 * K3.norm());
  double cross = 0.0;
  for (int j = 0; j < K3.outerSize(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(K3, j); it; ++it)
      if (it.row() % 3 != j % 3) cross = std::max(cross, std::abs(it.value()));
  EXPECT_GT(cross, 0.0);
  d.volume_matrix = VolumeMatrix::Isotropic;
  const Model iso = build_model(d);
  EXPECT_FALSE(iso.coupled());
  EXPECT_TRUE(iso.has_volume_term());
  EXPECT_EQ(iso.factor().rows(), iso.num_nodes());
  EXPECT_EQ(iso.matrix3().rows(), 0);
  d.lambda.assign(1, 0.0);
  const Model none = build_model(d);
  EXPECT_FALSE(none.has_volume_term());
  EXPECT_FALSE(none.coupled());
  // Negative or non-finite λ, and a wrong count, are rejected by name.
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    d.lambda.assign(1, bad);
    EXPECT_THROW(build_model(d), SolverError);
  }
  d.lambda.assign(3, 1.0);
  EXPECT_THROW(build_model(d), SolverError);
}

TEST(SolverVolume, IsotropicMatrixIsTheRotationAverageOfTheFrozenHessian) {
  // The isotropic matrix (w/3) g_a·g_b ⊗ I₃ equals the average of the Hessian of
  // Ê(x, R) = w/2 (R:F − 3)² over the 24 rotations of the cube: the group's 3-D representation is
  // irreducible, so the average of vec(R) vec(R)ᵀ is I₉/3 exactly (Schur orthogonality).
  const TetMesh mesh = test::jittered_box(3);
  std::vector<int> ids(static_cast<size_t>(mesh.tets.rows()));
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<double> half_lambda(ids.size(), 250.0);
  const VolumeTerm term(make_tet_elements(mesh, ids, half_lambda), VolumeMatrix::Isotropic);
  const int n = static_cast<int>(mesh.nodes.rows());
  std::vector<Triplet> trip;
  term.add_matrix(trip);
  Eigen::SparseMatrix<double> K(n, n);
  K.setFromTriplets(trip.begin(), trip.end());
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Points v(n, 3);
  for (Eigen::Index i = 0; i < v.size(); ++i) v.data()[i] = u(rng);
  const Points Kv = K * v;
  // The 24 proper signed permutation matrices.
  std::vector<Mat3> group;
  const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (const auto& p : perms)
    for (int signs = 0; signs < 8; ++signs) {
      Mat3 R = Mat3::Zero();
      for (int r = 0; r < 3; ++r) R(r, p[r]) = (signs >> r & 1) ? -1.0 : 1.0;
      if (R.determinant() > 0) group.push_back(R);
    }
  ASSERT_EQ(group.size(), 24u);
  Points avg = Points::Zero(n, 3);
  std::vector<double> proj(9 * static_cast<size_t>(term.num_constraints()));
  for (const Mat3& R : group) {
    for (int k = 0; k < term.num_constraints(); ++k) std::copy(R.data(), R.data() + 9, proj.data() + 9 * k);
    // Ê(·, R) is quadratic: the central difference of its force is its Hessian times v, exactly.
    Points fp = Points::Zero(n, 3), fm = Points::Zero(n, 3);
    term.add_force_given(mesh.nodes + v, {}, proj.data(), fp);
    term.add_force_given(mesh.nodes - v, {}, proj.data(), fm);
    avg -= (fp - fm) / 2.0;
  }
  avg /= 24.0;
  test::report("isotropic matrix vs rotation average", (avg - Kv).norm() / Kv.norm(), 1e-12);
  EXPECT_LE((avg - Kv).norm(), 1e-12 * Kv.norm());
}

TEST(SolverVolume, ConvergedPdMatchesNewtonWithBothMatrices) {
  for (VolumeMatrix matrix : {VolumeMatrix::Coupled, VolumeMatrix::Isotropic}) {
    SCOPED_TRACE(name_of(matrix));
    const Model model = build_model(volume_desc(matrix));
    const test::PdNewtonResult r = test::pd_vs_newton(model, test::anderson_options(20000, 1e-11));
    EXPECT_TRUE(r.pd.converged) << "residual " << r.pd.residual << " after " << r.pd.iterations;
    EXPECT_TRUE(r.newton.converged) << "Newton gradient " << r.newton.gradient_norm;
    test::report("PD (volume term) vs Newton", r.error, 1e-6);
    EXPECT_LE(r.error, 1e-6);
    EXPECT_GT(r.displacement, 0.02);  // large deformation
    if (test::verbose())
      std::printf("  %s: PD %d iterations (%d line-search halvings, %d Anderson rejections), Newton %d\n",
                  name_of(matrix), r.pd.iterations, r.pd.line_search_halvings, r.pd.anderson_rejections,
                  r.newton.iterations);
  }
}

TEST(SolverVolume, VolumeTermResistsCompression) {
  // The same load with λ = 0 and λ = 2μ: the volume term keeps det F closer to 1.
  auto volume_change = [](const ModelDesc& d) {
    const Model model = build_model(d);
    State s = make_state(model);
    EXPECT_TRUE(step(model, s, test::anderson_options(5000, 1e-8)).converged);
    double worst = 0.0;
    for (Eigen::Index t = 0; t < model.tets().rows(); ++t) {
      Mat3 Ds, Dm;
      for (int c = 0; c < 3; ++c) {
        Ds.col(c) = (s.x.row(model.tets()(t, c + 1)) - s.x.row(model.tets()(t, 0))).transpose();
        Dm.col(c) =
            (model.rest_positions().row(model.tets()(t, c + 1)) - model.rest_positions().row(model.tets()(t, 0)))
                .transpose();
      }
      worst = std::max(worst, std::abs(Ds.determinant() / Dm.determinant() - 1.0));
    }
    return worst;
  };
  ModelDesc d = volume_desc(VolumeMatrix::Coupled);
  const double with = volume_change(d);
  d.lambda.clear();
  const double without = volume_change(d);
  if (test::verbose()) std::printf("  max |det F - 1|: lambda = 2 mu %.4f, lambda = 0 %.4f\n", with, without);
  EXPECT_LT(with, 0.75 * without);
}

TEST(SolverVolume, EnergyNeverIncreasesAlongIterations) {
  for (VolumeMatrix matrix : {VolumeMatrix::Coupled, VolumeMatrix::Isotropic})
    for (bool anderson : {false, true}) {
      SCOPED_TRACE(std::string(name_of(matrix)) + (anderson ? " + Anderson" : ""));
      const Model model = build_model(volume_desc(matrix, 800.0));
      double prev = std::numeric_limits<double>::infinity();
      int halvings = 0;
      for (int k = 1; k <= 30; ++k) {
        State s = make_state(model);
        SolverOptions o;
        o.max_iterations = k;
        o.rel_tolerance = 0.0;
        o.anderson = anderson;
        const FrameStats st = step(model, s, o);
        EXPECT_LE(st.energy, prev + 1e-12 * std::abs(prev)) << "iteration " << k;
        prev = st.energy;
        halvings = st.line_search_halvings;
      }
      if (test::verbose())
        std::printf("  %s%s: %d line-search halvings in 30 iterations\n", name_of(matrix),
                    anderson ? " + Anderson" : "", halvings);
    }
}

TEST(SolverVolume, PatchTestReproducesAffineBoundaryMotion) {
  for (VolumeMatrix matrix : {VolumeMatrix::Coupled, VolumeMatrix::Isotropic}) {
    SCOPED_TRACE(name_of(matrix));
    ModelDesc d;
    d.mesh = test::jittered_box(5, 0.2);
    d.mu = {1e3};
    d.lambda = {4e3};
    d.volume_matrix = matrix;
    const Mat3 A = Eigen::AngleAxisd(0.4, Vec3(0.2, 1, 0.5).normalized()).toRotationMatrix() *
                   (Mat3() << 1.2, 0.1, 0.0, 0.05, 0.85, 0.1, 0.0, 0.0, 0.9).finished();
    const test::PatchTestResult r = test::patch_test(d, A, Vec3(0.1, -0.2, 0.3), test::anderson_options(20000, 1e-12));
    EXPECT_LE(r.interior_force, 1e-12);
    EXPECT_TRUE(r.converged);
    test::report("patch test (volume term)", r.error, 1e-10);
    EXPECT_LE(r.error, 1e-10);
  }
}

TEST(SolverVolume, ChebyshevAndCollisionsAreRefusedByName) {
  const Model model = build_model(volume_desc(VolumeMatrix::Coupled));
  State s = make_state(model);
  SolverOptions o;
  o.accelerator = Accelerator::Chebyshev;
  try {
    step(model, s, o);
    FAIL() << "expected a SolverError";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("Chebyshev"), std::string::npos) << e.what();
  }
  ProxySet proxies;
  NoContacts none;
  try {
    CollisionSolver c(model, proxies, {}, none, {});
    FAIL() << "expected a SolverError";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("lambda"), std::string::npos) << e.what();
  }
}

TEST(SolverVolume, BatchedKernelMatchesThePerElementPathAndIsBitwiseAcrossBuilds) {
  const Model model = build_model(volume_desc(VolumeMatrix::Coupled));
  const Term* term = nullptr;
  for (const auto& t : model.terms())
    if (t->name() == "volume") term = t.get();
  ASSERT_NE(term, nullptr);
  const auto& elements = static_cast<const VolumeTerm*>(term)->elements();
  // A bent, twisted, compressed state with a few inverted elements.
  Points x = model.rest_positions();
  std::mt19937 rng(2);
  std::normal_distribution<double> nd(0.0, 0.08);
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    const double z = x(i, 2), c = std::cos(0.6 * z), s = std::sin(0.6 * z), x0 = x(i, 0), y0 = x(i, 1);
    x(i, 0) = 0.9 * (c * x0 - s * y0) + nd(rng);
    x(i, 1) = 0.9 * (s * x0 + c * y0) + nd(rng);
    x(i, 2) = 0.8 * z + nd(rng);
  }
  const FrameInputs& in = model.initial_inputs();
  const size_t np = 9 * static_cast<size_t>(term->num_constraints());
  Points f_fast = Points::Zero(x.rows(), 3), f_ref = Points::Zero(x.rows(), 3);
  std::vector<double> p_fast(np), p_ref(np);
  const double e_fast = term->project_add_force(x, in, f_fast, p_fast.data());
  term->project(x, in, p_ref.data());
  const double e_ref = term->energy_given(x, in, p_ref.data());
  term->add_force_given(x, in, p_ref.data(), f_ref);
  EXPECT_NEAR(e_fast, e_ref, 1e-12 * std::abs(e_ref));
  EXPECT_LE((f_fast - f_ref).norm(), 1e-11 * f_ref.norm());
  double dp = 0.0;
  for (size_t i = 0; i < np; ++i) dp = std::max(dp, std::abs(p_fast[i] - p_ref[i]));
  EXPECT_LE(dp, 1e-12);
  if (const auto avx2 = detail::volume_range_variant(1)) {
    Points fb = Points::Zero(x.rows(), 3), fa = Points::Zero(x.rows(), 3);
    std::vector<double> pb(np), pa(np);
    const double eb = detail::corotated_project_add_force(elements, x, fb, pb.data(), detail::volume_range_variant(0));
    const double ea = detail::corotated_project_add_force(elements, x, fa, pa.data(), avx2);
    EXPECT_EQ(eb, ea);
    EXPECT_EQ(0, std::memcmp(fb.data(), fa.data(), sizeof(double) * static_cast<size_t>(fb.size())));
    EXPECT_EQ(0, std::memcmp(pb.data(), pa.data(), sizeof(double) * np));
  }
}
