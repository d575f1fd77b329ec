#pragma once
// Two-way continuous collision handling (step-and-project): from an intersection-free state x^[k]
// and the dynamics' target y^[k+1] (a PD frame), returns x^[k+1] reached from x^[k] along a
// piecewise-linear path on which no surface primitives meet, without continuous collision
// detection. Wang, Chen, Li, Liu, Wang, Zhou 2023, "Fast GPU-Based Two-Way Continuous Collision
// Handling", Alg. 1, eqs. 3–17; defaults of its Table 2 made scale-free.
//
//   x⁽⁰⁾ = x^[k], y⁽⁰⁾ = y^[k+1], D⁽⁰⁾ = 0, r = 1 per vertex
//   for l = 0 … L−1:
//     if D⁽ˡ⁾ < D^min: P ← proximity_search(x⁽ˡ⁾, D^max); D⁽ˡ⁾ ← D^max   (collision/proximity.hpp)
//     backward: y⁽ˡ⁺¹⁾ ← one projected Gauss–Seidel sweep from y⁽ˡ⁾ over
//        contact constraints of the pairs of P closer than δ at x⁽ˡ⁾, linearized at x⁽ˡ⁾ (eq. 9;
//        with rest_fraction ρ > 0, δ is per pair: ρ × the pair's rest distance for pairs of one
//        connected surface that were closer than δ at rest):
//          volume (eq. 11): c = s·V(x)/V_r − 1 ≥ 0, V the signed volume of the 4 points
//            (vertex–triangle with the point–plane closest feature, edge–edge with interior closest
//            points), s its sign at x⁽ˡ⁾, V_r the volume with the two sides pushed apart along the
//            pair normal to distance δ (eq. 10; the triangle's area, or |e_a × e_b|, kept);
//          gap (the fallback for other closest features, slivers and near-parallel edges, and the
//            vertex–vertex constraint of eq. 12 when the closest feature is a vertex):
//            c = (n·(p(y) − q(y)) − δ)/δ ≥ 0, p, q the closest points with their weights frozen at
//            x⁽ˡ⁾, n = (p − q)/|p − q|;
//        and soft edge-length constraints (eq. 13) c = σ − u·(y_i − y_j)/L ≥ 0, u and L the unit
//        direction and length of the edge at y^[k+1];
//        and (our extension) soft volume floors of the tets given by set_volume_tets:
//          c = V(y)/V_rest − min_volume ≥ 0, V the signed volume, linearized at y⁽ˡ⁾ (rebuilt every
//          step, for the tets whose volume at y⁽ˡ⁾ is below 2 min_volume V_rest). The paper keeps
//          tets from collapsing only through eq. 13, which bounds stretch, not compression: on a
//          one-tet-thick mat pressed against itself the contacts push surface vertices through
//          their own tets, the inverted tets then drive the next PD target through the mat, and the
//          projection stops converging (docs/validation.md §10);
//        M = lumped masses (inverse 0: kinematic vertices, obstacles); constraints greedily
//        coloured in a seeded random order, one colour at a time in parallel.
//     forward (eqs. 15–17): D_i = min(D⁽ˡ⁾, min over pairs of P containing i of their distance
//        at x⁽ˡ⁾ minus a rounding bound); α_i = min(½γ D_i / |y_i − x_i|, 1); x_i += α_i (y_i − x_i);
//        r_i ← r_i (1 − α_i). No vertex moves more than half the distance of any of its pairs, so
//        no pair meets on the segment x⁽ˡ⁾ → x⁽ˡ⁺¹⁾ (eq. 16); vertices on no contact triangle move
//        with α = 1 (they are in no pair). With forward = Planes (default; our extension) only the
//        motion toward the other side is bounded: for each pair of P, n is the unit vector between
//        its closest points at x⁽ˡ⁾ and g = min over side A's vertices of n·x − max over side B's of
//        n·x (minus a rounding allowance) its gap along n; the plane between the sides keeps the
//        convex hulls apart on the whole linear step when every vertex of A moves by n·Δx ≥ −γg/2 and
//        every vertex of B by n·Δx ≤ γg/2, so α_i is lowered only for vertices moving toward the
//        plane, and sliding or separating is free; every surface vertex is still capped at ½γD⁽ˡ⁾
//        (pairs outside P). A pair whose gap is not positive along n (degenerate) falls back to
//        ½γd/|Δx_i| for its four vertices. Unlike the two bounds below, a pair squeezed close by an
//        unresolved backward step opens again as soon as its target separates it, instead of
//        freezing everything that moves with it. With forward = Zones the bound is
//        relative instead: a pair cannot meet on the step if the displacement of each of its
//        vertices relative to each vertex of the other side is below its distance d (a point of a
//        primitive moves by a convex combination of its corners' displacements), and a pair outside
//        P (distance ≥ D⁽ˡ⁾) cannot meet if no vertex moves more than D⁽ˡ⁾/2. So every surface vertex
//        is capped at ½γD⁽ˡ⁾; the vertices of pairs closer than δ, joined through shared vertices,
//        form zones that move with one α (a block move keeps its internal distances); a zone's α is
//        lowered until every pair of P moves relatively by ≤ γ d (after 32 rounds the per-vertex
//        bound ½γd/|Δx_i| settles the rest). A tight pair whose target separates it then opens by up
//        to γ d per step while its zone travels; with the paper's per-vertex α it creeps at ½γd per
//        step, and a pair whose vertices move at different rates can be squeezed toward rounding
//        and freeze (stacked plates with a tunnelled target: tests/collision/test_two_way.cpp).
//     D⁽ˡ⁺¹⁾ = D⁽ˡ⁾ − 2 max_i |x_i⁽ˡ⁺¹⁾ − x_i⁽ˡ⁾|   (P stays a superset of the pairs closer than D⁽ˡ⁺¹⁾)
//     stop when ‖r‖∞ < ε
//   x^[k+1] = x⁽ˡ⁺¹⁾: safe even when not converged (then `converged` is false).
//
// Step-and-project has no global convergence guarantee (paper §8): it keeps the surface
// intersection-free, it does not promise to reach y.
//
// Embedded contact surfaces (our extension; the surface of a lattice-embedded body, Wang et al.
// 2021): the projection moves the nodes x (#V), the contact surface's points are s = W x (#P, each
// row of W at most 4 weights w_ik, Σ_k w_ik = 1), and every figure above that names a vertex is
// taken on s: the search, the distances, the CCD-free argument. Contact constraints are linear in
// s, so their node gradients are Wᵀ J (entries of one node merged) and the sweep moves nodes by
// M⁻¹WᵀJᵀΔλ; edge lengths and volume floors act on the nodes. The forward step keeps one α_j per
// node: s_i moves by Σ_k w_ik α_k Δ_k, so a bound B on a point's motion holds when each of its
// nodes satisfies α_k|Δ_k| ≤ B/‖w_i‖₁ (for separating planes: only the node motion that, times
// the sign of its weight, goes toward the plane is bounded, by γg/(2‖w_i‖₁)); impact zones are
// unions of nodes, and a pair's relative bound is divided by the product of its sides' largest
// ‖w‖₁. With convex weights ‖w_i‖₁ = 1, and with W = I (a tet mesh's own boundary) all of this is
// the vertex rule above. The path s(t) = W x(t) of a linear node step is linear, so eq. 16 holds.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <xpd/collision/proximity.hpp>
#include <xpd/core/types.hpp>

namespace xpd {

enum class TwoWayConstraint { Volume, Gap };

/// How the forward step bounds each vertex's advance (all three keep every pair apart on the step):
/// Planes — a separating plane per pair bounds only the motion toward the other side (default);
/// Zones — impact zones move as blocks, relative motion per pair ≤ γ d; Vertex — the paper's
/// |Δx_i| ≤ γ D_i / 2 (eq. 17).
enum class TwoWayForward { Planes, Zones, Vertex };

/// Contact points bound to the nodes: point i sits at Σ_k weights(i, k) · x[nodes(i, k)] (k < 4;
/// node −1 = unused entry, weight 0). Each row's weights sum to 1 (barycentric in a tet; weights
/// slightly negative, as for points snapped from outside a lattice, are allowed).
struct TwoWayEmbedding {
  Eigen::Matrix<int, Eigen::Dynamic, 4, Eigen::RowMajor> nodes;
  Eigen::Matrix<double, Eigen::Dynamic, 4, Eigen::RowMajor> weights;
  /// Point i = node i (W = I), #V points.
  static TwoWayEmbedding identity(Eigen::Index n);
};

/// The automatic δ: 0.1 × the mean length of the edges of `faces` at `rest` (0 without faces).
double two_way_automatic_delta(const Points& rest, const Triangles& faces);

/// Parameters (paper Table 2; lengths in the mesh's units). 0 = automatic where stated.
struct TwoWayOptions {
  double delta = 0;     ///< δ > 0, contact activation distance; 0 → two_way_automatic_delta of the contact surface
  double d_min = 0;     ///< D^min ≥ δ, search again below it; 0 → 2δ
  double d_max = 0;     ///< D^max > D^min, proximity search distance; 0 → 4δ
  double gamma = 0.9;   ///< γ ∈ (0, 1), forward-step damping
  double sigma = 1.1;   ///< σ ≥ 1, allowed edge stretch relative to y^[k+1]
  int max_steps = 512;  ///< L ≥ 1
  int sweeps = 1;       ///< projected Gauss–Seidel sweeps per backward step ≥ 1 (paper Fig. 7: 1)
  double tolerance = 1e-4;  ///< ε ∈ (0, 1) on ‖r‖∞
  TwoWayConstraint constraint = TwoWayConstraint::Volume;
  /// The forward step's rule (see the header comment): separating planes (default), impact zones,
  /// or the paper's per-vertex α (eq. 17).
  TwoWayForward forward = TwoWayForward::Planes;
  std::uint64_t seed = 1;  ///< of the randomized constraint colouring
  /// Repulsion in the dynamics (our stand-in for the paper's §6.2 repulsive model; the frame loop
  /// reads it): the projection's correction is carried into the next frame as nodal forces, see
  /// TwoWayProjector::update_contact_forces. false: each frame's dynamics ignore contact.
  bool contact_forces = true;
  /// Soft volume floor of the tets given by set_volume_tets (our extension; 0 = off): in every
  /// backward step, before the contacts, c = V(y)/V_rest − min_volume ≥ 0 per tet, linearized at
  /// y⁽ˡ⁾ (see the header comment). In [0, 1).
  double min_volume = 0.1;
  /// ρ ∈ [0, 1] (our extension; 0 = off): with ρ > 0, a pair of one connected contact surface
  /// that was closer than δ in the rest pose (small or uneven triangles: the arm's skin has edges
  /// of 0.3 δ) gets a contact constraint only below ρ × its rest distance, and is pushed to that,
  /// instead of to δ: pushing it to δ inflates the surface where it is at rest, and on an embedded
  /// surface it cannot be done at all when both sides sit in one tet. Pairs of different
  /// components (bodies, obstacles) always use δ. Off by default: letting such pairs come closer
  /// also lets them be squeezed, which stalled the armadillo funnel (docs/validation.md §10).
  double rest_fraction = 0;
};

/// The first invalid option as (name, message), or none; names are the scene keys
/// ("delta", "d_min", "d_max", "gamma", "sigma", "max_steps", "sweeps", "tolerance", "min_volume",
/// "rest_fraction").
std::optional<std::pair<std::string, std::string>> two_way_option_problem(const TwoWayOptions& options);

/// Figures of one projection.
struct TwoWayStats {
  int steps = 0;                ///< forward/backward steps taken
  int searches = 0;             ///< proximity searches
  bool converged = true;        ///< ‖r‖∞ < ε within max_steps (or nothing to do)
  double max_r = 0;             ///< ‖r‖∞ at the end
  std::size_t max_pairs = 0;    ///< largest |P|
  std::size_t max_active = 0;   ///< largest number of contact constraints (pairs closer than δ) in a step
  double min_distance = 0;      ///< smallest pair distance of P at the result (∞ when P is empty)
  double max_displacement = 0;  ///< max_i |x_i^[k+1] − y_i^[k+1]| (how far the projection moved a vertex)
  double max_stretch = 1;       ///< max over length edges of |x_i − x_j| / |y_i − y_j| at the result
  double ms_total = 0, ms_search = 0, ms_backward = 0, ms_forward = 0;
};

/// What a step did, for tests and diagnostics (references valid during the callback only).
struct TwoWayStepInfo {
  int step = 0;
  bool searched = false;                               ///< a proximity search ran at the start of this step
  double D = 0;                                        ///< D⁽ˡ⁾ after the search (the cap of every D_i)
  const Points* x_before = nullptr;                    ///< x⁽ˡ⁾ (nodes)
  const Points* x_after = nullptr;                     ///< x⁽ˡ⁺¹⁾ (nodes)
  const Points* y = nullptr;                           ///< y⁽ˡ⁺¹⁾ (nodes)
  const Points* s_before = nullptr;                    ///< W x⁽ˡ⁾ (contact points; = x⁽ˡ⁾ when W = I)
  const Points* s_after = nullptr;                     ///< W x⁽ˡ⁺¹⁾
  const std::vector<double>* safe_distance = nullptr;  ///< D_i per contact point (∞ off the contact surface)
  const ProximityPairs* pairs = nullptr;               ///< P (indices into faces / contact_edges())
};

class TwoWayProjector {
 public:
  /// `rest`: rest positions (#V × 3; automatic δ from them). `faces`: the contact surface (indices
  /// into the #V vertices; its edges are the edge–edge contact edges). `length_edges`: the soft
  /// edge-length constraints (e.g. every tet edge; may be empty). `inverse_mass`: #V entries ≥ 0
  /// (0: kinematic). Throws Error on inconsistent sizes or indices and on invalid options.
  TwoWayProjector(const Points& rest, Triangles faces, Edges length_edges, Eigen::VectorXd inverse_mass,
                  TwoWayOptions options = {});
  /// An embedded contact surface: `faces` index the points of `embedding` (#P rows, nodes in
  /// [0, #V)); everything else as above (the nodes carry the masses, edges and volume floors).
  /// Throws Error on bad indices, non-finite weights or rows not summing to 1.
  TwoWayProjector(const Points& rest, TwoWayEmbedding embedding, Triangles faces, Edges length_edges,
                  Eigen::VectorXd inverse_mass, TwoWayOptions options = {});

  /// The contact points W x of node positions x (#V × 3) → #P × 3.
  Points contact_points(const Points& x) const;

  /// Contact forces for the next frame of implicit-Euler dynamics (time step h > 0), from a
  /// projection of y (the dynamics' target, which already felt f) to x: the force that would have
  /// moved y to x in the step, f_i ← f_i + m_i (x_i − y_i)/h², is accumulated for the nodes of
  /// the pairs closer than D^min at x (a proximity search) and set to 0 for every other node, so
  /// it acts only while surfaces stay near. Persistent contact then enters the dynamics as a force
  /// (a multiplier estimate carried between frames, corrected by each projection) and the next
  /// target needs only the change of the contact force, instead of ignoring contact and handing
  /// the projection a target through the other layer. Vertices of inverse mass 0 get 0. f: #V × 3
  /// (resized and zeroed when its shape differs). Throws Error on sizes or h ≤ 0.
  void update_contact_forces(const Points& x, const Points& y, double h, Points& f) const;

  /// Tets (rows of 4 vertex indices, positive rest volume at `rest`) whose volume the backward
  /// step keeps above options().min_volume × the rest volume; empty (the default) = none. Throws
  /// Error on an index outside [0, #V) or a rest volume ≤ 0.
  void set_volume_tets(const Points& rest, Tets tets);

  /// The options with automatic values resolved.
  const TwoWayOptions& options() const { return options_; }
  const Triangles& faces() const { return faces_; }
  const Edges& contact_edges() const { return contact_edges_; }
  const Edges& length_edges() const { return length_edges_; }
  const TwoWayEmbedding& embedding() const { return embedding_; }
  Eigen::Index num_nodes() const { return n_; }
  Eigen::Index num_contact_points() const { return embedding_.nodes.rows(); }
  const Eigen::VectorXd& inverse_mass() const { return inverse_mass_; }
  /// The tets of set_volume_tets and their rest volumes.
  const Tets& volume_tets() const { return volume_tets_; }
  const std::vector<double>& volume_tet_rest_volumes() const { return rest_volume_; }
  /// Per contact point: the smallest point index of its connected component of the contact faces.
  const std::vector<int>& components() const { return component_; }
  /// The contact points at the rest positions (W × rest).
  const Points& rest_contact_points() const { return rest_points_; }

  /// Throws CollisionError naming the two triangles if the contact surface at W x intersects itself
  /// (collision/intersection.hpp), Error on non-finite or wrongly sized x.
  void check_intersection_free(const Points& x) const;

  /// Projects: x ← a safe state reached from x_safe toward y (node positions, both #V × 3; the
  /// contact surface at x_safe must be intersection-free, which is not re-checked here). Throws
  /// Error on sizes or non-finite input.
  TwoWayStats project(const Points& x_safe, const Points& y, Points& x,
                      const std::function<void(const TwoWayStepInfo&)>& observe = {}) const;

 private:
  int n_ = 0;
  TwoWayEmbedding embedding_;
  std::vector<double> l1_;  // ‖w_i‖₁ per contact point
  Triangles faces_;
  Edges contact_edges_, length_edges_;
  Tets volume_tets_;
  std::vector<double> rest_volume_;
  Eigen::VectorXd inverse_mass_;
  std::vector<char> on_surface_;       // per contact point: a vertex of a contact face
  std::vector<char> node_on_surface_;  // per node: carries weight ≠ 0 of a point on the surface
  std::vector<int> component_;         // per contact point: connected component of the faces
  Points rest_points_;                 // W × rest
  TwoWayOptions options_;
};

}  // namespace xpd
