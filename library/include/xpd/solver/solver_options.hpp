#pragma once
// Options and per-frame statistics shared by every global step of the frame loop
// (solver/frame_loop.hpp): convergence tests, accelerators, phase timings.
namespace xpd {

/// Acceleration of the PD fixed-point iteration x ← G(x) = x + K⁻¹ f(x).
enum class Accelerator {
  None,
  Anderson,  ///< Anderson type II over the last `anderson_window` iterates (Walker & Ni 2011)
  Chebyshev  ///< Chebyshev semi-iteration (Wang 2015), see SolverOptions::chebyshev_rho
};

/// Where a scene's frames run (scene key solver.device): the CPU, the CUDA backend (plain quasistatic
/// PD with the positions resident on the device, solver/device_pd.hpp; an error names what it does not
/// run), or the CUDA backend when the scene and the machine allow it, else the CPU.
enum class ComputeDevice { Cpu, Cuda, Automatic };

struct SolverOptions {
  int max_iterations = 100;  ///< global solves per frame
  /// Never stop (converged or energy test) before this many global solves; ≤ max_iterations
  /// is not required (max_iterations wins).
  int min_iterations = 0;
  /// Converged when ||f||_F ≤ rel_tolerance · scale, scale = max(||f(x_start)||, ||loads||),
  /// loads = gravity·m + nodal forces; when the scale itself is within 4 × the round-off estimate
  /// (FrameStats::roundoff_residual: an idle frame without loads), when ||f|| is within it too.
  double rel_tolerance = 1e-6;
  double abs_tolerance = 0.0;  ///< or ||f||_F ≤ abs_tolerance
  /// Or relative energy decrease over one iteration ≤ energy_tolerance (0 = off).
  double energy_tolerance = 0.0;
  bool anderson = false;  ///< Anderson acceleration (same as accelerator = Anderson)
  int anderson_window = 5;
  Accelerator accelerator = Accelerator::None;  ///< `anderson = true` also selects Anderson
  /// Chebyshev: x_{k+1} = ω_{k+1} (G(x_k) − x_{k−1}) + x_{k−1} with ω = 1 for the first
  /// `chebyshev_warmup` iterations, ω = 2/(2 − ρ²) at the first accelerated one and then
  /// ω_{k+1} = 4/(4 − ρ² ω_k) (Wang 2015, eq. 11). ρ is the spectral radius of the plain PD
  /// iteration. `chebyshev_rho` = 0 (default) estimates it: the ratio of the last two step norms
  /// ||δ_k|| / ||δ_{k−1}|| of the plain warm-up (approaches ρ from below, a safe choice), redone
  /// every `chebyshev_reestimate` accelerated iterations keeping the largest value seen in the
  /// frame, capped at 0.9999. A value in (0, 1) fixes ρ (well-tuned fixed values are faster on
  /// slow problems, e.g. slender beams need ρ ≈ 0.999). An accelerated iterate whose energy
  /// exceeds the previous one is replaced by the plain iterate G(x_k) and the warm-up restarts
  /// with a fresh estimate (monotone energy).
  double chebyshev_rho = 0.0;
  int chebyshev_warmup = 5;        ///< plain iterations before (and after each restart of) the ω sequence
  int chebyshev_reestimate = 50;   ///< automatic ρ: accelerated iterations between re-estimates (0 = never)
  bool store_projections = false;  ///< keep per-term projections in State::projections
  /// Stop at the round-off floor: a frame whose best residual has not fallen by 10% in the last
  /// max(stagnation_window, iterations / 4) iterations while ||f|| ≤ 4 × the round-off estimate
  /// (FrameStats::roundoff_residual) stops with `stagnated` set and converged = false (a tolerance below what double
  /// precision resolves would otherwise spin to max_iterations). 0: never.
  int stagnation_window = 200;
};

/// Wall time of the phases (milliseconds), like Figure 4 of Wang et al. 2021.
struct PhaseTimings {
  double local = 0;  ///< local step: per-element projections fused with the elastic force
  double rhs = 0;    ///< springs, loads, inertia, residual and right-hand-side assembly
  double solve = 0;  ///< triangular solves with the factor (3 RHS)
  double other = 0;  ///< update, Anderson, checks
};

struct FrameStats {
  double energy = 0;             ///< objective at the end of the frame
  double residual = 0;           ///< ||f||_F at the end
  double initial_residual = 0;   ///< ||f||_F at the start
  double load_scale = 0;         ///< ||gravity·m + nodal forces||_F
  int iterations = 0;            ///< global solves
  int anderson_rejections = 0;   ///< accelerated iterates rejected by the energy check (Anderson)
  int chebyshev_rejections = 0;  ///< same for Chebyshev
  int line_search_halvings = 0;  ///< step halvings of the line search (λ volume term only)
  double chebyshev_rho = 0;      ///< ρ used by Chebyshev in the last ω sequence (0 if none started)
  bool converged = false;
  /// Stopped at the round-off floor before max_iterations (SolverOptions::stagnation_window): the
  /// tolerance asked for is below what double precision resolves for this state.
  bool stagnated = false;
  /// Round-off estimate of ||f||: ε ||(K_ii |x_i|)_i||, K the global matrix (stiff springs and
  /// attachments dominate it: f = w (t − x) loses ε w |x| to cancellation), x at the frame's start.
  double roundoff_residual = 0;
  int threads = 0;  ///< TBB's allowed parallelism during the frame
  double wall_ms = 0;
  PhaseTimings timings_ms;
};

}  // namespace xpd
