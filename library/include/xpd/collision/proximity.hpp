#pragma once
// Proximity search of a triangle surface: every vertex–triangle and edge–edge pair, sharing no
// vertex, whose distance is below D (strictly). The pair set P of two-way continuous collision
// handling (Wang, Chen et al. 2023, "Fast GPU-Based Two-Way Continuous Collision Handling", §3:
// P_D with D = D^max) and, more generally, of any distance-based contact.
//
// Method: a uniform grid (Pabst et al. 2010; Tang et al. 2018), cell size s = max(D, mean edge
// length of the surface). Every triangle's and every edge's box, grown by D, is registered in the
// cells it overlaps (keys sorted, TBB parallel sort); a vertex looks up the one cell it lies in, an
// edge the cells of its own (ungrown) box; candidates pass a box test and then the exact-formula
// distance of collision/distance.hpp. The result is sorted, so it does not depend on the thread
// count. `brute_force_proximity` tests every pair and is the oracle of the tests.
#include <array>
#include <vector>
#include <xpd/core/types.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

/// Pairs closer than D, with their distances (unsquared) at the searched positions.
struct ProximityPairs {
  /// (vertex, triangle) with the vertex not a corner of the triangle; sorted.
  std::vector<std::array<int, 2>> vertex_triangle;
  std::vector<double> vertex_triangle_distance;
  /// (edge a, edge b), a < b, rows of the `edges` argument, without a common vertex; sorted.
  std::vector<std::array<int, 2>> edge_edge;
  std::vector<double> edge_edge_distance;
  std::size_t size() const { return vertex_triangle.size() + edge_edge.size(); }
};

/// Spatial-hash proximity search of the surface (faces, edges) at positions x (#V × 3; vertices
/// not used by a face or edge are ignored) for the distance D > 0. `edges`: the surface's edges
/// (e.g. unique_edges(faces)). Throws Error on an index out of range, D ≤ 0 or non-finite, or
/// non-finite positions.
ProximityPairs proximity_search(const Points& x, const Triangles& faces, const Edges& edges, double D);

/// The same pairs by testing every vertex against every triangle and every edge against every
/// edge (O(#V·#F + #E²)): the oracle of proximity_search.
ProximityPairs brute_force_proximity(const Points& x, const Triangles& faces, const Edges& edges, double D);

}  // namespace xpd
