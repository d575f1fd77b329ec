#include <fmt/format.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <numeric>
#include <xpd/core/error.hpp>
#include <xpd/energy/tet_elements.hpp>

namespace xpd {

TetElements make_tet_elements(const TetMesh& mesh, const std::vector<int>& tet_ids,
                              const std::vector<double>& stiffness) {
  if (stiffness.size() != tet_ids.size()) throw SolverError("make_tet_elements: one stiffness per tet is required");
  const int m = static_cast<int>(tet_ids.size());
  const int nv = static_cast<int>(mesh.nodes.rows());

  // Greedy colouring in input order: a tet takes the smallest colour not used at its nodes.
  constexpr int kMaxColors = 512;
  std::vector<std::bitset<kMaxColors>> used(static_cast<size_t>(nv));
  std::vector<int> color(static_cast<size_t>(m));
  int num_colors = 0;
  for (int k = 0; k < m; ++k) {
    const int t = tet_ids[static_cast<size_t>(k)];
    if (t < 0 || t >= mesh.tets.rows())
      throw SolverError(fmt::format("tet index {} out of range [0, {})", t, mesh.tets.rows()));
    std::bitset<kMaxColors> mask;
    for (int a = 0; a < 4; ++a) mask |= used[static_cast<size_t>(mesh.tets(t, a))];
    int c = 0;
    while (c < kMaxColors && mask[static_cast<size_t>(c)]) ++c;
    if (c == kMaxColors)
      throw SolverError(
          fmt::format("tet {}: more than {} element colours needed (node valence too high)", t, kMaxColors));
    color[static_cast<size_t>(k)] = c;
    for (int a = 0; a < 4; ++a) used[static_cast<size_t>(mesh.tets(t, a))].set(static_cast<size_t>(c));
    num_colors = std::max(num_colors, c + 1);
  }
  // Stable order by colour keeps input (spatial) order inside a colour: streaming memory access.
  std::vector<int> order(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return color[static_cast<size_t>(a)] < color[static_cast<size_t>(b)]; });

  TetElements e;
  e.nodes.resize(static_cast<size_t>(m));
  e.Dm_inv.resize(static_cast<size_t>(m));
  e.volume.resize(static_cast<size_t>(m));
  e.weight.resize(static_cast<size_t>(m));
  e.source = order;
  e.color_offsets.assign(static_cast<size_t>(num_colors) + 1, 0);
  for (int k = 0; k < m; ++k) ++e.color_offsets[static_cast<size_t>(color[static_cast<size_t>(k)]) + 1];
  std::partial_sum(e.color_offsets.begin(), e.color_offsets.end(), e.color_offsets.begin());

  for (int k = 0; k < m; ++k) {
    const int s = order[static_cast<size_t>(k)];
    const int t = tet_ids[static_cast<size_t>(s)];
    const double mu = stiffness[static_cast<size_t>(s)];
    if (!(mu > 0.0) || !std::isfinite(mu))
      throw SolverError(fmt::format("tet {}: stiffness must be positive and finite, got {}", t, mu));
    const TetRestShape r = tet_rest_shape(mesh, t);
    e.nodes[static_cast<size_t>(k)] = {mesh.tets(t, 0), mesh.tets(t, 1), mesh.tets(t, 2), mesh.tets(t, 3)};
    e.Dm_inv[static_cast<size_t>(k)] = r.Dm_inv;
    e.volume[static_cast<size_t>(k)] = r.volume;
    e.weight[static_cast<size_t>(k)] = 2.0 * mu * r.volume;
  }
  return e;
}

TetRestShape tet_rest_shape(const TetMesh& mesh, int t) {
  const Vec3 X0 = mesh.nodes.row(mesh.tets(t, 0)).transpose();
  Mat3 Dm;
  for (int a = 0; a < 3; ++a) Dm.col(a) = mesh.nodes.row(mesh.tets(t, a + 1)).transpose() - X0;
  const double vol = Dm.determinant() / 6.0;
  if (!(vol > 0.0) || !std::isfinite(vol))
    throw MeshError(fmt::format("tet {}: rest volume {} is not positive (inverted or degenerate)", t, vol));
  return {Dm.inverse(), vol};
}

}  // namespace xpd
