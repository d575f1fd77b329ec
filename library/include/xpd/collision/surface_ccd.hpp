#pragma once
// Continuous collision detection of a whole triangle surface over one linear step x⁰ → x¹: the
// broad phase (collision/broad_phase.hpp, boxes grown by the minimum separation) followed by the
// conservative narrow phase (collision/ccd.hpp) on every vertex–face and edge–edge candidate, in
// parallel. The earliest time of impact bounds an IPC line search (Li et al. 2020, §4.3: the step
// α ≤ toi keeps every iterate intersection-free).
//
// The result is deterministic: each query searches only up to the earliest time found so far,
// which cannot change a query's own answer below that time, and ties are broken by (kind, index).
#include <array>
#include <cstdint>
#include <limits>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/ccd.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

/// Earliest contact of a surface over a step.
struct SurfaceCcdResult {
  bool hit = false;
  /// Lower bound of the earliest time of impact in [0, 1]; +infinity when no pair comes within the
  /// minimum separation.
  double toi = std::numeric_limits<double>::infinity();
  bool edge_edge = false;              ///< the earliest pair is edge–edge (else vertex–face)
  std::array<int, 2> pair = {-1, -1};  ///< (vertex, face) or (edge, edge) of the earliest contact
  std::size_t vertex_face_candidates = 0, edge_edge_candidates = 0;
  std::int64_t checks = 0;  ///< box checks over all queries
  std::int64_t capped = 0;  ///< queries that reached max_checks (their hits are conservative)
  double broad_phase_ms = 0, narrow_phase_ms = 0;
};

/// Surface (faces, edges) moving from x0 to x1 (#V × 3 each). Vertices from `kinematic_from` on
/// are kinematic (obstacles): pairs between two of their elements are not tested, and with
/// `mixed_only` only pairs of a kinematic and a non-kinematic element are (broad_phase.hpp).
/// Throws Error like swept_candidates and vertex_face_ccd.
SurfaceCcdResult surface_ccd(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                             const CcdOptions& options = {}, int kinematic_from = kNoKinematicVertices,
                             bool mixed_only = false);

/// The same on the surface a candidate cache serves (its faces, edges and kinematic_from), the
/// broad phase being the cache's query (the same candidates as the sweep's).
SurfaceCcdResult surface_ccd(const Points& x0, const Points& x1, CandidateCache& cache, const CcdOptions& options = {},
                             bool mixed_only = false);

}  // namespace xpd
