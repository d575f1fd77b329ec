#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>
#include <xpd/core/error.hpp>
#include <xpd/mesh/shell.hpp>

namespace xpd {
namespace {

using Edge = std::pair<int, int>;

// The three tets of the prism over triangle (a, b, c) between layers lo and lo + 1, as (vertex,
// upper?) pairs, in the split fixed by the global vertex order: sorting the triangle's vertices
// s0 < s1 < s2, the tets are (s0 s1 s2 s0'), (s1 s2 s0' s1'), (s2 s0' s1' s2'). Every side quad of
// the prism then has the diagonal from its higher vertex's lower node to its lower vertex's upper
// node, which the neighbouring prism over the same edge chooses too.
std::array<std::array<std::pair<int, bool>, 4>, 3> prism_split(int a, int b, int c) {
  std::array<int, 3> s{a, b, c};
  std::sort(s.begin(), s.end());
  return {{{{{s[0], false}, {s[1], false}, {s[2], false}, {s[0], true}}},
           {{{s[1], false}, {s[2], false}, {s[0], true}, {s[1], true}}},
           {{{s[2], false}, {s[0], true}, {s[1], true}, {s[2], true}}}}};
}

}  // namespace

Shell make_shell(const SurfaceMesh& surface, const ShellOptions& o) {
  if (!(o.thickness > 0) || !std::isfinite(o.thickness))
    throw Error(fmt::format("shell: thickness must be > 0, got {}", o.thickness));
  if (o.layers < 1) throw Error(fmt::format("shell: layers must be >= 1, got {}", o.layers));
  if (!(o.thin_fraction > 0 && o.thin_fraction <= 0.5))
    throw Error(fmt::format("shell: thin_fraction must be in (0, 0.5], got {}", o.thin_fraction));
  if (!(o.min_volume_ratio > 0 && o.min_volume_ratio < 1))
    throw Error(fmt::format("shell: min_volume_ratio must be in (0, 1), got {}", o.min_volume_ratio));
  if (!(o.max_slope > 0)) throw Error(fmt::format("shell: max_slope must be > 0, got {}", o.max_slope));
  if (!(o.min_depth > 0 && o.min_depth <= 1))
    throw Error(fmt::format("shell: min_depth must be in (0, 1], got {}", o.min_depth));
  const int nv = static_cast<int>(surface.nodes.rows());
  const Eigen::Index nf = surface.triangles.rows();
  if (nv == 0 || nf == 0) throw Error("shell: the surface has no triangles");
  if (!surface.nodes.allFinite()) throw Error("shell: the surface has a non-finite vertex");

  // Directed edges: each may appear once (an edge shared by two triangles is traversed once in
  // each direction when they are consistently oriented).
  std::unordered_map<long long, int> directed;
  directed.reserve(static_cast<std::size_t>(3 * nf));
  std::vector<int> used(static_cast<std::size_t>(nv), 0);
  std::vector<Edge> edges;
  for (Eigen::Index f = 0; f < nf; ++f) {
    for (int k = 0; k < 3; ++k) {
      const int a = surface.triangles(f, k), b = surface.triangles(f, (k + 1) % 3);
      if (a < 0 || a >= nv || b < 0 || b >= nv)
        throw Error(fmt::format("shell: triangle {} refers to vertex {} of {}", f, a < 0 || a >= nv ? a : b, nv));
      if (a == b) throw Error(fmt::format("shell: triangle {} is degenerate (vertex {} twice)", f, a));
      used[static_cast<std::size_t>(a)] = 1;
      if (!directed.emplace(static_cast<long long>(a) * nv + b, static_cast<int>(f)).second)
        throw Error(
            fmt::format("shell: edge {}-{} is traversed in the same direction by triangles {} and {} (inconsistent "
                        "orientation or a non-manifold edge)",
                        a, b, directed[static_cast<long long>(a) * nv + b], f));
      if (!directed.count(static_cast<long long>(b) * nv + a)) edges.emplace_back(std::min(a, b), std::max(a, b));
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (int v = 0; v < nv; ++v)
    if (!used[static_cast<std::size_t>(v)])
      throw Error(fmt::format("shell: surface vertex {} belongs to no triangle (remove unused vertices)", v));

  auto X = [&](int v) -> Vec3 { return surface.nodes.row(v).transpose(); };
  // Vertex normals (front side): the area-weighted average, then turned towards the direction that
  // makes the smallest angle with all incident triangles' normals largest. Where the surface folds
  // sharply (an eyelid's rim) the average can be nearly perpendicular to a triangle, and no depth
  // keeps that prism positive: on the ICT face 10 vertices have a smallest cosine below 0.2 with the
  // average, none below 0.5 after the turn. (Smoothing the directions over neighbours was tried
  // too: at the tip of a cone, such as the tragus, it leaves the cone of the triangles' normals.)
  // The extrusion directions are the opposites.
  Points normal = Points::Zero(nv, 3);
  for (Eigen::Index f = 0; f < nf; ++f) {
    const int a = surface.triangles(f, 0), b = surface.triangles(f, 1), c = surface.triangles(f, 2);
    const Vec3 n = (X(b) - X(a)).cross(X(c) - X(a));
    if (!(n.norm() > 0)) throw Error(fmt::format("shell: triangle {} has zero area", f));
    for (const int v : {a, b, c}) normal.row(v) += n.transpose();
  }
  for (int v = 0; v < nv; ++v) {
    const double len = normal.row(v).norm();
    if (!(len > 0)) throw Error(fmt::format("shell: vertex {} has no defined normal (its triangles cancel)", v));
    normal.row(v) /= len;
  }
  {
    std::vector<std::vector<int>> incident(static_cast<std::size_t>(nv));
    for (Eigen::Index f = 0; f < nf; ++f)
      for (int k = 0; k < 3; ++k)
        incident[static_cast<std::size_t>(surface.triangles(f, k))].push_back(static_cast<int>(f));
    auto face_normal = [&](int f) -> Vec3 {
      const int a = surface.triangles(f, 0), b = surface.triangles(f, 1), c = surface.triangles(f, 2);
      return (X(b) - X(a)).cross(X(c) - X(a)).normalized();
    };
    for (int v = 0; v < nv; ++v) {
      // Subgradient ascent of min_f n·n_f: step towards the worst triangle's normal; the fixed
      // step oscillates about the optimum, so the best iterate is kept.
      Vec3 n = normal.row(v).transpose(), best = n;
      double best_worst = -2;
      for (int it = 0; it < 200; ++it) {
        double worst = 2;
        Vec3 nw = n;
        for (const int f : incident[static_cast<std::size_t>(v)]) {
          const Vec3 nf_hat = face_normal(f);
          if (nf_hat.dot(n) < worst) worst = nf_hat.dot(n), nw = nf_hat;
        }
        if (worst > best_worst) best_worst = worst, best = n;
        if (worst > 0.9) break;  // already well inside the cone
        n = (n + 0.05 * nw).normalized();
      }
      normal.row(v) = best.transpose();
    }
  }
  const Points dir = -normal;

  // Thin parts: the depth at v is at most thin_fraction × the distance, along its extrusion
  // direction, to a surface vertex behind it (within a 45° cone) that faces the other way.
  // Uniform hash grid searched one cell around: R, the largest gap that can still limit the
  // depth, and a point in the cone with s < R lies within √2 R, hence the cell √2 R.
  std::vector<double> depth(static_cast<std::size_t>(nv), o.thickness);
  const double floor = o.min_depth * o.thickness;
  {
    const double R = o.thickness / o.thin_fraction;
    const double cell = std::sqrt(2.0) * R;
    const Vec3 lo = surface.nodes.colwise().minCoeff().transpose();
    std::unordered_map<long long, std::vector<int>> grid;
    auto cell_of = [&](const Vec3& x) {
      return std::array<long long, 3>{static_cast<long long>(std::floor((x[0] - lo[0]) / cell)),
                                      static_cast<long long>(std::floor((x[1] - lo[1]) / cell)),
                                      static_cast<long long>(std::floor((x[2] - lo[2]) / cell))};
    };
    auto key = [](long long i, long long j, long long k) { return (i * 1000003LL + j) * 1000003LL + k; };
    for (int v = 0; v < nv; ++v) {
      const auto c = cell_of(X(v));
      grid[key(c[0], c[1], c[2])].push_back(v);
    }
    for (int v = 0; v < nv; ++v) {
      const Vec3 x = X(v), d = dir.row(v).transpose(), n = normal.row(v).transpose();
      const auto c = cell_of(x);
      double gap = R;
      for (long long i = c[0] - 1; i <= c[0] + 1; ++i)
        for (long long j = c[1] - 1; j <= c[1] + 1; ++j)
          for (long long k = c[2] - 1; k <= c[2] + 1; ++k) {
            const auto it = grid.find(key(i, j, k));
            if (it == grid.end()) continue;
            for (const int u : it->second) {
              if (u == v || normal.row(u).dot(n) >= 0) continue;
              const Vec3 r = X(u) - x;
              const double s = r.dot(d);
              if (s <= 0 || (r - s * d).norm() > s) continue;
              gap = std::min(gap, s);
            }
          }
      depth[static_cast<std::size_t>(v)] = std::max(floor, std::min(o.thickness, o.thin_fraction * gap));
    }
  }

  // Depth varies slowly: d(v) ≤ d(u) + max_slope |x_u − x_v| along every edge (sweeps to a fixed point).
  auto limit_slope = [&] {
    for (int sweep = 0; sweep < 10 * nv; ++sweep) {
      bool changed = false;
      for (const auto& [a, b] : edges) {
        const double l = o.max_slope * (X(a) - X(b)).norm();
        double& da = depth[static_cast<std::size_t>(a)];
        double& db = depth[static_cast<std::size_t>(b)];
        if (da > db + l) da = db + l, changed = true;
        if (db > da + l) db = da + l, changed = true;
      }
      if (!changed) return;
    }
  };
  limit_slope();

  const int L = o.layers;
  auto node = [&](int layer, int v) -> Vec3 {
    return X(v) + (static_cast<double>(layer) / L) * depth[static_cast<std::size_t>(v)] * dir.row(v).transpose();
  };
  // Convex parts: shrink the depth of a prism's vertices until each of its tets keeps
  // min_volume_ratio of its volume in the straight prism (the same depths along the triangle's
  // normal instead of the vertex directions). This may go below the thin-part floor (to 1% of it):
  // at the tip of a sharp ridge only a shallow prism stays positive.
  for (int round = 0;; ++round) {
    std::vector<char> shrink(static_cast<std::size_t>(nv), 0);
    Eigen::Index bad = -1;
    for (Eigen::Index f = 0; f < nf; ++f) {
      const int a = surface.triangles(f, 0), b = surface.triangles(f, 1), c = surface.triangles(f, 2);
      const Vec3 nf_hat = (X(b) - X(a)).cross(X(c) - X(a)).normalized();
      const auto split = prism_split(a, b, c);
      bool ok = true;
      for (int layer = 0; layer < L && ok; ++layer)
        for (const auto& t : split) {
          std::array<Vec3, 4> p, q;  // actual and straight-prism positions
          for (int k = 0; k < 4; ++k) {
            const int v = t[k].first, l = layer + (t[k].second ? 1 : 0);
            p[k] = node(l, v);
            q[k] = X(v) - (static_cast<double>(l) / L) * depth[static_cast<std::size_t>(v)] * nf_hat;
          }
          const double ref = std::abs(signed_volume(q[0], q[1], q[2], q[3]));
          const double sign = signed_volume(q[0], q[1], q[2], q[3]) > 0 ? 1.0 : -1.0;
          if (!(sign * signed_volume(p[0], p[1], p[2], p[3]) >= o.min_volume_ratio * ref)) {
            ok = false;
            break;
          }
        }
      if (!ok) {
        bad = f;
        for (const int v : {a, b, c}) shrink[static_cast<std::size_t>(v)] = 1;
      }
    }
    if (bad < 0) break;
    bool shrunk = false;
    for (int v = 0; v < nv; ++v)
      if (shrink[static_cast<std::size_t>(v)] && depth[static_cast<std::size_t>(v)] > 0.01 * floor) {
        depth[static_cast<std::size_t>(v)] = std::max(0.01 * floor, 0.8 * depth[static_cast<std::size_t>(v)]);
        shrunk = true;
      }
    if (!shrunk || round == 500)
      throw Error(fmt::format(
          "shell: the tets under triangle {} keep less than min_volume_ratio = {} of their straight-prism volume even "
          "at the smallest depth, 1% of min_depth x thickness = {} (a sharp fold of the surface: lower "
          "min_volume_ratio, or smooth the surface there)",
          bad, o.min_volume_ratio, 0.01 * floor));
    limit_slope();
  }

  Shell out;
  out.surface_vertices = nv;
  out.layers = L;
  out.direction = dir;
  out.depth = depth;
  TetMesh& m = out.mesh;
  m.nodes.resize(static_cast<Eigen::Index>(L + 1) * nv, 3);
  for (int layer = 0; layer <= L; ++layer)
    for (int v = 0; v < nv; ++v) m.nodes.row(static_cast<Eigen::Index>(layer) * nv + v) = node(layer, v).transpose();
  m.tets.resize(3 * L * nf, 4);
  m.region.resize(static_cast<std::size_t>(3 * L * nf));
  Eigen::Index t_out = 0;
  for (int layer = 0; layer < L; ++layer)
    for (Eigen::Index f = 0; f < nf; ++f) {
      const int a = surface.triangles(f, 0), b = surface.triangles(f, 1), c = surface.triangles(f, 2);
      const Vec3 nf_hat = (X(b) - X(a)).cross(X(c) - X(a)).normalized();
      for (const auto& t : prism_split(a, b, c)) {
        std::array<int, 4> idx;
        std::array<Vec3, 4> q;
        for (int k = 0; k < 4; ++k) {
          idx[k] = (layer + (t[k].second ? 1 : 0)) * nv + t[k].first;
          q[k] = X(t[k].first) - (t[k].second ? 1.0 : 0.0) * nf_hat;
        }
        if (signed_volume(q[0], q[1], q[2], q[3]) < 0) std::swap(idx[0], idx[1]);
        for (int k = 0; k < 4; ++k) m.tets(t_out, k) = idx[k];
        m.region[static_cast<std::size_t>(t_out)] = layer;
        ++t_out;
      }
    }
  return out;
}

}  // namespace xpd
