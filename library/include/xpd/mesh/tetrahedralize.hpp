#pragma once
// Conforming, quality tetrahedralization of a closed triangle surface with TetGen 1.5
// (H. Si, "TetGen, a Delaunay-based quality tetrahedral mesh generator", ACM TOMS 41(2), 2015).
// TetGen is a private dependency: no TetGen header or macro appears here.
#include <string>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Options, mapped to TetGen switches (shown in brackets). The input is always a piecewise linear
/// complex [p], indices are zero-based [z] and TetGen is quiet [Q].
struct TetrahedralizeOptions {
  /// Quality refinement [q]: bound on the radius–edge ratio of every tet (TetGen's default 2.0;
  /// √2 ≈ 1.414 is the tightest value TetGen guarantees to terminate with). ≤ 0 disables [q].
  double max_radius_edge_ratio = 1.414;
  /// Lower bound on dihedral angles in degrees for the quality refinement [q…/deg]; 0 = TetGen's default.
  double min_dihedral_deg = 0;
  /// Upper bound on tet volume [a…]; ≤ 0 = unbounded. In the units of the surface, cubed.
  double max_volume = 0;
  /// Keep the input surface triangles as the boundary, no Steiner points on it [Y]. Then the
  /// boundary of the result is exactly the input surface (interior Steiner points allowed).
  bool preserve_surface = true;
  /// Extra raw TetGen switches appended verbatim (expert use, e.g. "V" or "O3"); must not contain
  /// output-format switches that change the tet layout (e.g. "o2").
  std::string extra_switches;
  /// Run TetGen's self-intersection detection [d] first and throw MeshError naming the number of
  /// intersecting triangles. Costs about one extra Delaunay pass.
  bool detect_self_intersections = false;
  /// Run TetGen in a forked child process (POSIX). TetGen 1.5 (Debian libtet1.5) crashes with
  /// SIGSEGV in its cleanup on some error paths instead of throwing; isolation turns that crash
  /// into a MeshError. Costs one fork (~1 ms). Disable only for trusted input or debugging.
  /// Ignored in AddressSanitizer builds, where fork() with other threads running can deadlock the
  /// child (see tetrahedralize_isolates_process).
  bool isolate_process = true;
};

/// Whether this build can honour TetrahedralizeOptions::isolate_process: false in
/// AddressSanitizer builds (GCC 12's sanitizer allocator takes no locks around fork(), so a child
/// forked while another thread holds one of them deadlocks); TetGen then runs in-process, and its
/// crash on some error paths is not caught.
bool tetrahedralize_isolates_process();

/// The TetGen switch string the options stand for, e.g. "pzQq1.414Y".
std::string tetgen_switches(const TetrahedralizeOptions& options);

/// Tetrahedralizes the solid bounded by `closed` (#V × 3 nodes, #F × 3 triangles).
///
/// Checks first (MeshError naming the cause): valid surface (validate_surface), closed and
/// consistently oriented 2-manifold (is_closed_manifold), non-zero enclosed volume. Then calls
/// TetGen's library interface; any TetGen failure (it throws int codes: 1 out of memory,
/// 2 internal error, 3 self-intersecting input, 4 very small input feature, 5 two very close
/// input facets, 10 input error) or other exception becomes a MeshError with the code explained.
/// Returns nodes (input vertices first, in input order, then Steiner points) and positively
/// oriented tets (det[x1−x0, x2−x0, x3−x0] > 0); `boundary` = boundary_faces(tets) (outward);
/// `region` is empty.
TetMesh tetrahedralize(const SurfaceMesh& closed, const TetrahedralizeOptions& options = {});

}  // namespace xpd
