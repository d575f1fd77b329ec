#pragma once
// The collision detector the collision-aware solver uses (Wang et al. 2021, Algorithm 1 step 4.1,
// "C(x2) ← DetectCollisions(x2)"): kinematic obstacles (analytic shapes and mesh SDF grids, moved by
// keyframes) plus optional rest-pose level-set self-collision, over the proxies of the collision
// region only.
//
// Per region proxy p at x_p = W x:
//   obstacle candidate: find_contacts(obstacles, frame, x_p, margin) — the obstacle with the
//     smallest signed distance sd < margin; penetration π = −sd, ProxyContact::depth = max(0, −sd),
//     target t = x_p − sd n, other = obstacle index;
//   self candidate (when enabled): SelfCollision (self_collision.hpp), π = depth = |t − x_p|,
//     other = the penetrated tet (no margin: only actual penetration of the rest level set counts).
// The candidate with the larger π wins (the obstacle on ties). At most one contact per proxy,
// sorted by proxy index.
#include <memory>
#include <vector>
#include <xpd/collision/contact.hpp>
#include <xpd/collision/obstacles.hpp>
#include <xpd/collision/self_collision.hpp>

namespace xpd {

/// Options of CollisionDetector.
struct CollisionDetectorOptions {
  double margin = 0;          ///< obstacle contact margin (≥ 0): contacts for sd < margin
  SelfCollisionOptions self;  ///< used when a rest SDF is given
  /// Tets searched for self-collision; empty: proxy_region_tets(tets, proxies, region_proxies)
  /// (E_β of Wang et al. 2021). With node proxies that is one tet per proxy, so penetrations
  /// deeper than that layer go unseen: pass a thicker layer here. Every node of these tets is read
  /// by detect() and so must belong to the collision-prone set x2 when used inside the Schur inner
  /// loop.
  std::vector<int> self_region;
};

/// Obstacles + optional self-collision over a set of region proxies.
class CollisionDetector final : public ContactDetector {
 public:
  /// mesh: the simulation mesh at rest (nodes, tets); proxies and the region proxies to test (all
  /// when empty); obstacles (validated here and at every detect()); rest_sdf: the rest-pose signed
  /// distance grid of the body for self-collision, or null for none. The self-collision search
  /// region is options.self_region, or proxy_region_tets(mesh.tets, proxies, region_proxies). Throws Error on bad input
  /// (invalid obstacle, negative/non-finite margin, index out of range).
  CollisionDetector(const TetMesh& mesh, ProxySet proxies, std::vector<int> region_proxies,
                    std::vector<Obstacle> obstacles, std::shared_ptr<const SdfGrid> rest_sdf = nullptr,
                    const CollisionDetectorOptions& options = {});

  void detect(const Points& x, double frame, std::vector<ProxyContact>& contacts) override;

  bool self_collision_enabled() const { return self_ != nullptr; }
  const SelfCollision* self_collision() const { return self_.get(); }
  const std::vector<int>& region_proxies() const { return which_; }
  const std::vector<Obstacle>& obstacles() const { return obstacles_; }

 private:
  Eigen::Index num_nodes_ = 0;
  Tets tets_;
  ProxySet proxies_;
  std::vector<int> which_;
  std::vector<Obstacle> obstacles_;
  double margin_ = 0;
  std::unique_ptr<SelfCollision> self_;
  std::vector<ProxyContact> self_contacts_;  // scratch
  Points proxy_x_;                           // scratch: region proxy positions
  std::vector<Contact> hits_;                // scratch: obstacle contacts
  std::vector<RigidTransform> transforms_;   // scratch: obstacle poses at the frame
};

/// Largest ProxyContact::depth of the contacts (0 for none).
double max_penetration(const std::vector<ProxyContact>& contacts);

}  // namespace xpd
