// `xpd bench gpu`: paper 000's Figure 4 phases on box:N, the CUDA backend beside the CPU in one run
// (Wang et al. 2021, §4): local step, the 3-RHS substitutions (project-written supernodal solve and
// cuSPARSE's SpSM on the same factor), a plain PD iteration, 96-RHS substitutions and the dense
// Cholesky of an m × m collision system, each with its agreement figure against the CPU.
#include <fmt/format.h>

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/gpu/device.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/device_pd.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "commands.hpp"

namespace xpd::cli {

namespace {

struct BenchGpuOptions {
  int box = 48;
  int repeats = 20;
  int dense_m = 3960;
  bool collisions = true;
  bool json = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

template <class F>
double cpu_ms(int repeats, F&& f) {
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    Timer w;
    f();
    t.push_back(w.elapsed_ms());
  }
  return median(t);
}

// Wang et al. 2021's Algorithm 1 on the device (gpu::DeviceCollisionPd) on box:N:
// the top face's central patch holds node proxies, a sphere presses into it (the setup of `xpd bench
// collisions`), a few CPU frames with J = 2 make a pressed state, and from there one outer
// iteration with J = 1 and J = 1 + extra inner iterations runs on the device and on the CPU with
// the contacts of that state held (FixedContactDetector), agreement and time side by side.
void bench_algorithm_one(const BenchGpuOptions& o, nlohmann::ordered_json& j) {
  const int N = o.box, R = std::max(1, o.repeats), extra = 4;
  // The model of `bench collisions`: as above but without gravity (the box would sag away from the
  // sphere).
  ModelDesc d;
  d.mesh = make_box(N, N, N, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  d.density = {1000.0};
  for (int i = 0; i < N * N; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  const TetMesh& mesh = d.mesh;
  const Model model = build_model(d);
  const FrameInputs inputs = model.initial_inputs();
  const double half = 0.5 * 0.93 + 1e-9;
  std::vector<int> top;
  for (int i = 0; i < model.num_nodes(); ++i) {
    const Vec3 p = mesh.nodes.row(i).transpose();
    if (p.z() > 1.0 - 1e-9 && std::abs(p.x() - 0.5) <= half && std::abs(p.y() - 0.5) <= half) top.push_back(i);
  }
  const ProxySet proxies = proxies_from_nodes(mesh, top);
  std::vector<int> region(top.size());
  std::iota(region.begin(), region.end(), 0);
  const double radius = 0.3, indent = 0.08;
  CollisionDetector sphere(mesh, proxies, region,
                           {Obstacle{Sphere{Vec3(0.5, 0.5, 1.0 + radius - indent), radius}, {}}});
  CollisionOptions co;
  co.stiffness = 1e4 * 100.0 / (N - 1);  // 100 μ h, as `bench collisions`
  co.schur_solve = SchurSolveMethod::Woodbury;
  Timer ts;
  const CollisionModel cm(model, proxies, region, co);
  j["collision_setup_ms"] = ts.elapsed_ms();
  State pressed = make_state(model);
  pressed.inputs = inputs;
  {
    CollisionState st(cm, sphere);
    st.set_inner_iterations(2);
    SolverOptions warm;
    warm.max_iterations = 6;
    warm.rel_tolerance = 0;
    (void)collision_step(cm, st, pressed, warm, 1.0);
  }
  std::vector<ProxyContact> contacts;
  sphere.detect(pressed.x, 1.0, contacts);
  const int m = static_cast<int>(cm.region_nodes().size());
  j["collision_nodes"] = m;
  j["collision_proxies"] = static_cast<int>(top.size());
  j["active_proxies"] = static_cast<int>(contacts.size());
  j["active_fraction"] = top.empty() ? 0.0 : static_cast<double>(contacts.size()) / static_cast<double>(top.size());
  j["beta_elements"] = cm.num_beta_elements();
  if (contacts.empty()) throw Error("bench gpu: the sphere touches no proxy (no contacts to measure)");

  FixedContactDetector fixed(contacts);
  // CPU: one outer iteration from the pressed state (the reference), and the per-iteration time of
  // three (each frame also evaluates once more at its end: 4 evaluations for 3 iterations).
  auto cpu_run = [&](int J, int iterations, Points* x_out) {
    CollisionState st(cm, fixed);
    st.set_inner_iterations(J);
    State t = pressed;
    SolverOptions so;
    so.max_iterations = iterations;
    so.rel_tolerance = 0;
    const CollisionFrameStats cs = collision_step(cm, st, t, so, 1.0);
    if (x_out) *x_out = t.x;
    return cs.pd.wall_ms / cs.pd.iterations;
  };
  Points x1, xj;
  (void)cpu_run(1, 1, &x1);
  (void)cpu_run(1 + extra, 1, &xj);
  const double cpu_1 = cpu_run(1, 3, nullptr), cpu_j = cpu_run(1 + extra, 3, nullptr);
  j["cpu_outer_1inner_ms"] = cpu_1;
  j["cpu_extra_inner_ms"] = (cpu_j - cpu_1) / extra;

  Timer tu;
  auto dev = make_device_collision_pd(cm, inputs, static_cast<int>(contacts.size()));
  gpu::synchronize();
  j["collision_upload_ms"] = tu.elapsed_ms();
  std::vector<gpu::ContactSpring> springs;
  Points offsets;
  device_springs(cm, contacts, pressed.x, springs, offsets);
  dev->set_springs(springs, offsets);
  const double diag = (mesh.nodes.colwise().maxCoeff() - mesh.nodes.colwise().minCoeff()).norm();
  for (const int J : {1, 1 + extra}) {
    dev->pd().set_positions(pressed.x);
    dev->outer_iteration(J);
    dev->check();
    const Points xg = dev->pd().positions();
    const Points& xc = J == 1 ? x1 : xj;
    j[J == 1 ? "alg1_rel" : "alg1_j5_rel"] = (xg - xc).norm() / (xc - pressed.x).norm();
    j[J == 1 ? "alg1_max_diff_over_diag" : "alg1_j5_max_diff_over_diag"] = (xg - xc).cwiseAbs().maxCoeff() / diag;
    dev->pd().set_positions(pressed.x);
    dev->outer_iteration(J);
    j[J == 1 ? "alg1_bitwise_repeatable" : "alg1_j5_bitwise_repeatable"] =
        (dev->pd().positions().array() == xg.array()).all();
  }
  dev->pd().set_positions(pressed.x);
  const double free_before = gpu::device_free_bytes();
  const double t1 = gpu::time_device_ms([&] { dev->outer_iteration(1); }, R);
  dev->pd().set_positions(pressed.x);
  const double tj = gpu::time_device_ms([&] { dev->outer_iteration(1 + extra); }, R);
  dev->check();
  j["alg1_alloc_bytes"] = free_before - gpu::device_free_bytes();
  j["outer_1inner_ms"] = t1;
  j["outer_5inner_ms"] = tj;
  j["extra_inner_ms"] = (tj - t1) / extra;
  j["cpu_outer_1inner_over_gpu"] = cpu_1 / t1;
}

void run_bench_gpu(const BenchGpuOptions& o) {
  const auto devices = gpu::cuda_devices();
  if (devices.empty())
    throw GpuError(gpu::cuda_compiled() ? "bench gpu: no CUDA device or driver"
                                        : "bench gpu: the CUDA backend is not compiled in (-DXPD_WITH_CUDA=ON)");
  if (o.box < 2 || o.box > 1024) throw Error(fmt::format("bench gpu: box size {} outside [2, 1024]", o.box));
  const int N = o.box, R = std::max(1, o.repeats);
  nlohmann::ordered_json j;
  j["device"] = devices[0].name;
  j["box"] = N;
  Timer total;

  // The model of `bench core`: unit box, μ = 1e4, ρ = 1000, gravity, bottom layer attached.
  ModelDesc d;
  d.mesh = make_box(N, N, N, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  d.gravity = Vec3(0, 0, -9.81);
  for (int i = 0; i < N * N; ++i) d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  Timer tm;
  const Model model = build_model(d);
  j["model_ms"] = tm.elapsed_ms();
  j["nodes"] = model.num_nodes();
  j["tets"] = model.num_tets();
  j["nnz_L"] = model.factor().info().nnz_L;
  State s = make_state(model);
  SolverOptions so;
  so.max_iterations = 2;
  so.rel_tolerance = 0;
  (void)step(model, s, so);  // a sagged, non-trivial state
  const long n = model.num_nodes();

  // CPU phases (this machine's cores).
  j["cpu_local_ms"] = cpu_ms(R, [&] { (void)evaluate(model, s, nullptr, false); });
  const Eigen::MatrixXd f_cpu = s.force;
  j["cpu_solve_3rhs_ms"] = cpu_ms(R, [&] {
    Eigen::MatrixXd t = f_cpu;
    model.factor().solve_in_place(t);
  });
  j["cpu_pd_iteration_ms"] = cpu_ms(R, [&] {  // x is not moved: every repetition is the same iteration
    (void)evaluate(model, s, nullptr, false);
    solve_global(model, s);
  });

  // GPU: plan, upload, agreement.
  Timer tp;
  const gpu::SupernodalPlan plan = gpu::make_supernodal_plan(model.factor().supernodal_factor());
  j["plan_ms"] = tp.elapsed_ms();
  j["levels"] = plan.levels;
  j["supernodes"] = plan.nsuper;
  j["stored_values"] = plan.stored_values();
  Timer tu;
  gpu::DevicePd pd(make_device_pd_desc(model, s.inputs));
  gpu::synchronize();
  j["upload_ms"] = tu.elapsed_ms();
  pd.set_positions(s.x);
  (void)evaluate(model, s, nullptr, false);
  pd.evaluate_forces();
  const Points f_gpu = pd.forces();
  pd.check();
  const Points f_ref = s.force;
  j["forces_max_rel"] = (f_gpu - f_ref).cwiseAbs().maxCoeff() / f_ref.cwiseAbs().maxCoeff();

  gpu::DeviceSolve& solve = pd.solver();
  Eigen::MatrixXd x_cpu = f_ref;
  model.factor().solve_in_place(x_cpu);
  Eigen::MatrixXd x_gpu = f_ref;
  solve.solve(x_gpu);
  j["solve_rel_err"] = (x_gpu - x_cpu).norm() / x_cpu.norm();
  j["solve_residual"] = (model.matrix() * x_gpu - f_ref).norm() / f_ref.norm();
  Eigen::MatrixXd x_gpu2 = f_ref;
  solve.solve(x_gpu2);
  j["solve_bitwise_repeatable"] = (x_gpu2.array() == x_gpu.array()).all();

  gpu::DeviceVector work(static_cast<size_t>(3 * n));
  const Eigen::MatrixXd f_col = f_ref;  // column-major n × 3, the layout of the device solves
  auto reset = [&] {
    work.upload(f_col.data(), f_col.size());  // outside the timed region
  };
  reset();
  j["solve_3rhs_ms"] = gpu::time_device_ms([&] { solve.solve_device(work.data(), 3); }, R);
  j["solve_gbps"] = 2.0 * plan.stored_values() * 8.0 / (j["solve_3rhs_ms"].get<double>() * 1e6);
  // cuSPARSE on the same factor: SpSM (3 columns at once) and SpSV (column by column). The baseline
  // is the faster of the two that solves correctly.
  double baseline = 0;
  for (const bool spsv : {false, true}) {
    const char* name = spsv ? "spsv" : "spsm";
    gpu::CusparseSolve sp(model.factor().supernodal_factor(), 3, spsv);
    reset();
    sp.solve_device(work.data());
    gpu::synchronize();
    Eigen::MatrixXd xs(n, 3);
    work.download(xs.data(), xs.size());
    const double err = (xs - x_cpu).norm() / x_cpu.norm();
    const double ms = gpu::time_device_ms([&] { sp.solve_device(work.data()); }, std::min(R, 5), 1);
    j[fmt::format("{}_rel_err", name)] = err;
    j[fmt::format("{}_ms", name)] = ms;
    if (err <= 1e-8 && (baseline == 0 || ms < baseline)) baseline = ms;
  }
  j["spsv_baseline_ms"] = baseline > 0 ? nlohmann::ordered_json(baseline) : nullptr;
  j["solve_speedup_vs_spsv"] =
      baseline > 0 ? nlohmann::ordered_json(baseline / j["solve_3rhs_ms"].get<double>()) : nullptr;
  j["local_ms"] = gpu::time_device_ms([&] { pd.evaluate_forces(); }, R);

  // One PD iteration on the device against the CPU's from the same state.
  {
    pd.set_positions(s.x);
    pd.iterate();
    const Points xg = pd.positions();
    State t = s;
    (void)evaluate(model, t, nullptr, false);
    solve_global(model, t);
    const Points xc = t.x + Points(t.rhs);
    j["pd_iteration_rel"] = (xg - xc).norm() / (xc - s.x).norm();
    pd.set_positions(s.x);
    // Timed iterations, with the device's free memory before and after (no allocation in a step).
    const double free_before = gpu::device_free_bytes();
    j["pd_iteration_ms"] = gpu::time_device_ms([&] { pd.iterate(); }, R);
    pd.check();
    j["pd_iteration_alloc_bytes"] = free_before - gpu::device_free_bytes();
  }

  // Plain PD (no acceleration) for a fixed number of iterations on both, from the same state: the
  // largest position difference over the bounding-box diagonal.
  {
    const int iters = 30;
    State t = s;
    for (int it = 0; it < iters; ++it) {
      (void)evaluate(model, t, nullptr, false);
      solve_global(model, t);
      t.x += Points(t.rhs);
    }
    pd.set_positions(s.x);
    for (int it = 0; it < iters; ++it) pd.iterate();
    pd.check();
    const Points xg = pd.positions();
    const double diag =
        (model.rest_positions().colwise().maxCoeff() - model.rest_positions().colwise().minCoeff()).norm();
    j["pd_30_iterations_max_diff_over_diag"] = (xg - t.x).cwiseAbs().maxCoeff() / diag;
  }

  // 96 right-hand sides (the adjoint batches of the differentiable solver).
  {
    std::mt19937 rng(3);
    std::uniform_real_distribution<double> u(-1, 1);
    Eigen::MatrixXd B(n, 96);
    for (long i = 0; i < B.size(); ++i) B.data()[i] = u(rng);
    Eigen::MatrixXd Xc = B;
    model.factor().solve_in_place(Xc);
    Eigen::MatrixXd Xg = B;
    solve.solve(Xg);
    j["solve_96rhs_rel_err"] = (Xg - Xc).norm() / Xc.norm();
    gpu::DeviceVector w96(static_cast<size_t>(B.size()));
    w96.upload(B.data(), B.size());
    j["solve_96rhs_ms"] = gpu::time_device_ms([&] { solve.solve_device(w96.data(), 96); }, std::min(R, 10), 1);
    j["cpu_solve_96rhs_ms"] = cpu_ms(3, [&] {
      Eigen::MatrixXd t = B;
      model.factor().solve_in_place(t);
    });
  }

  // Dense Cholesky of an m × m SPD matrix (the size of the collision system of Figure 4).
  if (o.dense_m > 0) {
    const int m = o.dense_m;
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> u(-1, 1);
    Eigen::MatrixXd G(m, m);
    for (long i = 0; i < G.size(); ++i) G.data()[i] = u(rng);
    Eigen::MatrixXd H = G * G.transpose() / m + Eigen::MatrixXd::Identity(m, m);
    Eigen::MatrixXd g(m, 3);
    for (long i = 0; i < g.size(); ++i) g.data()[i] = u(rng);
    Eigen::LLT<Eigen::MatrixXd> llt;
    j["cpu_dense_refactor_ms"] = cpu_ms(3, [&] { llt.compute(H); });
    const Eigen::MatrixXd uc = llt.solve(g);
    gpu::DeviceDenseCholesky dc(m, 3);
    dc.upload(H);
    dc.factorize();
    Eigen::MatrixXd ug = g;
    dc.solve(ug);
    j["dense_rel_err"] = (ug - uc).norm() / uc.norm();
    // potrf overwrites its input: each repetition first restores the matrix (a device copy),
    // timed alone as well so that the factorization's own time is the difference.
    const double restore = gpu::time_device_ms([&] { dc.restore_async(); }, std::min(R, 10), 1);
    const double both = gpu::time_device_ms(
        [&] {
          dc.restore_async();
          dc.factorize_async();
        },
        std::min(R, 10), 1);
    j["dense_restore_ms"] = restore;
    j["dense_refactor_ms"] = both - restore;
    j["dense_m"] = m;
  }
  // The collision system of Figure 4's elbow (m region nodes, k = 148 springs over random tets of
  // the region, a quarter of them two-sided): refactor and Woodbury on the device against the
  // CPU's dense solve of H.
  if (o.dense_m > 0) {
    const int m = o.dense_m, k = 148;
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> u(-1, 1), w(0.05, 1.0);
    std::uniform_int_distribution<int> node(0, m - 1);
    Eigen::MatrixXd G(m, m);
    for (long i = 0; i < G.size(); ++i) G.data()[i] = u(rng);
    const Eigen::MatrixXd sigma = G * G.transpose() / m + Eigen::MatrixXd::Identity(m, m);
    Timer ti;
    const Eigen::MatrixXd sigma_inv = sigma.llt().solve(Eigen::MatrixXd::Identity(m, m));
    j["cpu_sigma_inverse_ms"] = ti.elapsed_ms();
    std::vector<gpu::ContactSpring> springs(k);
    Eigen::MatrixXd H = sigma;
    for (int q = 0; q < k; ++q) {
      auto& sp = springs[q];
      const int slots = q % 4 == 0 ? 8 : 4;
      double sum = 0;
      for (int a = 0; a < slots; ++a) {
        sp.nodes[a] = node(rng);
        sp.weights[a] = w(rng);
        sum += a < 4 ? sp.weights[a] : 0.0;
      }
      for (int a = 0; a < slots; ++a) sp.weights[a] *= (a < 4 ? 1.0 : -1.0) / sum;
      sp.stiffness = 1e3;
      Eigen::VectorXd wv = Eigen::VectorXd::Zero(m);
      for (int a = 0; a < 8; ++a) wv(sp.nodes[a]) += sp.weights[a];
      H += sp.stiffness * wv * wv.transpose();
    }
    Eigen::MatrixXd g(m, 3);
    for (long i = 0; i < g.size(); ++i) g.data()[i] = u(rng);
    Eigen::LLT<Eigen::MatrixXd> llt;
    j["cpu_collision_refactor_ms"] = cpu_ms(3, [&] { llt.compute(H); });
    const Eigen::MatrixXd ref = llt.solve(g);
    gpu::DeviceSchurSystem sys(sigma, sigma_inv, k);
    sys.set_springs(springs);
    sys.set_rhs(g);
    sys.refactor_async();
    const Eigen::MatrixXd ur = sys.result();
    sys.woodbury_async();
    const Eigen::MatrixXd uw = sys.result();
    j["collision_springs"] = k;
    j["refactor_rel_err"] = (ur - ref).norm() / ref.norm();
    j["woodbury_rel_err"] = (uw - ref).norm() / ref.norm();
    j["woodbury_vs_refactor"] = (uw - ur).norm() / ur.norm();
    j["collision_refactor_ms"] = gpu::time_device_ms([&] { sys.refactor_async(); }, std::min(R, 10), 1);
    j["woodbury_ms"] = gpu::time_device_ms([&] { sys.woodbury_async(); }, R);
  }
  if (o.collisions) bench_algorithm_one(o, j);
  j["cpu_local_over_gpu"] = j["cpu_local_ms"].get<double>() / j["local_ms"].get<double>();
  j["cpu_solve_over_gpu"] = j["cpu_solve_3rhs_ms"].get<double>() / j["solve_3rhs_ms"].get<double>();
  j["cpu_iteration_over_gpu"] = j["cpu_pd_iteration_ms"].get<double>() / j["pd_iteration_ms"].get<double>();
  j["total_s"] = total.elapsed_ms() / 1000.0;
  print_result(j, o.json);
}

}  // namespace

void add_bench_gpu_command(CLI::App& bench) {
  auto o = std::make_shared<BenchGpuOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "gpu",
      "The CUDA backend beside the CPU on box:N in one run: local step, 3-RHS substitutions (own supernodal solve and "
      "cuSPARSE SpSM), PD iteration, 96-RHS substitutions, dense Cholesky; agreement figures included");
  cmd->add_option("--box", o->box, "Nodes per side of the unit box")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed repetitions per figure (median; 3 warm-ups)")->capture_default_str();
  cmd->add_option("--dense", o->dense_m, "Order of the dense SPD system (0: skip)")->capture_default_str();
  cmd->add_option("--collisions", o->collisions, "Algorithm 1 on the device (a sphere pressing the top face; 0: skip)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON: local_ms, solve_3rhs_ms, spsv_baseline_ms, pd_iteration_ms, outer_1inner_ms, "
                "extra_inner_ms, solve_96rhs_ms, dense_refactor_ms, woodbury_ms, the cpu_* figures of the same run "
                "and the agreement figures");
  cmd->callback([o] { run_bench_gpu(*o); });
}

}  // namespace xpd::cli
