#pragma once
// Core PD benchmark on the structured box or a tet mesh file (wired to `xpd bench core`).
#include <string>
#include <xpd/energy/volume.hpp>

namespace xpd {

/// What `bench core` measures: box:N (N nodes per side, unit box, bottom layer z = 0 attached) or,
/// when `mesh` is set, that tet mesh file with its lowest 5 % along `up` (0 = x, 1 = y, 2 = z)
/// attached; μ = 1e4 Pa (times the mesh's height in its units, so that ρ g h / μ = 1 as on the unit
/// box), ρ = 1000, gravity along −up.
struct CoreBenchConfig {
  int box_n = 48;
  std::string mesh;  ///< tet mesh file (any format io::read_tet_mesh reads); empty: the box
  int up = 1;        ///< up axis of a mesh file
  int iterations = 10;
  int threads = 0;  ///< ≤ 0: TBB's default (all hardware threads)
  double lambda = 0.0;
  VolumeMatrix volume_matrix = VolumeMatrix::Coupled;
};

struct CoreBenchResult {
  std::string mesh;  ///< "box:N" or the mesh file's name
  int box_n = 0;
  long nodes = 0;
  long tets = 0;
  int threads = 0;                   ///< TBB threads
  int blas_threads = 0;              ///< OpenBLAS threads (0: another BLAS)
  int iterations = 0;                ///< measured PD iterations
  double nnz_L = 0;                  ///< nonzeros of the Cholesky factor
  double analyze_ms = 0;             ///< CHOLMOD symbolic analysis (METIS)
  double factor_ms = 0;              ///< CHOLMOD numeric factorization
  double model_ms = 0;               ///< whole build_model (rest data, colouring, assembly, factor)
  double pd_iteration_ms = 0;        ///< median of local + rhs + solve per plain PD iteration
  double local_ms = 0;               ///< median local step (projections fused with elastic forces)
  double rhs_ms = 0;                 ///< median rhs phase
  double solve_ms = 0;               ///< median global solve inside the iteration
  double solve_3rhs_ms = 0;          ///< median n × 3 solve alone (SparseCholesky's default solve), same run
  double cholmod_solve_3rhs_ms = 0;  ///< median of CHOLMOD's serial cholmod_l_solve2, same factor, same run
  double solve_gbps = 0;             ///< factor bytes read by the two sweeps of solve_3rhs_ms per second [GB/s]
  double ratio = 0;                  ///< pd_iteration_ms / solve_3rhs_ms (target ≤ 1.25)
  double lambda = 0;                 ///< λ of the run (0: plain PD)
  std::string volume_matrix;         ///< "coupled" / "isotropic" when λ > 0, else "none"
  std::string to_json() const;
};

/// Builds box:N (N nodes per side, unit box, μ = 1e4 Pa, ρ = 1000, bottom layer attached with
/// stiff springs, gravity), factors once, runs `iterations` plain PD iterations from a sagged
/// state and times each phase; also times the bare 3-RHS CHOLMOD solve. `threads` ≤ 0 uses the
/// TBB default. λ > 0 adds the volume term with the given matrix: the global solve is then the
/// coupled 3n × 3n one (solve_3rhs_ms times that bare 3n solve) or the isotropic n × 3 one, and the
/// timed iteration is local (corotated + volume) + rhs + solve, without the line search.
CoreBenchResult bench_core(const CoreBenchConfig& config);
CoreBenchResult bench_core(int box_n, int iterations = 10, int threads = 0, double lambda = 0.0,
                           VolumeMatrix volume_matrix = VolumeMatrix::Coupled);

/// Thread scaling of one PD iteration, measured in one run on one model: the same state timed
/// with 1 thread (TBB and OpenBLAS, xpd::ThreadLimit) and with `config.threads` (≤ 0: all hardware threads),
/// alternating 1 / N for `config.iterations` rounds so that machine noise hits both alike. Speed-ups are 1-thread time
/// over N-thread time (medians).
struct CoreScalingResult {
  CoreBenchResult one;   ///< phases at 1 thread
  CoreBenchResult many;  ///< phases at N threads
  double iteration_speedup = 0, local_speedup = 0, rhs_speedup = 0, solve_speedup = 0;
  std::string to_json() const;
};
CoreScalingResult bench_core_scaling(const CoreBenchConfig& config);

}  // namespace xpd
