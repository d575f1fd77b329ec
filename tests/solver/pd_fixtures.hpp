#pragma once
// Test helpers for the PD core: meshes, loaded models, tolerances. Every helper accepts any
// TetMesh (real meshes plug in the same way as boxes).
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace xpd::test {

/// Set XPD_TEST_VERBOSE=1 to print measured errors next to their tolerances.
inline bool verbose() {
  const char* v = std::getenv("XPD_TEST_VERBOSE");
  return v && v[0] == '1';
}
inline void report(const char* what, double value, double tol) {
  if (verbose()) std::printf("  [tol] %-40s %.3e (tol %.3e)\n", what, value, tol);
}

/// Length of the bounding-box diagonal.
inline double bbox_diagonal(const Points& x) {
  return (x.colwise().maxCoeff() - x.colwise().minCoeff()).norm();
}

/// Box of n³ nodes on [0,1]³ with interior nodes jittered by up to `jitter` × spacing
/// (keeps every tet positively oriented for jitter ≤ 0.2).
inline TetMesh jittered_box(int n, double jitter = 0.15, unsigned seed = 7) {
  TetMesh m = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double h = 1.0 / (n - 1);
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i) {
    const Vec3 p = m.nodes.row(i).transpose();
    if ((p.array() > 1e-9).all() && (p.array() < 1 - 1e-9).all())
      for (int d = 0; d < 3; ++d) m.nodes(i, d) += jitter * h * u(rng);
  }
  return m;
}

/// Attaches every node with coordinate `axis` within 1e-9 of its minimum to its rest position.
inline void attach_min_face(ModelDesc& d, int axis = 2, double stiffness = 1e7) {
  const double lo = d.mesh.nodes.col(axis).minCoeff();
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
    if (d.mesh.nodes(i, axis) < lo + 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), stiffness, d.mesh.nodes.row(i).transpose()});
}

/// A cantilever-like loaded model: min-z face attached, gravity, per-tet μ varying ±30%.
inline ModelDesc loaded_desc(const TetMesh& mesh, double gravity = 30.0, unsigned seed = 3) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.7, 1.3);
  d.mu.resize(static_cast<size_t>(mesh.tets.rows()));
  for (auto& m : d.mu) m = 1e3 * u(rng);
  d.density = 100.0;
  d.gravity = Vec3(0.3, 0.0, -1.0) * gravity;
  attach_min_face(d, 0, 1e6);  // attach the x = min face: the body bends under gravity
  return d;
}

}  // namespace xpd::test
