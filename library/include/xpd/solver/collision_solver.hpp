#pragma once
// Collision-aware Projective Dynamics: penalty springs on collision proxies solved in the Schur
// complement of the collision-safe region, with a nested inner loop (Wang et al. 2021,
// §4.2-§4.4 and Algorithm 1; Wang 2025, §4.4 and App. B), plus the baselines the paper compares to.
//
// Partition. The region proxies (collision/contact.hpp ProxySet, indices `region`) live in tets
// whose nodes form x2 (m nodes); x1 is the rest. Elements of the model's tet terms whose four nodes
// all lie in x2 form E_β (their forces touch x2 only); every other term is E_α. One CHOLMOD
// factorization of the unchanged PD matrix K, ordered x1 first and x2 last (solver/schur.hpp),
// gives Σ = K22 − K21 K11⁻¹ K12 and the partial substitutions.
//
// Collision energy. Every active proxy p (a contact from the detector) adds c/2 ||W_p x − t_p||²
// with t_p its projection onto free space (the PD projection of the non-penetration constraint),
// so the global matrix becomes K + Wᵀ C W, which only changes the x2 block: H = Σ + C22. A proxy
// once active keeps its spring for a few detections after it leaves contact
// (CollisionOptions::keep_active_in_frame, release_after), with target = its own position.
// A self-contact's target is material of the other side (t_p = B_p x, the rest-surface point
// carried by the tet that holds it), so its spring is two-sided, c/2 ||W_p x − B_p x||², with rank-1
// matrix c (W_p − B_p)ᵀ(W_p − B_p) over both tets' nodes (all in x2: CollisionOptions::region_tets);
// option two_sided_self_contact = false restores the one-sided spring to a half-way target. The
// pairing (which material point of the other side) is held for the frame once made
// (hold_self_contact_pairing), so each frame minimizes one energy.
//
// One outer iteration (schur method), with f = f(x) the forces of all terms at x (no collision):
//   1.  forward: y1 = L11⁻¹ f1, g2 = f2 − K21 K11⁻¹ f1                      (Algorithm 1 steps 1-3)
//   2.  g_α = g2 − f_β(x)    (the E_β forces are recomputed in the inner loop; App. B bookkeeping)
//   3.  for j = 1 … J:                                                         (step 4)
//         contacts at x (j = 1: the detection of the previous evaluation)     (4.1)
//         f_β = forces of E_β at x with fresh projections (R_β)                (4.2)
//         g = g_α + f_β + f_col(x2),  H = Σ + C22(contacts)                    (4.3, 4.4)
//         solve H u2 = g (dense refactor or Woodbury), x2 += u2                (4.5, 4.6)
//         g_α −= Σ_α u2, with Σ_α u2 = Σ u2 − A22^(β) u2 = (g − C22 u2) − A22^(β) u2   (4.7)
//   4.  backward: u1 = L11⁻ᵀ (y1 − L21ᵀ Σ_j u2_j), x1 += u1                    (step 5)
// With J = 1 this is exactly the solve of (K + WᵀCW) δ = f + f_col (baseline a). The E_β forces
// depend on x2 only, so changing R_β never touches f1 and y1 stays valid; Σ_α u2 is the change of
// the α residual when x2 moves by u2 and x1 follows its optimum (eq. 23).
//
// An iteration without any active contact takes the plain PD path (one solve with the model's own
// factor), so a scene that never collides gives the collision-free result bit for bit.
//
// Model / state. CollisionModel is constant after construction (region, E_β, A22^(β), the Schur
// factorization with Σ and Σ⁻¹, or a baseline's constant factor) and may serve any number of
// CollisionStates at once; a CollisionState holds what one simulation state changes (springs,
// contacts, the Schur workspace, scratch) and borrows one detector (detectors keep scratch: one per
// state). collision_step() runs one frame through the frame loop (solver/frame_loop.hpp) with the
// collision global step as its strategy. CollisionSolver bundles one model and one state.
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <xpd/collision/contact.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/schur.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/state.hpp>

namespace xpd {

/// How the global step with penalty springs is solved.
enum class CollisionMethod {
  Schur,               ///< Algorithm 1: Schur complement of x2, nested inner loop (default)
  FullRefactor,        ///< baseline (a): WᵀCW added to the sparse K, CHOLMOD numeric refactor every iteration
  ProjectiveSkinning,  ///< baseline (b), Wang et al. 2021, §5.4: K + Σ_region c w wᵀ prefactored once; inactive
                       ///< proxies target their current position (zero force, but stiffness in the matrix)
  Pcg,  ///< baseline (c), Wang et al. 2021, §5.5: (K + WᵀCW) δ = f by PCG with a Jacobi preconditioner
};

/// "schur", "full_refactor", "projective_skinning", "pcg".
std::string to_string(CollisionMethod method);
/// Inverse of to_string; throws Error on an unknown name.
CollisionMethod collision_method_from_string(const std::string& name);

struct CollisionOptions {
  double stiffness = 0;      ///< penalty stiffness c per active proxy [N/m], > 0
  int inner_iterations = 1;  ///< J ≥ 1: inner iterations per outer iteration (schur method)
  CollisionMethod method = CollisionMethod::Schur;
  SchurSolveMethod schur_solve = SchurSolveMethod::Automatic;  ///< H u2 = g: dense refactor or Woodbury
  SchurOptions schur;        ///< dense memory budget etc. (precompute_inverse is set as needed)
  int pcg_iterations = 100;  ///< baseline (c): fixed number of PCG iterations per global step
  /// Extra tets whose nodes join x2 (e.g. the tets a self-collision detector searches, which it
  /// reads inside the inner loop and must therefore move with x2).
  std::vector<int> region_tets;
  /// true: a proxy found in contact keeps its spring in the matrix while it is out of contact for
  /// fewer than `release_after` detections in a row; meanwhile its target is its current position
  /// (zero force, so nothing sticks). This keeps the matrix from switching back and forth at proxies
  /// on the contact boundary, where a per-detection active set can cycle forever, and frees proxies
  /// that really separate. The set is reset at the start of every frame. false: springs = the
  /// contacts of the last detection.
  bool keep_active_in_frame = true;
  int release_after = 3;  ///< ≥ 1; with keep_active_in_frame (1: drop as soon as out of contact)
  /// true: a self contact whose detector names the other side's material point (ProxyContact::
  /// surface_tet) gets a two-sided spring c/2 ||x_p − Σ b'_a x_a||², equal and opposite forces on the
  /// proxy and on the other side's tet; the collision forces are then the gradient of a penalty
  /// energy for a fixed contact pairing, which the frame loop can converge. false: the one-sided
  /// spring of Wang et al. 2021 to a half-way target frozen in space (no reaction on the other side
  /// except through its own proxies; not a potential, and contact frames can stall).
  bool two_sided_self_contact = true;
  /// With two_sided_self_contact: a self contact keeps the material point of the other side that it
  /// was first paired with in the frame for as long as its spring lasts (reset every frame), so a
  /// frame solves one energy, elastic + Σ c/2 ||x_p − B_p x||² over fixed pairs, and converges like
  /// plain PD; contacts re-pair at the next frame (within a frame they do not slide: static
  /// friction over one frame's motion). false: re-paired at every detection; the target then slides
  /// along the surface as the proxy moves, which is not the gradient of an energy, and frames with
  /// many contacts can stall (scenes/elbow.json frame 22: 600 iterations, not converged).
  bool hold_self_contact_pairing = true;
  /// With two_sided_self_contact: a self-contact spring acts only along the contact normal n made
  /// with its pairing (the detector's direction from the proxy towards free space), the other side's
  /// tangent plane at the paired point: c/2 min(0, n·d)² with d = x_p − B_p x, i.e. the PD projection
  /// of d onto the half-space n·d ≥ 0, with the same matrix c (W_p − B_p)ᵀ(W_p − B_p). Once made, the
  /// spring stays for the rest of the frame (release_after does not apply: outside its plane it has
  /// no force). With hold_self_contact_pairing a frame then minimizes one C¹ energy, elastic +
  /// Σ c/2 min(0, n_p·d_p)², whose only changes are new pairs. false: a zero-rest-length spring to
  /// the paired point (d itself); its tangential part resists a proxy sliding from where it was
  /// paired (static friction over the frame) until the detector finds it outside, when the force
  /// drops to zero at once, and a proxy on the contact boundary cycles through release and a fresh
  /// pairing: on scenes/face_jaw.json its contact frames stopped at 800 iterations (docs/validation.md
  /// §5). The price: a plane is the other side's surface only near the paired point; on the face the
  /// reported depths reach 39% of the mean edge, deepest next to the mouth's inner corners, where the
  /// nearest surface a proxy ends in faces away from the one it was paired with. The lips of scenes/lips.json converge
  /// faster without it (87 against 549 iterations), hence off by default.
  bool self_contact_half_space = false;
  /// With self_contact_half_space and hold_self_contact_pairing: rounds of re-pairing. When a frame
  /// has converged with its pairings held and some proxy has slid farther than this [m] from its
  /// paired point along the held plane, ||(I − n nᵀ) d||, every such pairing is made afresh at one
  /// detection (proxy in contact: the detector's current point and normal; out of contact: the
  /// spring is released) and the frame goes on from there (GlobalStep::revise). The plane stands for
  /// the other side's surface only near the paired point; a lip sliding along the other lip
  /// otherwise ends the frame pressed against a plane that the surface has curved away from (too
  /// shallow where it curves outward). Each round minimizes one energy. 0: never.
  double half_space_repair_distance = 0;
  /// ≥ 0: at most this many re-pairing rounds per frame (half_space_repair_distance); the last
  /// round's pairings are then held to convergence.
  int half_space_repair_rounds = 8;
  /// true: an outer iteration without active contacts is a plain PD iteration with the model's own
  /// factor (bitwise the collision-free step). false (tests): always the method's own path.
  bool plain_path_without_contacts = true;
};

/// Per-frame timings of the collision phases [ms] (Wang et al. 2021, Figure 4 rows).
struct CollisionTimings {
  double detect = 0;        ///< collision detection (every outer and inner iteration)
  double local_beta = 0;    ///< E_β local step + forces in the inner loop
  double schur_update = 0;  ///< contact constraints into H (dense scatter) or the Woodbury gathers
  double schur_factor = 0;  ///< dense Cholesky of H (or of the k × k Woodbury capacitance)
  double schur_solve = 0;   ///< triangular solves / Σ⁻¹ product of the reduced system
  double forward = 0;       ///< partial forward substitution
  double backward = 0;      ///< partial backward substitution
  double refactor = 0;      ///< baseline (a): sparse numeric refactorization
  double pcg = 0;           ///< baseline (c): PCG iterations
};

/// a += scale · b, phase by phase (sums over frames, means per iteration).
void accumulate(CollisionTimings& a, const CollisionTimings& b, double scale = 1.0);

struct CollisionFrameStats {
  FrameStats pd;               ///< energy and residual include the penalty springs; iterations = outer
  int inner_iterations = 0;    ///< inner iterations done in the frame (all outer iterations)
  int plain_iterations = 0;    ///< outer iterations that took the plain path (no contact)
  int active_proxies = 0;      ///< contacts found at the end of the frame
  double max_penetration = 0;  ///< deepest contact depth at the end of the frame [length]
  int repair_rounds = 0;       ///< re-pairing rounds in the frame (half_space_repair_distance)
  CollisionTimings timings_ms;
};

class CollisionState;

/// The collision-prone nodes x2 of a CollisionModel: the nodes of the region proxies' tets and of
/// `region_tets`, sorted and unique (region-local order). Throws SolverError for a proxy or tet index
/// out of range.
std::vector<int> collision_region_nodes(const Tets& tets, const ProxySet& proxies, const std::vector<int>& region,
                                        const std::vector<int>& region_tets);

/// The E_β elements of one tet term: the element-order indices whose four nodes all lie in x2.
struct CollisionBetaElements {
  const TetTerm* term = nullptr;
  std::vector<int> elements;
};

/// The constant part of collision handling for one Model (which must outlive it): the partition
/// into x1 / x2, the E_β elements, A22^(β), and the factorization of the method (the x2-last Schur
/// factorization for schur, K + all region springs for projective_skinning). Read only after
/// construction: one CollisionModel serves any number of CollisionStates. Movable.
class CollisionModel {
 public:
  /// `proxies`: all proxies of the body; `region`: indices of the proxies of the collision-prone
  /// region (may be empty: every iteration is plain). Throws SolverError on bad indices, a
  /// non-positive stiffness or J < 1, a model with a coupled 3n × 3n matrix (λ > 0 with
  /// VolumeMatrix::Coupled; the isotropic volume matrix is accepted, its plain steps line-searched),
  /// and (schur) when the region's dense matrices exceed
  /// options.schur.dense_memory_budget_bytes.
  CollisionModel(const Model& model, const ProxySet& proxies, std::vector<int> region, CollisionOptions options);
  /// The same with the Schur factorization supplied instead of built (schur method; std::nullopt
  /// builds it): one that SchurFactorization::modify() carried through a topology event of the
  /// model, taken from the previous CollisionModel by release_schur(). It must factor
  /// model.matrix() with collision_region_nodes() as its region (SolverError otherwise: a cut that
  /// duplicated region nodes changes the region and needs a new factorization), and hold Σ⁻¹
  /// unless options.schur_solve is DenseRefactor. A model built without its factor
  /// (ModelDesc::factorize = false) then takes its plain steps with the Schur factorization's solve.
  CollisionModel(const Model& model, const ProxySet& proxies, std::vector<int> region, CollisionOptions options,
                 std::optional<SchurFactorization> schur);
  ~CollisionModel();
  CollisionModel(CollisionModel&&) noexcept;
  CollisionModel& operator=(CollisionModel&&) noexcept;

  const Model& model() const;
  const ProxySet& proxies() const;
  /// Region proxy indices (sorted, unique).
  const std::vector<int>& region() const;
  const CollisionOptions& options() const;
  /// The collision-prone nodes x2 (global node indices, region-local order).
  const std::vector<int>& region_nodes() const;
  /// Number of E_β elements (over all tet terms).
  int num_beta_elements() const;
  /// The Schur factorization (schur method with a non-empty region), else nullptr.
  const SchurFactorization* schur() const;
  /// Moves the Schur factorization out (for the next topology event); schur() is null afterwards
  /// and the model must not step again.
  std::optional<SchurFactorization> release_schur();
  /// Setup time: factorizations of the method [ms].
  double setup_ms() const;
  /// E_β per tet term (terms without β elements omitted).
  const std::vector<CollisionBetaElements>& beta_elements() const;
  /// A22^(β) = Σ_β w_e G_eᵀ G_e, the E_β elements' part of K restricted to x2 (m × m, region-local).
  const Eigen::SparseMatrix<double>& beta_matrix() const;
  /// The check every detection passes (CollisionState, device_springs): SolverError for a contact
  /// of a proxy outside the collision region, contacts not sorted by proxy or repeated, or a
  /// non-finite target.
  void check_contacts(const std::vector<ProxyContact>& contacts) const;

  struct Impl;  ///< opaque (collision_solver.cpp)

 private:
  friend class CollisionState;
  friend CollisionFrameStats collision_step(const CollisionModel&, CollisionState&, State&, const SolverOptions&,
                                            double);
  std::unique_ptr<Impl> impl_;
};

/// What one simulation state changes in collision handling: the penalty springs and their
/// bookkeeping, the contacts of the last detection, the Schur workspace (solve scratch) and the
/// forward/backward blocks, and, for baseline (a), the refactored sparse factor. Borrows the
/// CollisionModel and a detector, which must outlive it (detectors keep scratch: one per state).
/// After the first step, steps of the same size allocate nothing (tests/alloc). Movable.
class CollisionState {
 public:
  /// The detector must report contacts for region proxies of `model` only, sorted by proxy.
  CollisionState(const CollisionModel& model, ContactDetector& detector);
  ~CollisionState();
  CollisionState(CollisionState&&) noexcept;
  CollisionState& operator=(CollisionState&&) noexcept;

  /// Inner iterations J (≥ 1) of the next steps (initially CollisionOptions::inner_iterations).
  void set_inner_iterations(int inner_iterations);
  int inner_iterations() const;
  /// Contacts found at the end of the last step (at the final positions).
  const std::vector<ProxyContact>& contacts() const;
  /// Norm of the reduced right-hand side g (the gradient of the condensed problem in x2, x1 at its
  /// optimum for the frozen α projections) at each inner iteration of the last outer iteration that
  /// took the Schur path in the last step: decreasing when the inner loop converges.
  const std::vector<double>& inner_residuals() const;
  /// The Schur solves' workspace (last method and timings of the reduced solve).
  const SchurWorkspace& schur_workspace() const;

  struct Impl;  ///< opaque (collision_solver.cpp)

 private:
  friend class CollisionModel;
  friend CollisionFrameStats collision_step(const CollisionModel&, CollisionState&, State&, const SolverOptions&,
                                            double);
  std::unique_ptr<Impl> impl_;
};

/// Solves one frame (quasistatic equilibrium or one implicit Euler step) with the current inputs,
/// starting from state.x; obstacle keyframes are evaluated at `frame`. The frame loop
/// (solver/frame_loop.hpp) with the collision global step: convergence as for plain PD on the total
/// force f(x) + f_col(x); Anderson acceleration (SolverOptions::anderson or accelerator = Anderson)
/// extrapolates the outer iteration with the energy safeguard on elastic + penalty energy;
/// Chebyshev is refused (its spectral radius is not defined while the contact set, hence the
/// matrix, changes). Throws SolverError when `cstate` belongs to another model or `state` to
/// another Model.
CollisionFrameStats collision_step(const CollisionModel& model, CollisionState& cstate, State& state,
                                   const SolverOptions& options, double frame);

/// One CollisionModel and one CollisionState, for single-state use (tests, benchmarks, scenes).
class CollisionSolver {
 public:
  /// See CollisionModel and CollisionState; the detector is borrowed and must outlive the solver.
  CollisionSolver(const Model& model, const ProxySet& proxies, std::vector<int> region, ContactDetector& detector,
                  CollisionOptions options);
  ~CollisionSolver();
  CollisionSolver(CollisionSolver&&) noexcept;
  CollisionSolver& operator=(CollisionSolver&&) noexcept;

  const CollisionModel& model() const { return *model_; }
  CollisionState& state() { return *state_; }
  const CollisionState& state() const { return *state_; }

  const CollisionOptions& options() const { return model_->options(); }
  void set_inner_iterations(int inner_iterations) { state_->set_inner_iterations(inner_iterations); }
  const std::vector<int>& region_nodes() const { return model_->region_nodes(); }
  int num_beta_elements() const { return model_->num_beta_elements(); }
  const SchurFactorization* schur() const { return model_->schur(); }
  double setup_ms() const { return model_->setup_ms(); }
  const std::vector<ProxyContact>& contacts() const { return state_->contacts(); }
  const std::vector<double>& inner_residuals() const { return state_->inner_residuals(); }

  /// collision_step() with the bundled model and state.
  CollisionFrameStats step(State& state, const SolverOptions& options, double frame);

 private:
  std::unique_ptr<CollisionModel> model_;
  std::unique_ptr<CollisionState> state_;
};

}  // namespace xpd
