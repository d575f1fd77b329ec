#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/topology/surface_region.hpp>

namespace xpd {

std::vector<int> flood_fill_triangles(const Triangles& triangles, int seed,
                                      const std::vector<std::array<int, 2>>& barrier) {
  const int nf = static_cast<int>(triangles.rows());
  if (seed < 0 || seed >= nf)
    throw MeshError(fmt::format("flood_fill_triangles: seed triangle {} out of range ({} triangles)", seed, nf));
  auto key = [](int a, int b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  // Edge → the triangles that use it (a map: the surfaces here are a skin, thousands of triangles).
  std::map<std::pair<int, int>, std::vector<int>> edges;
  for (int f = 0; f < nf; ++f)
    for (int k = 0; k < 3; ++k) edges[key(triangles(f, k), triangles(f, (k + 1) % 3))].push_back(f);
  const int nv = nf > 0 ? triangles.maxCoeff() + 1 : 0;
  std::vector<std::pair<int, int>> blocked;
  for (const auto& e : barrier) {
    if (e[0] < 0 || e[1] < 0 || e[0] >= nv || e[1] >= nv)
      throw MeshError(
          fmt::format("flood_fill_triangles: barrier edge ({}, {}) names a vertex out of range", e[0], e[1]));
    blocked.push_back(key(e[0], e[1]));
  }
  std::sort(blocked.begin(), blocked.end());
  std::vector<char> seen(static_cast<size_t>(nf), 0);
  std::vector<int> stack{seed}, out;
  seen[static_cast<size_t>(seed)] = 1;
  while (!stack.empty()) {
    const int f = stack.back();
    stack.pop_back();
    out.push_back(f);
    for (int k = 0; k < 3; ++k) {
      const auto e = key(triangles(f, k), triangles(f, (k + 1) % 3));
      if (std::binary_search(blocked.begin(), blocked.end(), e)) continue;
      for (int g : edges[e])
        if (!seen[static_cast<size_t>(g)]) {
          seen[static_cast<size_t>(g)] = 1;
          stack.push_back(g);
        }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

Triangles shell_skin(const Shell& shell, const FaceCutter& cutter) {
  const Triangles all = boundary_faces(cutter.mesh().tets);
  std::vector<int> keep;
  for (int f = 0; f < all.rows(); ++f)
    if (cutter.original(all(f, 0)) < shell.surface_vertices && cutter.original(all(f, 1)) < shell.surface_vertices &&
        cutter.original(all(f, 2)) < shell.surface_vertices)
      keep.push_back(f);
  Triangles skin(static_cast<Eigen::Index>(keep.size()), 3);
  for (size_t k = 0; k < keep.size(); ++k) skin.row(static_cast<Eigen::Index>(k)) = all.row(keep[k]);
  return skin;
}

std::vector<int> shell_nodes_below(const Shell& shell, const FaceCutter& cutter, const Triangles& skin,
                                   const std::vector<int>& region) {
  std::vector<int> out;
  for (int f : region) {
    if (f < 0 || f >= skin.rows())
      throw MeshError(fmt::format("shell_nodes_below: triangle {} out of range ({} triangles)", f, skin.rows()));
    for (int k = 0; k < 3; ++k) {
      const int v = cutter.original(skin(f, k));
      if (v >= shell.surface_vertices)
        throw MeshError(fmt::format("shell_nodes_below: node {} of triangle {} is not on the skin", skin(f, k), f));
      out.push_back(shell.layers * shell.surface_vertices + v);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace xpd
