#include "bench_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <xpd/core/error.hpp>
#include <xpd/core/threads.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

namespace xpd {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}
}  // namespace

std::string CoreBenchResult::to_json() const {
  return fmt::format(
      "{{\"mesh\": \"{}\", \"box\": {}, \"nodes\": {}, \"tets\": {}, \"threads\": {}, \"blas_threads\": {}, "
      "\"iterations\": {}, "
      "\"nnz_L\": {:.0f}, \"analyze_ms\": {:.3f}, \"factor_ms\": {:.3f}, \"model_ms\": {:.3f}, "
      "\"pd_iteration_ms\": {:.3f}, \"local_ms\": {:.3f}, \"rhs_ms\": {:.3f}, \"solve_ms\": {:.3f}, "
      "\"solve_3rhs_ms\": {:.3f}, \"cholmod_solve_3rhs_ms\": {:.3f}, \"solve_gbps\": {:.3f}, \"ratio\": {:.3f}, "
      "\"lambda\": {}, \"volume_matrix\": \"{}\"}}",
      mesh, box_n, nodes, tets, threads, blas_threads, iterations, nnz_L, analyze_ms, factor_ms, model_ms,
      pd_iteration_ms, local_ms, rhs_ms, solve_ms, solve_3rhs_ms, cholmod_solve_3rhs_ms, solve_gbps, ratio, lambda,
      volume_matrix);
}

std::string CoreScalingResult::to_json() const {
  return fmt::format(
      "{{\"one_thread\": {}, \"threads\": {}, \"iteration_speedup\": {:.3f}, \"local_speedup\": {:.3f}, "
      "\"rhs_speedup\": {:.3f}, \"solve_speedup\": {:.3f}}}",
      one.to_json(), many.to_json(), iteration_speedup, local_speedup, rhs_speedup, solve_speedup);
}

namespace {

// The benchmark's model and a state warmed up by two iterations (first touch of the workspaces, a
// non-trivial deformed state), with the static fields of the result filled in.
struct Setup {
  std::unique_ptr<Model> model;
  std::unique_ptr<State> state;
  std::unique_ptr<SparseCholesky> cholmod;  // the same matrix factored again, solved by CHOLMOD serially
  CoreBenchResult base;
};

Setup make_setup(const CoreBenchConfig& c) {
  if (!(c.lambda >= 0.0)) throw Error(fmt::format("bench core: lambda must be >= 0, got {}", c.lambda));
  if (c.iterations < 1) throw Error("bench core: iterations must be >= 1");
  Setup su;
  CoreBenchResult& r = su.base;
  ModelDesc d;
  if (c.mesh.empty()) {
    if (c.box_n < 2 || c.box_n > 1024) throw Error(fmt::format("bench core: box size {} outside [2, 1024]", c.box_n));
    r.box_n = c.box_n;
    r.mesh = fmt::format("box:{}", c.box_n);
    d.mesh = make_box(c.box_n, c.box_n, c.box_n, Vec3::Zero(), Vec3::Ones());
    d.gravity = Vec3(0, 0, -9.81);
    for (int i = 0; i < c.box_n * c.box_n; ++i)  // bottom layer z = 0: nodes i + N (j + N·0)
      d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  } else {
    if (c.up < 0 || c.up > 2) throw Error(fmt::format("bench core: up axis {} is not 0, 1 or 2", c.up));
    d.mesh = io::read_tet_mesh(c.mesh);
    r.mesh = std::filesystem::path(c.mesh).filename().string();
    d.gravity = Vec3::Zero();
    d.gravity(c.up) = -9.81;
    const double lo = d.mesh.nodes.col(c.up).minCoeff(), hi = d.mesh.nodes.col(c.up).maxCoeff();
    for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
      if (d.mesh.nodes(i, c.up) <= lo + 0.05 * (hi - lo))
        d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e6, d.mesh.nodes.row(i).transpose()});
  }
  // ρ g L / μ = 1 on the unit box; a mesh file keeps that ratio (its μ scales with its height), so
  // that any mesh sags alike instead of collapsing into inverted elements.
  const double height =
      d.mesh.nodes.col(c.mesh.empty() ? 2 : c.up).maxCoeff() - d.mesh.nodes.col(c.mesh.empty() ? 2 : c.up).minCoeff();
  d.mu = {1e4 * (c.mesh.empty() ? 1.0 : height)};
  d.lambda = {c.lambda};
  d.volume_matrix = c.volume_matrix;
  d.density = {1000.0};
  r.lambda = c.lambda;
  r.volume_matrix = c.lambda == 0.0 ? "none" : c.volume_matrix == VolumeMatrix::Coupled ? "coupled" : "isotropic";
  r.nodes = d.mesh.nodes.rows();
  r.tets = d.mesh.tets.rows();
  Timer t;
  su.model = std::make_unique<Model>(build_model(d));
  r.model_ms = t.elapsed_ms();
  const Model& model = *su.model;
  r.analyze_ms = model.factor().info().analyze_ms;
  r.factor_ms = model.factor().info().factorize_ms;
  r.nnz_L = model.factor().info().nnz_L;
  su.cholmod = std::make_unique<SparseCholesky>(model.factor().backend());
  su.cholmod->compute(model.coupled() ? model.matrix3() : model.matrix());
  su.cholmod->set_parallel_solve(false);
  su.state = std::make_unique<State>(make_state(model));
  SolverOptions warm;
  warm.max_iterations = 2;
  warm.rel_tolerance = 0.0;
  step(model, *su.state, warm);
  return su;
}

struct Sample {
  double local = 0, rhs = 0, solve = 0, bare = 0, cholmod = 0;
  int blas_threads = 0;  // OpenBLAS's threads while sampled
};

// One plain PD iteration's phases at the current state, the bare solve on the same right-hand
// side size (n × 3, or 3n × 1 when coupled) with the default solve and with CHOLMOD's serial one.
// With `advance` the state moves by the step (not with the volume term: a full step without the
// line search can invert elements and send the kernel to its SVD fallback).
Sample sample(Setup& su, bool advance) {
  const Model& model = *su.model;
  State& s = *su.state;
  PhaseTimings pt;
  PhaseTimer timer;
  evaluate(model, s, &pt);
  timer.skip();
  solve_global(model, s);
  timer.lap(pt.solve);
  Sample out{pt.local, pt.rhs, pt.solve};
  out.blas_threads = blas_threads();
  const Eigen::MatrixXd B = model.coupled()
                                ? Eigen::MatrixXd(Eigen::Map<const Eigen::MatrixXd>(s.rhs3.data(), s.rhs3.size(), 1))
                                : Eigen::MatrixXd(s.rhs);
  Eigen::MatrixXd X = B;
  Timer tb;
  model.factor().solve_in_place(X);
  out.bare = tb.elapsed_ms();
  X = B;
  Timer tc;
  su.cholmod->solve_in_place(X);
  out.cholmod = tc.elapsed_ms();
  if (advance && !model.has_volume_term()) s.x += Points(s.rhs);
  return out;
}

void summarize(const std::vector<Sample>& v, const Setup& su, int threads, CoreBenchResult& r) {
  r = su.base;
  r.threads = threads;
  r.blas_threads = v.empty() ? 0 : v.front().blas_threads;
  r.iterations = static_cast<int>(v.size());
  std::vector<double> local, rhs, solve, iter, bare, chol;
  for (const Sample& x : v) {
    local.push_back(x.local);
    rhs.push_back(x.rhs);
    solve.push_back(x.solve);
    iter.push_back(x.local + x.rhs + x.solve);
    bare.push_back(x.bare);
    chol.push_back(x.cholmod);
  }
  r.local_ms = median(local);
  r.rhs_ms = median(rhs);
  r.solve_ms = median(solve);
  r.pd_iteration_ms = median(iter);
  r.solve_3rhs_ms = median(bare);
  r.cholmod_solve_3rhs_ms = median(chol);
  r.ratio = r.solve_3rhs_ms > 0 ? r.pd_iteration_ms / r.solve_3rhs_ms : 0.0;
  // Forward and back substitution each read the whole factor once.
  r.solve_gbps = r.solve_3rhs_ms > 0 ? 2.0 * su.model->factor().info().factor_bytes / (r.solve_3rhs_ms * 1e6) : 0.0;
}

}  // namespace

CoreBenchResult bench_core(const CoreBenchConfig& c) {
  const ThreadLimit limit(c.threads);
  const int threads = tbb_threads();
  Setup su = make_setup(c);
  std::vector<Sample> v;
  for (int k = 0; k < c.iterations; ++k) v.push_back(sample(su, /*advance=*/true));
  CoreBenchResult r;
  summarize(v, su, threads, r);
  return r;
}

CoreBenchResult bench_core(int box_n, int iterations, int threads, double lambda, VolumeMatrix volume_matrix) {
  CoreBenchConfig c;
  c.box_n = box_n;
  c.iterations = iterations;
  c.threads = threads;
  c.lambda = lambda;
  c.volume_matrix = volume_matrix;
  return bench_core(c);
}

CoreScalingResult bench_core_scaling(const CoreBenchConfig& c) {
  int many = c.threads;
  if (many <= 0) many = tbb_threads();
  Setup su = [&] {
    const ThreadLimit limit(many);
    return make_setup(c);
  }();
  std::vector<Sample> one_v, many_v;
  for (int k = 0; k < c.iterations; ++k) {
    {  // TBB and OpenBLAS alike
      const ThreadLimit limit(1);
      one_v.push_back(sample(su, /*advance=*/false));
    }
    {
      const ThreadLimit limit(many);
      many_v.push_back(sample(su, /*advance=*/false));
    }
  }
  CoreScalingResult r;
  summarize(one_v, su, 1, r.one);
  summarize(many_v, su, many, r.many);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  r.iteration_speedup = ratio(r.one.pd_iteration_ms, r.many.pd_iteration_ms);
  r.local_speedup = ratio(r.one.local_ms, r.many.local_ms);
  r.rhs_speedup = ratio(r.one.rhs_ms, r.many.rhs_ms);
  r.solve_speedup = ratio(r.one.solve_3rhs_ms, r.many.solve_3rhs_ms);
  return r;
}

}  // namespace xpd
