#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <xpd/collision/obstacles.hpp>
#include <xpd/core/error.hpp>

namespace xpd {
namespace {

bool finite(const Vec3& v) { return v.allFinite(); }

std::string vec_str(const Vec3& v) {
  return "(" + std::to_string(v.x()) + ", " + std::to_string(v.y()) + ", " + std::to_string(v.z()) + ")";
}

void validate_shape(const ObstacleShape& shape) {
  std::visit(
      [](const auto& s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, Plane>) {
          if (!finite(s.point) || !finite(s.normal)) throw Error("obstacle plane: point and normal must be finite");
          if (!(s.normal.norm() > 0)) throw Error("obstacle plane: normal must be non-zero, got " + vec_str(s.normal));
        } else if constexpr (std::is_same_v<S, Sphere>) {
          if (!finite(s.center)) throw Error("obstacle sphere: center must be finite");
          if (!(s.radius > 0) || !std::isfinite(s.radius))
            throw Error("obstacle sphere: radius must be finite and > 0, got " + std::to_string(s.radius));
        } else if constexpr (std::is_same_v<S, Capsule>) {
          if (!finite(s.a) || !finite(s.b)) throw Error("obstacle capsule: end points must be finite");
          if (!(s.radius > 0) || !std::isfinite(s.radius))
            throw Error("obstacle capsule: radius must be finite and > 0, got " + std::to_string(s.radius));
        } else if constexpr (std::is_same_v<S, MeshSdf>) {
          if (!s.grid) throw Error("obstacle mesh_sdf: the signed distance grid is missing (null)");
        } else {
          static_assert(std::is_same_v<S, Box>);
          if (!finite(s.half_extents) || !(s.half_extents.minCoeff() > 0))
            throw Error("obstacle box: half extents must be finite and > 0, got " + vec_str(s.half_extents));
        }
      },
      shape);
}

// Unit vector perpendicular to v (v may be zero: then +z).
Vec3 any_perpendicular(const Vec3& v) {
  if (!(v.squaredNorm() > 0)) return Vec3::UnitZ();
  int i = 0;
  v.cwiseAbs().minCoeff(&i);
  return v.cross(Vec3::Unit(i)).normalized();
}

ObstacleQuery ball_query(const Vec3& center, double radius, const Vec3& x, const Vec3& fallback_normal) {
  const Vec3 d = x - center;
  const double len = d.norm();
  ObstacleQuery q;
  q.normal = len > 0 ? Vec3(d / len) : fallback_normal;
  q.signed_distance = len - radius;
  q.closest_surface_point = center + radius * q.normal;
  return q;
}

ObstacleQuery local(const Plane& s, const Vec3& x) {
  ObstacleQuery q;
  q.normal = s.normal.normalized();
  q.signed_distance = q.normal.dot(x - s.point);
  q.closest_surface_point = x - q.signed_distance * q.normal;
  return q;
}

ObstacleQuery local(const Sphere& s, const Vec3& x) { return ball_query(s.center, s.radius, x, Vec3::UnitZ()); }

ObstacleQuery local(const Capsule& s, const Vec3& x) {
  const Vec3 ab = s.b - s.a;
  const double len2 = ab.squaredNorm();
  const double t = len2 > 0 ? std::clamp((x - s.a).dot(ab) / len2, 0.0, 1.0) : 0.0;
  const Vec3 q = s.a + t * ab;
  Vec3 d = x - q;
  // Interior of the segment: d is perpendicular to the axis; remove the rounding residue along the
  // axis so that the normal (and with it the target q + r n) stays exactly off-axis.
  if (t > 0 && t < 1) d -= (d.dot(ab) / len2) * ab;
  const double len = d.norm();
  const double scale = (x - s.a).norm() + std::sqrt(len2) + s.radius;
  ObstacleQuery r;
  r.normal = len > 1e-14 * scale ? Vec3(d / len) : any_perpendicular(ab);
  r.signed_distance = len - s.radius;
  r.closest_surface_point = q + s.radius * r.normal;
  return r;
}

ObstacleQuery local(const Box& s, const Vec3& x) {
  const Vec3& h = s.half_extents;
  const Vec3 q = x.cwiseAbs() - h;
  ObstacleQuery r;
  if (q.maxCoeff() > 0) {
    const Vec3 t = x.cwiseMax(-h).cwiseMin(h);
    const Vec3 d = x - t;
    r.signed_distance = d.norm();
    r.normal = d / r.signed_distance;
    r.closest_surface_point = t;
  } else {
    int i = 0;
    r.signed_distance = q.maxCoeff(&i);  // lowest index on ties
    const double sign = x[i] < 0 ? -1.0 : 1.0;
    r.normal = sign * Vec3::Unit(i);
    r.closest_surface_point = x;
    r.closest_surface_point[i] = sign * h[i];
  }
  return r;
}

ObstacleQuery local(const MeshSdf& s, const Vec3& x) {
  Vec3 g;
  ObstacleQuery r;
  r.signed_distance = s.grid->value_and_gradient(x, g);
  // The trilinear gradient is the direction of steepest ascent of the sampled distance; its length
  // is ~1 away from the medial axis. Where it vanishes (medial axis, symmetric cells) any direction
  // is as good as another: use +z as the analytic shapes do at their centers.
  const double len = g.norm();
  r.normal = len > 1e-12 ? Vec3(g / len) : Vec3::UnitZ();
  r.closest_surface_point = x - r.signed_distance * r.normal;
  return r;
}

}  // namespace

void validate(const Obstacle& obstacle) {
  validate_shape(obstacle.shape);
  for (std::size_t k = 0; k < obstacle.keyframes.size(); ++k) {
    const Keyframe& key = obstacle.keyframes[k];
    if (!std::isfinite(key.frame) || !finite(key.translation) || !finite(key.pivot) ||
        !key.rotation.coeffs().allFinite())
      throw Error("obstacle keyframe " + std::to_string(k) + ": values must be finite");
    if (!(key.rotation.norm() > 0))
      throw Error("obstacle keyframe " + std::to_string(k) + ": zero rotation quaternion");
    if (k > 0 && !(key.frame > obstacle.keyframes[k - 1].frame))
      throw Error("obstacle keyframes must have strictly increasing frames (key " + std::to_string(k) + " at frame " +
                  std::to_string(key.frame) + " follows frame " + std::to_string(obstacle.keyframes[k - 1].frame) +
                  ")");
  }
}

ObstacleQuery query_local(const ObstacleShape& shape, const Vec3& x) {
  validate_shape(shape);
  return std::visit([&](const auto& s) { return local(s, x); }, shape);
}

namespace {
ObstacleQuery query_validated(const Obstacle& obstacle, const RigidTransform& T, const Vec3& x) {
  const Vec3 xl = T.rotation.conjugate() * (x - T.translation);
  ObstacleQuery q = std::visit([&](const auto& s) { return local(s, xl); }, obstacle.shape);
  q.closest_surface_point = T.apply(q.closest_surface_point);
  q.normal = T.rotation * q.normal;
  return q;
}
}  // namespace

ObstacleQuery query(const Obstacle& obstacle, double frame, const Vec3& x) {
  validate(obstacle);
  return query_validated(obstacle, evaluate(obstacle.keyframes, frame), x);
}

std::vector<Contact> find_contacts(const std::vector<Obstacle>& obstacles, double frame, const Points& proxies,
                                   double margin) {
  std::vector<RigidTransform> transforms;
  std::vector<Contact> contacts;
  find_contacts(obstacles, frame, proxies, margin, transforms, contacts);
  return contacts;
}

void find_contacts(const std::vector<Obstacle>& obstacles, double frame, const Points& proxies, double margin,
                   std::vector<RigidTransform>& transforms, std::vector<Contact>& contacts) {
  if (!(margin >= 0) || !std::isfinite(margin))
    throw Error("find_contacts: margin must be finite and >= 0, got " + std::to_string(margin));
  transforms.clear();
  contacts.clear();
  for (std::size_t o = 0; o < obstacles.size(); ++o) {
    try {
      validate(obstacles[o]);
    } catch (const Error& e) {
      throw Error("obstacle " + std::to_string(o) + ": " + e.what());
    }
    transforms.push_back(evaluate(obstacles[o].keyframes, frame));
  }
  for (Eigen::Index p = 0; p < proxies.rows(); ++p) {
    const Vec3 x = proxies.row(p).transpose();
    double best = std::numeric_limits<double>::infinity();
    Contact c;
    for (std::size_t o = 0; o < obstacles.size(); ++o) {
      const ObstacleQuery q = query_validated(obstacles[o], transforms[o], x);
      if (q.signed_distance < margin && q.signed_distance < best) {
        best = q.signed_distance;
        c.proxy = static_cast<int>(p);
        c.obstacle = static_cast<int>(o);
        c.target = q.closest_surface_point;
        c.normal = q.normal;
        c.depth = -q.signed_distance;
      }
    }
    if (best < margin) contacts.push_back(c);
  }
}

}  // namespace xpd
