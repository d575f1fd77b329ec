#include "bench_core.hpp"

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/info.h>

#include <algorithm>
#include <memory>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/pd_solver.hpp>

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
      "{{\"box\": {}, \"nodes\": {}, \"tets\": {}, \"threads\": {}, \"iterations\": {}, "
      "\"nnz_L\": {:.0f}, \"analyze_ms\": {:.3f}, \"factor_ms\": {:.3f}, \"model_ms\": {:.3f}, "
      "\"pd_iteration_ms\": {:.3f}, \"local_ms\": {:.3f}, \"rhs_ms\": {:.3f}, \"solve_ms\": {:.3f}, "
      "\"solve_3rhs_ms\": {:.3f}, \"ratio\": {:.3f}, \"lambda\": {}, \"volume_matrix\": \"{}\"}}",
      box_n, nodes, tets, threads, iterations, nnz_L, analyze_ms, factor_ms, model_ms, pd_iteration_ms, local_ms,
      rhs_ms, solve_ms, solve_3rhs_ms, ratio, lambda, volume_matrix);
}

CoreBenchResult bench_core(int box_n, int iterations, int threads, double lambda, VolumeMatrix volume_matrix) {
  if (!(lambda >= 0.0)) throw Error(fmt::format("bench core: lambda must be >= 0, got {}", lambda));
  if (box_n < 2 || box_n > 1024) throw Error(fmt::format("bench core: box size {} outside [2, 1024]", box_n));
  if (iterations < 1) throw Error("bench core: iterations must be >= 1");
  std::unique_ptr<tbb::global_control> control;
  if (threads > 0)
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                    static_cast<size_t>(threads));
  CoreBenchResult r;
  r.box_n = box_n;
  r.threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  ModelDesc d;
  d.mesh = make_box(box_n, box_n, box_n, Vec3::Zero(), Vec3::Ones());
  d.mu = {1e4};
  d.lambda = {lambda};
  d.volume_matrix = volume_matrix;
  r.lambda = lambda;
  r.volume_matrix = lambda == 0.0 ? "none" : volume_matrix == VolumeMatrix::Coupled ? "coupled" : "isotropic";
  d.density = {1000.0};
  d.gravity = Vec3(0, 0, -9.81);
  for (int i = 0; i < box_n * box_n; ++i)  // bottom layer z = 0: nodes i + N (j + N·0)
    d.attachments.push_back({BaryPoint::node(i), 1e6, d.mesh.nodes.row(i).transpose()});
  r.nodes = d.mesh.nodes.rows();
  r.tets = d.mesh.tets.rows();
  Timer t;
  const Model model = build_model(d);
  r.model_ms = t.elapsed_ms();
  r.analyze_ms = model.factor().info().analyze_ms;
  r.factor_ms = model.factor().info().factorize_ms;
  r.nnz_L = model.factor().info().nnz_L;
  State s = make_state(model);
  // Warm-up: two iterations (first-touch of CHOLMOD workspaces, a non-trivial deformed state).
  SolverOptions warm;
  warm.max_iterations = 2;
  warm.rel_tolerance = 0.0;
  step(model, s, warm);

  std::vector<double> local, rhs, solve, iter, bare;
  for (int k = 0; k < iterations; ++k) {
    PhaseTimings pt;
    PhaseTimer timer;
    evaluate(model, s, &pt);
    timer.skip();
    solve_global(model, s);
    timer.lap(pt.solve);
    // Update (not timed as part of the three phases). With the volume term a full step without
    // the line search can invert elements and send the kernel to its SVD fallback: the phases are
    // then timed at the warmed-up state instead.
    if (!model.has_volume_term()) s.x += Points(s.rhs);
    local.push_back(pt.local);
    rhs.push_back(pt.rhs);
    solve.push_back(pt.solve);
    iter.push_back(pt.local + pt.rhs + pt.solve);
    // The bare CHOLMOD solve on the same right-hand side size (n × 3, or 3n × 1 when coupled).
    Eigen::MatrixXd B = model.coupled()
                            ? Eigen::MatrixXd(Eigen::Map<const Eigen::MatrixXd>(s.rhs3.data(), s.rhs3.size(), 1))
                            : Eigen::MatrixXd(s.rhs);
    Timer tb;
    model.factor().solve_in_place(B);
    bare.push_back(tb.elapsed_ms());
  }
  r.iterations = iterations;
  r.local_ms = median(local);
  r.rhs_ms = median(rhs);
  r.solve_ms = median(solve);
  r.pd_iteration_ms = median(iter);
  r.solve_3rhs_ms = median(bare);
  r.ratio = r.solve_3rhs_ms > 0 ? r.pd_iteration_ms / r.solve_3rhs_ms : 0.0;
  return r;
}

}  // namespace xpd
