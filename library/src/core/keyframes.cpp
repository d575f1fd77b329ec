#include <algorithm>
#include <xpd/core/keyframes.hpp>

namespace xpd {

RigidTransform to_transform(const Keyframe& key) {
  RigidTransform t;
  t.rotation = key.rotation.normalized();
  t.translation = key.pivot + key.translation - (t.rotation * key.pivot);
  return t;
}

RigidTransform evaluate(const std::vector<Keyframe>& keys, double frame) {
  if (keys.empty()) return {};
  if (frame <= keys.front().frame) return to_transform(keys.front());
  if (frame >= keys.back().frame) return to_transform(keys.back());
  // First key strictly after `frame`; its predecessor is at or before it.
  const auto next =
      std::upper_bound(keys.begin(), keys.end(), frame, [](double f, const Keyframe& k) { return f < k.frame; });
  const Keyframe& a = *(next - 1);
  const Keyframe& b = *next;
  const double s = (frame - a.frame) / (b.frame - a.frame);
  Keyframe mid;
  mid.frame = frame;
  mid.translation = (1 - s) * a.translation + s * b.translation;
  mid.pivot = (1 - s) * a.pivot + s * b.pivot;
  // Eigen's slerp takes the shorter arc (it flips the sign of the dot product when negative).
  mid.rotation = a.rotation.normalized().slerp(s, b.rotation.normalized());
  return to_transform(mid);
}

}  // namespace xpd
