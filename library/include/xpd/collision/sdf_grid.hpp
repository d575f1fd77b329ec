#pragma once
// Signed distance to a closed triangle surface, sampled on a uniform grid and interpolated
// trilinearly: the "signed distance grids of triangle meshes" of DESIGN.md §3 (obstacles) and the
// rest-pose level set of the body for self-collision (McAdams et al. 2011, as used in
// Wang et al. 2021, §5.1).
//
// Grid: nodes X_ijk = origin + h (i, j, k), 0 ≤ i < dims[0] etc., covering the surface's bounding
// box plus `padding` cells on every side. Stored value φ_ijk (negative inside):
//   * |φ_ijk| is the exact Euclidean distance to the nearest triangle for every node whose true
//     distance is ≤ band·h (every triangle is tested against all nodes within band·h of its
//     bounding box). Farther nodes hold the exact distance to a triangle found by closest-triangle
//     propagation from neighbouring nodes (plane sweeps, as in SDFGen): never smaller than the
//     true distance and close to it (measured ≤ 0.07 h on a sphere, exact for a box).
//   * sign: the node is inside when its winding number is non-zero (non-zero rule, so the
//     orientation of the surface does not matter). Winding numbers come from one +x ray per grid
//     line (y_j, z_k): crossings of the projected triangles are decided with Simulation of
//     Simplicity tie-breaking (robust 2D orientation with lexicographic ties), so a line through
//     an edge or vertex is counted exactly once for a watertight surface.
// Queries, with u = (x − origin)/h:
//   value(x)    trilinear interpolation of φ in the cell holding x (C⁰; error O(h²) where the true
//               SDF is smooth, O(h) near its kinks). Outside the grid box B: φ(c) + |x − c| with
//               c the closest point of B (an upper bound of the distance, never NaN).
//   gradient(x) the exact gradient of that piecewise-trilinear function (inside a cell: the
//               derivative of the trilinear interpolant; outside B: components along clamped
//               axes are (x − c)_i / |x − c|, the others ∂φ/∂x_i at c). On a cell face the cell
//               with the lower index is used (cells are half-open [i, i+1)).
// Thread-safe for concurrent queries after construction.
#include <Eigen/Core>
#include <cstdint>
#include <vector>
#include <xpd/mesh/barycentric.hpp>  // closest_point_on_triangle
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Options of SdfGrid.
struct SdfGridOptions {
  double cell_size = 0;  ///< h; when > 0 it wins over `resolution`
  int resolution = 64;   ///< cells along the longest side of the surface's bounding box (h = L / resolution)
  int padding = 3;       ///< extra cells on every side of the bounding box (≥ 1)
  int band = 3;          ///< exact-distance band in cells (≥ 1); beyond it distances are propagated
};

/// Signed distance grid of a closed, watertight triangle surface (negative inside).
class SdfGrid {
 public:
  /// Builds the grid (parallel with TBB). `closed` must be watertight (geometrically: seams with
  /// duplicated coincident vertices are fine); its orientation does not matter. Throws MeshError
  /// on an empty surface, an index out of range, a non-finite coordinate, a degenerate bounding box,
  /// options out of range, more than 2^27 grid nodes, or a grid line whose net winding is not
  /// zero (the surface is not closed).
  /// Cost: O(#nodes + #F · (triangle extent / h + 2 band)³) for the band, plus 12 plane sweeps over
  /// the far nodes (≤ 9 point–triangle distances each per sweep), all parallel within a plane.
  explicit SdfGrid(const SurfaceMesh& closed, const SdfGridOptions& options = {});

  /// Trilinearly interpolated signed distance at x (see header comment for outside the box).
  double value(const Vec3& x) const;
  /// Gradient of value() at x.
  Vec3 gradient(const Vec3& x) const;
  /// Both at once; returns the value.
  double value_and_gradient(const Vec3& x, Vec3& gradient) const;

  const Vec3& origin() const { return origin_; }
  double cell_size() const { return h_; }
  /// Nodes per axis.
  const Eigen::Vector3i& dims() const { return dims_; }
  /// Width of the exact band: band · h.
  double band_width() const { return band_ * h_; }
  /// Upper corner of the grid box: origin + h (dims − 1).
  Vec3 upper() const { return origin_ + h_ * (dims_.cast<double>() - Vec3::Ones()); }
  /// Position of node (i, j, k).
  Vec3 node(int i, int j, int k) const { return origin_ + h_ * Vec3(i, j, k); }
  /// Stored value of node (i, j, k) (no bounds check beyond debug asserts).
  double node_value(int i, int j, int k) const { return phi_[index(i, j, k)]; }
  /// All node values, x fastest: index i + dims[0] (j + dims[1] k).
  const std::vector<double>& values() const { return phi_; }

 private:
  std::size_t index(int i, int j, int k) const {
    return std::size_t(i) + std::size_t(dims_[0]) * (std::size_t(j) + std::size_t(dims_[1]) * std::size_t(k));
  }
  double interior(const Vec3& x, Vec3* gradient) const;  // x inside the grid box

  Vec3 origin_ = Vec3::Zero();
  double h_ = 1;
  int band_ = 3;
  Eigen::Vector3i dims_ = Eigen::Vector3i::Zero();
  std::vector<double> phi_;
};

}  // namespace xpd
