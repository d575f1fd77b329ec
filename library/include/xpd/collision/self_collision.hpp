#pragma once
// Self-collision by rest-pose level sets (McAdams et al. 2011, "Efficient elasticity for character
// skinning with contact and collisions", as used in Wang et al. 2021, §5.1, and DESIGN.md §3).
//
// The body's rest shape is described by a signed distance grid φ of its closed surface (negative
// inside). A proxy p at deformed position x_p = Σ_a W(p, a) x_a penetrates another part of the body
// when x_p lies inside a deformed tet T that is not in p's own neighbourhood and the rest-space
// image of x_p through T is inside the rest surface:
//   b   = barycentric weights of x_p in the DEFORMED tet T (Σ b = 1, all b ≥ −tolerance),
//   X   = Σ_a b_a X_a          (rest-space image of x_p through T's affine map),
//   if φ(X) < δ − projection_tolerance (δ = margin ≥ 0: material of the other side, or within δ
//   of its rest surface; with δ = 0 not merely on the surface):
//     X'  = Newton projection of X onto φ = δ: X ← X − (φ(X) − δ) ∇φ / max(|∇φ|, ½)|∇φ| (at most
//           projection_iterations steps, stopping when |φ − δ| ≤ projection_tolerance; where the
//           trilinear gradient is shorter than ½ — medial axis — central differences over one
//           grid cell replace it; a point with no direction at all gives no contact),
//     b'  = barycentric weights of X' in the REST tet T (the affine map of T extended outside it),
//     t   = Σ_a b'_a x_a       (target in deformed space), depth = max(0, |t − x_p| − δ) (the
//           penetration of the surface itself; δ is measured in rest space, so under strain this is
//           approximate for δ > 0),
//     n   = (t − x_p)/|t − x_p| (or F_T^{−T} ∇φ normalized when t = x_p).
// The margin δ keeps a layer of thickness δ between the sides. Embedded surfaces need it: the
// surface is drawn as flat triangles between its embedded vertices, while the other side's
// material is the lattice's piecewise-affine map; where the lattice bends across a triangle (a
// crease) the two differ (measured: up to 8e-4 on the 72K-tet elbow at 140°, 4% of its mean edge),
// so vertices can sit inside the drawn triangles of the other side while outside its material.
// Among the candidate tets of one proxy the deepest (most negative φ(X); lowest tet index on ties)
// gives its contact, with ProxyContact::other = T.
//
// Neighbourhood exclusion (a proxy must not collide with the material it is part of): T is skipped
// when it is the proxy's own tet, when it shares a node with the proxy's own tet, or when
// |X − X_p| < exclusion_radius (X_p the proxy's rest position). While the deformation inverts no
// tet, the piecewise-affine map is injective and x_p lies only in tets around its own (node
// sharing already excludes them; the tests confirm no contacts under smooth deformations). Where
// the map folds — inverted or crushed tets at a tight crease, e.g. inside a bent elbow — x_p enters
// tets a few rings away; the rest-space radius is the robust rule there, since such tets map x_p
// back close to X_p, whereas genuinely colliding material comes from far away in rest space.
// Contacts between parts closer than the radius in rest space are not detected (choose the radius
// below the rest distance of surfaces that may touch: e.g. the gap of a U-shaped body).
//
// Only the `region` tets are searched (they get a spatial hash of their deformed bounding boxes,
// rebuilt at every detect(); cost O(#region tets + #region proxies · candidates)); proxies that
// penetrate beyond the region are not seen.
#include <memory>
#include <vector>
#include <xpd/collision/contact.hpp>
#include <xpd/collision/sdf_grid.hpp>
#include <xpd/mesh/tet_locator.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Options of SelfCollision.
struct SelfCollisionOptions {
  /// Rest-space neighbourhood radius; ≤ 0 picks 1.5 × the mean rest edge length of the region tets.
  double exclusion_radius = 0;
  /// x_p is inside a deformed tet when all its barycentric weights are ≥ −tolerance.
  double tolerance = 1e-9;
  /// Newton steps of the rest-space projection onto φ = 0 (≥ 1).
  int projection_iterations = 4;
  /// Stop the projection when |φ(X') − margin| ≤ this; ≤ 0 picks 1e-6 × the grid cell size.
  double projection_tolerance = 0;
  /// Contact margin δ ≥ 0 (rest-space length): proxies within δ of the other side's rest surface
  /// are contacts, their targets on the offset surface φ = δ (see the header comment).
  double margin = 0;
};

/// Rest-pose level-set self-collision of one body (see the header comment).
class SelfCollision final : public ContactDetector {
 public:
  /// rest_nodes #V × 3 and tets #T × 4 of the simulation mesh; rest_sdf: signed distance grid of the
  /// body's rest surface (e.g. rest_surface_sdf(), or an embedded high-resolution surface); region:
  /// the tets to search (duplicates removed); proxies and the proxies to test (`region_proxies`,
  /// all when empty). Keeps copies. Throws Error on a null grid, an index out of range, non-finite
  /// rest nodes, or bad options.
  SelfCollision(const Points& rest_nodes, const Tets& tets, std::shared_ptr<const SdfGrid> rest_sdf,
                std::vector<int> region, ProxySet proxies, std::vector<int> region_proxies = {},
                const SelfCollisionOptions& options = {});

  /// Self contacts (Source::Self) at node positions x (#V × 3), at most one per proxy, sorted by
  /// proxy. `frame` is unused (the rest shape does not move). Uses a spatial hash.
  void detect(const Points& x, double frame, std::vector<ProxyContact>& contacts) override;
  void detect(const Points& x, std::vector<ProxyContact>& contacts) { detect(x, 0.0, contacts); }

  /// Oracle: the same rule testing every region tet for every proxy (no hash). Identical output.
  void detect_brute_force(const Points& x, std::vector<ProxyContact>& contacts) const;

  double exclusion_radius() const { return exclusion_radius_; }
  double margin() const { return margin_; }
  const std::vector<int>& region() const { return region_; }
  const std::vector<int>& region_proxies() const { return which_; }
  const ProxySet& proxies() const { return proxies_; }

 private:
  // Evaluates region tet T for proxy slot i at deformed position xp; updates `best` when T gives a
  // deeper candidate (φ smaller, or equal φ and lower tet index).
  void consider(const Points& x, int i, const Vec3& xp, int T, ProxyContact& best, double& best_phi) const;
  void check_positions(const Points& x) const;

  Points rest_;
  Tets tets_;
  std::shared_ptr<const SdfGrid> sdf_;
  std::vector<int> region_;
  ProxySet proxies_;
  std::vector<int> which_;
  double exclusion_radius_ = 0;
  double tolerance_ = 1e-9;
  int iterations_ = 4;
  double projection_tolerance_ = 0;
  double margin_ = 0;
  // Rest-space point location over the region tets: the projected rest point is carried back to
  // deformed space by the tet that contains it (McAdams et al. 2011), not by extrapolating T's map.
  std::unique_ptr<TetLocator> rest_locator_;
  // Spatial hash scratch (reused between calls).
  std::vector<Vec3> box_lo_, box_hi_;
  std::vector<int> cell_start_, cell_tets_, cell_fill_;
  std::vector<ProxyContact> slot_;
  std::vector<double> slot_phi_;
};

/// Signed distance grid of the boundary surface of a tet mesh (boundary_faces of its tets) at the
/// mesh's nodes: the rest-pose level set when given rest nodes.
std::shared_ptr<const SdfGrid> rest_surface_sdf(const TetMesh& mesh, const SdfGridOptions& options = {});

}  // namespace xpd
