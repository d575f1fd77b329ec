#pragma once
// State: everything that changes during a simulation (positions, velocities, per-frame inputs,
// projections, scratch). Created once by make_state; a step never allocates.
#include <Eigen/Cholesky>
#include <vector>
#include <xpd/energy/term.hpp>
#include <xpd/solver/model.hpp>

namespace xpd {

/// Preallocated buffers of Anderson acceleration (window m, 3n-vectors).
struct AndersonScratch {
  Eigen::MatrixXd dF, dG;  ///< 3n × m secant differences of residuals / fixed-point images
  Eigen::VectorXd F_prev, G_prev;
  Eigen::VectorXd x_pd;         ///< the plain PD iterate (fallback when acceleration is rejected)
  Eigen::MatrixXd normal;       ///< m × m
  Eigen::VectorXd gamma, dFtF;  ///< m
  Eigen::MatrixXd normal_k;     ///< m × m: the active k × k block, identity beyond it (k = history)
  /// Constructed from a 1 × 1 identity so that its status is defined from the start: Eigen's
  /// default constructor leaves it uninitialized, and moving a State would read it (UBSan).
  Eigen::LDLT<Eigen::MatrixXd> ldlt{Eigen::MatrixXd::Identity(1, 1)};
  int history = 0, head = 0;
  bool has_prev = false;
};

/// Buffers of the Chebyshev semi-iteration (3n-vectors, sized on first use).
struct ChebyshevScratch {
  Eigen::VectorXd x_prev;  ///< x_{k−1}
  Eigen::VectorXd x_pd;    ///< the plain PD iterate G(x_k) (fallback when rejected)
  int plain = 0;           ///< plain iterations since the (re)start of the ω sequence
  int accelerated = 0;     ///< accelerated iterations of the current ω sequence
  double omega = 1.0;      ///< ω_k of the last iteration
  double rho = 0.0;        ///< ρ of the current ω sequence
  double step_prev = 0.0;  ///< ||δ_{k−1}||, for the ρ estimate
  double ratio = 0.0;      ///< last ||δ_k|| / ||δ_{k−1}|| of the warm-up
};

struct State {
  Points x;            ///< #V × 3 current positions
  Points x_start;      ///< positions at the start of the current frame (x_n)
  Points velocity;     ///< #V × 3 (implicit Euler)
  FrameInputs inputs;  ///< per-frame inputs; edit between frames (no refactorization)
  /// Per term (Model::terms() order), its projections of the last local step
  /// (num_constraints × projection_size doubles). Filled when SolverOptions::store_projections.
  std::vector<std::vector<double>> projections;
  // Scratch (sized by make_state; the step hot path does not allocate).
  Points force;           ///< #V × 3 f(x) = −∇E(x)
  Points inertia_target;  ///< y = x_n + h v_n (implicit Euler)
  Eigen::MatrixXd rhs;    ///< n × 3 column-major right-hand side / solution of the global step
  Points step;            ///< #V × 3 δ = G(x) − x of the last global step (frame loop)
  Points x_prev;          ///< #V × 3 iterate before the global step (line search, accelerators)
  Eigen::VectorXd rhs3;   ///< 3n right-hand side / solution of the coupled global step (empty unless coupled)
  AndersonScratch anderson;
  ChebyshevScratch chebyshev;
  int frame = 0;
  /// The residual scale of the last frame when it converged (0 otherwise): a frame that starts
  /// within its tolerance of it converges at once (frame_loop.hpp).
  double converged_scale = 0.0;
};

/// State at rest: x = rest positions, zero velocity, inputs = model.initial_inputs().
State make_state(const Model& model);

}  // namespace xpd
