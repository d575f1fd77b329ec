#pragma once
// IPC barrier contact inside Projective Dynamics (Li, Yang, Solenthaler 2023, "Efficient
// Incremental Potential Contact for Actuated Face Simulation", §2–3, Algorithm 1; barrier, distances
// and CCD-bounded line search of Li et al. 2020, "Incremental Potential Contact").
//
// Contact surface. A triangle surface whose vertices are proxies (collision/contact.hpp ProxySet:
// s = W x, each vertex bound to one tet by 4 barycentric weights), e.g. the mesh boundary or an
// embedded surface. Every vertex–triangle and edge–edge pair of it that shares no vertex and comes
// closer than d̂ adds the barrier κ b(D, d̂²) (edge–edge times the mollifier χ), D the squared
// distance (collision/distance.hpp). Pairs closer than d̂ at rest are refused at construction (they
// would carry a permanent pre-stress); the rest state must be intersection-free.
//
// Objective per frame: E(x) = E_PD(x) + B(W x), E_PD the model's energy (local step inside).
// One iteration (the frame loop's line-searched step, solver/frame_loop.hpp):
//   f = −∇E at x (PD forces with fresh projections, minus Wᵀ ∇B);
//   ℬ = Wᵀ (Σ_pairs PSD(∇²B_pair)) W, the pair Hessians projected to PSD and factored U Uᵀ;
//   δ solves (K ⊗ I₃ + ℬ) δ = f — by the Schur complement of the collision-free nodes and the 3-D
//     low-rank Woodbury of SchurFactorization::solve_low_rank_system (global_solve = woodbury), or
//     by a sparse Cholesky of the full 3n × 3n matrix every iteration (full_sparse: the oracle);
//   α_max = 0.8 · toi of the surface CCD from W x to W (x + δ) (collision/surface_ccd.hpp: no false
//     negatives, so every iterate stays intersection-free); Armijo backtracking from α_max on E.
// x2 (the Schur region) = the nodes of the tets holding the surface's proxies.
//
// Barrier stiffness κ: given, or automatic (κ ≤ 0): the IPC Toolkit's rule with the PD matrix in
// place of the mass (quasistatic PD has none): κ_min = 10⁷ k̄ / (4 d₀ b''(d₀, d̂²)), k̄ the mean
// diagonal of K, d₀ = (10⁻⁸ · bbox diagonal)²; at each frame start with active pairs
// κ = clamp(−∇Bᵀ∇E_PD / ‖∇B‖², κ_min, 100 κ_min) (with κ = 1 in ∇B); while an obstacle lags
// behind its pose and the closest pair is nearer than d̂/10, κ doubles after each of its advances
// (up to 100 κ_min; IpcFrameStats::kappa_raises).
//
// Obstacles: kinematic triangle surfaces (IpcObstacle) appended to the contact surface after the
// body's vertices. Their pairs with the body carry the same barrier (forces and Hessians on the
// body's coordinates only: each pair's Hessian is restricted to the body's rows before its PSD
// projection); pairs between obstacles are ignored. Within a frame an obstacle moves on the
// straight line of its vertices from where it stands to its keyframed pose at the frame, in
// admissible steps: after every accepted iterate (GlobalStep::advance) the remaining motion Δo is
// proposed together with the body's linear response δ = −(K ⊗ I₃ + ℬ)⁻¹ Wᵀ H_bo Δo (H_bo the pair
// Hessians' body–obstacle blocks), and the joint motion goes as far as the CCD allows with a minimum
// separation of half the smallest pair distance (no gap more than halves), so the surface stays
// intersection-free; the frame converges only once every obstacle stands at its pose (a blocked
// obstacle lags and the frame reports not converged; the next frame goes on from there).
//
// Limits (documented, not hidden): one body surface, all of it in the region; no friction;
// Chebyshev is refused (its iterate is not CCD-checked); a quasistatic or implicit-Euler Model
// with λ = 0 (n × n matrix).
#include <memory>
#include <vector>
#include <xpd/collision/ccd.hpp>
#include <xpd/collision/contact.hpp>
#include <xpd/core/keyframes.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/schur.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

enum class IpcGlobalSolve {
  Woodbury,    ///< Schur complement + 3-D low-rank Woodbury (Li et al. 2023, §3.2)
  FullSparse,  ///< the full 3n × 3n matrix factored every iteration (oracle / baseline)
  /// Li et al. 2023's baseline △: conjugate gradients on (K ⊗ I₃ + ℬ) δ = f preconditioned by the
  /// PD factor (K⁻¹ for x, y, z), to IpcOptions::pcg_tolerance relative residual.
  Pcg,
};

struct IpcOptions {
  double dhat = 0;   ///< activation distance d̂ > 0 [length]
  double kappa = 0;  ///< barrier stiffness κ > 0; ≤ 0: automatic (see the header comment)
  /// CCD of the line search; tolerance ≤ 0 means 10⁻³ d̂, and each search uses at most a tenth of
  /// the closest active pair's distance (so that a gap pressed below the tolerance does not read
  /// as a contact at t = 0). The minimum separation stays 0: the step is cut to 0.8 · toi instead.
  CcdOptions ccd{0.0, 0.0, 1'000'000, 1.0};
  IpcGlobalSolve global_solve = IpcGlobalSolve::Woodbury;
  /// How the barrier term reaches the Woodbury solve: automatic = the factored U (3q × r) while
  /// r ≤ 3q / 2, else the dense block ℬ_N (one Cholesky of ℬ_N + Σ⁻¹[N, N]⁻¹ ⊗ I₃); or forced (tests, benchmarks).
  enum class WoodburyForm { Automatic, Factored, Block } woodbury_form = WoodburyForm::Automatic;
  SchurOptions schur;             ///< dense memory budget of the Schur region
  double pcg_tolerance = 1e-8;    ///< global_solve = pcg: relative residual ‖r‖ / ‖f‖
  int pcg_max_iterations = 2000;  ///< global_solve = pcg: a solve that does not reach the tolerance throws
};

/// A kinematic obstacle of IPC contact: a triangle surface given in its local frame, placed at frame
/// f by T = evaluate(keyframes, f) (core/keyframes.hpp; no keys: where it is given). Orientation and
/// closedness do not matter (the barrier is unsigned); its own triangles may overlap.
struct IpcObstacle {
  Points vertices;  ///< #V × 3, local frame
  Triangles triangles;
  std::vector<Keyframe> keyframes;
};

/// Statistics of one frame.
struct IpcFrameStats {
  FrameStats pd;                 ///< energy (PD + barrier), residual, iterations, line-search halvings
  int active_pairs = 0;          ///< pairs within d̂ at the end of the frame
  double min_distance = 0;       ///< smallest distance among them (d̂ when none)
  double kappa = 0;              ///< κ at the end of the frame (the largest used, when raised)
  int max_touched_nodes = 0;     ///< largest n_c (nodes under active barriers) in one iteration
  int max_rank = 0;              ///< largest r (columns of U) in one iteration
  double min_step_fraction = 1;  ///< smallest CCD bound α_max computed in the frame (with Anderson also
                                 ///< those of extrapolated iterates, which are then rejected)
  double ccd_ms = 0, barrier_ms = 0;
  /// global_solve = woodbury, parts of the global step summed over the frame: the sparse forward
  /// and backward substitutions with the PD factor (what a plain PD iteration also pays), and the
  /// reduced solve on the region (gather of Σ⁻¹[N, N], capacitance and its factorization, the
  /// Σ⁻¹ products and the refinement step); with obstacles they include the predictor solve of
  /// each obstacle advance.
  double substitution_ms = 0, reduced_ms = 0;
  int pcg_iterations = 0;     ///< CG iterations of the frame (global_solve = pcg)
  int obstacle_advances = 0;  ///< obstacle moves of the frame (1 when nothing blocks them)
  int kappa_raises = 0;       ///< doublings of the automatic κ for a lagging obstacle (header comment)
  /// Largest distance of an obstacle vertex from its keyframed pose at the end of the frame (0 when
  /// every obstacle arrived) [length].
  double obstacle_lag = 0;
};

/// Constant part: the surface, its pairs' mollifier thresholds, the Schur factorization with x2
/// last. Serves any number of IpcStates.
class IpcModel {
 public:
  /// `proxies`: the surface vertices as proxies; `triangles`: the surface (#F × 3, indices into
  /// the proxies); `obstacles`: kinematic surfaces. Throws Error on bad options or indices, a
  /// coupled model, an obstacle without triangles or with non-finite vertices, and rest pairs of the
  /// body closer than d̂ (naming the pair and its distance).
  IpcModel(const Model& model, ProxySet proxies, Triangles triangles, IpcOptions options,
           std::vector<IpcObstacle> obstacles = {});
  ~IpcModel();
  IpcModel(IpcModel&&) noexcept;
  IpcModel& operator=(IpcModel&&) noexcept;

  const Model& model() const;
  const ProxySet& proxies() const;
  /// The body's contact surface (indices into the proxies) and its edges.
  const Triangles& triangles() const;
  const Edges& edges() const;
  const std::vector<IpcObstacle>& obstacles() const;
  /// All obstacles' triangles, indices into obstacle_pose() rows.
  const Triangles& obstacle_triangles() const;
  /// All obstacles' vertices at frame f (rows in the order of obstacles()).
  Points obstacle_pose(double frame) const;
  const IpcOptions& options() const;
  /// The Schur region x2 (global node indices).
  const std::vector<int>& region_nodes() const;
  /// κ_min of the automatic rule (also reported when κ is given).
  double kappa_min() const;
  /// Surface positions W x (#P × 3).
  Points surface_positions(const Points& x) const;

  struct Impl;

 private:
  friend class IpcState;
  std::unique_ptr<Impl> impl_;
};

/// Per-state scratch: the active pairs, the Schur workspace, κ of the current frame.
class IpcState {
 public:
  explicit IpcState(const IpcModel& model);
  ~IpcState();
  IpcState(IpcState&&) noexcept;
  IpcState& operator=(IpcState&&) noexcept;

  /// One frame from state.x (which must be intersection-free with every pair's distance > 0), the
  /// obstacles moving toward their pose at frame state.frame + 1 (before the first frame they stand
  /// at their pose of state.frame). Throws SolverError on an intersecting or touching start, and as
  /// run_frame().
  IpcFrameStats step(State& state, const SolverOptions& options);
  /// Where the obstacles stand now (rows as IpcModel::obstacle_pose; empty before the first step).
  const Points& obstacle_positions() const;
  /// Places the obstacles (rows as IpcModel::obstacle_pose) for the next step, which then moves
  /// them from there, e.g. to rerun a frame from another state's obstacles. Throws Error on a
  /// size mismatch or a non-finite position.
  void place_obstacles(const Points& positions);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd
