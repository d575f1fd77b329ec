#pragma once
// Kinematic obstacles for penalty contact (Wang et al. 2021): a collision proxy point x that lies
// inside an obstacle gets a zero-rest-length spring to its projection t on the obstacle surface.
// Obstacles are analytic shapes given in a local frame and moved rigidly by keyframes, so the
// world-space shape at `frame` is T(frame)(local shape) with T = evaluate(keyframes, frame).
//
// Conventions shared by every shape (all in the local frame; world results follow by T):
//   sd(x)   signed distance to the surface, negative inside, positive outside;
//   n(x)    outward unit normal; where sd is differentiable, n = ∇sd;
//   t(x)    closest surface point (projection target), t = x − sd(x) · n(x), so |t − x| = |sd|.
//           For an inside point the target lies along +n from x (x is pushed out along n).
//
// Shape formulas (local frame):
//   Plane {p, m}:       n = m/|m|,  sd = n·(x − p).  The half-space n·(x − p) < 0 is inside.
//   Sphere {c, r}:      d = x − c, sd = |d| − r, n = d/|d| (+z when x = c).
//   Capsule {a, b, r}:  s = clamp((x − a)·(b − a)/|b − a|², 0, 1) (s = 0 when a = b),
//                       q = a + s(b − a); then the sphere formulas about q (when x = q, n is a fixed
//                       unit vector perpendicular to b − a; the same when |x − q| is
//                       at rounding level; inside the segment the axial residue of x − q is removed).
//   Box {h}:            centered at the origin, |x_i| ≤ h_i inside. q_i = |x_i| − h_i.
//                       Outside (max q > 0): t = clamp(x, −h, h), sd = |x − t|, n = (x − t)/sd.
//                       Inside or on it (max q ≤ 0): i = argmax q (lowest i on ties),
//                       sd = q_i, n = sign(x_i) e_i (sign(0) = +1), t = x with t_i = sign(x_i) h_i.
//   MeshSdf {grid}:     sd = grid->value(x) (trilinear signed distance of a closed triangle mesh,
//                       collision/sdf_grid.hpp), g = grid->gradient(x), n = g/|g| (+z when g = 0),
//                       t = x − sd · n (exact for the sampled function only to O(h); one step, no
//                       iteration). Accurate within the grid's exact band; see SdfGrid for outside.
// sd is 1-Lipschitz everywhere and C¹ except on the medial axes (sphere center, capsule axis,
// box inside diagonals/planes where two faces are equally near, box edges/corners at sd = 0).
#include <cstddef>
#include <memory>
#include <variant>
#include <vector>

#include "xpd/collision/sdf_grid.hpp"
#include "xpd/core/keyframes.hpp"
#include "xpd/mesh/tet_mesh.hpp"

namespace xpd {

/// Half-space below a plane through `point` with (not necessarily unit, non-zero) `normal`.
struct Plane {
  Vec3 point = Vec3::Zero();
  Vec3 normal = Vec3::UnitZ();
};

/// Ball of `radius` > 0 about `center`.
struct Sphere {
  Vec3 center = Vec3::Zero();
  double radius = 1;
};

/// Points within `radius` > 0 of the segment [a, b] (a = b is allowed: a sphere).
struct Capsule {
  Vec3 a = Vec3::Zero();
  Vec3 b = Vec3::UnitX();
  double radius = 1;
};

/// Axis-aligned (in the local frame) box [−h, h] centered at the origin, every h_i > 0.
struct Box {
  Vec3 half_extents = Vec3::Ones();
};

/// Signed distance grid of a closed triangle mesh (in the obstacle's local frame). Shared, immutable:
/// one grid may serve several obstacles. Must be non-null.
struct MeshSdf {
  std::shared_ptr<const SdfGrid> grid;
};

using ObstacleShape = std::variant<Plane, Sphere, Capsule, Box, MeshSdf>;

/// An analytic shape in its local frame moved rigidly over frames. Empty `keyframes`: the shape
/// stays put (identity transform). Keys must have strictly increasing frames (see evaluate()).
struct Obstacle {
  ObstacleShape shape;
  std::vector<Keyframe> keyframes;
};

/// World-space result of a point query.
struct ObstacleQuery {
  double signed_distance = 0;                 ///< negative inside
  Vec3 closest_surface_point = Vec3::Zero();  ///< projection target t = x − sd · n
  Vec3 normal = Vec3::UnitZ();                ///< outward unit normal
};

/// One proxy in contact with one obstacle.
struct Contact {
  int proxy = 0;                ///< row of `proxies`
  int obstacle = 0;             ///< index into the obstacle list
  Vec3 target = Vec3::Zero();   ///< closest surface point (spring target)
  Vec3 normal = Vec3::UnitZ();  ///< outward normal at the target
  double depth = 0;             ///< penetration depth −sd (> 0 inside; ≤ 0 for margin-only contacts)
};

/// Throws xpd::Error when the shape is invalid (non-finite values, radius ≤ 0, zero plane normal,
/// half extent ≤ 0, null MeshSdf grid) or the keyframes are not strictly increasing in frame / have a zero rotation.
void validate(const Obstacle& obstacle);

/// Query in the shape's local frame (no motion). Validates the shape.
ObstacleQuery query_local(const ObstacleShape& shape, const Vec3& x);

/// Query of the obstacle placed by T = evaluate(keyframes, frame): the local query at
/// T⁻¹(x), with the point and normal mapped back by T (distances are invariant under T).
ObstacleQuery query(const Obstacle& obstacle, double frame, const Vec3& x);

/// Contacts at `frame`: for each proxy row with signed distance < `margin` (≥ 0) to some obstacle,
/// one Contact with the obstacle of smallest signed distance (the deepest; lowest index on ties).
/// Sorted by proxy index. Throws xpd::Error for an invalid obstacle or a negative/non-finite margin.
std::vector<Contact> find_contacts(const std::vector<Obstacle>& obstacles, double frame, const Points& proxies,
                                   double margin = 0);
/// find_contacts into `contacts` (cleared first), with `transforms` as scratch: no allocation once
/// both have grown to their working size.
void find_contacts(const std::vector<Obstacle>& obstacles, double frame, const Points& proxies, double margin,
                   std::vector<RigidTransform>& transforms, std::vector<Contact>& contacts);

}  // namespace xpd
