#pragma once
// Intersection test of a triangle surface: does an edge of the surface meet a triangle that shares
// no vertex with it? (Every intersection of two triangles without a common vertex shows as an edge
// of one meeting the other.) Floating-point orientation tests with a relative dead band (|det| ≤
// 1e−10 L³, L the longest edge vector of the test): nearly coplanar configurations go to a planar
// test instead of deciding on rounding noise, and touching or coplanar overlapping pairs count as
// meeting, so the answer errs toward "intersecting". The tests check it against exact rational
// predicates (tests/collision/exact_intersection.hpp). Used to refuse intersecting start states
// (IPC, two-way collision handling: libuipc's InitSurfaceIntersectionCheck does the same).
#include <optional>
#include <string>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/core/types.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

/// One edge–triangle meeting: the edge (row of `edges`, its two vertices), the triangle (row of
/// `faces`), a triangle of `faces` that has the edge (−1 if none), and a description naming both
/// triangles and the positions.
struct SurfaceIntersection {
  int edge = -1;
  int face = -1;
  int edge_face = -1;
  std::string description;
};

/// The first meeting in candidate order (edge_face_candidates), or none. `edges`: the surface's
/// edges (unique_edges(faces)); vertices from `kinematic_from` on are kinematic (obstacles, which
/// may overlap each other: their mutual pairs are not tested). Throws Error like the broad phase on
/// bad indices or non-finite x.
std::optional<SurfaceIntersection> find_surface_intersection(const Points& x, const Triangles& faces,
                                                             const Edges& edges,
                                                             int kinematic_from = kNoKinematicVertices);

}  // namespace xpd
