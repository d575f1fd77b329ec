#pragma once
// Named node and tet selections of a TetMesh: the regions that scenes attach springs to, load, or
// give a material. A selection is a small description (a box, a sphere, a half-space, a patch of the
// boundary surface, an explicit index list, or a set operation on other named selections); it is
// evaluated against a mesh's rest positions into sorted, unique 0-based indices.
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Every node / every tet. The scene name "all" always means this and cannot be redefined.
struct AllSelection {};

/// Axis-aligned box [min, max] (closed; min <= max componentwise).
struct BoxSelection {
  Vec3 min = Vec3::Zero();
  Vec3 max = Vec3::Zero();
};

/// Closed ball |x - center| <= radius (radius >= 0).
struct SphereSelection {
  Vec3 center = Vec3::Zero();
  double radius = 0;
};

/// Closed capsule: points within `radius` (>= 0) of the segment [a, b] (a = b: a ball). Handy for
/// the flesh around a bone.
struct CapsuleSelection {
  Vec3 a = Vec3::Zero();
  Vec3 b = Vec3::Zero();
  double radius = 0;
};

/// Closed half-space normal · x <= offset. `normal` is unit length (the scene parser normalises
/// it), so `offset` is a signed distance from the origin in length units. {1,0,0}, c selects x <= c.
struct HalfSpaceSelection {
  Vec3 normal = Vec3::UnitX();
  double offset = 0;
};

/// Nodes of the boundary surface (triangles used by exactly one tet), optionally restricted to the
/// nodes of another named selection (`within`, empty = no restriction) and to nodes whose outward
/// rest normal (area-weighted average of the incident boundary triangles' normals) makes an angle of
/// at most `max_angle_deg` with `direction` (unit length).
struct SurfaceSelection {
  std::string within;
  struct Cone {
    Vec3 direction = Vec3::UnitZ();
    double max_angle_deg = 90;
  };
  std::optional<Cone> cone;
};

/// An explicit list of 0-based node indices (inline in the scene or read from a text file).
struct IndexSelection {
  std::vector<int> nodes;  ///< as given (unsorted, may repeat); evaluation sorts and deduplicates
  std::string file;        ///< the index file it came from, empty when inline
};

/// Set operation on other named selections: union, intersection, or difference (the first operand
/// minus all the others).
struct SetSelection {
  enum class Op { Union, Intersection, Difference };
  Op op = Op::Union;
  std::vector<std::string> operands;
};

using Selection = std::variant<AllSelection, BoxSelection, SphereSelection, CapsuleSelection, HalfSpaceSelection,
                               SurfaceSelection, IndexSelection, SetSelection>;
/// Named selections of a scene. References (SurfaceSelection::within, SetSelection::operands) are
/// names in this map or "all"; they must not form a cycle (the scene parser rejects cycles).
using SelectionMap = std::map<std::string, Selection>;

/// Nodes of `selection` in `mesh` (rest positions), sorted ascending, unique.
/// Throws Error on an unknown referenced name, a reference cycle, or an index out of [0, #V).
std::vector<int> select_nodes(const Selection& selection, const SelectionMap& named, const TetMesh& mesh);
/// Same for a name ("all" or a key of `named`).
std::vector<int> select_nodes(const std::string& name, const SelectionMap& named, const TetMesh& mesh);

/// Tets of `selection`, sorted ascending, unique. Geometric selections (box, sphere, half-space)
/// take the tets whose centroid lies inside; node-list selections (surface, indices) take the tets
/// whose four nodes are all selected; set operations combine their operands' tet sets; "all" is
/// every tet. This is how materials are assigned to regions.
std::vector<int> select_tets(const Selection& selection, const SelectionMap& named, const TetMesh& mesh);
std::vector<int> select_tets(const std::string& name, const SelectionMap& named, const TetMesh& mesh);

/// Per-node lumped boundary area for the nodes in `nodes` (sorted, unique): each boundary triangle
/// whose three nodes are all in `nodes` gives one third of its rest area to each of them. Returns a
/// vector parallel to `nodes` (zeros for nodes that touch no such triangle).
std::vector<double> lumped_boundary_area(const TetMesh& mesh, const std::vector<int>& nodes);

}  // namespace xpd
