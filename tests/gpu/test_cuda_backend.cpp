// The CUDA backend against the CPU: the supernodal solve and cuSPARSE's against CHOLMOD, the
// device local step and PD iteration against the CPU's, the dense Cholesky against Eigen. Every
// test needs a device and skips with the reason without one; the first checks the error path
// instead, everywhere.
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <cmath>
#include <iostream>
#include <random>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/gpu/device.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/device_pd.hpp>
#include <xpd/solver/pd_solver.hpp>

namespace xpd {

namespace {

#define XPD_REQUIRE_GPU()                                                            \
  if (gpu::cuda_devices().empty())                                                   \
  GTEST_SKIP() << (gpu::cuda_compiled() ? "no CUDA device or driver on this machine" \
                                        : "built without the CUDA backend (-DXPD_WITH_CUDA=ON)")

// The unit box:n, μ = 1e4, its bottom layer attached; gravity on request.
ModelDesc box_desc(int n, bool gravity) {
  ModelDesc d;
  d.mesh = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  if (gravity) d.gravity = Vec3(0, 0, -9.81);
  for (int i = 0; i < n * n; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  return d;
}

Model sagging_box(int n) { return build_model(box_desc(n, true)); }

// The nodes of the box's top face (z = 1).
std::vector<int> top_nodes(const TetMesh& mesh) {
  std::vector<int> top;
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
    if (mesh.nodes(i, 2) > 1.0 - 1e-9) top.push_back(static_cast<int>(i));
  return top;
}

Eigen::MatrixXd random_matrix(long rows, long cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Eigen::MatrixXd B(rows, cols);
  for (long i = 0; i < B.size(); ++i) B.data()[i] = u(rng);
  return B;
}

}  // namespace

TEST(CudaBackend, WithoutADeviceEveryEntryPointThrowsGpuError) {
  if (!gpu::cuda_devices().empty()) GTEST_SKIP() << "a CUDA device is present: the error path is not reachable";
  EXPECT_THROW(gpu::DeviceVector(8), GpuError);
  EXPECT_THROW(gpu::DeviceDenseCholesky(8), GpuError);
  const ModelDesc d = box_desc(4, true);
  const Model model = build_model(d);
  EXPECT_THROW(gpu::DevicePd(make_device_pd_desc(model, model.initial_inputs())), GpuError);
  {
    const std::vector<int> top = top_nodes(d.mesh);
    const ProxySet proxies = proxies_from_nodes(d.mesh, top);
    std::vector<int> region(top.size());
    for (size_t k = 0; k < top.size(); ++k) region[k] = static_cast<int>(k);
    CollisionOptions co;
    co.stiffness = 1e3;
    const CollisionModel cm(model, proxies, region, co);
    EXPECT_THROW((void)make_device_collision_pd(cm, model.initial_inputs(), 4), GpuError);
  }
  try {
    gpu::DeviceSolve solve(gpu::make_supernodal_plan(model.factor().supernodal_factor()));
    FAIL() << "DeviceSolve built without a device";
  } catch (const GpuError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

// device_springs (host only) builds the CPU's springs and refuses what the CPU's detection check
// (CollisionModel::check_contacts) refuses.
TEST(CudaBackend, DeviceSpringsFollowTheContactsAndRefuseBadOnes) {
  const ModelDesc d = box_desc(5, false);
  const Model model = build_model(d);
  std::vector<int> top = top_nodes(d.mesh);
  top.push_back(0);  // a proxy outside the region
  const ProxySet proxies = proxies_from_nodes(d.mesh, top);
  std::vector<int> region(top.size() - 1);
  for (size_t k = 0; k < region.size(); ++k) region[k] = static_cast<int>(k);
  CollisionOptions co;
  co.stiffness = 500;
  const CollisionModel cm(model, proxies, region, co);
  const Points x = model.rest_positions();
  std::vector<ProxyContact> contacts(2);
  contacts[0].proxy = 1;
  contacts[0].target = Vec3(0.1, 0.2, 0.9);
  contacts[1].proxy = 3;
  contacts[1].target = Vec3(0.4, 0.5, 0.8);
  std::vector<gpu::ContactSpring> springs;
  Points offsets;
  device_springs(cm, contacts, x, springs, offsets);
  ASSERT_EQ(springs.size(), 2u);
  for (size_t c = 0; c < 2; ++c) {
    // W x reproduces the proxy's position; the offset is the target; the stiffness the model's.
    Vec3 wx = Vec3::Zero();
    double wsum = 0;
    for (int a = 0; a < 8; ++a) {
      wx += springs[c].weights[a] * x.row(cm.region_nodes()[springs[c].nodes[a]]).transpose();
      wsum += springs[c].weights[a];
    }
    EXPECT_NEAR(wsum, 1.0, 1e-15);
    EXPECT_LE((wx - x.row(top[contacts[c].proxy]).transpose()).norm(), 1e-15);
    EXPECT_EQ(Vec3(offsets.row(static_cast<Eigen::Index>(c)).transpose()), contacts[c].target);
    EXPECT_EQ(springs[c].stiffness, 500.0);
  }
  // The CPU detection's check (CollisionModel::check_contacts), then the device's own.
  auto bad = contacts;
  std::swap(bad[0], bad[1]);  // unsorted
  EXPECT_THROW(device_springs(cm, bad, x, springs, offsets), SolverError);
  bad = contacts;
  bad[1].proxy = static_cast<int>(top.size()) - 1;  // not a region proxy
  EXPECT_THROW(device_springs(cm, bad, x, springs, offsets), SolverError);
  bad = contacts;
  bad[0].target(0) = std::nan("");
  EXPECT_THROW(device_springs(cm, bad, x, springs, offsets), SolverError);
  EXPECT_THROW(device_springs(cm, contacts, Points(x.topRows(3)), springs, offsets), GpuError);
}

TEST(CudaBackend, SupernodalSolveEqualsCholmodAndRepeatsBitwise) {
  XPD_REQUIRE_GPU();
  const Model model = sagging_box(24);
  gpu::DeviceSolve solve(gpu::make_supernodal_plan(model.factor().supernodal_factor()));
  const long n = model.num_nodes();
  for (const int k : {1, 3, 11}) {
    const Eigen::MatrixXd B = random_matrix(n, k, 11 + k);
    Eigen::MatrixXd ref = B, X = B, X2 = B;
    model.factor().solve_in_place(ref);
    solve.solve(X);
    solve.solve(X2);
    EXPECT_LE((X - ref).norm() / ref.norm(), 1e-11) << "k = " << k;
    EXPECT_LE((model.matrix() * X - B).norm() / B.norm(), 1e-12) << "k = " << k;
    EXPECT_TRUE((X.array() == X2.array()).all()) << "two solves differ (k = " << k << ")";
  }
}

TEST(CudaBackend, CusparseBaselineEqualsCholmod) {
  XPD_REQUIRE_GPU();
  const Model model = sagging_box(24);
  const long n = model.num_nodes();
  const Eigen::MatrixXd B = random_matrix(n, 3, 5);
  Eigen::MatrixXd ref = B;
  model.factor().solve_in_place(ref);
  for (const bool spsv : {false, true}) {
    gpu::CusparseSolve sp(model.factor().supernodal_factor(), 3, spsv);
    Eigen::MatrixXd X = B;
    gpu::DeviceVector d(static_cast<size_t>(X.size()));
    d.upload(X.data(), X.size());
    sp.solve_device(d.data());
    gpu::synchronize();
    d.download(X.data(), X.size());
    EXPECT_LE((X - ref).norm() / ref.norm(), 1e-10) << (spsv ? "SpSV" : "SpSM");
  }
}

TEST(CudaBackend, LocalStepAndPdIterationEqualTheCpu) {
  XPD_REQUIRE_GPU();
  const Model model = sagging_box(12);
  State s = make_state(model);
  SolverOptions so;
  so.max_iterations = 3;
  so.rel_tolerance = 0;
  (void)step(model, s, so);
  gpu::DevicePd pd(make_device_pd_desc(model, s.inputs));
  pd.set_positions(s.x);
  pd.evaluate_forces();
  const Points fg = pd.forces();
  pd.check();
  (void)evaluate(model, s, nullptr, false);
  const double diff = (fg - s.force).cwiseAbs().maxCoeff();
  std::cout << "max |f_gpu - f_cpu| = " << diff << " (max |f| = " << s.force.cwiseAbs().maxCoeff() << ")\n";
  EXPECT_LE(diff, 1e-12 * s.force.cwiseAbs().maxCoeff());
  pd.iterate();
  const Points xg = pd.positions();
  State t = s;
  solve_global(model, t);
  const Points xc = s.x + Points(t.rhs);
  EXPECT_LE((xg - xc).norm(), 1e-11 * (xc - s.x).norm());
  // A second run from the same positions repeats bitwise, and iterating allocates no device memory.
  pd.set_positions(s.x);
  const double free_before = gpu::device_free_bytes();
  pd.iterate();
  EXPECT_TRUE((pd.positions().array() == xg.array()).all());
  for (int i = 0; i < 5; ++i) pd.iterate();
  gpu::synchronize();
  EXPECT_EQ(gpu::device_free_bytes(), free_before);
}

TEST(CudaBackend, DenseCholeskyEqualsEigenAndNamesTheFailingColumn) {
  XPD_REQUIRE_GPU();
  const int m = 600;
  const Eigen::MatrixXd G = random_matrix(m, m, 9);
  Eigen::MatrixXd H = G * G.transpose() / m + Eigen::MatrixXd::Identity(m, m);
  const Eigen::MatrixXd g = random_matrix(m, 3, 10);
  const Eigen::MatrixXd ref = H.llt().solve(g);
  gpu::DeviceDenseCholesky dc(m, 3);
  dc.upload(H);
  dc.factorize();
  Eigen::MatrixXd u = g;
  dc.solve(u);
  EXPECT_LE((u - ref).norm() / ref.norm(), 1e-10);
  H(37, 37) = -1.0;
  dc.upload(H);
  try {
    dc.factorize();
    FAIL() << "an indefinite matrix was factored";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("column"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, CollisionSystemRefactorAndWoodburyEqualTheDenseSolve) {
  XPD_REQUIRE_GPU();
  const int m = 400, k = 40;
  const Eigen::MatrixXd G = random_matrix(m, m, 21);
  const Eigen::MatrixXd sigma = G * G.transpose() / m + Eigen::MatrixXd::Identity(m, m);
  const Eigen::MatrixXd sigma_inv = sigma.llt().solve(Eigen::MatrixXd::Identity(m, m));
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> node(0, m - 1);
  std::uniform_real_distribution<double> u(0.05, 1.0);
  std::vector<gpu::ContactSpring> springs(k);
  Eigen::MatrixXd H = sigma;
  for (int j = 0; j < k; ++j) {
    auto& sp = springs[j];
    const int slots = j % 3 == 0 ? 8 : 4;  // every third one two-sided (other side negated)
    double sum = 0;
    for (int a = 0; a < slots; ++a) {
      sp.nodes[a] = node(rng);
      sp.weights[a] = u(rng);
      sum += a < 4 ? sp.weights[a] : 0.0;
    }
    for (int a = 0; a < slots; ++a) sp.weights[a] *= (a < 4 ? 1.0 : -1.0) / sum;
    sp.stiffness = 100.0 * (1 + j % 5);
    Eigen::VectorXd w = Eigen::VectorXd::Zero(m);
    for (int a = 0; a < 8; ++a) w(sp.nodes[a]) += sp.weights[a];
    H += sp.stiffness * w * w.transpose();
  }
  const Eigen::MatrixXd g = random_matrix(m, 3, 22);
  const Eigen::MatrixXd ref = H.llt().solve(g);
  gpu::DeviceSchurSystem sys(sigma, sigma_inv, 64);
  sys.set_springs(springs);
  sys.set_rhs(g);
  sys.refactor_async();
  const Eigen::MatrixXd ur = sys.result();
  sys.woodbury_async();
  const Eigen::MatrixXd uw = sys.result();
  sys.woodbury_async();
  EXPECT_TRUE((sys.result().array() == uw.array()).all()) << "two Woodbury solves differ";
  EXPECT_LE((ur - ref).norm() / ref.norm(), 1e-10);
  EXPECT_LE((uw - ref).norm() / ref.norm(), 1e-9);
  EXPECT_LE((uw - ur).norm() / ur.norm(), 1e-9);
  // An indefinite H is refused with the column; Woodbury refuses a non-positive stiffness.
  springs[0].stiffness = -1e9;
  sys.set_springs(springs);
  sys.refactor_async();
  EXPECT_THROW((void)sys.result(), SolverError);
  EXPECT_THROW(sys.woodbury_async(), GpuError);
}

// Wang et al. 2021's Algorithm 1 on the device against the CPU's CollisionState with the same
// contact set held fixed (FixedContactDetector): box:10 pressed by a sphere, one outer iteration
// with J = 1 and J = 3 inner iterations from the pressed state; J = 1 also against baseline (a), the
// sparse solve of (K + WᵀCW) δ = f + f_col, which Algorithm 1 with one inner iteration equals.
TEST(CudaBackend, AlgorithmOneEqualsTheCpuInnerLoopAndTheFullSolve) {
  XPD_REQUIRE_GPU();
  const int N = 10;
  const ModelDesc d = box_desc(N, false);
  const Model model = build_model(d);
  const std::vector<int> top = top_nodes(d.mesh);
  const ProxySet proxies = proxies_from_nodes(d.mesh, top);
  std::vector<int> region(top.size());
  for (size_t k = 0; k < top.size(); ++k) region[k] = static_cast<int>(k);
  CollisionDetector sphere(d.mesh, proxies, region, {Obstacle{Sphere{Vec3(0.5, 0.5, 1.0 + 0.3 - 0.1), 0.3}, {}}});
  CollisionOptions co;
  co.stiffness = 1e4 * 100.0 / (N - 1);
  CollisionModel cm(model, proxies, region, co);
  CollisionState pressing(cm, sphere);
  State pressed = make_state(model);
  SolverOptions warm;
  warm.max_iterations = 4;
  warm.rel_tolerance = 0;
  pressing.set_inner_iterations(2);
  (void)collision_step(cm, pressing, pressed, warm, 1.0);
  const std::vector<ProxyContact> contacts = pressing.contacts();
  ASSERT_GT(contacts.size(), 4u);
  std::cout << "m = " << cm.region_nodes().size() << ", contacts = " << contacts.size() << ", E_beta "
            << cm.num_beta_elements() << "\n";

  FixedContactDetector fixed(contacts);
  SolverOptions one;
  one.max_iterations = 1;
  one.rel_tolerance = 0;
  auto gpu_pd = make_device_collision_pd(cm, pressed.inputs, static_cast<int>(contacts.size()));
  std::vector<gpu::ContactSpring> springs;
  Points offsets;
  device_springs(cm, contacts, pressed.x, springs, offsets);
  gpu_pd->set_springs(springs, offsets);
  for (const int J : {1, 3}) {
    CollisionState ref(cm, fixed);
    ref.set_inner_iterations(J);
    State s = pressed;
    (void)collision_step(cm, ref, s, one, 1.0);
    gpu_pd->pd().set_positions(pressed.x);
    gpu_pd->outer_iteration(J);
    gpu_pd->check();
    const Points xg = gpu_pd->pd().positions();
    const double step = (s.x - pressed.x).norm();
    const double diff = (xg - s.x).norm();
    std::cout << "J = " << J << ": ||x_gpu - x_cpu|| / ||step|| = " << diff / step << "\n";
    EXPECT_LE(diff, 1e-10 * step) << "J = " << J;
    const std::vector<double> rg = gpu_pd->inner_residuals();
    const std::vector<double>& rc = ref.inner_residuals();
    ASSERT_EQ(rg.size(), rc.size());
    for (size_t j = 0; j < rg.size(); ++j) EXPECT_NEAR(rg[j], rc[j], 1e-9 * rc[0]) << "inner " << j;
    if (J == 1) {
      // Baseline (a) with the same contacts: the full sparse solve that J = 1 equals.
      CollisionOptions ca = co;
      ca.method = CollisionMethod::FullRefactor;
      CollisionModel full(model, proxies, region, ca);
      CollisionState fs(full, fixed);
      State t = pressed;
      (void)collision_step(full, fs, t, one, 1.0);
      EXPECT_LE((xg - t.x).norm(), 1e-10 * (t.x - pressed.x).norm());
    } else {
      // Repeats bitwise; further iterations allocate no device memory.
      gpu_pd->pd().set_positions(pressed.x);
      const double free_before = gpu::device_free_bytes();
      gpu_pd->outer_iteration(J);
      EXPECT_TRUE((gpu_pd->pd().positions().array() == xg.array()).all());
      for (int i = 0; i < 3; ++i) gpu_pd->outer_iteration(J);
      gpu_pd->check();
      EXPECT_EQ(gpu::device_free_bytes(), free_before);
    }
  }
  // Without springs, J = 1 is the plain PD step x + K⁻¹ f (any factor ordering solves K).
  {
    auto plain = make_device_collision_pd(cm, pressed.inputs, 0);
    plain->pd().set_positions(pressed.x);
    plain->check();  // nothing run yet: only the elements' status
    plain->outer_iteration(1);
    plain->check();
    State t = pressed;
    (void)evaluate(model, t, nullptr, false);
    solve_global(model, t);
    const Points xc = pressed.x + Points(t.rhs);
    EXPECT_LE((plain->pd().positions() - xc).norm(), 1e-10 * (xc - pressed.x).norm());
    EXPECT_THROW(plain->set_springs(springs, offsets), GpuError);  // built for no springs
  }
  // Bad springs are refused before anything runs.
  springs[0].stiffness = 0;
  EXPECT_THROW(gpu_pd->set_springs(springs, offsets), GpuError);
  springs[0].stiffness = co.stiffness;
  springs[0].nodes[0] = static_cast<int>(cm.region_nodes().size());
  EXPECT_THROW(gpu_pd->set_springs(springs, offsets), GpuError);
}

}  // namespace xpd
