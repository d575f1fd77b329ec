// Generic tests over every PD term: one finite-difference test, rest/rigid-motion invariance,
// robustness of projections. New terms are covered by adding them to kitchen_sink().
#include <gtest/gtest.h>

#include <random>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/strain_limit.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/solver/model.hpp>

#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {

// A model with every term type. `rest_free`: all terms have zero energy at rest (S = I, spring rest
// lengths = rest distances, targets at rest, no loads).
ModelDesc kitchen_sink(const TetMesh& mesh, bool rest_free) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.5, 1.5), b(-0.08, 0.08);
  const int nt = static_cast<int>(mesh.tets.rows());
  d.mu.resize(static_cast<size_t>(nt));
  for (auto& m : d.mu) m = 100.0 * u(rng);
  // The λ volume term on every tet but a few (per-tet λ, zero skipped).
  d.lambda.resize(static_cast<size_t>(nt));
  for (int t = 0; t < nt; ++t) d.lambda[static_cast<size_t>(t)] = t % 7 == 3 ? 0.0 : 150.0 * u(rng);
  for (int t = 0; t < nt; t += 3) {
    ShapeTargetDesc s;
    s.tet = t;
    if (!rest_free)
      for (auto& p : s.params) p = b(rng);
    d.shape_targets.push_back(s);
  }
  for (int t = 1; t < nt; t += 2) d.strain_limits.push_back({t, 300.0 * u(rng), 0.8, 1.2});
  test::attach_min_face(d, 2, 1e3);
  // A barycentric attachment inside tet 5.
  AttachmentDesc a;
  for (int k = 0; k < 4; ++k) {
    a.point.nodes[static_cast<size_t>(k)] = mesh.tets(5, k);
    a.point.weights[static_cast<size_t>(k)] = 0.1 + 0.1 * k;
  }
  a.stiffness = 500.0;
  a.target = a.point.eval(mesh.nodes);
  d.attachments.push_back(a);
  const int nv = static_cast<int>(mesh.nodes.rows());
  for (int k = 0; k < 6; ++k) {
    PointSpring s;
    s.a = BaryPoint::node((7 * k + 1) % nv);
    s.b = BaryPoint::node((13 * k + 5) % nv);
    s.stiffness = 50.0 * u(rng);
    const double rest = (s.a.eval(mesh.nodes) - s.b.eval(mesh.nodes)).norm();
    s.rest_length = (k % 2 == 0 || rest_free) ? rest : 0.0;
    if (rest_free && s.rest_length == 0.0) continue;
    d.springs.push_back(s);
  }
  if (!rest_free) {
    d.gravity = Vec3(0, 0, -9.81);
    d.nodal_forces = Points::Constant(nv, 3, 0.5);
  }
  return d;
}

Points deformed(const Points& X, double stretch, double noise, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Points x = stretch * X;
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] += noise * u(rng);
  return x;
}

Points rigidly_moved(const Points& x, const Mat3& Q, const Vec3& t) {
  Points y(x.rows(), 3);
  for (Eigen::Index i = 0; i < x.rows(); ++i) y.row(i) = (Q * x.row(i).transpose() + t).transpose();
  return y;
}

double dot(const Points& a, const Points& b) { return a.cwiseProduct(b).sum(); }

}  // namespace

TEST(EnergyTerms, GradientMatrixAndHessianMatchFiniteDifferences) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(kitchen_sink(mesh, /*rest_free=*/false));
  const int n = model.num_nodes();
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Points v(n, 3);
  for (Eigen::Index i = 0; i < v.size(); ++i) v.data()[i] = u(rng);
  // Stretched configuration: every term's Hessian is PSD there, so projection is the identity.
  const Points x = deformed(model.rest_positions(), 1.4, 0.01, 9);
  FrameInputs in = model.initial_inputs();
  for (const auto& term : model.terms()) {
    SCOPED_TRACE(std::string(term->name()));
    // (1) gradient vs central differences of E.
    const double eps = 1e-6;
    Points g = Points::Zero(n, 3);
    term->add_gradient(x, in, g);
    const double fd = (term->energy(x + eps * v, in) - term->energy(x - eps * v, in)) / (2 * eps);
    const double an = dot(g, v);
    test::report("gradient", std::abs(fd - an), 1e-6 * std::max(1.0, std::abs(an)));
    EXPECT_NEAR(fd, an, 1e-6 * std::max(1.0, std::abs(an)));
    // (2) the constant matrix is the Hessian of Ê(·, p) with p frozen (Ê is quadratic: exact): p
    // projected at x for PD terms (the 3n × 3n form add_matrix3 = add_matrix ⊗ I₃ checks both), at
    // the rest state (p = R = I) for the coupling volume term, whose matrix is its rest Hessian.
    std::vector<double> p(static_cast<size_t>(term->num_constraints() * term->projection_size()));
    term->project(term->couples_coordinates() ? model.rest_positions() : x, in, p.data());
    Points fp = Points::Zero(n, 3), fm = Points::Zero(n, 3);
    const double h = 1e-3;
    term->add_force_given(x + h * v, in, p.data(), fp);
    term->add_force_given(x - h * v, in, p.data(), fm);
    std::vector<Triplet> trip;
    term->add_matrix3(trip);
    Eigen::SparseMatrix<double> K3(3 * n, 3 * n);
    K3.setFromTriplets(trip.begin(), trip.end());
    const Eigen::VectorXd K3v = K3 * Eigen::Map<const Eigen::VectorXd>(v.data(), 3 * n);
    const Points Kv = Eigen::Map<const Points>(K3v.data(), n, 3);
    const Points fd_K = -(fp - fm) / (2 * h);
    const double kscale = std::max(1e-12, Kv.norm());
    test::report("matrix", (fd_K - Kv).norm() / kscale, 1e-8);
    EXPECT_LE((fd_K - Kv).norm(), 1e-8 * kscale + 1e-12);
    // Ê(x, p(x)) = E(x): the fused path and the split path agree.
    term->project(x, in, p.data());
    Points f1 = Points::Zero(n, 3), f2 = Points::Zero(n, 3);
    const double e1 = term->project_add_force(x, in, f1, nullptr);
    term->add_force_given(x, in, p.data(), f2);
    EXPECT_NEAR(e1, term->energy_given(x, in, p.data()), 1e-12 * std::max(1.0, std::abs(e1)));
    EXPECT_LE((f1 - f2).norm(), 1e-12 * std::max(1.0, f1.norm()));
    // (3) Newton Hessian vs central differences of the gradient.
    std::vector<Triplet> ht;
    term->add_hessian(x, in, ht);
    Eigen::SparseMatrix<double> H(3 * n, 3 * n);
    H.setFromTriplets(ht.begin(), ht.end());
    Eigen::VectorXd vv(3 * n);
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) vv(3 * i + d) = v(i, d);
    const Eigen::VectorXd Hv = H * vv;
    Points gp = Points::Zero(n, 3), gm = Points::Zero(n, 3);
    const double e2 = 1e-5;
    term->add_gradient(x + e2 * v, in, gp);
    term->add_gradient(x - e2 * v, in, gm);
    const Points fdH = (gp - gm) / (2 * e2);
    Eigen::VectorXd fdv(3 * n);
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) fdv(3 * i + d) = fdH(i, d);
    const double hscale = std::max(1e-9, Hv.norm());
    test::report("hessian", (fdv - Hv).norm() / hscale, 1e-5);
    EXPECT_LE((fdv - Hv).norm(), 1e-5 * hscale + 1e-9);
  }
}

TEST(EnergyTerms, ZeroAtRestAndUnderRigidMotion) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(kitchen_sink(mesh, /*rest_free=*/true));
  const int n = model.num_nodes();
  const Mat3 Q = Eigen::AngleAxisd(0.9, Vec3(1, 2, 3).normalized()).toRotationMatrix();
  const Vec3 t(0.3, -2.0, 5.0);
  const Points X = model.rest_positions();
  const Points Xd = deformed(X, 1.1, 0.02, 4);
  for (const auto& term : model.terms()) {
    SCOPED_TRACE(std::string(term->name()));
    FrameInputs in = model.initial_inputs();
    // Scales for the relative tolerance: energy / forces at a 10% deformation.
    Points fs = Points::Zero(n, 3);
    const double es = std::max(term->project_add_force(Xd, in, fs, nullptr), 1e-30);
    const double fscale = std::max(fs.norm(), 1e-30);
    for (int rigid = 0; rigid < 2; ++rigid) {
      const Points x = rigid ? rigidly_moved(X, Q, t) : X;
      FrameInputs inr = in;
      if (rigid) inr.attachment_targets = rigidly_moved(in.attachment_targets, Q, t);
      Points f = Points::Zero(n, 3);
      const double e = term->project_add_force(x, inr, f, nullptr);
      test::report("rest energy", std::abs(e) / es, 1e-12);
      EXPECT_LE(std::abs(e), 1e-12 * es);
      EXPECT_LE(f.norm(), 1e-12 * fscale);
      // Rotation invariance of a deformed state.
      if (rigid) {
        FrameInputs ind = inr;
        const double e_def = term->energy(rigidly_moved(Xd, Q, t), ind);
        const double e_ref = term->energy(Xd, in);
        if (term->name() != "attachment" && term->name() != "loads") {
          EXPECT_NEAR(e_def, e_ref, 1e-12 * std::max(1.0, std::abs(e_ref)));
        }
      }
    }
  }
}

TEST(EnergyTerms, ProjectionsFiniteForInvertedAndDegenerateElements) {
  const TetMesh mesh = test::jittered_box(3);
  const Model model = build_model(kitchen_sink(mesh, false));
  Points x = model.rest_positions();
  // Invert tet 0 (reflect node 0 through the plane of the other three), flatten tet 1, collapse tet 2.
  auto tet = [&](int t, int a) { return model.tets()(t, a); };
  {
    const Vec3 a = x.row(tet(0, 1)), b = x.row(tet(0, 2)), c = x.row(tet(0, 3));
    const Vec3 nrm = (b - a).cross(c - a).normalized();
    const Vec3 p = x.row(tet(0, 0));
    x.row(tet(0, 0)) = (p - 2.0 * (p - a).dot(nrm) * nrm).transpose();
  }
  {
    const Vec3 a = x.row(tet(1, 1)), b = x.row(tet(1, 2)), c = x.row(tet(1, 3));
    x.row(tet(1, 0)) = ((a + b + c) / 3.0).transpose();
  }
  for (int k = 1; k < 4; ++k) x.row(tet(2, k)) = x.row(tet(2, 0));
  for (const auto& term : model.terms()) {
    SCOPED_TRACE(std::string(term->name()));
    std::vector<double> p(static_cast<size_t>(term->num_constraints() * term->projection_size()));
    term->project(x, model.initial_inputs(), p.data());
    for (double v : p) ASSERT_TRUE(std::isfinite(v));
    Points f = Points::Zero(x.rows(), 3);
    EXPECT_TRUE(std::isfinite(term->project_add_force(x, model.initial_inputs(), f, nullptr)));
    EXPECT_TRUE(f.allFinite());
    if (term->name() == "corotated")
      for (int k = 0; k < term->num_constraints(); ++k) {
        const Eigen::Map<const Mat3> R(p.data() + 9 * k);
        EXPECT_LE((R.transpose() * R - Mat3::Identity()).norm(), 1e-10);
        EXPECT_NEAR(R.determinant(), 1.0, 1e-10);
      }
  }
}

TEST(EnergyTerms, StrainLimitProjectionWithinBounds) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(kitchen_sink(mesh, false));
  std::mt19937 rng(8);
  std::normal_distribution<double> nd(0.0, 0.15);
  Points x = model.rest_positions();
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] += nd(rng);  // large random strains, some inverted
  for (const auto& term : model.terms()) {
    const auto* sl = dynamic_cast<const StrainLimitTerm*>(term.get());
    if (!sl) continue;
    std::vector<double> p(static_cast<size_t>(sl->num_constraints() * 9));
    sl->project(x, model.initial_inputs(), p.data());
    int clamped = 0;
    for (int k = 0; k < sl->num_constraints(); ++k) {
      const SignedSvd3 s = signed_svd(Eigen::Map<const Mat3>(p.data() + 9 * k));
      for (int i = 0; i < 3; ++i) {
        EXPECT_GE(s.sigma(i), sl->limits(k)(0) - 1e-12);
        EXPECT_LE(s.sigma(i), sl->limits(k)(1) + 1e-12);
      }
      const Mat3 F = deformation_gradient(sl->elements(), k, x);
      clamped += (F - Eigen::Map<const Mat3>(p.data() + 9 * k)).norm() > 1e-12;
    }
    EXPECT_GT(clamped, 0);
  }
}

TEST(EnergyTerms, StrainLimitFastPathEqualsTheSvdProjection) {
  // F = U diag(σ) Vᵀ with σ inside, at and just beyond the limits [0.8, 1.2] (and inverted): the
  // projection (closed-form σ² test, then SVD) equals U clamp(σ) Vᵀ, and is exactly F inside.
  const TetMesh mesh = test::jittered_box(2);
  const TetElements e = make_tet_elements(mesh, {0}, {1.0});
  const StrainLimitTerm term(e, {Eigen::Vector2d(0.8, 1.2)});
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double sigmas[] = {0.5, 0.8 - 1e-12, 0.8, 0.8 + 1e-12, 0.9, 1.0, 1.1, 1.2 - 1e-12, 1.2, 1.2 + 1e-12, 1.5};
  int inside_exact = 0;
  for (int trial = 0; trial < 11 * 11 * 11; ++trial) {  // every combination of the σ values
    const Mat3 U = Eigen::AngleAxisd(3.0 * u(rng), Vec3(u(rng), u(rng), u(rng)).normalized()).toRotationMatrix();
    const Mat3 V = Eigen::AngleAxisd(3.0 * u(rng), Vec3(u(rng), u(rng), u(rng)).normalized()).toRotationMatrix();
    Vec3 s(sigmas[trial % 11], sigmas[(trial / 11) % 11], sigmas[trial / 121]);
    if (trial % 13 == 0) s(2) = -s(2);  // inverted
    const Mat3 F = U * s.asDiagonal() * V.transpose();
    const Mat3 p = term.project_element(0, F, {});
    const SignedSvd3 ref = signed_svd(F);
    const Vec3 c = ref.sigma.cwiseMax(0.8).cwiseMin(1.2);
    EXPECT_LE((p - ref.U * c.asDiagonal() * ref.V.transpose()).norm(), 1e-12) << "trial " << trial;
    if ((s.array() > 0.8 + 1e-6).all() && (s.array() < 1.2 - 1e-6).all()) {
      EXPECT_EQ(p, F) << "trial " << trial;
      ++inside_exact;
    }
  }
  EXPECT_GT(inside_exact, 20);  // 27 all-inside combinations, a few of them inverted
}
