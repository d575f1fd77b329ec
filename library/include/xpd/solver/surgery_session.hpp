#pragma once
// SurgerySession: a quasistatic PD model whose topology changes between frames — face-separating
// cuts, excisions, sutures, hooks, released attachments — with its factor kept by progressive Cholesky updates (Li,
// Liu, Kavan & Chen 2021) instead of a refactorization per event, or refactored per event (the oracle; paper 003's
// "same results" claim made measurable). The library layer of the thesis's surgery tools (Wang 2025, ch. 5) that scenes
// and the viewer build on.
//
// One event:
//   1. the mesh operation (FaceCutter::cut) or the spring list change (a suture added / removed);
//   2. the new model is built (assembly and validation, no factorization in progressive mode):
//      a fragment left without attachment fails here (SolverError naming the component);
//   3. the factor follows: DynamicLdlt::modify with the event's columns (cut_modification,
//      spring_column); when it reports a loss of definiteness (it rolled back exactly) the new
//      matrix is refactored instead and `factor_fallback` counts it; refactor mode factors it anew;
//   4. the state continues: old nodes keep their positions, a node's copy starts at its twin's,
//      frame inputs (attachment targets, gravity) carry over, a new hook's target is the given one.
// An event that fails at any step leaves mesh, model, factor and state as they were and rethrows.
//
// Quasistatic or implicit Euler: with implicit Euler the lumped masses' change (M/h² in the PD
// matrix) enters each event's factor modification, a copy starts with its twin's velocity, and a
// piece a cut frees falls (no attachment is needed).
// Limits (SolverError at construction): corotated tets, optionally strain-limited (Wang 2025 §3's
// biphasic skin: a strain limit's block is G_tᵀ G_t like the corotated one, so a tet's weight in
// cut_modification is μ + μ′), no shape targets or λ term, no nodal forces, no allow_unattached (its
// regularization follows K's diagonal, which the updates do not track).
//
// Cost: the factor follows an event without refactorization, but the event still copies the mesh
// and rebuilds the Model (assembly and validation, no factorization): on box:48 about 0.5 s, more
// than a small cut's update (xpd bench cut's `refills[].assemble_ms`); `factor_update_ms` counts
// the factor only. Making the terms follow the event incrementally is the next step.
#include <memory>
#include <vector>
#include <xpd/collision/obstacles.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/solver_options.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

/// How the factor follows a topology event.
enum class FactorUpdate {
  Progressive,  ///< DynamicLdlt::modify (refactor only when it reports a loss of definiteness)
  Refactor      ///< a fresh CHOLMOD analyze + factorize of the new model per event (the oracle)
};

struct SurgeryOptions {
  FactorUpdate factor_update = FactorUpdate::Progressive;
  SolverOptions solver;  ///< every frame (step())
  FillPolicy fill;       ///< check_fill() (progressive mode)
};

/// Collision handling through topology events (enable_collision): the localized collisions of
/// Wang et al. 2021 (solver/collision_solver.hpp, Schur method) against kinematic obstacles. At
/// each event the region's Schur factorization follows the change by SchurFactorization::modify
/// (low-rank updates of Σ⁻¹ and Σ, progressive mode) instead of a new factorization, unless the
/// event changes the region's nodes (a cut that duplicates a node of a region proxy's tet: the
/// copies would belong to x2) or the session refactors (refactor mode, the oracle): then the
/// factorization is built anew. The proxies follow the events: face cuts keep tet ids; an element
/// split moves a proxy of a cut tet to the fragment holding it; an excision drops the proxies in
/// the removed tets and renumbers the others; a node proxy of a split node gives the other side a
/// proxy of its own; an excision inside a surface (excise_inside: a split and an excision in one
/// event) does both, the split's rebinding first. An event that excises every region proxy is
/// refused (SolverError, state unchanged); there is no self-collision (its rest-pose level set does
/// not follow cuts).
struct SurgeryCollision {
  ProxySet proxies;         ///< points bound to tets of the session's current mesh
  std::vector<int> region;  ///< the collision region's proxies (indices into proxies)
  std::vector<Obstacle> obstacles;
  double margin = 0;         ///< obstacle contact margin (CollisionDetectorOptions::margin)
  CollisionOptions options;  ///< stiffness, inner iterations, ...; method must be Schur
};

/// Figures of a session (the `stats.json` topology fields of the surgery issue).
struct SurgeryStats {
  long topology_events = 0;     ///< cuts that separated a face, excisions; sutures, hooks, attachments added or removed
  double factor_update_ms = 0;  ///< the last event's factor update (or refactorization)
  double factor_update_ms_total = 0;
  /// The last event's (or the session's first) model build: progressive mode changes the current
  /// model's K by the event's FactorModification (build_model's second form), refactor mode
  /// assembles it afresh (box:48: about 0.4 s against 2.1 s)
  double model_ms = 0;
  double model_ms_total = 0;   ///< over the events
  long factor_fallback = 0;    ///< progressive updates that lost definiteness and were refactored
  long fill_refactors = 0;     ///< refactorizations by check_fill()
  double nnz_L = 0;            ///< entries of the current factor (progressive mode; 0 in refactor mode)
  long schur_updates = 0;      ///< events whose collision region's Σ, Σ⁻¹ followed by low-rank updates
  long schur_rebuilds = 0;     ///< events after which the region's Schur factorization was built anew
  double schur_update_ms = 0;  ///< the last event's Schur update (or rebuild)
};

class CutSurface;

class SurgerySession {
 public:
  /// Builds the model (and its factor) from `desc`; throws SolverError / MeshError like
  /// build_model, and SolverError for what the session does not support (header comment).
  explicit SurgerySession(ModelDesc desc, SurgeryOptions options = {});
  ~SurgerySession();
  SurgerySession(SurgerySession&&) noexcept;
  SurgerySession& operator=(SurgerySession&&) noexcept;

  const TetMesh& mesh() const;
  const Model& model() const;
  const State& state() const;
  /// The state between frames (positions, frame inputs); its size changes with cuts.
  State& state();
  const SurgeryStats& stats() const;
  const SurgeryOptions& options() const;
  /// The frames' solver options (editable between frames).
  SolverOptions& solver_options();
  /// The updatable factor (progressive mode; empty in refactor mode, where model().factor() solves).
  const DynamicLdlt& factor() const;
  /// The mesh operations so far (which faces are cut, which original node each node descends
  /// from): what the skin tools (topology/surface_region.hpp) read.
  const FaceCutter& cutter() const;

  /// Separates the given interior faces (FaceCutter::cut: nodes split per side, the crack front
  /// single) and updates the factor. Each copy of a split node attached by a node attachment gets
  /// the same attachment (new key, attachment_origin() names the original's). A cut of no new face changes nothing.
  /// Throws MeshError for faces that are not two tets sharing a face, SolverError when the cut mesh is not a valid
  /// model (e.g. a fragment without attachment) — state unchanged.
  CutEvent cut(const std::vector<TetPair>& faces);

  /// Cuts the tets the surface passes through (element splitting, FaceCutter::split: each a
  /// fragment per side with its volume fraction of the tet's μ, ρ and strain-limit stiffness, the
  /// nodes split per connected side) and updates the factor: the changed tets' blocks with their
  /// new weights and the new fragments' blocks, the new nodes placed before their twins. Copies of
  /// attached nodes inherit the attachments, as with cut(). A surface that cuts no tet changes
  /// nothing. Throws MeshError (a mesh with face cuts) or SolverError (an unattached fragment) —
  /// state unchanged.
  CutEvent split(const CutSurface& surface);

  /// Removes what lies inside a closed surface (a sphere): split() by it, then the excision of the
  /// fragments inside (FaceCutter::tets_inside), as one event: one model, one factor modification
  /// (the split's change, then minus the inside fragments' blocks and a placeholder for each node
  /// left without a tet, a new one with its twin's diagonal). The lumped mass drops by exactly the
  /// inside fragments' share. Nothing inside: no event (empty result). Errors as excise().
  /// `split_event` (optional) receives the split's event (its tets are numbered before the
  /// excision's tet_map).
  ExcisionEvent excise_inside(const CutSurface& surface, CutEvent* split_event = nullptr);

  /// Removes tets (excision, FaceCutter::excise; ids of the current mesh). Nodes left without a tet
  /// become inactive (ModelDesc::inactive_nodes: a placeholder diagonal, the node's current K(j,j);
  /// they stay where they are, and no later suture or hook may use them); hooks, sutures and
  /// attachments on them go with the event. The lumped mass drops by exactly the removed tets'.
  /// The factor: minus the removed tets' blocks, plus the placeholders, minus the dropped springs'
  /// columns. Throws MeshError (an id out of range or repeated, every tet) or SolverError (a
  /// fragment left without attachment) — state unchanged.
  ExcisionEvent excise(const std::vector<int>& tets);  // no tets: nothing happens, empty event

  /// Adds a zero-rest-length spring of stiffness k between two points (a suture; a rank-1 update
  /// of the factor) and returns its id. Throws SolverError for a node out of range, two ends at the
  /// same point, or k not finite and > 0 (spring_column) — state unchanged.
  int add_suture(const BaryPoint& a, const BaryPoint& b, double stiffness);
  /// Removes a suture (a rank-1 downdate). Throws SolverError for an unknown id.
  void remove_suture(int id);
  /// Number of sutures in place.
  int num_sutures() const;

  /// Adds a skin hook: a zero-rest-length spring of stiffness k from a point to a target (an
  /// attachment; a rank-1 update). Returns its attachment key, the row of its target in
  /// state().inputs.attachment_targets is attachment_row(key): move the hook by editing it between
  /// frames (no factor change). Throws SolverError like add_suture — state unchanged.
  int add_hook(const BaryPoint& point, const Vec3& target, double stiffness);
  /// Several hook springs in one event (one model rebuild, a rank-k update): a hook that grips a
  /// patch of tissue. points and targets of equal, non-zero length; each spring has `stiffness`.
  /// Returns their keys in order. Throws SolverError like add_hook — state unchanged.
  std::vector<int> add_hooks(const std::vector<BaryPoint>& points, const std::vector<Vec3>& targets, double stiffness);
  /// Removes attachments (hooks by their key; the desc's own attachments by their index in
  /// ModelDesc::attachments, which is their key) in one event of rank-1 downdates — the factor side
  /// of undermining, which releases the tissue below a skin region. Throws SolverError for an
  /// unknown or repeated key, or when the release leaves a fragment without attachment — state
  /// unchanged.
  void remove_attachments(const std::vector<int>& keys);
  /// The row of an attachment in state().inputs.attachment_targets (and in the model's attachment
  /// term), or −1 when there is none with that key.
  int attachment_row(int key) const;
  int num_attachments() const;
  /// The keys of the attachments in place, in row order.
  const std::vector<int>& attachment_keys() const;
  /// The point an attachment in place holds. Throws SolverError for a key not in place.
  const BaryPoint& attachment_point(int key) const;
  /// The key an attachment was copied from: a cut gives each copy of a split node the attachments
  /// of the node it duplicates (same stiffness and target; origin = the first ancestor's key), so
  /// that a clamp holds every piece it held; other attachments are their own origin. −1 for a key
  /// never issued.
  int attachment_origin(int key) const;

  /// Solves the frame (quasistatic equilibrium from the current positions) with the current factor;
  /// with collisions on, collision_step() with obstacles at `frame` (its figures:
  /// last_collision_stats()).
  FrameStats step(double frame = 0.0);

  /// Turns collision handling on (SurgeryCollision): builds the detector and the collision model
  /// with its Schur factorization of the current matrix. Throws SolverError / Error for bad input
  /// (proxy indices, a non-Schur method, a stiffness ≤ 0, an invalid obstacle) — the session
  /// unchanged.
  void enable_collision(SurgeryCollision collision);
  /// The current collision model (null while collisions are off).
  const CollisionModel* collision_model() const;
  /// Figures of the last step() with collisions on.
  const CollisionFrameStats& last_collision_stats() const;
  /// The contacts at the end of the last step() (empty while collisions are off).
  const std::vector<ProxyContact>& contacts() const;

  /// The fill policy (progressive mode, between interactions): DynamicLdlt::refill of the current
  /// matrix without the round-off residues of entries that events cancelled (off-diagonal entries
  /// below 1e-13 √(K_ii K_jj)), so that the fresh ordering is the cut mesh's. In refactor mode
  /// nothing to do (returns a result with refactored = false).
  RefillResult check_fill();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xpd
