#pragma once
// Core PD benchmark on the structured box (wired to `xpd bench core --box N --json`).
#include <string>
#include <xpd/energy/volume.hpp>

namespace xpd {

struct CoreBenchResult {
  int box_n = 0;
  long nodes = 0;
  long tets = 0;
  int threads = 0;
  int iterations = 0;          ///< measured PD iterations
  double nnz_L = 0;            ///< nonzeros of the Cholesky factor
  double analyze_ms = 0;       ///< CHOLMOD symbolic analysis (METIS)
  double factor_ms = 0;        ///< CHOLMOD numeric factorization
  double model_ms = 0;         ///< whole build_model (rest data, colouring, assembly, factor)
  double pd_iteration_ms = 0;  ///< median of local + rhs + solve per plain PD iteration
  double local_ms = 0;         ///< median local step (projections fused with elastic forces)
  double rhs_ms = 0;           ///< median rhs phase
  double solve_ms = 0;         ///< median global solve inside the iteration
  double solve_3rhs_ms = 0;    ///< median CHOLMOD n × 3 solve alone, same factor, same run
  double ratio = 0;            ///< pd_iteration_ms / solve_3rhs_ms (target ≤ 1.25)
  double lambda = 0;           ///< λ of the run (0: plain PD)
  std::string volume_matrix;   ///< "coupled" / "isotropic" when λ > 0, else "none"
  std::string to_json() const;
};

/// Builds box:N (N nodes per side, unit box, μ = 1e4 Pa, ρ = 1000, bottom layer attached with
/// stiff springs, gravity), factors once, runs `iterations` plain PD iterations from a sagged
/// state and times each phase; also times the bare 3-RHS CHOLMOD solve. `threads` ≤ 0 uses the
/// TBB default. λ > 0 adds the volume term with the given matrix: the global solve is then the
/// coupled 3n × 3n one (solve_3rhs_ms times that bare 3n solve) or the isotropic n × 3 one, and the
/// timed iteration is local (corotated + volume) + rhs + solve, without the line search.
CoreBenchResult bench_core(int box_n, int iterations = 10, int threads = 0, double lambda = 0.0,
                           VolumeMatrix volume_matrix = VolumeMatrix::Coupled);

}  // namespace xpd
