#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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
  const TetMesh& mesh = cutter.mesh();
  const int S = shell.surface_vertices;
  auto column_key = [](std::array<int, 3> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // The region's prism columns, by the original surface vertices of their triangles.
  std::vector<std::array<int, 3>> columns;
  std::vector<std::array<int, 3>> skin_faces;  // the region's skin triangles, current ids sorted
  for (int f : region) {
    if (f < 0 || f >= skin.rows())
      throw MeshError(fmt::format("shell_nodes_below: triangle {} out of range ({} triangles)", f, skin.rows()));
    std::array<int, 3> v{}, cur{};
    for (int k = 0; k < 3; ++k) {
      v[static_cast<size_t>(k)] = cutter.original(skin(f, k));
      cur[static_cast<size_t>(k)] = skin(f, k);
      if (v[static_cast<size_t>(k)] >= S)
        throw MeshError(fmt::format("shell_nodes_below: node {} of triangle {} is not on the skin", skin(f, k), f));
    }
    columns.push_back(column_key(v));
    skin_faces.push_back(column_key(cur));
  }
  std::sort(columns.begin(), columns.end());
  std::sort(skin_faces.begin(), skin_faces.end());
  // The tets of those columns (every node of a prism's tets descends from its triangle's vertices at
  // some layer). A cut may run through a column, so only the tets reached from the region's skin
  // faces through faces the tets still share (a separated face no longer has three common nodes)
  // are the region's.
  std::vector<int> in_column;
  std::vector<char> seed;
  for (int t = 0; t < mesh.tets.rows(); ++t) {
    std::array<int, 4> v{};
    for (int a = 0; a < 4; ++a) v[static_cast<size_t>(a)] = cutter.original(mesh.tets(t, a)) % S;
    std::sort(v.begin(), v.end());
    const std::array<int, 3> key{v[0], v[1] == v[0] ? v[2] : v[1], v[3]};
    if (std::unique(v.begin(), v.end()) - v.begin() != 3 || !std::binary_search(columns.begin(), columns.end(), key))
      continue;
    in_column.push_back(t);
    bool touches = false;
    for (int skip = 0; skip < 4 && !touches; ++skip) {
      std::array<int, 3> face{};
      int k = 0;
      for (int a = 0; a < 4; ++a)
        if (a != skip) face[static_cast<size_t>(k++)] = mesh.tets(t, a);
      touches = std::binary_search(skin_faces.begin(), skin_faces.end(), column_key(face));
    }
    seed.push_back(touches ? 1 : 0);
  }
  auto shared = [&](int t, int u) {
    int common = 0;
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) common += mesh.tets(t, a) == mesh.tets(u, b) ? 1 : 0;
    return common == 3;
  };
  std::vector<char> reached(seed);
  std::vector<size_t> stack;
  for (size_t i = 0; i < in_column.size(); ++i)
    if (reached[i]) stack.push_back(i);
  while (!stack.empty()) {  // columns hold few tets each: a quadratic scan over them is cheap
    const size_t i = stack.back();
    stack.pop_back();
    for (size_t j = 0; j < in_column.size(); ++j)
      if (!reached[j] && shared(in_column[i], in_column[j])) {
        reached[j] = 1;
        stack.push_back(j);
      }
  }
  std::vector<int> out;
  for (size_t i = 0; i < in_column.size(); ++i)
    if (reached[i])
      for (int a = 0; a < 4; ++a) {
        const int node = mesh.tets(in_column[i], a);
        if (cutter.original(node) >= shell.layers * S) out.push_back(node);
      }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> hook_grip_nodes(const TetMesh& mesh, const std::array<int, 4>& seed, const Vec3& centre,
                                 double radius) {
  const auto n = static_cast<int>(mesh.nodes.rows());
  if (!(radius > 0) || !std::isfinite(radius))
    throw MeshError(fmt::format("hook_grip_nodes: the radius must be finite and > 0 (got {})", radius));
  for (const int v : seed)
    if (v >= n) throw MeshError(fmt::format("hook_grip_nodes: seed node {} out of range ({} nodes)", v, n));
  // Node → tets, compressed.
  std::vector<int> start(static_cast<std::size_t>(n) + 1, 0), tets_of;
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t)
    for (int a = 0; a < 4; ++a) ++start[static_cast<std::size_t>(mesh.tets(t, a)) + 1];
  for (std::size_t v = 1; v < start.size(); ++v) start[v] += start[v - 1];
  tets_of.resize(static_cast<std::size_t>(start.back()));
  std::vector<int> fill(start.begin(), start.end() - 1);
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t)
    for (int a = 0; a < 4; ++a)
      tets_of[static_cast<std::size_t>(fill[static_cast<std::size_t>(mesh.tets(t, a))]++)] = static_cast<int>(t);
  auto inside = [&](int v) { return (mesh.nodes.row(v).transpose() - centre).norm() <= radius; };
  std::vector<char> seen(static_cast<std::size_t>(n), 0);
  std::vector<int> queue;
  for (const int v : seed)
    if (v >= 0 && inside(v) && !seen[static_cast<std::size_t>(v)]) {
      seen[static_cast<std::size_t>(v)] = 1;
      queue.push_back(v);
    }
  for (std::size_t q = 0; q < queue.size(); ++q) {
    const int v = queue[q];
    for (int k = start[static_cast<std::size_t>(v)]; k < start[static_cast<std::size_t>(v) + 1]; ++k)
      for (int a = 0; a < 4; ++a) {
        const int w = mesh.tets(tets_of[static_cast<std::size_t>(k)], a);
        if (!seen[static_cast<std::size_t>(w)] && inside(w)) {
          seen[static_cast<std::size_t>(w)] = 1;
          queue.push_back(w);
        }
      }
  }
  std::vector<int> out;
  for (const int v : boundary_nodes(mesh.tets))
    if (seen[static_cast<std::size_t>(v)]) out.push_back(v);
  return out;
}

}  // namespace xpd
