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
#include <Eigen/SparseCore>
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
  /// The two halves of solve_device, for partial substitutions (Algorithm 1, DeviceCollisionPd),
  /// k ≤ 4: forward_device(X, k) leaves y = L⁻¹ P X in work() (L order, node-interleaved: entry
  /// (i, r) at work()[i k + r]); backward_device(X, k) solves Lᵀ z = work() and writes X := Pᵀ z.
  /// Between the two the caller may change work(). Each gets its own CUDA graph per (X, k).
  void forward_device(const double* X, int k);
  void backward_device(double* X, int k);
  double* work();
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
  friend class DeviceCollisionPd;
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
  /// Device-side use (DeviceCollisionPd): the right-hand side g (m × r column-major, r ≤ max_rhs;
  /// the caller fills it on the stream), the solution u2 of the last solve (same layout), and
  /// check(), which waits and throws as result() does.
  double* device_rhs(int r);
  const double* device_result() const;
  void check();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// What DeviceCollisionPd runs: plain PD on the x2-last factor of the collision Schur
/// factorization (SchurFactorization), the region and its dense blocks. Filled from a
/// CollisionModel by make_device_collision_desc() (solver/device_pd.hpp).
struct DeviceCollisionDesc {
  DevicePdDesc pd;                       ///< pd.factor: the x2-last factor (the region's rows last)
  std::vector<int> region_nodes;         ///< x2, global node indices, region order (m)
  std::vector<int> factor_position;      ///< region index i → its row n − m + p of the factor
  Eigen::MatrixXd l22;                   ///< chol(Σ), m × m lower, factor order
  Eigen::MatrixXd sigma, sigma_inv;      ///< Σ and Σ⁻¹, region order
  Eigen::SparseMatrix<double> a22_beta;  ///< A22^(β), region order
  std::vector<int> beta_elements;        ///< E_β: indices into pd.elements whose 4 nodes lie in x2
  int max_springs = 0;                   ///< capacity of the contact set (buffers sized once)
};

/// Wang et al. 2021's Algorithm 1 on the device with a fixed set of contact springs (detection
/// stays on the host: set_springs() between iterations). One outer iteration, positions resident:
///   f = f(x)                          local step + forces of every term (DevicePd)
///   y = L⁻¹ P f                       full forward sweep of the x2-last factor (DeviceSolve)
///   g2 = L22 y2                       dense trmm (= f2 − K21 K11⁻¹ f1, schur.hpp forward())
///   g_α = g2 − f_β(x)
///   J times: f_β(x) (E_β local step), g = g_α + f_β + f_col(x2), H u2 = g by Woodbury with the
///     resident Σ⁻¹ (DeviceSchurSystem), x2 += u2, g_α −= (g − C22 u2) − A22^(β) u2
///   z2 = L22ᵀ Σ_j u2_j into y's trailing rows; full backward sweep; x1 += z1
/// — the CPU's CollisionState::schur_iteration with the springs held (the CPU re-detects before
/// each inner iteration j > 0; with the same contacts its springs are these, except a one-sided
/// self contact's half-way target, which the CPU recomputes at the moved x and the device keeps).
/// The spring of contact s is c/2 ||Σ_a w_a x[nodes_a] − o_s||² (ContactSpring over REGION-local
/// nodes; o_s its target in space, 0 for a two-sided self contact). Every device buffer is made at
/// construction; the first outer_iteration also instantiates the sweeps' two CUDA graphs, and from
/// then on iterations take no device memory. The solve is always Woodbury (stiffness > 0).
class DeviceCollisionPd {
 public:
  explicit DeviceCollisionPd(const DeviceCollisionDesc& desc);
  ~DeviceCollisionPd();
  DeviceCollisionPd(const DeviceCollisionPd&) = delete;
  DeviceCollisionPd& operator=(const DeviceCollisionPd&) = delete;
  /// The plain PD part (positions, frame inputs, forces, plain iterations on the x2-last factor).
  DevicePd& pd();
  int region_size() const;
  /// Replaces the springs (region-local nodes) and their offsets (#springs × 3). GpuError beyond
  /// max_springs, for a slot (used or not) naming a node outside the region, a stiffness ≤ 0, a
  /// non-finite weight or offset. Uploads a few KB and waits; allocates nothing.
  void set_springs(const std::vector<ContactSpring>& springs, const Points& offsets);
  /// One outer iteration with 1 ≤ `inner` ≤ 256 inner iterations (asynchronous; check() waits and
  /// throws SolverError for an inverted element or a capacitance that is not positive definite).
  /// Without set_springs() the contact set is empty. Afterwards pd().forces() holds the step of
  /// the backward sweep, not f (the forces' buffer is the sweep's right-hand side).
  void outer_iteration(int inner);
  /// Waits; SolverError as above. Before any outer_iteration it only checks the elements' status.
  void check();
  /// ||g|| of each inner iteration of the last outer iteration (waits for the device).
  std::vector<double> inner_residuals();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd::gpu
