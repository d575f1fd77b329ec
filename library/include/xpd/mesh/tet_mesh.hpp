#pragma once
// Mesh containers shared by every area. Matrices are row-major so that Python sees them as
// C-contiguous numpy arrays without copies.
#include <Eigen/Core>
#include <Eigen/Geometry>
#include <string>
#include <vector>
#include <xpd/core/types.hpp>

namespace xpd {

/// A tetrahedral mesh as read from a file or generated.
struct TetMesh {
  Points nodes;             ///< #V × 3
  Tets tets;                ///< #T × 4
  Triangles boundary;       ///< #B × 3 triangles stored in the file (may be empty; not required
                            ///< to equal the extracted boundary surface)
  std::vector<int> region;  ///< per-tet region/physical tag, empty if the file had none
};

/// A triangle surface (collision proxies, rendering, embedding input).
struct SurfaceMesh {
  Points nodes;         ///< #V × 3
  Triangles triangles;  ///< #F × 3 (polygons of the file are fan-triangulated)
};

/// Signed volume of tet (a,b,c,d): det[b-a, c-a, d-a] / 6.
inline double signed_volume(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d) {
  return (b - a).dot((c - a).cross(d - a)) / 6.0;
}

}  // namespace xpd
