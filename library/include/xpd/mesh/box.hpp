#pragma once
// Structured box meshes: the benchmark family used throughout xpd (`xpd bench collisions` runs its
// box:N analogue of Wang et al. 2021, Figure 4, on them).
#include <string>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Box of nx × ny × nz nodes spanning [lo, hi], every hexahedral cell split into 6 tets along its
/// main diagonal (Kuhn / Freudenthal split; conforming across cells). #V = nx·ny·nz,
/// #T = 6 (nx−1)(ny−1)(nz−1). Node (i,j,k) has index i + nx (j + ny k). Tets positively oriented.
/// `box:48` = 110,592 nodes, 622,938 tets. Requires nx, ny, nz ≥ 2 and lo < hi componentwise.
TetMesh make_box(int nx, int ny, int nz, const Vec3& lo, const Vec3& hi);

/// The 12 outward-oriented triangles (8 nodes) of the box [lo, hi] (the boundary of
/// make_box(2, 2, 2, lo, hi)): a kinematic obstacle of the two-way projection, for example.
SurfaceMesh make_box_surface(const Vec3& lo, const Vec3& hi);

/// Parses a generator string "box:N" or "box:NX,NY,NZ" (nodes per side). The box spans
/// [0, (N−1)h] per axis with spacing h = 1 / (max(NX,NY,NZ) − 1), so its longest side is 1.
/// Throws Error on a malformed string or sizes outside [2, 1024].
TetMesh make_box_from_spec(const std::string& spec);

/// True when `spec` names a generator ("box:...") rather than a file.
bool is_generator_spec(const std::string& spec);

}  // namespace xpd
