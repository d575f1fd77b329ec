#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd {
namespace {

void check_finite_nodes(const Points& nodes, const std::string& source) {
  for (Eigen::Index i = 0; i < nodes.rows(); ++i)
    for (int c = 0; c < 3; ++c)
      if (!std::isfinite(nodes(i, c)))
        throw MeshError(fmt::format("{}: node {} has a non-finite coordinate ({}, {}, {})", source, i, nodes(i, 0),
                                    nodes(i, 1), nodes(i, 2)));
}

template <class Cells>
void check_indices(const Cells& cells, Eigen::Index num_nodes, const char* kind, const std::string& source) {
  for (Eigen::Index e = 0; e < cells.rows(); ++e) {
    for (int k = 0; k < cells.cols(); ++k) {
      const int v = cells(e, k);
      if (v < 0 || v >= num_nodes)
        throw MeshError(fmt::format("{}: {} {} references node {} (out of range: {} nodes, 0-based)", source, kind, e,
                                    v, num_nodes));
      for (int l = 0; l < k; ++l)
        if (cells(e, l) == v) throw MeshError(fmt::format("{}: {} {} uses node {} twice", source, kind, e, v));
    }
  }
}

}  // namespace

ValidationReport validate_tet_mesh(TetMesh& mesh, const ValidationOptions& options, const std::string& source) {
  ValidationReport report;
  const Eigen::Index n = mesh.nodes.rows(), m = mesh.tets.rows();
  if (n == 0) throw MeshError(source + ": mesh has no nodes");
  if (m == 0) throw MeshError(source + ": mesh has no tetrahedra");
  check_finite_nodes(mesh.nodes, source);
  check_indices(mesh.tets, n, "tet", source);
  if (mesh.boundary.rows() > 0) check_indices(mesh.boundary, n, "boundary triangle", source);
  if (!mesh.region.empty() && static_cast<Eigen::Index>(mesh.region.size()) != m)
    throw MeshError(fmt::format("{}: {} region tags for {} tets", source, mesh.region.size(), m));

  // Orientation and degeneracy, one pass.
  std::vector<double> vol(static_cast<std::size_t>(m));
  Eigen::Index negative = 0;
  for (Eigen::Index e = 0; e < m; ++e) {
    std::array<Vec3, 4> x;
    for (int k = 0; k < 4; ++k) x[k] = mesh.nodes.row(mesh.tets(e, k)).transpose();
    const double v = signed_volume(x[0], x[1], x[2], x[3]);
    double lmax = 0;
    for (int a = 0; a < 4; ++a)
      for (int b = a + 1; b < 4; ++b) lmax = std::max(lmax, (x[a] - x[b]).norm());
    if (!(std::abs(v) > options.degenerate_tolerance * lmax * lmax * lmax))
      throw MeshError(
          fmt::format("{}: tet {} (nodes {} {} {} {}) is degenerate: volume {:.3g} with longest edge {:.3g}", source, e,
                      mesh.tets(e, 0), mesh.tets(e, 1), mesh.tets(e, 2), mesh.tets(e, 3), v, lmax));
    vol[static_cast<std::size_t>(e)] = v;
    negative += v < 0;
  }
  if (negative == m) {
    // The whole file uses the opposite orientation convention: flip every tet.
    mesh.tets.col(2).swap(mesh.tets.col(3));
    report.flipped_tets = static_cast<int>(m);
  } else if (negative > 0) {
    if (!options.fix_orientation) {
      const auto e = std::find_if(vol.begin(), vol.end(), [](double v) { return v < 0; }) - vol.begin();
      throw MeshError(
          fmt::format("{}: tet {} (nodes {} {} {} {}) is inverted (signed volume {:.3g}); {} of {} tets are "
                      "inverted. Use --fix-orientation (fix_orientation) to reorient them",
                      source, e, mesh.tets(e, 0), mesh.tets(e, 1), mesh.tets(e, 2), mesh.tets(e, 3),
                      vol[static_cast<std::size_t>(e)], negative, m));
    }
    for (Eigen::Index e = 0; e < m; ++e)
      if (vol[static_cast<std::size_t>(e)] < 0) std::swap(mesh.tets(e, 2), mesh.tets(e, 3));
    report.flipped_tets = static_cast<int>(negative);
  }

  // Referenced nodes; duplicates among them (exact coordinate equality).
  std::vector<char> used(static_cast<std::size_t>(n), 0);
  for (Eigen::Index e = 0; e < m; ++e)
    for (int k = 0; k < 4; ++k) used[static_cast<std::size_t>(mesh.tets(e, k))] = 1;
  report.unreferenced_nodes = static_cast<int>(std::count(used.begin(), used.end(), 0));
  if (options.reject_duplicate_nodes) {
    std::vector<int> order;
    order.reserve(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
      if (used[static_cast<std::size_t>(i)]) order.push_back(i);
    const auto key = [&](int i) { return std::array<double, 3>{mesh.nodes(i, 0), mesh.nodes(i, 1), mesh.nodes(i, 2)}; };
    std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b) || (key(a) == key(b) && a < b); });
    for (std::size_t i = 1; i < order.size(); ++i)
      if (key(order[i - 1]) == key(order[i]))
        throw MeshError(fmt::format("{}: nodes {} and {} are duplicates (both at {}, {}, {}) and both used by tets",
                                    source, order[i - 1], order[i], mesh.nodes(order[i], 0), mesh.nodes(order[i], 1),
                                    mesh.nodes(order[i], 2)));
  }
  return report;
}

void validate_surface(const SurfaceMesh& surface, const std::string& source) {
  if (surface.nodes.rows() == 0) throw MeshError(source + ": surface has no vertices");
  if (surface.triangles.rows() == 0) throw MeshError(source + ": surface has no faces");
  check_finite_nodes(surface.nodes, source);
  check_indices(surface.triangles, surface.nodes.rows(), "face", source);
}

}  // namespace xpd
