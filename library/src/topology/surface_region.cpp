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
  const auto nt = static_cast<std::size_t>(mesh.tets.rows());
  auto sorted3 = [](std::array<int, 3> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<char> in_region(static_cast<std::size_t>(skin.rows()), 0);
  for (int f : region) {
    if (f < 0 || f >= skin.rows())
      throw MeshError(fmt::format("shell_nodes_below: triangle {} out of range ({} triangles)", f, skin.rows()));
    in_region[static_cast<std::size_t>(f)] = 1;
  }
  // Columns by the original surface vertices of their skin triangles: each skin triangle's column
  // and whether it is the region's (every node of a prism's tets descends from its triangle's
  // vertices at some layer).
  std::map<std::array<int, 3>, char> column_of_skin;  // column → 1 region, 0 other skin
  std::map<std::array<int, 3>, char> skin_face;       // current ids → 1 region, 0 other
  for (Eigen::Index f = 0; f < skin.rows(); ++f) {
    std::array<int, 3> v{}, cur{};
    for (int k = 0; k < 3; ++k) {
      v[static_cast<size_t>(k)] = cutter.original(skin(f, k));
      cur[static_cast<size_t>(k)] = skin(f, k);
      if (v[static_cast<size_t>(k)] >= S)
        throw MeshError(fmt::format("shell_nodes_below: node {} of triangle {} is not on the skin", skin(f, k), f));
    }
    const char r = in_region[static_cast<std::size_t>(f)];
    char& c = column_of_skin.try_emplace(sorted3(v), r).first->second;
    c = static_cast<char>(c | r);
    skin_face[sorted3(cur)] = r;
  }
  // Each tet's column (−1: none with a skin triangle left) and which skin face it touches.
  std::vector<std::array<int, 3>> col(nt);
  std::vector<int> kind(nt, -1);     // 1 region column, 0 other skin column, −1 none
  std::vector<int> touches(nt, -1);  // 1 a region skin face, 0 another skin face, −1 none
  for (std::size_t t = 0; t < nt; ++t) {
    std::array<int, 4> v{};
    for (int a = 0; a < 4; ++a)
      v[static_cast<size_t>(a)] = cutter.original(mesh.tets(static_cast<Eigen::Index>(t), a)) % S;
    std::sort(v.begin(), v.end());
    if (std::unique(v.begin(), v.end()) - v.begin() == 3) {  // a prism's tet: 3 surface vertices
      col[t] = {v[0], v[1], v[2]};
      if (const auto it = column_of_skin.find(col[t]); it != column_of_skin.end()) kind[t] = it->second;
    }
    for (int skip = 0; skip < 4; ++skip) {
      std::array<int, 3> face{};
      int k = 0;
      for (int a = 0; a < 4; ++a)
        if (a != skip) face[static_cast<size_t>(k++)] = mesh.tets(static_cast<Eigen::Index>(t), a);
      if (const auto it = skin_face.find(sorted3(face)); it != skin_face.end())
        touches[t] = std::max(touches[t], int{it->second});
    }
  }
  // Tets sharing a face (a separated face no longer has three common nodes).
  const std::vector<std::vector<int>> next = tet_face_neighbours(mesh.tets);
  auto flood = [&](std::vector<char>& reached, std::vector<int> stack, auto allowed) {
    for (const int t : stack) reached[static_cast<std::size_t>(t)] = 1;
    while (!stack.empty()) {
      const int t = stack.back();
      stack.pop_back();
      for (const int u : next[static_cast<std::size_t>(t)])
        if (!reached[static_cast<std::size_t>(u)] && allowed(t, u)) {
          reached[static_cast<std::size_t>(u)] = 1;
          stack.push_back(u);
        }
    }
  };
  // Anchored: the tets of the other skin triangles' columns still joined, inside their column, to
  // their own skin. A cut runs along faces, so it zigzags across columns: next to an incision, a
  // column whose skin triangle lies outside the region may hold tets on the region's side, cut off
  // from that skin. They belong to the region (their deep nodes are copies the cut made, which
  // inherited the attachments: left attached, they tied the flap of scenes/face_flap.json to the
  // skin beside its arms), where a column across the region's base line, which no cut separates,
  // stays the other skin's.
  std::vector<char> anchored(nt, 0);
  {
    std::vector<int> seeds;
    for (std::size_t t = 0; t < nt; ++t)
      if (kind[t] == 0 && touches[t] == 0) seeds.push_back(static_cast<int>(t));
    flood(anchored, seeds,
          [&](int t, int u) { return col[static_cast<std::size_t>(u)] == col[static_cast<std::size_t>(t)]; });
  }
  // The region's tets: reached from its skin faces through shared faces, inside the region's columns
  // (a cut through one leaves its far side out) or the cut-off parts of the other skin's columns.
  std::vector<char> reached(nt, 0);
  {
    std::vector<int> seeds;
    for (std::size_t t = 0; t < nt; ++t)
      if (kind[t] == 1 && touches[t] == 1) seeds.push_back(static_cast<int>(t));
    // Only beside the region: columns sharing a surface vertex with one of its columns (a cut
    // elsewhere that separates tets from their skin, say a dissection under the skin next to the
    // flap, must not carry the flood away from the region's skin).
    std::vector<char> near_region(static_cast<std::size_t>(S), 0);
    for (const auto& [c, r] : column_of_skin)
      if (r)
        for (const int v : c) near_region[static_cast<std::size_t>(v)] = 1;
    flood(reached, seeds, [&](int, int u) {
      const auto k = static_cast<std::size_t>(u);
      if (kind[k] == 1) return true;
      if (kind[k] != 0 || anchored[k]) return false;
      return near_region[static_cast<std::size_t>(col[k][0])] || near_region[static_cast<std::size_t>(col[k][1])] ||
             near_region[static_cast<std::size_t>(col[k][2])];
    });
  }
  std::vector<int> out;
  for (std::size_t t = 0; t < nt; ++t)
    if (reached[t])
      for (int a = 0; a < 4; ++a) {
        const int node = mesh.tets(static_cast<Eigen::Index>(t), a);
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
