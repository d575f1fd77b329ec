#include <fmt/format.h>

#include <Eigen/Geometry>
#include <algorithm>
#include <array>
#include <numeric>
#include <optional>
#include <xpd/core/disjoint_sets.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

namespace {

struct FaceRec {
  std::array<int, 3> key;  // sorted node ids
  int tet;
  bool operator<(const FaceRec& o) const { return key != o.key ? key < o.key : tet < o.tet; }
};

// All tet faces sorted by their node triple: equal neighbours are shared faces.
std::vector<FaceRec> sorted_faces(const Tets& tets) {
  std::vector<FaceRec> f;
  f.reserve(4 * static_cast<size_t>(tets.rows()));
  for (int t = 0; t < tets.rows(); ++t)
    for (int a = 0; a < 4; ++a) {
      std::array<int, 3> k{};
      int q = 0;
      for (int b = 0; b < 4; ++b)
        if (b != a) k[static_cast<size_t>(q++)] = tets(t, b);
      std::sort(k.begin(), k.end());
      f.push_back({k, t});
    }
  std::sort(f.begin(), f.end());
  return f;
}

int shared_nodes(const Tets& tets, int a, int b) {
  int s = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      if (tets(a, i) == tets(b, j)) ++s;
  return s;
}

}  // namespace

FaceCutter::FaceCutter(TetMesh mesh) : mesh_(std::move(mesh)) {
  (void)boundary_faces(mesh_.tets);  // throws MeshError for a face in more than two tets
  node_tets_.assign(static_cast<size_t>(mesh_.nodes.rows()), {});
  origin_.resize(static_cast<size_t>(mesh_.nodes.rows()));
  for (size_t v = 0; v < origin_.size(); ++v) origin_[v] = static_cast<int>(v);
  for (int t = 0; t < mesh_.tets.rows(); ++t)
    for (int a = 0; a < 4; ++a) node_tets_[static_cast<size_t>(mesh_.tets(t, a))].push_back(t);
  const auto nt = static_cast<size_t>(mesh_.tets.rows());
  source_rows_ = mesh_.tets;
  source_.resize(nt);
  std::iota(source_.begin(), source_.end(), 0);
  real_.assign(nt, 0xF);
  planes_.assign(nt, {});
  fraction_.assign(nt, 1.0);
  snap_ = nt > 0 ? 0.05 * mean_edge_length(mesh_.nodes, mesh_.tets) : 0.0;
}

int FaceCutter::original(int node) const {
  if (node < 0 || node >= static_cast<int>(origin_.size()))
    throw MeshError(
        fmt::format("FaceCutter::original: node {} out of range (the mesh has {} nodes)", node, origin_.size()));
  return origin_[static_cast<size_t>(node)];
}

bool FaceCutter::is_cut(int t0, int t1) const {
  const TetPair p{std::min(t0, t1), std::max(t0, t1)};
  return std::binary_search(cut_.begin(), cut_.end(), p);
}

CutEvent FaceCutter::cut(const std::vector<TetPair>& faces) {
  const int nt = static_cast<int>(mesh_.tets.rows());
  if (split_elements_)
    throw MeshError("cut: the mesh has split elements (an embedded cut); face cuts and element splits do not mix");
  // Validate everything before changing anything.
  std::vector<TetPair> fresh;
  for (const auto& [a, b] : faces) {
    if (a < 0 || b < 0 || a >= nt || b >= nt || a == b)
      throw MeshError(fmt::format("cut: face ({}, {}) does not name two distinct tets of {}", a, b, nt));
    if (is_cut(a, b)) continue;
    if (shared_nodes(mesh_.tets, a, b) != 3)
      throw MeshError(fmt::format("cut: tets {} and {} do not share a face", a, b));
    fresh.emplace_back(std::min(a, b), std::max(a, b));
  }
  std::sort(fresh.begin(), fresh.end());
  fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());

  CutEvent ev;
  ev.nodes_before = static_cast<int>(mesh_.nodes.rows());
  ev.faces_cut = static_cast<int>(fresh.size());
  if (fresh.empty()) return ev;
  std::vector<TetPair> merged;
  merged.reserve(cut_.size() + fresh.size());
  std::merge(cut_.begin(), cut_.end(), fresh.begin(), fresh.end(), std::back_inserter(merged));
  cut_.swap(merged);

  // Nodes of the newly separated faces.
  std::vector<int> nodes;
  for (const auto& [a, b] : fresh)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        if (mesh_.tets(a, i) == mesh_.tets(b, j)) nodes.push_back(mesh_.tets(a, i));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());

  std::vector<std::pair<int, Eigen::RowVector4i>> old;  // first old row per changed tet
  DisjointSets sides;
  for (int v : nodes) {
    const std::vector<int> T = node_tets_[static_cast<size_t>(v)];
    const int m = static_cast<int>(T.size());
    sides.reset(m);
    for (int i = 0; i < m; ++i)
      for (int j = i + 1; j < m; ++j) {
        const int a = T[static_cast<size_t>(i)], b = T[static_cast<size_t>(j)];
        if (shared_nodes(mesh_.tets, a, b) == 3 && !is_cut(a, b)) sides.unite(i, j);
      }
    // Components; the one with the lowest tet id keeps v.
    std::vector<int> root_of(static_cast<size_t>(m));
    for (int i = 0; i < m; ++i) root_of[static_cast<size_t>(i)] = sides.find(i);
    int keep = -1, keep_tet = nt;
    for (int i = 0; i < m; ++i)
      if (T[static_cast<size_t>(i)] < keep_tet) {
        keep_tet = T[static_cast<size_t>(i)];
        keep = root_of[static_cast<size_t>(i)];
      }
    std::vector<int> roots;
    for (int i = 0; i < m; ++i)
      if (root_of[static_cast<size_t>(i)] != keep) roots.push_back(root_of[static_cast<size_t>(i)]);
    std::sort(roots.begin(), roots.end());
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    if (roots.empty()) continue;
    std::vector<int> kept;
    for (int i = 0; i < m; ++i)
      if (root_of[static_cast<size_t>(i)] == keep) kept.push_back(T[static_cast<size_t>(i)]);
    // Order the copies by their component's lowest tet (T is not sorted after earlier splits).
    std::vector<std::pair<int, int>> comps;  // (lowest tet, root)
    for (int r : roots) {
      int lo = nt;
      for (int i = 0; i < m; ++i)
        if (root_of[static_cast<size_t>(i)] == r) lo = std::min(lo, T[static_cast<size_t>(i)]);
      comps.emplace_back(lo, r);
    }
    std::sort(comps.begin(), comps.end());
    for (const auto& [lo, r] : comps) {
      (void)lo;
      const int copy = static_cast<int>(mesh_.nodes.rows());
      mesh_.nodes.conservativeResize(copy + 1, Eigen::NoChange);
      mesh_.nodes.row(copy) = mesh_.nodes.row(v);
      ev.copy_of.push_back(v);
      origin_.push_back(origin_[static_cast<size_t>(v)]);
      node_tets_.emplace_back();
      for (int i = 0; i < m; ++i) {
        if (root_of[static_cast<size_t>(i)] != r) continue;
        const int t = T[static_cast<size_t>(i)];
        if (std::none_of(old.begin(), old.end(), [&](const auto& o) { return o.first == t; }))
          old.emplace_back(t, mesh_.tets.row(t));
        for (int a = 0; a < 4; ++a)
          if (mesh_.tets(t, a) == v) mesh_.tets(t, a) = copy;
        node_tets_.back().push_back(t);
      }
    }
    node_tets_[static_cast<size_t>(v)] = kept;
  }
  std::sort(old.begin(), old.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [t, row] : old) {
    ev.changed_tets.push_back(t);
    ev.old_tets.push_back(row);
  }
  return ev;
}

std::vector<TetPair> faces_across_plane(const TetMesh& mesh, const Vec3& normal, double offset, const Vec3& order) {
  const auto faces = sorted_faces(mesh.tets);
  auto side = [&](int t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += mesh.nodes.row(mesh.tets(t, a)).transpose();
    return normal.dot(c / 4.0) - offset;
  };
  std::vector<std::pair<double, TetPair>> keyed;
  for (size_t i = 0; i + 1 < faces.size(); ++i) {
    if (faces[i].key != faces[i + 1].key) continue;
    const int a = faces[i].tet, b = faces[i + 1].tet;
    const double sa = side(a), sb = side(b);
    if (!((sa < 0 && sb > 0) || (sa > 0 && sb < 0))) continue;
    Vec3 c = Vec3::Zero();
    for (int k : faces[i].key) c += mesh.nodes.row(k).transpose();
    keyed.emplace_back(order.dot(c / 3.0), TetPair{std::min(a, b), std::max(a, b)});
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<TetPair> out;
  out.reserve(keyed.size());
  for (const auto& k : keyed) out.push_back(k.second);
  return out;
}

std::vector<TetPair> faces_across_swept_path(const TetMesh& mesh, const SweptPath& path) {
  const std::vector<SweptTriangle> tris = swept_triangles(path);  // MeshError for a malformed path
  Eigen::AlignedBox3d box;
  for (const SweptTriangle& tri : tris)
    for (const Vec3& v : tri.v) box.extend(v);
  const auto faces = sorted_faces(mesh.tets);
  auto centroid = [&](int t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += mesh.nodes.row(mesh.tets(t, a)).transpose();
    return Vec3(c / 4.0);
  };
  std::vector<std::pair<double, TetPair>> keyed;
  for (size_t i = 0; i + 1 < faces.size(); ++i) {
    if (faces[i].key != faces[i + 1].key) continue;
    const int ta = faces[i].tet, tb = faces[i + 1].tet;
    const Vec3 a = centroid(ta), b = centroid(tb);
    Eigen::AlignedBox3d seg(a.cwiseMin(b), a.cwiseMax(b));
    if (!seg.intersects(box)) continue;
    // The first triangle crossed (a segment through an edge between two triangles is one face).
    for (const SweptTriangle& tri : tris) {
      const auto hit = segment_triangle(a, b, tri.v[0], tri.v[1], tri.v[2]);
      if (!hit) continue;
      const double u = (*hit)[1], v = (*hit)[2];
      keyed.emplace_back((1 - u - v) * tri.arc[0] + u * tri.arc[1] + v * tri.arc[2],
                         TetPair{std::min(ta, tb), std::max(ta, tb)});
      break;
    }
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<TetPair> out;
  out.reserve(keyed.size());
  for (const auto& k : keyed) out.push_back(k.second);
  return out;
}

ExcisionEvent FaceCutter::excise(const std::vector<int>& tets) {
  const int nt = static_cast<int>(mesh_.tets.rows());
  ExcisionEvent ev;
  ev.removed = tets;
  std::sort(ev.removed.begin(), ev.removed.end());
  for (size_t k = 0; k < ev.removed.size(); ++k) {
    if (ev.removed[k] < 0 || ev.removed[k] >= nt)
      throw MeshError(fmt::format("excise: tet {} out of range (the mesh has {} tets)", ev.removed[k], nt));
    if (k > 0 && ev.removed[k] == ev.removed[k - 1])
      throw MeshError(fmt::format("excise: tet {} listed twice", ev.removed[k]));
  }
  if (static_cast<int>(ev.removed.size()) == nt) throw MeshError("excise: every tet of the mesh would be removed");
  ev.tet_map.assign(static_cast<size_t>(nt), 0);
  for (int t : ev.removed) {
    ev.tet_map[static_cast<size_t>(t)] = -1;
    ev.removed_rows.push_back(mesh_.tets.row(t));
  }
  Tets kept(nt - static_cast<int>(ev.removed.size()), 4);
  int next = 0;
  for (int t = 0; t < nt; ++t)
    if (ev.tet_map[static_cast<size_t>(t)] == 0) {
      ev.tet_map[static_cast<size_t>(t)] = next;
      kept.row(next++) = mesh_.tets.row(t);
    }
  // Separated faces follow their tets (the map is increasing: pairs stay sorted with t0 < t1).
  std::vector<TetPair> cut;
  for (const auto& [a, b] : cut_)
    if (ev.tet_map[static_cast<size_t>(a)] >= 0 && ev.tet_map[static_cast<size_t>(b)] >= 0)
      cut.emplace_back(ev.tet_map[static_cast<size_t>(a)], ev.tet_map[static_cast<size_t>(b)]);
  std::vector<std::vector<int>> node_tets(node_tets_.size());
  for (int t = 0; t < kept.rows(); ++t)
    for (int a = 0; a < 4; ++a) node_tets[static_cast<size_t>(kept(t, a))].push_back(t);
  for (size_t v = 0; v < node_tets.size(); ++v)
    if (node_tets[v].empty() && !node_tets_[v].empty()) ev.orphaned.push_back(static_cast<int>(v));
  mesh_.tets = std::move(kept);
  if (mesh_.region.size() == static_cast<size_t>(nt)) {
    std::vector<int> region;
    for (int t = 0; t < nt; ++t)
      if (ev.tet_map[static_cast<size_t>(t)] >= 0) region.push_back(mesh_.region[static_cast<size_t>(t)]);
    mesh_.region = std::move(region);
  }
  cut_ = std::move(cut);
  node_tets_ = std::move(node_tets);
  // The split elements' records follow their tets.
  auto follow = [&](auto& per_tet) {
    size_t k = 0;
    for (size_t t = 0; t < static_cast<size_t>(nt); ++t)
      if (ev.tet_map[t] >= 0) per_tet[k++] = std::move(per_tet[t]);
    per_tet.resize(k);
  };
  follow(source_);
  follow(real_);
  follow(planes_);
  follow(fraction_);
  return ev;
}

std::string check_cut_mesh(const TetMesh& mesh, bool allow_unused) {
  const auto& x = mesh.nodes;
  std::vector<char> used(static_cast<size_t>(x.rows()), 0);
  for (int t = 0; t < mesh.tets.rows(); ++t) {
    for (int a = 0; a < 4; ++a) {
      const int i = mesh.tets(t, a);
      if (i < 0 || i >= x.rows()) return fmt::format("tet {} has node {} out of range", t, i);
      used[static_cast<size_t>(i)] = 1;
    }
    const double v =
        signed_volume(x.row(mesh.tets(t, 0)), x.row(mesh.tets(t, 1)), x.row(mesh.tets(t, 2)), x.row(mesh.tets(t, 3)));
    if (!(v > 0)) return fmt::format("tet {} has volume {}", t, v);
  }
  for (size_t i = 0; i < used.size() && !allow_unused; ++i)
    if (!used[i]) return fmt::format("node {} is used by no tet", i);
  try {
    (void)boundary_faces(mesh.tets);  // a face in more than two tets, or two tets disagreeing on it
  } catch (const MeshError& e) {
    return e.what();
  }
  return {};
}

}  // namespace xpd
