#pragma once
// Point location in a tetrahedral mesh: which tet contains a point, and with which barycentric
// weights. A uniform grid over the tets' bounding boxes answers queries in O(1) expected time;
// a brute-force oracle with the identical selection rule is kept for tests.
#include <limits>
#include <vector>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Result of a point-location query.
struct TetLocation {
  int tet = -1;                 ///< tet index, −1 when none qualifies
  Vec4 weights = Vec4::Zero();  ///< barycentric weights of the point in `tet` (Σ = 1; may be < 0
                                ///< down to −tolerance, or any value for nearest_tet outside)
  double distance = 0;          ///< Euclidean distance from the point to `tet` (0 when inside)
  bool found() const { return tet >= 0; }
};

/// Uniform grid over the axis-aligned bounding boxes of a tet mesh's tets.
///
/// Each tet is registered in every grid cell its bounding box overlaps (CSR layout, tets in
/// ascending order per cell). A query visits the cells overlapping the point's tolerance box and
/// computes barycentric weights of the candidates. The default cell size is the mean bounding-box
/// extent of the tets, enlarged if needed so that the grid has at most 8·#T + 4096 cells
/// (memory O(#T) even for a sparse mesh in a large box). The locator keeps its own copy of the
/// mesh. Thread-safe for concurrent queries.
class TetLocator {
 public:
  /// nodes #V × 3, tets #T × 4 (any orientation, non-degenerate). cell_size ≤ 0 picks the default.
  /// Throws MeshError on an empty mesh or an index out of range.
  TetLocator(const Points& nodes, const Tets& tets, double cell_size = 0);

  /// The tet containing p: among tets whose weights all satisfy w_i ≥ −tolerance, the one with
  /// the largest min_i w_i (the most interior one; ties go to the lowest index). Not found when
  /// p lies outside every tet by more than the tolerance. `tolerance` is in barycentric units
  /// (relative to the tet's size); 1e-9 accepts points on shared faces despite round-off.
  TetLocation find_tet(const Vec3& p, double tolerance = 1e-9) const;

  /// The tet nearest to p: find_tet(p, tolerance) when that succeeds (distance 0), otherwise the
  /// tet at the smallest Euclidean distance (ties to the lowest index), with its extrapolated
  /// barycentric weights (some negative; Σ w x_i = p still holds exactly in exact arithmetic).
  TetLocation nearest_tet(const Vec3& p, double tolerance = 1e-9) const;

  double cell_size() const { return h_; }
  const Eigen::Vector3i& grid_cells() const { return dims_; }
  const Points& nodes() const { return nodes_; }
  const Tets& tets() const { return tets_; }

 private:
  Eigen::Vector3i cell_of(const Vec3& p) const;  // clamped to the grid
  int cell_index(int i, int j, int k) const { return i + dims_[0] * (j + dims_[1] * k); }

  Points nodes_;
  Tets tets_;
  Vec3 origin_;
  double h_ = 1;
  double max_tet_extent_ = 0;
  Eigen::Vector3i dims_;
  std::vector<int> cell_start_;  // CSR offsets, size #cells + 1
  std::vector<int> cell_tets_;
};

/// Brute-force oracle for TetLocator::find_tet: same selection rule, checks every tet.
TetLocation find_tet_brute_force(const Points& nodes, const Tets& tets, const Vec3& p, double tolerance = 1e-9);

/// Brute-force oracle for TetLocator::nearest_tet: same selection rule, checks every tet.
TetLocation nearest_tet_brute_force(const Points& nodes, const Tets& tets, const Vec3& p, double tolerance = 1e-9);

/// Euclidean distance from p to the (solid) tet (a,b,c,d); 0 inside.
double point_tet_distance(const Vec3& p, const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d);

}  // namespace xpd
