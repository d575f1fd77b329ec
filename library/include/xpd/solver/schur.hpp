#pragma once
// Schur-complement localisation of the PD global step onto the collision-prone nodes (DESIGN §3,
// "Partition", "One factorization, two uses", "Collisions in the Schur system"; Wang et al. 2021, §4.3-4.4
// and Algorithm 1; Woodbury from Li et al. 2023, §3.2).
//
// Notation. K is the n × n scalar SPD global matrix (λ = 0: the same block for x, y and z, so every
// right-hand side is n × r with r = 3 typically). The nodes are split into the collision-safe set
// x1 (n1 = n − m nodes) and the collision-prone region x2 (m nodes). P is the permutation that puts
// x1 first (METIS order of K11) and x2 last (CAMD order of K22 with the nodes coupled to x1 last;
// every m-sized input and output below is nevertheless in the caller's region order), and
//
//     P K Pᵀ = [K11 K12; K21 K22] = L Lᵀ,   L = [L11 0; L21 L22]   (one CHOLMOD supernodal factor;
//                                                                  simplicial with XPD_CHOLMOD_LGPL_ONLY)
//
// so L11 L11ᵀ = K11, L21 = K21 L11⁻ᵀ and
//
//     Σ = K22 − K21 K11⁻¹ K12 = L22 L22ᵀ      (dense m × m Schur complement, its Cholesky factor is L22).
//
// Partial substitutions (PARDISO phases "331" / "333") are obtained from full CHOLMOD triangular
// solves plus one dense triangular product with L22 (proofs beside forward() / backward()).
//
// Collisions: k penalty proxies c_j/2 ‖W_j x2 − t_j‖² add C22 = Wᵀ C W (W: k × m, 4 barycentric
// weights per row; C = diag(c)) to Σ, H = Σ + C22, solved per inner iteration either by dense
// Cholesky refactorization of H or by Woodbury with a precomputed dense Σ⁻¹.
//
// Changes of K (topology events of surgery: cuts, excisions, sutures, hooks; Li et al. 2021) are
// followed by modify() without a new factorization or a new Σ⁻¹: K_new = (K ⊕ 0) + ΔK with ΔK of
// low rank r, written ΔK = U Λ Uᵀ on the few unknowns R it touches (new unknowns enter K ⊕ δI, δ
// their diagonal in K_new, so that ΔK vanishes on their diagonal). Σ⁻¹ is the region block of K⁻¹,
// so Sherman–Morrison–Woodbury on K gives, with Y = (K ⊕ δI)⁻¹ U (r solves with the factor before
// the change), C = Λ⁻¹ + Uᵀ Y and Z = Y[x2] (m × r):
//
//     Σ_new⁻¹ = Σ⁻¹ − Z C⁻¹ Zᵀ,      Σ_new = Σ + W̃ (C − Zᵀ W̃)⁻¹ W̃ᵀ   with W̃ = Σ Z
//
// (the second is SMW applied back to the first), O(m² r) for both instead of the O(m³) of dpotri.
// This needs no "x2 last" order of the sparse factor: the first modify() moves the solves to a
// DynamicLdlt of K (METIS order) that follows the same change, and the substitutions become full
// solves: forward u⁰ = K⁻¹ f, g2 = Σ u⁰₂ (since u⁰₂ = Σ⁻¹ g2); backward u = u⁰ + K⁻¹ [0; Σ (u2 − u⁰₂)]
// (the x2 part of that solve is u2 − u⁰₂, its x1 part −K11⁻¹ K12 (u2 − u⁰₂)).
#include <Eigen/Core>
#include <Eigen/SparseCore>
#include <array>
#include <cstddef>
#include <memory>
#include <vector>
#include <xpd/gpu/factor_view.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>

namespace xpd {

/// One active collision spring in the region: a combination W_j x2 = Σ_a weights[a] · x2[nodes[a]]
/// held by a penalty spring of stiffness `stiffness` (> 0 for Woodbury; ≥ 0 for the dense refactor).
/// `nodes` are REGION-LOCAL indices (0 ≤ nodes[a] < m, position in region_nodes()); unused slots
/// carry weight 0; a node may appear in several slots. Its contribution to H is stiffness · w wᵀ
/// with w = Σ_a weights[a] e_{nodes[a]}. Slots 0-3: the proxy's tet (barycentric weights, a point
/// held to a fixed target); slots 4-7: for a two-sided self-contact spring, the other side's surface
/// point with negated weights (w = W_p − B_s, the spring pulls the two points together).
inline constexpr int kSchurProxySlots = 8;
struct SchurProxy {
  std::array<int, kSchurProxySlots> nodes{};
  std::array<double, kSchurProxySlots> weights{};
  double stiffness = 0.0;
};

/// A symmetric positive semidefinite term that couples the x, y and z of a few region nodes, in
/// factored form U Uᵀ: the projected barrier Hessian of IPC contact pairs mapped to tet nodes
/// (Li et al. 2023, §3.2, with the factored form of xpd's design: their ℬ̌ is singular).
/// `nodes`: q distinct REGION-LOCAL indices N; `u`: 3q × r, row 3a + c = coordinate c of node
/// nodes[a]. The term is E_N U Uᵀ E_Nᵀ on the 3m unknowns ordered node-major (3i + c).
/// Alternatively (`block` non-empty, `u` then empty): the term itself, ℬ_N as a dense 3q × 3q PSD
/// matrix (node-major), for contact sets whose total rank exceeds what a factored form saves.
struct SchurLowRank {
  std::vector<int> nodes;
  Eigen::MatrixXd u;
  Eigen::MatrixXd block;
};

/// How solve_collision_system() solves H u2 = g.
enum class SchurSolveMethod {
  Automatic,      ///< cheaper of the two by the cost model of choose_method()
  DenseRefactor,  ///< H = Σ + WᵀCW formed densely, LAPACK dpotrf + dpotrs (Wang et al. 2021)
  Woodbury,  ///< Σ⁻¹ − Σ⁻¹Wᵀ(C⁻¹ + WΣ⁻¹Wᵀ)⁻¹WΣ⁻¹, one k × k Cholesky (Li et al. 2023, §3.2)
};

struct SchurOptions {
  /// Upper bound for the dense m × m matrices held by the factorization (Σ, L22, the H workspace,
  /// and Σ⁻¹ when precompute_inverse): checked BEFORE any of them is allocated; exceeding it throws
  /// SolverError naming m and the budget. Not counted: the transient q × q and q × k matrices of a
  /// Woodbury solve (q ≤ m distinct proxy nodes, k proxies; automatic picks it only for k below m).
  std::size_t dense_memory_budget_bytes = std::size_t{2} << 30;  // 2 GiB
  /// Precompute Σ⁻¹ (dpotri on L22) at construction; required for SchurSolveMethod::Woodbury.
  bool precompute_inverse = true;
  /// Also analyze K with the unconstrained METIS ordering to report nnz(L) without the
  /// "x2 last" constraint (SchurStats::nnz_L_unconstrained); costs one extra METIS + symbolic pass.
  bool compare_unconstrained_ordering = false;
  /// Partial substitutions over the x1 supernodes only (y1 = L11⁻¹ f1, g2 = f2 − L21 y1; backward
  /// L11ᵀ u1 = y1 − L21ᵀ u2), when the supernodal factor has a supernode boundary at column n1;
  /// false (or no boundary there): a full CHOLMOD solve with the dense L22 multiplied back in
  /// (4 passes over L22's m²/2 values that the partial substitutions do not need). Same results up
  /// to round-off (tests: PartialSubstitutionsEqualFullSolve).
  bool partial_sweeps = true;
};

/// Sizes and timings (milliseconds, like every timing of xpd) of the last construction / refactorization.
struct SchurStats {
  int n = 0;                       ///< nodes
  int m = 0;                       ///< region (x2) nodes
  double nnz_L = 0;                ///< nonzeros of L with the x1-METIS / x2-last ordering
  double nnz_L_unconstrained = 0;  ///< nonzeros of L with plain METIS on K (0 unless requested)
  double nnz_L21 = 0;              ///< stored entries of the L21 block (m rows × n1 columns)
  double nnz_L22 = 0;              ///< stored entries of L22 in the factor (≤ m (m + 1) / 2)
  double analyze_ms = 0;           ///< METIS on K11 + CHOLMOD symbolic analysis
  double factor_ms = 0;            ///< CHOLMOD supernodal numeric factorization
  double schur_ms = 0;             ///< L22 extraction + Σ = L22 L22ᵀ (dsyrk)
  double inverse_ms = 0;           ///< Σ⁻¹ (dpotri), 0 when not precomputed
  std::size_t dense_bytes = 0;     ///< bytes held by the dense m × m matrices
  bool partial_sweeps = false;     ///< the partial substitutions run over the x1 supernodes only
  long partial_sweep_tasks = 0;    ///< independent subtrees they run concurrently (0: serial loops)
  bool updatable = false;          ///< the solves run on a DynamicLdlt (after the first modify())
  double updatable_ms = 0;         ///< building that DynamicLdlt (METIS + numeric factorization)
  long modifications = 0;          ///< modify() calls followed by low-rank updates since construction
  long rebuilds = 0;               ///< modify() calls that rebuilt the factorization from K_new instead
};

/// What one SchurFactorization::modify() did (timings in milliseconds).
struct SchurModifyResult {
  int rank = 0;          ///< r, the numerical rank of ΔK (eigenvalues above 1e-13 × the largest)
  bool rebuilt = false;  ///< the factorization was built anew from K_new (`reason` says why)
  /// "": updated; "rank": r above max_update_rank() (the dense updates would cost about what
  /// dpotri does); "definiteness": the sparse factor's update lost definiteness (rolled back);
  /// "capacitance": C or C − ZᵀW̃ singular to working precision.
  const char* reason = "";
  double updatable_ms = 0;  ///< this call built the DynamicLdlt (first modify() after a construction)
  double solve_ms = 0;      ///< Y = K⁻¹ U with the factor before the change
  double factor_ms = 0;     ///< DynamicLdlt::modify
  double dense_ms = 0;      ///< the updates of Σ⁻¹ and Σ
  double total_ms = 0;      ///< the whole call (a rebuild included)
};

/// Wall time (ms) of the phases of the last solve_collision_system() call (Wang et al. 2021, Figure 4 rows).
struct SchurSolveTimings {
  double update = 0;  ///< dense_refactor: copy Σ, scatter WᵀCW; woodbury: gather Σ⁻¹[N, N], build S
  double factor = 0;  ///< dense_refactor: dpotrf of H (m × m); woodbury: dpotrf of S (k × k)
  double solve = 0;   ///< triangular solves / the Σ⁻¹ product
};

class SchurFactorization;

/// Scratch of SchurFactorization's solves for one user (one simulation state, one thread): the
/// CHOLMOD solve workspace with its own cholmod_common, the dense blocks of the forward, backward
/// and collision solves (sized on first use; the solves then never allocate), the H = Σ + WᵀCW
/// workspace of the dense refactor, and what the last collision solve did. With one workspace per
/// state, one constant factorization serves any number of states.
class SchurWorkspace {
 public:
  SchurWorkspace();
  ~SchurWorkspace();
  SchurWorkspace(SchurWorkspace&&) noexcept;
  SchurWorkspace& operator=(SchurWorkspace&&) noexcept;
  SchurWorkspace(const SchurWorkspace&) = delete;
  SchurWorkspace& operator=(const SchurWorkspace&) = delete;

  /// The method used by the last solve_collision_system() with this workspace.
  SchurSolveMethod last_method() const;
  /// Phase timings of that call.
  const SchurSolveTimings& last_timings() const;

 private:
  friend class SchurFactorization;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Partial Cholesky / Schur-complement factorization of an SPD matrix with a trailing region.
///
/// Phased use (one Model-like object per topology):
///   construct (analyze + factorize, once) → refactorize(K') when values change, same pattern →
///   per outer iteration forward() → per inner iteration solve_collision_system(), apply_schur() →
///   backward().
/// The solves come in two forms: const methods taking a SchurWorkspace (one per state or thread: the
/// factorization is then shared, read only), and single-user overloads without one, which use a
/// workspace held inside the object (convenient in tests; not for concurrent use).
class SchurFactorization {
 public:
  /// K: n × n SPD (both triangles stored, or at least the lower one; only the lower triangle is
  /// read). region_nodes: the m distinct collision-prone node indices in [0, n), in the order that
  /// defines region-local indices (may be empty: m = 0 is a plain sparse Cholesky).
  /// Throws SolverError on a non-square K, bad/duplicate region indices, a region whose dense
  /// matrices exceed options.dense_memory_budget_bytes, or K not positive definite.
  SchurFactorization(const Eigen::SparseMatrix<double>& K, const std::vector<int>& region_nodes,
                     const SchurOptions& options = {});
  ~SchurFactorization();
  SchurFactorization(SchurFactorization&&) noexcept;
  SchurFactorization& operator=(SchurFactorization&&) noexcept;
  SchurFactorization(const SchurFactorization&) = delete;
  SchurFactorization& operator=(const SchurFactorization&) = delete;

  /// Numeric refactorization for new values of K with the SAME sparsity pattern (the symbolic
  /// analysis and ordering are kept); recomputes Σ, L22 and Σ⁻¹. A different pattern throws, and
  /// so does a factorization that modify() has made updatable (construct a new one instead).
  void refactorize(const Eigen::SparseMatrix<double>& K);

  /// Follows K_new = (K ⊕ 0) + ΔK, the change `mod` describes in DynamicLdlt's terms (columns
  /// added and removed, an entrywise change, new unknowns appended with ids n() …), with low-rank
  /// updates of Σ⁻¹ and Σ and a DynamicLdlt::modify of the sparse factor (header comment). New
  /// unknowns join x1 (the region and its order are unchanged; a change that must grow the region
  /// needs a new factorization). `K_new` (order n() + mod.new_dofs) is read only when the update is
  /// not taken: then the factorization is rebuilt from it (x2 last, dpotri), as the constructor
  /// would, and the result says why. The first call builds the DynamicLdlt of the current K (a
  /// METIS analysis and a numeric factorization, once). Afterwards schur_factor() and
  /// supernodal_factor() are empty, the partial sweeps are full solves, y1 of forward() has n rows,
  /// and the solves of one factorization are no longer concurrent (DynamicLdlt's workspace).
  /// Throws SolverError, the factorization unchanged, for a malformed modification or a K_new of
  /// the wrong order; a rebuild may throw like the constructor (K_new not positive definite).
  SchurModifyResult modify(const FactorModification& mod, const Eigen::SparseMatrix<double>& K_new);
  /// Largest rank of ΔK that modify() takes as a low-rank update: max(32, m / 8); a change on more
  /// than twice as many unknowns is not decomposed. The updates cost r sparse solves and ≈ 4 m² r
  /// flops (Σ Z, two dsyrk); a rebuild a sparse factorization, m³/3 (Σ) and 2 m³/3 (dpotri).
  int max_update_rank() const;

  int n() const;
  int m() const;
  /// The region nodes (global indices) in region-local order.
  const std::vector<int>& region_nodes() const;
  /// Region-local index of a global node, −1 if the node is in x1.
  int region_index(int node) const;
  /// The fill-reducing permutation: permutation()[p] = global node at factor position p; the last m
  /// entries are the region nodes, region node i at position n1 + factor_position(i). Empty once
  /// modify() has made the factorization updatable.
  const std::vector<int>& permutation() const;
  /// Position of region node i inside the trailing m × m block of the factor (0 ≤ · < m).
  int factor_position(int region_index) const;
  const SchurStats& stats() const;
  /// The x2-last factor in CHOLMOD's supernodal layout (indices copied to `long`, values pointing
  /// into this factorization until the next refactorize()), for the device backend's Algorithm 1:
  /// factor row n − m + factor_position(i) is region node i. Empty (nsuper = 0) when the factor is
  /// not a supernodal LLᵀ (XPD_CHOLMOD_LGPL_ONLY builds).
  SupernodalFactorCopy supernodal_factor() const;

  /// Σ = K22 − K21 K11⁻¹ K12 = L22 L22ᵀ, dense m × m, both triangles filled, region-local order.
  const Eigen::MatrixXd& schur_complement() const;
  /// L22, the lower-triangular trailing block of L (strict upper part zero), m × m, in FACTOR
  /// order: Σ(i, j) = (L22 L22ᵀ)(factor_position(i), factor_position(j)).
  const Eigen::MatrixXd& schur_factor() const;
  /// Σ⁻¹, dense m × m, region-local order; empty unless SchurOptions::precompute_inverse.
  const Eigen::MatrixXd& schur_inverse() const;

  /// Full solve K u = f. f: n × r (node order). Returns u: n × r.
  Eigen::MatrixXd solve(const Eigen::Ref<const Eigen::MatrixXd>& f);
  Eigen::MatrixXd solve(SchurWorkspace& ws, const Eigen::Ref<const Eigen::MatrixXd>& f) const;

  /// Partial forward substitution (Wang et al. 2021, eq. 16, Algorithm 1 step 3).
  /// f: n × r in node order. Outputs
  ///   y1 = L11⁻¹ f1                       (n1 × r, factor order: opaque, pass to backward();
  ///                                        after modify(): u⁰ = K⁻¹ f, n × r),
  ///   g2 = f2 − L21 y1 = f2 − K21 K11⁻¹ f1 (m × r, region-local order).
  /// g2 is the right-hand side of the reduced system Σ u2 = g2.
  /// Computed as: y = L⁻¹ P f (one full CHOLMOD forward solve, CHOLMOD_L), y1 = y[0:n1] and
  /// g2 = L22 · y[n1:n] (dense trmm, factor order, then gathered into region order). Proof: the last block row of L y =
  /// P f is L21 y1 + L22 y2 = f2, hence L22 y2 = f2 − L21 y1; and L21 y1 = K21 L11⁻ᵀ L11⁻¹ f1 = K21 K11⁻¹ f1.
  void forward(const Eigen::Ref<const Eigen::MatrixXd>& f, Eigen::MatrixXd& y1, Eigen::MatrixXd& g2);
  void forward(SchurWorkspace& ws, const Eigen::Ref<const Eigen::MatrixXd>& f, Eigen::MatrixXd& y1,
               Eigen::MatrixXd& g2) const;

  /// Partial backward substitution (Wang et al. 2021, eq. 18, Algorithm 1 step 5).
  /// y1 from forward(), u2: m × r region correction. Returns u: n × r in node order with
  ///   u1 = L11⁻ᵀ (y1 − L21ᵀ u2),   u2 copied into the region rows.
  /// Computed as: z = [y1; L22ᵀ u2] (u2 scattered to factor order, dense trmm), u = Pᵀ L⁻ᵀ z (one full CHOLMOD backward
  /// solve, CHOLMOD_Lt). Proof: Lᵀ v = z reads L22ᵀ v2 = L22ᵀ u2 ⇒ v2 = u2, and L11ᵀ v1 + L21ᵀ v2 = y1 ⇒ v1 = L11⁻ᵀ (y1
  /// − L21ᵀ u2) = u1. With u2 = Σ⁻¹ g2, forward + reduced solve + backward equals the full solve K⁻¹ f.
  Eigen::MatrixXd backward(const Eigen::MatrixXd& y1, const Eigen::Ref<const Eigen::MatrixXd>& u2);
  /// backward() into u (resized only when its size differs; with the scratch kept inside, repeated
  /// calls of one size never allocate). y1, g2 of forward() are likewise reused when sized.
  void backward(const Eigen::MatrixXd& y1, const Eigen::Ref<const Eigen::MatrixXd>& u2, Eigen::MatrixXd& u);
  void backward(SchurWorkspace& ws, const Eigen::MatrixXd& y1, const Eigen::Ref<const Eigen::MatrixXd>& u2,
                Eigen::MatrixXd& u) const;

  /// out = Σ u2 (m × r), Algorithm 1 step 4.7 (g_α −= Σ_α u2). One dense symmetric product
  /// (memory-bound, reads m²/2 doubles). Where H u2 = g was just solved, Σ u2 = g − (H − Σ) u2 with
  /// the sparse H − Σ = A22^(β) + WᵀCW is an equivalent, cheaper alternative (equal up to round-off).
  Eigen::MatrixXd apply_schur(const Eigen::Ref<const Eigen::MatrixXd>& u2) const;

  /// Solves H u2 = g with H = Σ + Wᵀ C W (W, C from `proxies`; identical for every column of g).
  /// g: m × r. proxies empty: H = Σ, solved with L22 (two dense triangular solves).
  /// dense_refactor: copy Σ into the H workspace, scatter c_j w_j w_jᵀ, dpotrf, dpotrs.
  /// woodbury (needs precompute_inverse and every stiffness > 0), restricted to the q ≤ min(m, 4k)
  /// distinct nodes N the proxies touch (W = W_N E_Nᵀ):
  ///   v_N = (Σ⁻¹ g)[N], B = Σ⁻¹[N, N]   (one pass over the q columns Σ⁻¹(:, N)),
  ///   S = C⁻¹ + W_N B W_Nᵀ (k × k SPD),  s = S⁻¹ W_N v_N,  u2 = Σ⁻¹ (g − Wᵀ s)   (one dsymm),
  /// which is (Σ + WᵀCW)⁻¹ g = [Σ⁻¹ − Σ⁻¹Wᵀ (C⁻¹ + WΣ⁻¹Wᵀ)⁻¹ WΣ⁻¹] g.
  /// Throws SolverError if H (or S) is not numerically positive definite or an index is out of range.
  Eigen::MatrixXd solve_collision_system(const std::vector<SchurProxy>& proxies,
                                         const Eigen::Ref<const Eigen::MatrixXd>& g,
                                         SchurSolveMethod method = SchurSolveMethod::Automatic);
  /// solve_collision_system() into u2 (m × r, resized only when needed): no allocation once the
  /// internal scratch has grown to the largest contact set seen.
  void solve_collision_system(const std::vector<SchurProxy>& proxies, const Eigen::Ref<const Eigen::MatrixXd>& g,
                              SchurSolveMethod method, Eigen::MatrixXd& u2);
  void solve_collision_system(SchurWorkspace& ws, const std::vector<SchurProxy>& proxies,
                              const Eigen::Ref<const Eigen::MatrixXd>& g, SchurSolveMethod method,
                              Eigen::MatrixXd& u2) const;

  /// Solves (Σ ⊗ I₃ + E_N U Uᵀ E_Nᵀ) u2 = g for g: m × 3 (column c = coordinate c, region order),
  /// the IPC global step's reduced system, by Woodbury with the precomputed Σ⁻¹ (needs
  /// precompute_inverse) and the r × r capacitance S = I + Uᵀ (Σ⁻¹[N, N] ⊗ I₃) U (SPD for any U,
  /// so no inverse of the singular barrier block is formed):
  ///   v = Σ⁻¹ g,   s = S⁻¹ Uᵀ vec(v[N]),   u2 = v − Σ⁻¹[:, N] · reshape(U s)   (q × 3).
  /// With term.block = ℬ_N instead of U, the same identity without an inverse of the (singular)
  /// ℬ_N either: with B = Σ⁻¹[N, N] and B̃ = B⁻¹ ⊗ I₃, (ℬ_N⁻¹ + B ⊗ I₃)⁻¹ = B̃ − B̃ C⁻¹ B̃ for the
  /// SPD C = ℬ_N + B̃ (3q × 3q, Cholesky), so y = B̃ vec(v[N]), s = y − B̃ C⁻¹ y,
  /// u2 = v − Σ⁻¹[:, N] · reshape(s).
  /// Then up to `refinement_steps` steps of iterative refinement: the residual g − Σ u2 − E_N U Uᵀ
  /// u2[N] (dense Σ, one dsymm) is solved with the same S and added, because Σ⁻¹ g and the
  /// correction cancel when ‖U Uᵀ‖ ≫ ‖Σ‖ (stiff barriers); a residual ≤ 10⁻¹² ‖g‖∞ (max norm)
  /// ends the refinement without that solve. U's columns are used as sparse (each touches ≤ 16
  /// nodes). Cost: m² (dsymm of g) + m q (gather) + 48 q r + 24 r² + r³/3 + m q (update), or with
  /// the block q³ + 9 q³ (the two Choleskys), plus m² for each residual and m² for each refinement
  /// solve. u2 is resized only when needed.
  /// Throws SolverError on a missing Σ⁻¹, g not m × 3, u not 3q rows, a node index out of range or
  /// repeated, or an S (or C) that is not numerically positive definite.
  void solve_low_rank_system(SchurWorkspace& ws, const SchurLowRank& term, const Eigen::Ref<const Eigen::MatrixXd>& g,
                             Eigen::MatrixXd& u2, int refinement_steps = 1) const;
  /// The single-user overload (internal workspace).
  void solve_low_rank_system(const SchurLowRank& term, const Eigen::Ref<const Eigen::MatrixXd>& g, Eigen::MatrixXd& u2,
                             int refinement_steps = 1);

  /// The method `automatic` picks for k proxies touching q distinct nodes and r right-hand sides.
  /// Cost model in flop equivalents; memory-bound kernels (copies, gathers, products with r
  /// columns) weighted by kMemoryWeight = 8 against the BLAS-3 flops of dpotrf:
  ///   refactor ≈ m³/3 (dpotrf of H) + kMemoryWeight·(m²/2 (copy Σ) + m² r (dpotrs))
  ///   woodbury ≈ k³/3 (dpotrf of S) + kMemoryWeight·(m q + m²/2 (dsymm) + 4 q k + 4 k²)
  /// i.e. Woodbury until k approaches m (box:48, m = 3783: refactor ≈ 0.4-0.6 s, Woodbury ≈ 15-35 ms
  /// for k = 5-15 % of m on 2 CPU cores). Woodbury also requires Σ⁻¹ (precompute_inverse) and every
  /// stiffness > 0.
  SchurSolveMethod choose_method(const std::vector<SchurProxy>& proxies, int r = 3) const;
  /// choose_method() with caller-held scratch (no allocation once `seen` has m entries).
  SchurSolveMethod choose_method(const std::vector<SchurProxy>& proxies, int r, std::vector<char>& seen) const;

  /// The method actually used by the last single-user solve_collision_system() call.
  SchurSolveMethod last_method() const;
  /// Phase timings of the last solve_collision_system() call.
  const SchurSolveTimings& last_timings() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// C22 = Wᵀ C W as a sparse m × m matrix (region-local), for tests and baselines.
Eigen::SparseMatrix<double> collision_matrix(int m, const std::vector<SchurProxy>& proxies);

}  // namespace xpd
