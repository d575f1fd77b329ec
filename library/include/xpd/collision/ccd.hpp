#pragma once
// Conservative continuous collision detection (CCD) for linearly moving primitives: a vertex
// against a triangle and an edge against an edge, over one step t ∈ [0, 1]. Inclusion-based root
// finding after Wang, Ferguson, Schneider, Jiang, Attene, Panozzo 2021 ("A Large Scale Benchmark
// and an Inclusion-Based Algorithm for Continuous Collision Detection", Tight Inclusion), with our
// own rounding bound and a best-first search order that makes the returned time a lower bound.
//
// Each vertex moves as x(t) = x⁰ + t (x¹ − x⁰). A contact is a root of
//   vertex–face:  F(t, u, v) = p(t) − [(1 − u − v) a(t) + u b(t) + v c(t)],  u, v ≥ 0, u + v ≤ 1
//   edge–edge:    F(t, u, v) = (1 − u) a(t) + u b(t) − (1 − v) c(t) − v d(t),  u, v ∈ [0, 1]
// F is linear in each of t, u, v separately, so its range over a box [t]×[u]×[v] lies in the
// bounding box of its 8 corner values. The search keeps boxes ordered by their lower t; a box whose
// corner hull, widened by the rounding bound and the minimum separation, misses the origin holds
// no root and is dropped; a box whose hull is narrower than `tolerance` on every axis is a hit.
//
// Guarantees (for finite input, any scale):
// - No false negatives: if the primitives come within `minimum_separation` (∞-norm of F) at some
//   t ∈ [0, 1], the result is a hit.
// - `toi` is a lower bound of the first such time: every box with a smaller lower t was proved
//   root-free before it was returned.
// - A hit may be a false positive only when the primitives come within
//   tolerance + minimum_separation + rounding (per axis) of each other; reaching `max_checks`
//   also returns a hit (flagged `capped`), never a miss.
// Cost: boxes must be resolved to the tolerance where the primitives are near contact at the
// earliest time. Near-parallel primitives lying on each other (a curve of near-roots) and a
// minimum separation much larger than the tolerance (a whole patch of (u, v) within ms) make that
// set large; the search may then reach max_checks, which is still a correct, conservative answer
// (toi a lower bound). Keep ms within a few tolerances where speed matters (the IPC Toolkit caps
// it for the same reason).
// Rounding: corner values are computed in double from the 8 input points; the bound used is
// 64·2⁻⁵³·M per axis, M = the largest |coordinate| of the 8 points on that axis (the evaluation
// order in ccd.cpp has a worst case of 50·2⁻⁵³·M), so no rescaling of the input is needed.
#include <cstdint>
#include <limits>
#include <xpd/core/types.hpp>

namespace xpd {

/// Options of vertex_face_ccd / edge_edge_ccd.
struct CcdOptions {
  /// Codomain tolerance δ (length units of the input, > 0): a box counts as a hit once F varies by
  /// at most δ over it on each axis. Smaller: fewer false positives, more box checks.
  double tolerance = 1e-6;
  /// Minimum separation ms ≥ 0 (length units): report a hit when the primitives come within ms
  /// (per axis of F) instead of touching. IPC's line search uses ms > 0 to keep a gap.
  double minimum_separation = 0.0;
  /// Cap on box checks (> 0); reaching it returns a hit at the current lower bound.
  std::int64_t max_checks = 1'000'000;
  /// Search t ∈ [0, max_time] only (0 ≤ max_time ≤ 1): a query whose first contact is later
  /// reports no hit. A surface-wide CCD passes the earliest time found so far.
  double max_time = 1.0;
};

/// Outcome of one CCD query.
struct CcdResult {
  bool hit = false;  ///< the primitives may touch (within the minimum separation) in [0, 1]
  /// Lower bound of the first time of contact when hit; +infinity when not.
  double toi = std::numeric_limits<double>::infinity();
  std::int64_t checks = 0;  ///< boxes evaluated
  bool capped = false;      ///< the search stopped at max_checks (the hit is then conservative)
};

/// Vertex p against triangle (a, b, c), each given at t = 0 (suffix 0) and t = 1 (suffix 1).
/// Throws Error for non-finite coordinates or invalid options.
CcdResult vertex_face_ccd(const Vec3& p0, const Vec3& a0, const Vec3& b0, const Vec3& c0, const Vec3& p1,
                          const Vec3& a1, const Vec3& b1, const Vec3& c1, const CcdOptions& options = {});

/// Edge (a, b) against edge (c, d), each given at t = 0 and t = 1. Throws like vertex_face_ccd.
CcdResult edge_edge_ccd(const Vec3& a0, const Vec3& b0, const Vec3& c0, const Vec3& d0, const Vec3& a1, const Vec3& b1,
                        const Vec3& c1, const Vec3& d1, const CcdOptions& options = {});

}  // namespace xpd
