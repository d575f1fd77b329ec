#pragma once
// Broad phase for surface contact: the vertex–face and edge–edge pairs of a triangle surface whose
// bounding boxes overlap, either swept over a linear step x⁰ → x¹ (candidates for continuous
// collision detection, collision/ccd.hpp) or at one position inflated by a distance (candidates
// for distance-based contact such as IPC barriers: pass x¹ = x⁰ and the distance as inflation).
//
// Boxes: a vertex's box spans its positions at t = 0 and t = 1, grown by `inflation` on every
// side; an edge's and a face's box is the union of their vertices' boxes. Two boxes overlap when
// min_a ≤ max_b and min_b ≤ max_a on every axis (touching counts). Pairs that share a vertex are
// never candidates (a vertex of the face, edges with a common end), as in the IPC Toolkit and the
// scalable-CCD benchmark of Belgrod et al. 2023. Kinematic parts (obstacles whose motion is given):
// vertices from index `kinematic_from` on belong to them, and a pair whose two elements have only
// such vertices is no candidate (obstacles do not collide with each other; the default includes
// every pair); with `mixed_only`, only pairs of one kinematic and one other element are (the motion
// of obstacles against a body that stands still).
//
// Method: sort and sweep (Baraff 1992) along the axis on which the box centres spread most,
// parallel over the sweep's start boxes with TBB; every candidate list is sorted, so the result
// does not depend on the thread count. `brute_force_candidates` tests every pair and is the
// oracle of the tests.
#include <array>
#include <limits>
#include <vector>
#include <xpd/core/types.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

/// kinematic_from of a surface without kinematic vertices.
inline constexpr int kNoKinematicVertices = std::numeric_limits<int>::max();

/// Candidate pairs of one surface.
struct SurfaceCandidates {
  /// (vertex, face) with the vertex not a corner of the face; sorted.
  std::vector<std::array<int, 2>> vertex_face;
  /// (edge a, edge b), a < b, rows of the `edges` argument, without a common vertex; sorted.
  std::vector<std::array<int, 2>> edge_edge;
};

/// Sort-and-sweep candidates of the surface (faces, edges) moving from x0 to x1 (#V × 3 each, same
/// size; the vertices are those the faces use). `edges` are the surface's edges (e.g.
/// unique_edges(faces)); `inflation` ≥ 0 in length units. Throws Error on mismatched sizes, an index
/// out of range, a negative or non-finite inflation or non-finite positions.
SurfaceCandidates swept_candidates(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                                   double inflation = 0.0, int kinematic_from = kNoKinematicVertices,
                                   bool mixed_only = false);

/// (edge, face) pairs without a common vertex whose boxes at x (inflation 0) overlap, sorted: the
/// candidates of an edge–triangle intersection test (an edge piercing a triangle is seen by no
/// vertex–face or edge–edge distance). Throws like swept_candidates.
std::vector<std::array<int, 2>> edge_face_candidates(const Points& x, const Triangles& faces, const Edges& edges,
                                                     int kinematic_from = kNoKinematicVertices);

/// swept_candidates over many queries on one surface whose vertices move little between them (the
/// iterations of a solver): a Verlet list (Verlet 1967). The cache holds the candidates of static
/// boxes about centres c grown by R; a query (x0 → x1, inflation r) whose every used vertex stays
/// within R − r of its centre (max-norm, at both ends) has boxes inside the cached ones, so its
/// pairs are among the cached ones, and the cache returns those whose query boxes overlap: exactly
/// swept_candidates(x0, x1, faces, edges, r, kinematic_from, mixed_only), at the cost of one pass
/// over the cached pairs. Otherwise it rebuilds about c = (x0 + x1)/2 with
/// R = max(r, largest_inflation) + margin + max ‖x1 − x0‖∞ / 2, and also when R exceeds 4 times
/// what the query needs (after a long step). Not thread-safe: one cache per solver state.
class CandidateCache {
 public:
  /// margin > 0 and largest_inflation ≥ 0 in length units (largest_inflation: the largest inflation
  /// the caller will ask, so that one build serves queries of different inflations). Throws Error
  /// on a non-positive or non-finite margin.
  CandidateCache(Triangles faces, Edges edges, double margin, double largest_inflation = 0.0,
                 int kinematic_from = kNoKinematicVertices);

  /// The candidates of the step x0 → x1 (#V × 3 each), equal to swept_candidates'. Throws like it.
  SurfaceCandidates query(const Points& x0, const Points& x1, double inflation, bool mixed_only = false);

  /// The surface the cache serves.
  const Triangles& faces() const { return faces_; }
  const Edges& edges() const { return edges_; }
  int kinematic_from() const { return kinematic_from_; }

  long queries() const { return queries_; }
  long rebuilds() const { return rebuilds_; }

 private:
  Triangles faces_;
  Edges edges_;
  double margin_, largest_inflation_;
  int kinematic_from_;
  std::vector<int> used_;  // vertices the faces and edges use
  Points centre_;
  double radius_ = 0;
  SurfaceCandidates cached_;
  long queries_ = 0, rebuilds_ = 0;
};

/// The same pairs by testing every vertex against every face and every edge against every edge
/// (O(#V·#F + #E²)): the oracle of swept_candidates.
SurfaceCandidates brute_force_candidates(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                                         double inflation = 0.0, int kinematic_from = kNoKinematicVertices,
                                         bool mixed_only = false);

}  // namespace xpd
