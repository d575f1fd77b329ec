// The adjoint method of solver/adjoint.hpp against its oracles, on real meshes from the shared
// data folder (octopus-low, armadillo_4k) with every tet shape-targeted (Wang 2025, ch. 6):
//  - the matrix-free Hessian product against the assembled Newton Hessian;
//  - the mixed products hᵀ ∂f/∂b against central differences of hᵀ f in b, per tet, on compressed
//    elements;
//  - CG and the fixed-point iteration against the direct sparse solve; an indefinite Hessian is
//    refused by all three;
//  - end to end: Taylor remainders of a loss through the equilibrium (second order) and central
//    differences, for shape targets and attachment targets;
//  - a batch of frames against the same frames one at a time.
#include <gtest/gtest.h>

#include <Eigen/Eigenvalues>
#include <cmath>
#include <limits>
#include <random>
#include <xpd/core/error.hpp>
#include <xpd/energy/polar.hpp>
#include <xpd/energy/shape_target.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/adjoint.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/quasistatic_batch.hpp>

#include "solver/pd_fixtures.hpp"
#include "test_util.hpp"

using namespace xpd;

namespace {

// Every tet shape-targeted (μ varying ±30%), the max-y band attached, gravity sideways and down at
// a moderate load (ρ g L / μ = 0.15: a stable, clearly deformed equilibrium).
ModelDesc actuated_desc(const TetMesh& mesh, unsigned seed = 3) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.7, 1.3);
  const double mu = 1e3;
  d.mu.resize(static_cast<size_t>(mesh.tets.rows()));
  for (auto& m : d.mu) m = mu * u(rng);
  d.density = {100.0};
  const double L = test::bbox_diagonal(mesh.nodes);
  d.gravity = Vec3(0.3, -1.0, 0.0) * (0.15 * mu / (d.density[0] * L));
  for (int t = 0; t < mesh.tets.rows(); ++t) d.shape_targets.push_back({t, {}});
  const Vec3 lo = mesh.nodes.colwise().minCoeff(), hi = mesh.nodes.colwise().maxCoeff();
  const double band = hi.y() - 0.1 * (hi.y() - lo.y());
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
    if (mesh.nodes(i, 1) >= band)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e2 * mu * L, mesh.nodes.row(i).transpose()});
  return d;
}

// Uniform entries in [−amplitude, amplitude]: shape-target parameters (cols = 6) or points (3).
template <class Matrix>
Matrix uniform(Eigen::Index rows, double amplitude, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-amplitude, amplitude);
  Matrix m(rows, Matrix::ColsAtCompileTime);
  for (Eigen::Index r = 0; r < rows; ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) m(r, c) = u(rng);
  return m;
}
ShapeTargetParams random_params(Eigen::Index rows, double amplitude, unsigned seed) {
  return uniform<ShapeTargetParams>(rows, amplitude, seed);
}
Points random_points(Eigen::Index rows, double amplitude, unsigned seed) {
  return uniform<Points>(rows, amplitude, seed);
}

Points flat_product(const Eigen::SparseMatrix<double>& H, const Points& h) {
  const Eigen::Index n = h.rows();
  const Eigen::VectorXd y = H * Eigen::Map<const Eigen::VectorXd>(h.data(), 3 * n);
  return Eigen::Map<const Points>(y.data(), n, 3);
}

// Equilibrium at state.inputs: PD (Anderson) to 1e-10, then Newton to its round-off floor (the
// finite-difference checks must compare gradients of the same, converged function).
void equilibrate(const Model& model, State& s) {
  SolverOptions o;
  o.max_iterations = 3000;
  o.rel_tolerance = 1e-10;
  o.accelerator = Accelerator::Anderson;
  step(model, s, o);
  NewtonOptions no;
  no.rel_tolerance = 1e-13;
  no.max_iterations = 50;
  newton_solve(model, s, no);
}

struct RealMesh {
  const char* file;
  int expected_tets;
};
const RealMesh kMeshes[] = {
    {"libigl-tutorial-data/octopus-low.mesh", 1140},
    {"pbd-models/armadillo_4k.node", 3717},
};

TetMesh load(const RealMesh& rm) {
  TetMesh mesh = io::read_tet_mesh(test::data_path(rm.file));
  EXPECT_EQ(mesh.tets.rows(), rm.expected_tets);
  return mesh;
}

}  // namespace

TEST(AdjointHessianProduct, EqualsAssembledNewtonHessianOnRealMeshes) {
  for (const RealMesh& rm : kMeshes) {
    SCOPED_TRACE(rm.file);
    const TetMesh mesh = load(rm);
    const ModelDesc d = actuated_desc(mesh);
    const Model model = build_model(d);
    State s = make_state(model);
    s.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.2, 11);
    // A deformed, non-equilibrium state with compressed and stretched tets.
    const double L = test::bbox_diagonal(mesh.nodes);
    s.x = model.rest_positions() * Eigen::Vector3d(0.7, 1.2, 0.9).asDiagonal().toDenseMatrix() +
          random_points(model.num_nodes(), 0.01 * L, 12);
    const Points h = random_points(model.num_nodes(), 1.0, 13);
    Points Hh;
    hessian_product(model, s, h, Hh);
    const Points ref = flat_product(newton_hessian(model, s, /*psd_project=*/false), h);
    const double rel = (Hh - ref).norm() / ref.norm();
    test::report("H h vs assembled Hessian", rel, 1e-12);
    EXPECT_LE(rel, 1e-12);
    // The linearized operator of the adjoint iterations (cached element blocks) is the same H.
    const HessianOperator op(model, s);
    Points Hh_cached;
    op.apply(h, Hh_cached);
    const double rel_cached = (Hh_cached - ref).norm() / ref.norm();
    test::report("cached H h vs assembled Hessian", rel_cached, 1e-12);
    EXPECT_LE(rel_cached, 1e-12);
  }
}

TEST(AdjointHessianProduct, CachedOperatorCoversEveryTermKind) {
  // Strain limits and the λ volume term take the default (triplet) cache of Term; corotated and
  // shape-target tets the element-block cache. Both must give the assembled Hessian's product.
  const TetMesh mesh = load(kMeshes[0]);
  ModelDesc d = actuated_desc(mesh);
  d.lambda = {2e3};
  // Half the tets corotated with a strain limit instead of shape-targeted.
  std::vector<ShapeTargetDesc> targeted;
  for (const ShapeTargetDesc& t : d.shape_targets)
    if (t.tet % 2 == 0)
      targeted.push_back(t);
    else
      d.strain_limits.push_back({t.tet, 1e4, 0.95, 1.05});
  d.shape_targets = targeted;
  const Model model = build_model(d);
  State s = make_state(model);
  s.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.2, 21);
  const double L = test::bbox_diagonal(mesh.nodes);
  s.x = model.rest_positions() * 1.15 + random_points(model.num_nodes(), 0.01 * L, 22);
  const Points h = random_points(model.num_nodes(), 1.0, 23);
  const Points ref = flat_product(newton_hessian(model, s, /*psd_project=*/false), h);
  Points out;
  HessianOperator(model, s).apply(h, out);
  const double rel = (out - ref).norm() / ref.norm();
  test::report("cached H h (volume, strain limit) vs assembled", rel, 1e-12);
  EXPECT_LE(rel, 1e-12);
}

TEST(AdjointMixedProduct, ShapeTargetGradientEqualsCentralDifferences) {
  // 200 random tets of the octopus, deformed by a stretch-and-compress map (singular values of F
  // from 0.5 to 1.3) with noise; random targets b; per tet and component the adjoint's
  // hᵀ ∂f/∂b against central differences of hᵀ f(x; b).
  const TetMesh mesh = load(kMeshes[0]);
  const Model model = build_model(actuated_desc(mesh));
  const ShapeTargetTerm* term = nullptr;
  for (const auto& t : model.terms())
    if (auto* st = dynamic_cast<const ShapeTargetTerm*>(t.get())) term = st;
  ASSERT_NE(term, nullptr);
  State s = make_state(model);
  const double L = test::bbox_diagonal(mesh.nodes);
  const Mat3 A = Eigen::AngleAxisd(0.4, Vec3(1, 2, 3).normalized()).toRotationMatrix() *
                 Eigen::Vector3d(1.3, 1.0, 0.5).asDiagonal();
  s.x = model.rest_positions() * A.transpose() + random_points(model.num_nodes(), 0.003 * L, 21);
  s.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.15, 22);
  const Points h = random_points(model.num_nodes(), 1.0, 23);

  const FrameInputs grad = input_gradient(model, s, h);
  // hᵀ f of one element (the rest of the mesh does not depend on its b; summing it would only add
  // round-off to the differences).
  auto htf = [&](const FrameInputs& in, int element) {
    Points f = Points::Zero(model.num_nodes(), 3);
    term->project_add_force_subset(s.x, in, f, {element});
    return h.cwiseProduct(f).sum();
  };
  std::mt19937 rng(24);
  std::uniform_int_distribution<int> pick(0, static_cast<int>(mesh.tets.rows()) - 1);
  const double eps = 1e-5;  // round-off dominates below (1e-6: 6e-8; 1e-5: 1e-8 worst case)
  std::vector<int> element_of(static_cast<size_t>(mesh.tets.rows()), -1);  // shape-target row → element
  for (int k = 0; k < term->elements().size(); ++k)
    element_of[static_cast<size_t>(term->elements().source[static_cast<size_t>(k)])] = k;
  double worst = 0, min_sigma = 1e9;
  for (int trial = 0; trial < 200; ++trial) {
    const int row = pick(rng);  // shape-target row = tet (every tet targeted, in order)
    const Mat3 F = deformation_gradient(term->elements(), element_of[static_cast<size_t>(row)], s.x);
    min_sigma = std::min(min_sigma, signed_svd(F).sigma.minCoeff());
    for (int c = 0; c < 6; ++c) {
      FrameInputs plus = s.inputs, minus = s.inputs;
      plus.shape_targets(row, c) += eps;
      minus.shape_targets(row, c) -= eps;
      const int k = element_of[static_cast<size_t>(row)];
      const double fd = (htf(plus, k) - htf(minus, k)) / (2 * eps);
      const double an = grad.shape_targets(row, c);
      const double rel = std::abs(fd - an) / std::max(std::abs(an), 1e-3 * grad.shape_targets.row(row).norm());
      worst = std::max(worst, rel);
    }
  }
  test::report("mixed product vs central FD (200 tets)", worst, 1e-7);
  EXPECT_LE(worst, 1e-7);
  EXPECT_LT(min_sigma, 0.6);  // the sample includes compressed elements
}

// CG against the direct solve on the octopus and a jittered cube; the fixed-point iteration (its
// rate is 1 − λ_min(K⁻¹H), slow on long, soft bodies: on the hanging octopus 5,000 iterations reach
// only 1e-4) on the cube.
TEST(AdjointSolve, CgAndFixedPointEqualTheDirectSolve) {
  struct Fixture {
    const char* name;
    TetMesh mesh;
    std::vector<AdjointMethod> methods;
  };
  const std::vector<Fixture> fixtures = {
      {"octopus", load(kMeshes[0]), {AdjointMethod::ConjugateGradient}},
      {"cube", test::jittered_box(5), {AdjointMethod::ConjugateGradient, AdjointMethod::FixedPoint}},
  };
  for (const Fixture& fx : fixtures) {
    SCOPED_TRACE(fx.name);
    const Model model = build_model(actuated_desc(fx.mesh));
    State s = make_state(model);
    s.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.1, 31);
    equilibrate(model, s);
    const Points g = random_points(model.num_nodes(), 1.0, 32);
    AdjointOptions o;
    o.method = AdjointMethod::Direct;
    Points h_direct;
    AdjointSolver(model, o).solve(s, g, h_direct);
    for (AdjointMethod m : fx.methods) {
      o.method = m;
      Points h;
      const AdjointStats st = AdjointSolver(model, o).solve(s, g, h);
      const double rel = (h - h_direct).norm() / h_direct.norm();
      test::report(m == AdjointMethod::ConjugateGradient ? "CG vs direct" : "fixed point vs direct", rel, 1e-8);
      if (test::verbose()) std::printf("  %s: iterations %d, residual %.2e\n", fx.name, st.iterations, st.residual);
      EXPECT_LE(rel, 1e-8);
      EXPECT_LE(st.residual, o.tolerance);
      EXPECT_GT(st.iterations, 0);
    }
  }
}

TEST(AdjointSolve, IndefiniteHessianIsRefusedByEveryMethod) {
  // A box crushed to 30% of its size: the corotated twist modes (ψ_i + ψ_j)/(σ_i + σ_j) < 0, so H
  // has negative eigenvalues (checked on the assembled matrix). No method may return a gradient.
  ModelDesc d;
  d.mesh = make_box(4, 4, 4, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e3};
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
    if (d.mesh.nodes(i, 2) == 0.0)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e3, d.mesh.nodes.row(i).transpose()});
  const Model model = build_model(d);
  State s = make_state(model);
  s.x = 0.3 * model.rest_positions();
  const Eigen::MatrixXd H = newton_hessian(model, s, false).toDense();
  ASSERT_LT(Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(H).eigenvalues().minCoeff(), 0.0);
  const Points g = random_points(model.num_nodes(), 1.0, 41);
  for (AdjointMethod m : {AdjointMethod::ConjugateGradient, AdjointMethod::FixedPoint, AdjointMethod::Direct}) {
    AdjointOptions o;
    o.method = m;
    Points h;
    try {
      AdjointSolver(model, o).solve(s, g, h);
      ADD_FAILURE() << "method " << static_cast<int>(m) << " returned a gradient";
    } catch (const SolverError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("frame 0"), std::string::npos) << msg;
      EXPECT_TRUE(msg.find("not positive definite") != std::string::npos || msg.find("diverged") != std::string::npos)
          << msg;
    }
  }
}

TEST(AdjointSolve, BadInputsAreRefused) {
  ModelDesc d;
  d.mesh = make_box(3, 3, 3, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e3};
  d.attachments.push_back({BaryPoint::node(0), 1e3, Vec3::Zero()});
  d.allow_unattached = false;
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
    if (d.mesh.nodes(i, 2) == 0.0)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e3, d.mesh.nodes.row(i).transpose()});
  const Model model = build_model(d);
  const State s = make_state(model);
  const AdjointSolver solver(model);
  Points h;
  EXPECT_THROW(solver.solve(s, Points::Zero(3, 3), h), SolverError);  // wrong rows
  Points g = Points::Ones(model.num_nodes(), 3);
  g(2, 1) = std::nan("");
  EXPECT_THROW(solver.solve(s, g, h), SolverError);
  // Zero loss gradient: h = 0 exactly, no iteration.
  const AdjointStats st = solver.solve(s, Points::Zero(model.num_nodes(), 3), h);
  EXPECT_EQ(st.iterations, 0);
  EXPECT_EQ(h.norm(), 0.0);
  AdjointOptions bad;
  bad.tolerance = 0;
  EXPECT_THROW(AdjointSolver(model, bad), SolverError);
  d.integrator = Integrator::ImplicitEuler;
  EXPECT_THROW(AdjointSolver(build_model(d)), SolverError);
}

namespace {

// L(x) = Σ c_i · x_i + ½ Σ (x_i − X_i)²: linear plus quadratic, gradient g = c + (x − X).
struct Loss {
  Points c;
  Points X;
  double value(const Points& x) const { return c.cwiseProduct(x).sum() + 0.5 * (x - X).squaredNorm(); }
  Points gradient(const Points& x) const { return c + (x - X); }
};

// dL/dq · δ for q = shape targets (which = 0) or attachment targets (which = 1), the adjoint's
// and by finite differences, plus the Taylor remainders over ε = 1e-2 · 2^-k.
void check_end_to_end(const RealMesh& rm, int which) {
  SCOPED_TRACE(rm.file);
  SCOPED_TRACE(which == 0 ? "shape targets" : "attachment targets");
  const TetMesh mesh = load(rm);
  const Model model = build_model(actuated_desc(mesh));
  const double L = test::bbox_diagonal(mesh.nodes);
  State base = make_state(model);
  base.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.1, 51);
  equilibrate(model, base);
  const Loss loss{random_points(model.num_nodes(), 1.0, 52), model.rest_positions()};

  Points h;
  AdjointSolver(model).solve(base, loss.gradient(base.x), h);
  const FrameInputs grad = input_gradient(model, base, h);

  // Direction δ: all shape-target parameters, or all attachment targets (scaled to the body).
  FrameInputs dir = base.inputs;
  double directional = 0;
  if (which == 0) {
    dir.shape_targets = random_params(base.inputs.shape_targets.rows(), 1.0, 53);
    directional = grad.shape_targets.cwiseProduct(dir.shape_targets).sum();
  } else {
    dir.attachment_targets = random_points(base.inputs.attachment_targets.rows(), 0.1 * L, 54);
    directional = grad.attachment_targets.cwiseProduct(dir.attachment_targets).sum();
  }
  auto loss_at = [&](double eps) {
    State s = base;  // warm start from the base equilibrium
    if (which == 0)
      s.inputs.shape_targets += eps * dir.shape_targets;
    else
      s.inputs.attachment_targets += eps * dir.attachment_targets;
    equilibrate(model, s);
    return loss.value(s.x);
  };
  const double L0 = loss.value(base.x);
  // Central differences.
  const double e = 1e-4;
  const double fd = (loss_at(e) - loss_at(-e)) / (2 * e);
  const double rel = std::abs(fd - directional) / std::abs(directional);
  test::report("end to end vs central FD", rel, 1e-5);
  EXPECT_LE(rel, 1e-5);
  // Taylor remainder |L(q + εδ) − L(q) − ε dL·δ| = O(ε²): slope ≥ 1.9 over three halvings.
  double prev = 0;
  for (int k = 0; k < 4; ++k) {
    const double eps = 1e-2 / std::pow(2.0, k);
    const double r = std::abs(loss_at(eps) - L0 - eps * directional);
    if (k > 0) {
      const double slope = std::log2(prev / r);
      test::report("Taylor remainder slope", slope, 1.9);
      EXPECT_GE(slope, 1.9) << "eps " << eps << " remainder " << r << " previous " << prev;
    }
    prev = r;
  }
}

}  // namespace

TEST(AdjointEndToEnd, ShapeTargetGradientOnOctopus) { check_end_to_end(kMeshes[0], 0); }
TEST(AdjointEndToEnd, AttachmentTargetGradientOnOctopus) { check_end_to_end(kMeshes[0], 1); }
TEST(AdjointEndToEnd, ShapeTargetGradientOnArmadillo) { check_end_to_end(kMeshes[1], 0); }
TEST(AdjointEndToEnd, AttachmentTargetGradientOnArmadillo) { check_end_to_end(kMeshes[1], 1); }

// Sixteen frames (different actuations, so different equilibria and Hessians) solved as one batch
// against one at a time: CG on the octopus, the fixed-point iteration on the cube.
TEST(AdjointBatch, SixteenFramesEqualOneAtATime) {
  for (const AdjointMethod m : {AdjointMethod::ConjugateGradient, AdjointMethod::FixedPoint}) {
    const bool cg = m == AdjointMethod::ConjugateGradient;
    SCOPED_TRACE(cg ? "CG, octopus" : "fixed point, cube");
    const Model model = build_model(actuated_desc(cg ? load(kMeshes[0]) : test::jittered_box(5)));
    const int B = 16;
    std::vector<State> states;
    std::vector<Points> g;
    for (int i = 0; i < B; ++i) {
      State s = make_state(model);
      s.inputs.shape_targets = random_params(model.initial_inputs().shape_targets.rows(), 0.1, 60 + i);
      equilibrate(model, s);
      states.push_back(std::move(s));
      g.push_back(random_points(model.num_nodes(), 1.0, 80 + i));
    }
    std::vector<const State*> ptrs;
    for (const State& s : states) ptrs.push_back(&s);
    AdjointOptions o;
    o.method = m;
    const AdjointSolver solver(model, o);
    std::vector<Points> hb;
    const std::vector<AdjointStats> stats = solver.solve(ptrs, g, hb);
    double worst = 0;
    for (int i = 0; i < B; ++i) {
      Points h1;
      const AdjointStats st = solver.solve(states[static_cast<size_t>(i)], g[static_cast<size_t>(i)], h1);
      EXPECT_EQ(st.iterations, stats[static_cast<size_t>(i)].iterations);
      worst = std::max(worst, (hb[static_cast<size_t>(i)] - h1).norm() / h1.norm());
    }
    test::report("batched vs single", worst, 1e-12);
    EXPECT_LE(worst, 1e-12);
  }
}

TEST(QuasistaticBatchForward, RestInputsConvergeAtTheRestShapeFromAnyStart) {
  // Without loads, a = 0 and attachment targets at rest make the rest shape the equilibrium: its
  // residual is pure round-off, which no tolerance relative to the cold start (itself round-off)
  // can reach. The batch's round-off level accepts it; from a deformed warm start the solve must
  // come back to the rest shape.
  ModelDesc d = actuated_desc(load(kMeshes[0]));
  d.gravity = Vec3::Zero();
  const Model model = build_model(d);
  QuasistaticBatch batch(model);
  batch.options().forward.rel_tolerance = 1e-10;
  const Eigen::Index n = model.num_nodes(), u = model.initial_inputs().shape_targets.rows();
  const ShapeTargetParams a0 = ShapeTargetParams::Zero(u, 6);
  const ShapeTargetParams a1 = random_params(u, 0.1, 90);
  Points x(n, 3);
  std::vector<FrameStats> st = batch.forward(1, a0.data(), nullptr, x.data());
  ASSERT_TRUE(st[0].converged);
  EXPECT_EQ(st[0].iterations, 0);
  const double L = test::bbox_diagonal(model.rest_positions());
  st = batch.forward(1, a1.data(), nullptr, x.data());  // deformed
  ASSERT_TRUE(st[0].converged);
  EXPECT_GT((x - model.rest_positions()).norm(), 1e-3 * L);
  const double away = (x - model.rest_positions()).norm();
  st = batch.forward(1, a0.data(), nullptr, x.data());  // warm start from the deformed shape
  ASSERT_TRUE(st[0].converged);
  EXPECT_GT(st[0].iterations, 0);
  // Back at the rest shape: at 1e-10 the batch's round-off level decides (it is pessimistic: the
  // stiff attachments dominate |K|; measured 4.0e-6 of the deformation left, 5.2e-7 without it).
  const double back = (x - model.rest_positions()).norm() / away;
  test::report("back to rest (||x - X|| / ||x_deformed - X||)", back, 1e-4);
  EXPECT_LE(back, 1e-4);
}

TEST(QuasistaticBatchForward, SetWarmStartIsWhereTheNextForwardStarts) {
  // An optimizer returns the batch to accepted equilibria after a refused trial step: from the
  // equilibrium of a1 set back as the warm start, a1 takes no iteration and gives that equilibrium
  // bit for bit; from the rest shape it takes some. A non-finite warm start is refused, naming the
  // frame, and leaves every slot as it was.
  const Model model = build_model(actuated_desc(load(kMeshes[0])));
  QuasistaticBatch batch(model);
  const Eigen::Index n = model.num_nodes(), u = model.initial_inputs().shape_targets.rows();
  const ShapeTargetParams a1 = random_params(u, 0.1, 91);
  ShapeTargetParams two(2 * u, 6);
  two << a1, a1;
  Points x1(n, 3), x(n, 3);
  std::vector<FrameStats> st = batch.forward(1, a1.data(), nullptr, x1.data());
  ASSERT_TRUE(st[0].converged);
  const int cold = st[0].iterations;
  EXPECT_GT(cold, 0);
  Points rest = model.rest_positions();
  batch.set_warm_start(1, rest.data());
  st = batch.forward(1, a1.data(), nullptr, x.data());
  EXPECT_EQ(st[0].iterations, cold);  // the same solve as the first: set_warm_start is the start
  batch.set_warm_start(1, x1.data());
  st = batch.forward(1, a1.data(), nullptr, x.data());
  ASSERT_TRUE(st[0].converged);
  EXPECT_EQ(st[0].iterations, 0);
  EXPECT_TRUE(x == x1);
  // Two slots from one; a NaN in the second frame is named and changes nothing.
  Points both(2 * n, 3);
  both << x1, x1;
  batch.set_warm_start(2, both.data());
  EXPECT_EQ(batch.num_slots(), 2);
  both(n + 5, 1) = std::numeric_limits<double>::quiet_NaN();
  both.topRows(n) = rest;
  try {
    batch.set_warm_start(2, both.data());
    FAIL() << "expected a SolverError";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("frame 1:"), std::string::npos) << e.what();
  }
  Points out(2 * n, 3);
  st = batch.forward(2, two.data(), nullptr, out.data());
  EXPECT_EQ(st[0].iterations, 0);
  EXPECT_EQ(st[1].iterations, 0);
  EXPECT_THROW(batch.set_warm_start(-1, x1.data()), SolverError);
}

TEST(AdjointBatch, ErrorsNameTheFrameByItsIndexInTheBatch) {
  // Batches are solved in groups of 16 frames; an error in a later group must still name the
  // frame's index in the whole batch. Frames 0..16 have g = 0 (h = 0 at once), frame 17 cannot
  // converge in one CG iteration.
  const Model model = build_model(actuated_desc(test::jittered_box(4)));
  State s = make_state(model);
  equilibrate(model, s);
  const int B = 18;
  std::vector<const State*> states(B, &s);
  std::vector<Points> g(B, Points::Zero(model.num_nodes(), 3)), h;
  g[17] = random_points(model.num_nodes(), 1.0, 99);
  AdjointOptions o;
  o.max_iterations = 1;
  try {
    AdjointSolver(model, o).solve(states, g, h);
    FAIL() << "expected a SolverError";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("frame 17:"), std::string::npos) << e.what();
  }
}
