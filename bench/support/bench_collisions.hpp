#pragma once
// Collision benchmark on the structured box (wired to `xpd bench collisions --box N --json`):
// Wang et al. 2021's Figure 4 experiment on box:N. The top face's central patch holds the collision
// proxies (its nodes; the Schur region x2 is the nodes of their tets), a sphere presses into it so
// that a fraction of the proxies is in contact, and one run measures, on the same model:
// a plain PD iteration, an outer iteration of Algorithm 1 with one inner iteration, the cost of
// each further inner iteration, and the full-refactorization baseline (a).
#include <string>
#include <xpd/solver/collision_solver.hpp>

namespace xpd {

struct CollisionBenchOptions {
  int box_n = 48;               ///< nodes per side
  int iterations = 5;           ///< measured outer iterations per configuration (mean reported)
  int refactor_iterations = 2;  ///< measured iterations of baseline (a)
  int extra_inner = 4;          ///< inner iterations beyond the first for extra_inner_ms
  double patch = 0.93;          ///< side of the central top patch holding proxies, fraction of the box side
  double indent = 0.08;         ///< sphere indentation depth below the undeformed top face (box side = 1)
  double sphere_radius = 0.3;
  int threads = 0;  ///< ≤ 0: TBB default
  SchurSolveMethod schur_solve = SchurSolveMethod::Automatic;
};

struct CollisionBenchResult {
  int box_n = 0;               ///< 0 for a scene
  std::string scene;           ///< scene file (scene benchmark)
  int frame = 0;               ///< frame whose contact state is measured (scene benchmark)
  double sigma_inv_bytes = 0;  ///< dense Σ and Σ⁻¹ of the region: 2 m² doubles (Σ⁻¹ only with Woodbury)
  long nodes = 0, tets = 0;
  int threads = 0;
  int proxies = 0;                            ///< proxies of the region (top patch nodes)
  int collision_nodes = 0;                    ///< m = |x2|
  int active_proxies = 0;                     ///< contacts at the measured state
  double active_fraction = 0;                 ///< active_proxies / proxies
  int beta_elements = 0;                      ///< |E_β|
  std::string schur_solve;                    ///< method the automatic choice used in the measured iterations
  double nnz_L = 0, nnz_L_unconstrained = 0;  ///< x2-last factor vs. the model's METIS factor
  double factor_ms = 0;                       ///< model factorization (plain METIS)
  double schur_setup_ms = 0;                  ///< x2-last analyze + factor + Σ (+ Σ⁻¹)
  double plain_iteration_ms = 0;              ///< plain PD iteration (local + rhs + solve), no collisions
  double outer_1inner_ms = 0;                 ///< Algorithm 1 outer iteration with J = 1 (incl. detection)
  double extra_inner_ms = 0;                  ///< cost of each further inner iteration
  double refactor_iteration_ms = 0;           ///< baseline (a): springs in K, numeric refactor + solve
  double pcg_iteration_ms = 0;                ///< baseline (c): PCG Jacobi, 100 iterations
  CollisionTimings phases_1inner;             ///< per outer iteration, J = 1
  PhaseTimings pd_phases_1inner;              ///< per outer iteration, J = 1 (local, rhs, ...)
  std::string to_json() const;
};

/// Runs the benchmark (one model, one process). Throws Error on invalid options.
CollisionBenchResult bench_collisions(const CollisionBenchOptions& options);

/// The same figures on a scene with collision handling (`xpd bench collisions --scene FILE`):
/// frames 1..frame are solved as the scene says (frame ≤ 0: up to the first frame with active
/// contacts); then, from that converged contact state and with that frame's inputs, `iterations`
/// plain PD iterations of the same model, the same number of Algorithm 1 outer iterations with J = 1
/// and with J = 1 + extra_inner (the scene's accelerator off, no convergence test). Fills the
/// box-independent fields of the result plus scene, frame and sigma_inv_bytes (refactor and PCG
/// baselines are not run). Throws Error when the scene has no collision handling or no frame up to
/// the last one has contacts.
struct SceneCollisionBenchOptions {
  std::string scene;
  int frame = 0;
  int iterations = 5;
  int extra_inner = 4;
};
CollisionBenchResult bench_collisions_scene(const SceneCollisionBenchOptions& options);

}  // namespace xpd
