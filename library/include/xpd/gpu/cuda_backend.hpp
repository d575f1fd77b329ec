#pragma once
// CUDA backend (XPD_WITH_CUDA=ON): the PD global solve, the corotated local step and the dense
// Cholesky of the collision Schur complement on one GPU. No CUDA type appears here; without the
// backend every constructor throws GpuError ("built without CUDA"), and so does a build with it on
// a machine without a driver or device (tests skip on gpu::cuda_devices().empty()).
//
// Everything runs on one stream of device 0 in FP64. Device memory is allocated when an object is
// built (after checking cudaMemGetInfo: the error names the bytes needed and free) and never inside
// a solve or an iteration; every reduction sums in a fixed order, so two runs are bitwise equal.
#include <Eigen/Core>
#include <array>
#include <functional>
#include <memory>
#include <xpd/core/types.hpp>
#include <xpd/energy/springs.hpp>
#include <xpd/energy/term.hpp>
#include <xpd/energy/tet_elements.hpp>
#include <xpd/gpu/supernodal_plan.hpp>

namespace xpd::gpu {

/// A device array of doubles (RAII). Copies cross the bus synchronously on the backend's stream.
class DeviceVector {
 public:
  DeviceVector() = default;
  explicit DeviceVector(size_t n);
  ~DeviceVector();
  DeviceVector(DeviceVector&&) noexcept;
  DeviceVector& operator=(DeviceVector&&) noexcept;
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  size_t size() const { return n_; }
  double* data() { return p_; }
  const double* data() const { return p_; }
  void upload(const double* host, size_t n);
  void download(double* host, size_t n) const;

 private:
  double* p_ = nullptr;
  size_t n_ = 0;
};

/// Median milliseconds of `repeats` runs of `work` (each enqueueing device work on the backend's
/// stream), timed with CUDA events after `warmup` untimed runs.
double time_device_ms(const std::function<void()>& work, int repeats = 20, int warmup = 3);

/// Waits for the backend's stream; throws GpuError with CUDA's message when a kernel failed.
void synchronize();

/// Free device memory in bytes (cudaMemGetInfo), for checking that a step allocates nothing.
double device_free_bytes();

/// Supernodal, level-scheduled forward and backward substitution with the partitioned inverse
/// (supernodal_plan.hpp): the plan's values and maps are uploaded once; each right-hand-side count
/// k gets one CUDA graph (captured on its first solve), replayed on every later solve.
class DeviceSolve {
 public:
  explicit DeviceSolve(const SupernodalPlan& plan);
  ~DeviceSolve();
  DeviceSolve(const DeviceSolve&) = delete;
  DeviceSolve& operator=(const DeviceSolve&) = delete;
  long rows() const;
  /// X := A⁻¹ X for the device array X (n × k, column-major), asynchronous on the stream.
  /// Right-hand sides go in groups of up to 8 through the same launches (k > 8: several groups).
  void solve_device(double* X, int k);
  /// Host convenience: uploads B, solves, downloads.
  void solve(Eigen::Ref<Eigen::MatrixXd> B);
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Baseline of the issue: cuSPARSE's SpSM (CSR of L and of Lᵀ built from the same supernodal
/// factor, explicit zeros of the supernodes included; analysis once, solve many), or with `spsv`
/// one SpSV per column on the same matrices.
class CusparseSolve {
 public:
  CusparseSolve(const SupernodalFactorView& L, int k, bool spsv = false);
  ~CusparseSolve();
  CusparseSolve(const CusparseSolve&) = delete;
  CusparseSolve& operator=(const CusparseSolve&) = delete;
  /// X := A⁻¹ X, X on the device (n × k column-major, the k given at construction).
  void solve_device(double* X);
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// What DevicePd runs: plain quasistatic PD with the corotated tet term, node attachments and loads.
/// Filled from a Model by make_device_pd_desc() (solver/device_pd.hpp), which refuses the terms the
/// device does not run.
struct DevicePdDesc {
  const TetElements* elements = nullptr;      ///< the corotated term's elements (must outlive DevicePd)
  std::vector<AttachmentSpring> attachments;  ///< node attachments only (one node, weight 1)
  Points attachment_targets;                  ///< #attachments × 3
  Eigen::VectorXd masses;                     ///< lumped masses (#V)
  Vec3 gravity = Vec3::Zero();
  Points nodal_forces;          ///< #V × 3 or empty
  Points rest;                  ///< initial positions (#V × 3)
  SupernodalFactorView factor;  ///< the PD matrix's factor (supernodal)
};

/// Plain PD on the device, positions resident:
///   local step: one thread per tet, F = Ds Dm⁻¹, R = polar(F) by the scaled Newton iteration of
///     energy/polar_newton.hpp (one source for CPU and device), per-tet force block
///     H = −w (F − R) Dm⁻ᵀ (the CPU's operations in the CPU's order, no FMA contraction: the
///     forces equal the CPU's bit for bit);
///   forces: one thread per node gathers its tets' blocks in element order, then adds the
///     attachment springs −k (x_i − t), m_i g and the nodal forces;
///   iteration: x ← x + K⁻¹ f(x) (DeviceSolve, 3 right-hand sides).
/// check() throws SolverError when an element was inverted or degenerate (the device has no SVD
/// fallback yet).
class DevicePd {
 public:
  explicit DevicePd(const DevicePdDesc& desc);
  ~DevicePd();
  DevicePd(const DevicePd&) = delete;
  DevicePd& operator=(const DevicePd&) = delete;
  void set_positions(const Points& x);
  Points positions() const;
  /// Local step and forces at the device positions (asynchronous).
  void evaluate_forces();
  /// The forces of the last evaluate_forces (#V × 3).
  Points forces() const;
  /// One PD iteration: evaluate_forces, solve, x += step (asynchronous).
  void iterate();
  /// Throws SolverError when a local step since the last check met an inverted or degenerate element.
  void check();
  /// Replaces the frame inputs: attachment targets (#attachments × 3, the description's order),
  /// gravity, nodal forces (#V × 3, or empty for none). Uploads into buffers sized at construction:
  /// allocates nothing. GpuError on wrong sizes or non-finite values.
  void set_inputs(const Points& attachment_targets, const Vec3& gravity, const Points& nodal_forces);
  struct Evaluation {
    double energy = 0;  ///< E(x) = Σ_t w_t/2 ||F_t − R_t||² + Σ_j k_j/2 ||x_j − t_j||² − Σ_i (m_i g + f_i)·x_i
    double residual = 0;  ///< ||f(x)||_F
  };
  /// Local step and forces at the device positions, then E and ||f|| by fixed-order sums (only these
  /// two numbers cross the bus). Waits for the device; SolverError as check().
  Evaluation evaluate();
  /// x ← x + K⁻¹ f with the forces of the last evaluate() (asynchronous; the forces' buffer then
  /// holds the step, so forces() is valid only after an evaluate()).
  void apply_step();
  /// Anderson acceleration on the device (DevicePdStep; the host loop's formulas,
  /// solver/anderson.hpp). After apply_step() (x = G(x_k), the forces' buffer holding δ): records
  /// the secant pair in a ring of `window` (1 to 8) columns, made on the first call or when the
  /// window changes, and writes the Gram matrix dFᵀdF of the k pairs held into gram's top-left
  /// k × k block and dFᵀδ into rhs's first k entries (rest zero), by fixed-order device sums.
  /// Returns k (0 while the history is empty). gram: at least window × window, rhs: window.
  int anderson_record(int window, Eigen::MatrixXd& gram, Eigen::VectorXd& rhs);
  /// Makes the ring's buffers for `window` now (anderson_record makes them on first use): GpuError
  /// for a window outside 1 to 8 or too little device memory (needed vs free).
  void anderson_prepare(int window);
  /// x = G(x_k) − Σ_{a<k} γ_a dG_a (asynchronous).
  void anderson_combine(const Eigen::VectorXd& gamma, int k);
  /// x = G(x_k) of the last record, history emptied (the accelerated iterate was rejected).
  void anderson_reject();
  /// Empties the history (start of a frame).
  void anderson_reset();
  DeviceSolve& solver();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// Dense FP64 Cholesky on the device (cuSOLVER potrf/potrs): the refactorization of the collision
/// system H = Σ + Wᵀ C W of Wang et al. 2021 (Algorithm 1, m ≈ 3,900).
class DeviceDenseCholesky {
 public:
  explicit DeviceDenseCholesky(int m, int max_rhs = 3);
  ~DeviceDenseCholesky();
  DeviceDenseCholesky(const DeviceDenseCholesky&) = delete;
  DeviceDenseCholesky& operator=(const DeviceDenseCholesky&) = delete;
  /// Copies the m × m SPD matrix (column-major, lower triangle read) to the device.
  void upload(const Eigen::MatrixXd& H);
  /// Factors the matrix in place (asynchronous, no pivot check: factorize() checks).
  void factorize_async();
  /// Restores the last uploaded matrix over a factor (device copy, asynchronous).
  void restore_async();
  /// Factors and checks: SolverError naming the failing column when H is not positive definite.
  void factorize();
  /// Solves with the last factor: B (m × r, r ≤ max_rhs) := H⁻¹ B on the host.
  void solve(Eigen::Ref<Eigen::MatrixXd> B);
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// One contact spring of the collision system (as solver/schur.hpp's SchurProxy): c/2 ‖w · x2 − t‖²
/// with w = Σ_a weights[a] e_{nodes[a]} over region-local node indices; unused slots weigh 0.
struct ContactSpring {
  std::array<int, 8> nodes{};
  std::array<double, 8> weights{};
  double stiffness = 0;
};

/// The dense part of paper 000's collision solve on the device (Wang et al. 2021, Algorithm 1,
/// steps 4.5–4.6): H u2 = g with H = Σ + Wᵀ C W, Σ (the m × m Schur complement) and Σ⁻¹ resident.
///   refactor: H ← Σ (device copy); the distinct entries of Wᵀ C W, merged on the host in a fixed
///     order, added by one thread each; cuSOLVER potrf + potrs;
///   woodbury (Li et al. 2023, §3.2): v = Σ⁻¹ g, B = Σ⁻¹[N, N] over the q distinct nodes N,
///     S = C⁻¹ + W_N B W_Nᵀ (k × k), s = S⁻¹ W_N v_N, u2 = Σ⁻¹ (g − Wᵀ s) (cuBLAS gemm, potrf/potrs).
/// All buffers are sized at construction for up to `max_springs` springs and `max_rhs` columns.
class DeviceSchurSystem {
 public:
  DeviceSchurSystem(const Eigen::MatrixXd& sigma, const Eigen::MatrixXd& sigma_inv, int max_springs, int max_rhs = 3);
  ~DeviceSchurSystem();
  DeviceSchurSystem(const DeviceSchurSystem&) = delete;
  DeviceSchurSystem& operator=(const DeviceSchurSystem&) = delete;
  /// Sets the springs (host preparation, a few KB uploaded). GpuError when there are more than
  /// max_springs or a node is out of range; woodbury needs every stiffness > 0.
  void set_springs(const std::vector<ContactSpring>& springs);
  /// Uploads g (m × r) into the system's right-hand side.
  void set_rhs(const Eigen::MatrixXd& g);
  /// u2 = H⁻¹ g on the device (asynchronous); no pivot check (solve() checks).
  void refactor_async();
  void woodbury_async();
  /// The last u2, after checking the factorization: SolverError naming the column when H (or S) is
  /// not positive definite.
  Eigen::MatrixXd result();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd::gpu
