#pragma once
// Face-separating cuts of a tetrahedral mesh (the cut of Li, Liu, Kavan & Chen 2021, §5 "bar"
// example; the mesh side of the thesis's incision tools, Wang 2025 ch. 5).
//
// A cut separates interior faces, each named by the two tets that share it. After each cut every
// node of a newly separated face is split into one copy per connected component of its incident
// tets, where two incident tets are connected when they share a face that is not cut. So a node
// on the interior of a cut surface gets two copies (the cut opens there), while a node on the
// crack front, whose incident tets are still connected around the cut's end, stays single (a
// partial cut opens only where it is complete). The copy keeps the original's rest position;
// tets of the component that holds the lowest tet id keep the original node, the others are
// re-indexed to the copies. Tet ids never change and the node list only grows, so anything that
// refers to an original node (attachments, selections) stays valid and stays on that side.
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>
#include <xpd/mesh/barycentric.hpp>  // Vec4
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Two tets sharing a face, t0 < t1.
using TetPair = std::pair<int, int>;

/// What one cut did to the mesh (the input of a factor update: the changed tets' old and new node
/// indices, and the new nodes).
struct CutEvent {
  int nodes_before = 0;                      ///< #V before the cut; new nodes are nodes_before, …
  std::vector<int> copy_of;                  ///< per new node: the node it duplicates
  std::vector<int> changed_tets;             ///< tets whose node indices changed (ascending)
  std::vector<Eigen::RowVector4i> old_tets;  ///< their node indices before the cut (same order)
  int faces_cut = 0;                         ///< faces newly separated by this cut
  // Element splitting (FaceCutter::split) only; empty for face cuts.
  std::vector<double> old_fraction;  ///< per changed tet: its volume fraction before the event (same order)
  int tets_before = 0;               ///< #T before the event; new tets are tets_before, …
  std::vector<int> tet_copy_of;      ///< per new tet: the tet it was split from
  int tets_split = 0;                ///< tets cut through by this split (= new tets)
};

/// What an excision did (the input of a factor update: the removed tets' blocks, the new placeholders).
struct ExcisionEvent {
  std::vector<int> removed;                      ///< old ids of the removed tets (ascending)
  std::vector<Eigen::RowVector4i> removed_rows;  ///< their node indices (same order)
  std::vector<int> tet_map;                      ///< old tet id → new id, −1 when removed
  std::vector<int> orphaned;                     ///< nodes left without any tet (ascending; they stay, unused)
};

/// A tet mesh that is cut progressively. Keeps the set of separated faces and node → tet incidence.
class CutSurface;

class FaceCutter {
 public:
  /// Throws MeshError (from boundary_faces) when the mesh has a face shared by more than two tets
  /// or two tets listing a face with the same orientation.
  explicit FaceCutter(TetMesh mesh);

  const TetMesh& mesh() const { return mesh_; }
  int num_cut_faces() const { return static_cast<int>(cut_.size()); }
  /// Removes tets (excision): the others are renumbered in their order (tet_map), separated faces
  /// follow them, nodes stay (those left without a tet are listed as orphaned: a model keeps them
  /// as inactive unknowns, ModelDesc::inactive_nodes). Throws MeshError (mesh unchanged) for an id
  /// out of range or repeated, or when every tet would go.
  ExcisionEvent excise(const std::vector<int>& tets);

  /// The node of the mesh given at construction that `node` descends from (a copy of a copy maps
  /// to the first original; an original maps to itself). Throws MeshError when out of range.
  int original(int node) const;
  /// True when the face between t0 and t1 has been separated.
  bool is_cut(int t0, int t1) const;

  /// Separates the given faces and splits the nodes as described above. Faces already cut are
  /// skipped. Throws MeshError (mesh unchanged) when a pair is not two distinct tets sharing a face,
  /// or when the mesh has split elements (one kind of cut per mesh).
  CutEvent cut(const std::vector<TetPair>& faces);

  /// Element splitting, for cuts that do not follow mesh faces (a lattice with an embedded surface;
  /// the virtual node algorithm of Molino, Bao & Fedkiw 2004). Each node's side of `surface` is
  /// snapped away from the surface by 5% of the mesh's mean edge (no sliver fragments). A tet whose
  /// material (the part of it its earlier splits left it, holding its "real" corners) has corners on
  /// both sides, with every edge between the two sides crossing the surface, is cut through: it
  /// keeps the positive side's fragment and a new tet (a copy of its rest shape, appended) takes the
  /// negative side's; each fragment's volume fraction is its share of the tet's volume, the region
  /// where the linear interpolation of the nodes' sides keeps its sign, clipped exactly. A tet the
  /// surface crosses only partly (the blade's end inside it) is not cut, so the cut opens only where
  /// it is complete, as with faces. Then each node of a cut tet is split into one copy per connected
  /// component of the tets around it, two tets connected when their source tets share a face, they
  /// name the same nodes on it and a corner of that face is real in both; the component with the
  /// lowest tet id keeps the node. Copies start at the node's rest position; a fragment's nodes on
  /// the other side are "virtual" (they carry its shape and its share of mass and stiffness).
  /// changed_tets are the tets whose nodes or fraction changed (old_fraction beside old_tets).
  /// Throws MeshError (mesh unchanged) when the mesh has face cuts.
  CutEvent split(const CutSurface& surface);

  /// The tets whose real corners all lie on the negative side of `surface` (as split() snaps
  /// them): after a split by a closed surface, the fragments inside it — what an excision of the
  /// region removes.
  std::vector<int> tets_inside(const CutSurface& surface) const;

  /// How far the point with barycentric weights w (in tet t's rest shape) lies inside t's material:
  /// the smallest signed value of the side planes of t's splits there (≥ 0: t holds the point;
  /// +∞ for a tet never split).
  double material_margin(int t, const Vec4& w) const;
  /// The tets of each source tet (index: the source tet, as source_tet()).
  std::vector<std::vector<int>> fragments_by_source() const;
  /// Of the fragments of t's source tet (`by_source` from fragments_by_source()), the one whose
  /// material holds the point with weights w — the weights are the same in every fragment, which
  /// share the rest shape and corner order — or, for a point on a cut, the one it lies least
  /// outside of. Ties go to the lowest tet id.
  int fragment_holding(int t, const Vec4& w, const std::vector<std::vector<int>>& by_source) const;

  /// Volume fraction of tet t's material (1 for a tet never split). Throws MeshError out of range.
  double fraction(int t) const;
  const std::vector<double>& fractions() const { return fraction_; }
  /// The tet of the mesh given at construction that tet t is a fragment of.
  int source_tet(int t) const;
  /// True when corner a (0–3) of tet t holds material of t (a "real" node of the fragment).
  bool is_real(int t, int a) const;
  /// True after a split that cut at least one tet.
  bool has_split_elements() const { return split_elements_; }

 private:
  TetMesh mesh_;
  std::vector<std::vector<int>> node_tets_;  // node → incident tets
  std::vector<TetPair> cut_;                 // sorted
  std::vector<int> origin_;                  // node → the original node it descends from
  // Element splitting: per tet, its source tet, real corners (bit a = corner a), the linear side
  // functions (values at the corners, with the sign kept) that bound its material, and its fraction.
  struct SidePlane {
    std::array<double, 4> value;
    double sign;
  };
  Tets source_rows_;  // the tets at construction
  std::vector<int> source_;
  std::vector<unsigned char> real_;
  std::vector<std::vector<SidePlane>> planes_;
  std::vector<double> fraction_;
  double snap_ = 0;  // 5% of the mean edge at construction
  bool split_elements_ = false;
};

/// Interior faces of `mesh` (tets sharing three nodes) whose two tets have centroids strictly on
/// opposite sides of the plane n·x = offset, ordered by the key `order · centroid(face)` (ties by
/// tet ids), so that a cut can advance along `order`. n need not be unit length.
std::vector<TetPair> faces_across_plane(const TetMesh& mesh, const Vec3& normal, double offset, const Vec3& order);

/// A blade's swept surface (the thesis's incision and deep cut, Wang 2025 ch. 5): a polyline of
/// points p_i on (or in) the tissue, each with a sweep vector s_i (the blade's depth direction
/// times its depth, e.g. the inward normal × depth), spans bilinear patches p_i, p_{i+1},
/// p_{i+1} + s_{i+1}, p_i + s_i, each taken as two triangles.
struct SweptPath {
  std::vector<Vec3> points;  ///< ≥ 2
  std::vector<Vec3> sweep;   ///< one per point, or one for all
  /// The sweep vector of point i (the single one when one is given for all).
  const Vec3& sweep_at(std::size_t i) const { return sweep.size() == 1 ? sweep.front() : sweep[i]; }
};

/// Interior faces of `mesh` whose dual segment (from one tet's centroid to the other's) crosses the
/// swept surface, ordered by the arc length along the polyline of the crossing point (the blade's
/// progress; ties by tet ids). A straight path swept through the whole mesh gives the faces of
/// faces_across_plane; a shallow sweep only the faces whose dual segment crosses above its depth.
/// Throws MeshError for fewer than two points, a sweep count other than 1 or the point count, or
/// a non-finite coordinate.
std::vector<TetPair> faces_across_swept_path(const TetMesh& mesh, const SweptPath& path);

/// Checks the invariants of a cut mesh: every tet has positive volume, every node is used (unless
/// `allow_unused`: nodes orphaned by an excision), no face is shared by more than two tets and the
/// two tets of a face agree on its orientation (the boundary_faces checks). Returns an empty string
/// or the first violation.
std::string check_cut_mesh(const TetMesh& mesh, bool allow_unused = false);

}  // namespace xpd
