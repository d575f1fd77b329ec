#pragma once
// Cut surfaces for element splitting (FaceCutter::split, topology/face_cut.hpp): the blade's swept
// surface of an incision or deep cut (Wang 2025 ch. 5), or a closed sphere (an excision's boundary),
// seen by the mesh through two queries on rest positions — which side a point lies on, and whether
// a segment crosses the surface. The virtual node algorithm (Molino, Bao & Fedkiw 2004) needs no
// more: the side of each node, interpolated linearly in a tet, gives the cut's plane inside it, and
// a tet is cut through only where every edge between its two sides crosses the surface.
#include <array>
#include <memory>
#include <optional>
#include <vector>
#include <xpd/core/types.hpp>

namespace xpd {

struct SweptPath;

/// One triangle of a blade's swept surface, with the blade's progress (arc length along the
/// polyline) at each corner: the far side of a patch carries its polyline point's arc length.
struct SweptTriangle {
  Vec3 v[3];
  double arc[3];
};

/// The triangles of the surface a SweptPath spans: bilinear patches p_i, p_{i+1}, p_{i+1} + s_{i+1},
/// p_i + s_i, each as (p_i, p_{i+1}, q_{i+1}) and (p_i, q_{i+1}, q_i), q = p + s. Throws MeshError
/// for fewer than two points, a sweep count other than 1 or the point count, or a non-finite value.
std::vector<SweptTriangle> swept_triangles(const SweptPath& path);

/// Segment a→b against triangle (v0, v1, v2) (Möller & Trumbore 1997): the segment parameter
/// t ∈ [0, 1] and barycentrics (u, v) of the crossing, or nothing when it misses or lies in the
/// triangle's plane.
std::optional<std::array<double, 3>> segment_triangle(const Vec3& a, const Vec3& b, const Vec3& v0, const Vec3& v1,
                                                      const Vec3& v2);

class CutSurface {
 public:
  virtual ~CutSurface() = default;
  /// A signed distance [m] (or an approximation of it within the mesh's edge length): ≥ 0 on the
  /// positive side. Its linear interpolation in a tet places the cut inside that tet.
  virtual double side(const Vec3& x) const = 0;
  /// True when the closed segment a–b meets the surface, or an end lies within `tolerance` of it.
  virtual bool crosses(const Vec3& a, const Vec3& b, double tolerance) const = 0;
  /// The unit normal of the surface nearest x, pointing to the positive side.
  virtual Vec3 normal(const Vec3& x) const = 0;
};

/// The surface a SweptPath spans (bilinear patches p_i, p_{i+1}, p_{i+1} + s_{i+1}, p_i + s_i, each
/// two triangles, as faces_across_swept_path): side() is the signed distance to the plane of the
/// nearest triangle, (x − c)·n̂ with c the nearest point and n̂ ∝ (p_{i+1} − p_i) × s_i, so one side
/// of the whole blade is positive and a flat blade gives the same plane in every tet however far it
/// has advanced; crosses() is a segment–triangle test against every triangle. Throws MeshError like
/// faces_across_swept_path for a malformed path.
std::unique_ptr<CutSurface> swept_cut_surface(const SweptPath& path);

/// A sphere's boundary: side() = |x − c| − r (inside negative); crosses() when the segment has a
/// point at distance r from c (within the tolerance). Throws MeshError for a non-finite centre or r ≤ 0.
std::unique_ptr<CutSurface> sphere_cut_surface(const Vec3& center, double radius);

}  // namespace xpd
