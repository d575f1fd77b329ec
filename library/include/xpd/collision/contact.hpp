#pragma once
// The contract between collision detection (collision/) and the collision-aware PD solver
// (solver/collision_solver.hpp): collision proxies bound to the simulation mesh, the contacts a
// detector reports for them, and the detector interface.
//
// A proxy is a point of the body embedded in one simulation tet (Wang et al. 2021, §4.1): its
// position is x_p = Σ_a W(p, a) x[tets(tet[p], a)] with barycentric weights W (Σ_a W = 1). Proxies
// are either surface vertices of the simulation mesh (one weight 1) or vertices of a
// high-resolution surface embedded in a coarser lattice (mesh/embedding.hpp). An active proxy gets
// a zero-rest-length penalty spring c/2 ||x_p − t||² to its projection t onto free space (the PD
// projection of the non-penetration constraint), recomputed at every detection.
#include <utility>
#include <vector>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Collision proxies: points bound to tets of the simulation mesh by barycentric weights.
struct ProxySet {
  std::vector<int> tet;        ///< #P: simulation tet holding each proxy
  BarycentricWeights weights;  ///< #P × 4: x_p = Σ_a weights(p, a) x[tets(tet[p], a)]
  Points rest;                 ///< #P × 3 rest positions (= W X_rest)
  int size() const { return static_cast<int>(tet.size()); }
};

/// One active proxy of one detection pass.
struct ProxyContact {
  enum class Source { Obstacle, Self };
  int proxy = -1;               ///< index into the ProxySet
  Vec3 target = Vec3::Zero();   ///< spring target: the proxy's projection onto free space
  Vec3 normal = Vec3::UnitZ();  ///< unit direction from the proxy towards free space
  double depth = 0;             ///< penetration depth |t − x_p| ≥ 0 (0 for margin-only contacts)
  Source source = Source::Obstacle;
  int other = -1;  ///< obstacle index (Obstacle) or the penetrated tet (Self)
  /// Self contacts: the target is a material point of the other side, target = Σ_a
  /// surface_weights[a] x[tets(surface_tet, a)] (its rest-surface point carried by the tet holding
  /// it), so the solver can make the spring two-sided: c/2 ||x_p − Σ_a surface_weights[a] x_a||²
  /// pulls both sides together with equal and opposite forces (a potential, unlike a spring to a
  /// target frozen in space). −1 when the target is a point in space (obstacles).
  int surface_tet = -1;
  Vec4 surface_weights = Vec4::Zero();
};

/// Collision detection as the solver sees it. Implementations may keep scratch (acceleration
/// structures) between calls; one detector is used by one solver at a time.
class ContactDetector {
 public:
  virtual ~ContactDetector() = default;
  /// Contacts of the detector's proxies at node positions x (#V × 3; only the nodes of the proxies'
  /// tets and of the tets searched for self-collision are read) at `frame` (obstacle keyframes).
  /// Clears `contacts` and fills at most one contact per proxy, sorted by proxy index.
  virtual void detect(const Points& x, double frame, std::vector<ProxyContact>& contacts) = 0;
};

/// A detector that reports the same contacts at every call (set()): the contact set held fixed,
/// for oracles and benchmarks of the solvers without detection (the device's Algorithm 1 is checked
/// against the CPU's this way). The contacts must be sorted by proxy, one per proxy.
class FixedContactDetector final : public ContactDetector {
 public:
  FixedContactDetector() = default;
  explicit FixedContactDetector(std::vector<ProxyContact> contacts) : contacts_(std::move(contacts)) {}
  void set(std::vector<ProxyContact> contacts) { contacts_ = std::move(contacts); }
  void detect(const Points&, double, std::vector<ProxyContact>& contacts) override { contacts = contacts_; }

 private:
  std::vector<ProxyContact> contacts_;
};

/// proxy_positions into `out` (resized only when the count changes: no allocation in a loop).
void proxy_positions(const ProxySet& proxies, const Tets& tets, const Points& x, const std::vector<int>& which,
                     Points& out);
/// Positions of proxies `which` (all when empty) at node positions x: #which × 3.
Points proxy_positions(const ProxySet& proxies, const Tets& tets, const Points& x, const std::vector<int>& which = {});

}  // namespace xpd
