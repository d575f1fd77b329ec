// FaceCutter::split: element splitting for cuts that do not follow mesh faces (Molino, Bao &
// Fedkiw 2004, "A virtual node algorithm for changing mesh topology during simulation").
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <xpd/core/disjoint_sets.hpp>
#include <xpd/core/error.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

namespace {

// A piece of the reference tet, corners in barycentric coordinates (λ1, λ2, λ3), λ0 = 1 − Σ.
using Piece = std::array<Vec3, 4>;

double piece_volume(const Piece& p) { return std::abs((p[1] - p[0]).dot((p[2] - p[0]).cross(p[3] - p[0]))) / 6.0; }

// The triangular prism a0 a1 a2 / b0 b1 b2 (lateral edges a_i b_i, convex) as three tets.
void push_prism(const Vec3& a0, const Vec3& a1, const Vec3& a2, const Vec3& b0, const Vec3& b1, const Vec3& b2,
                std::vector<Piece>& out) {
  out.push_back({a0, a1, a2, b0});
  out.push_back({a1, a2, b0, b1});
  out.push_back({a2, b0, b1, b2});
}

// The part of `p` where the linear function with corner values `value` (of the reference tet)
// times `sign` is ≥ 0, as tets. Every clipped part of a tet by a plane is a tet or a prism.
void clip(const Piece& p, const std::array<double, 4>& value, double sign, std::vector<Piece>& out) {
  double d[4];
  int pos[4], neg[4], np = 0, nn = 0;
  for (int a = 0; a < 4; ++a) {
    const Vec3& l = p[static_cast<size_t>(a)];
    d[a] = sign * (value[0] * (1.0 - l.sum()) + value[1] * l[0] + value[2] * l[1] + value[3] * l[2]);
    if (d[a] >= 0)
      pos[np++] = a;
    else
      neg[nn++] = a;
  }
  if (np == 0) return;
  if (nn == 0) {
    out.push_back(p);
    return;
  }
  auto at = [&](int i) { return p[static_cast<size_t>(i)]; };
  auto edge = [&](int i, int j) { return Vec3(at(i) + d[i] / (d[i] - d[j]) * (at(j) - at(i))); };
  if (np == 1) {
    out.push_back({at(pos[0]), edge(pos[0], neg[0]), edge(pos[0], neg[1]), edge(pos[0], neg[2])});
  } else if (np == 3) {
    push_prism(at(pos[0]), at(pos[1]), at(pos[2]), edge(pos[0], neg[0]), edge(pos[1], neg[0]), edge(pos[2], neg[0]),
               out);
  } else {
    push_prism(at(pos[0]), edge(pos[0], neg[0]), edge(pos[0], neg[1]), at(pos[1]), edge(pos[1], neg[0]),
               edge(pos[1], neg[1]), out);
  }
}

// The volume fraction of the reference tet where every plane keeps its sign.
template <class Planes>
double material_fraction(const Planes& planes) {
  std::vector<Piece> pieces{{Vec3::Zero(), Vec3::UnitX(), Vec3::UnitY(), Vec3::UnitZ()}}, next;
  for (const auto& pl : planes) {
    next.clear();
    for (const Piece& p : pieces) clip(p, pl.value, pl.sign, next);
    pieces.swap(next);
  }
  double v = 0;
  for (const Piece& p : pieces) v += piece_volume(p);
  return v * 6.0;
}

}  // namespace

double FaceCutter::fraction(int t) const {
  if (t < 0 || t >= static_cast<int>(fraction_.size()))
    throw MeshError(fmt::format("FaceCutter::fraction: tet {} out of range ({} tets)", t, fraction_.size()));
  return fraction_[static_cast<size_t>(t)];
}

int FaceCutter::source_tet(int t) const {
  if (t < 0 || t >= static_cast<int>(source_.size()))
    throw MeshError(fmt::format("FaceCutter::source_tet: tet {} out of range ({} tets)", t, source_.size()));
  return source_[static_cast<size_t>(t)];
}

bool FaceCutter::is_real(int t, int a) const {
  if (t < 0 || t >= static_cast<int>(real_.size()) || a < 0 || a > 3)
    throw MeshError(fmt::format("FaceCutter::is_real: tet {} corner {} out of range ({} tets)", t, a, real_.size()));
  return (real_[static_cast<size_t>(t)] >> a) & 1;
}

double FaceCutter::material_margin(int t, const Vec4& w) const {
  (void)fraction(t);  // range check
  double margin = std::numeric_limits<double>::infinity();
  for (const SidePlane& p : planes_[static_cast<size_t>(t)])
    margin = std::min(margin, p.sign * (p.value[0] * w[0] + p.value[1] * w[1] + p.value[2] * w[2] + p.value[3] * w[3]));
  return margin;
}

std::vector<std::vector<int>> FaceCutter::fragments_by_source() const {
  std::vector<std::vector<int>> out(static_cast<size_t>(source_rows_.rows()));
  for (size_t t = 0; t < source_.size(); ++t) out[static_cast<size_t>(source_[t])].push_back(static_cast<int>(t));
  return out;
}

int FaceCutter::fragment_holding(int t, const Vec4& w, const std::vector<std::vector<int>>& by_source) const {
  const int s = source_tet(t);
  if (static_cast<size_t>(s) >= by_source.size())
    throw MeshError("FaceCutter::fragment_holding: the fragment lists are not this mesh's");
  int best = t;
  double best_margin = -std::numeric_limits<double>::infinity();
  for (int u : by_source[static_cast<size_t>(s)]) {
    const double m = material_margin(u, w);
    if (m > best_margin) {
      best = u;
      best_margin = m;
    }
  }
  return best;
}

std::vector<int> FaceCutter::tets_inside(const CutSurface& surface) const {
  std::vector<signed char> side(static_cast<size_t>(mesh_.nodes.rows()), 0);  // 0 unknown, 1 inside, −1 not
  std::vector<int> out;
  for (int t = 0; t < mesh_.tets.rows(); ++t) {
    bool inside = true;
    for (int a = 0; a < 4 && inside; ++a) {
      if (!is_real(t, a)) continue;
      const int v = mesh_.tets(t, a);
      signed char& s = side[static_cast<size_t>(v)];
      if (s == 0) {
        const double phi = surface.side(mesh_.nodes.row(v).transpose());
        s = std::abs(phi) >= snap_ && phi < 0 ? 1 : -1;  // split() snaps |φ| < snap to the positive side
      }
      inside = s == 1;
    }
    if (inside) out.push_back(t);
  }
  return out;
}

CutEvent FaceCutter::split(const CutSurface& surface) {
  if (!cut_.empty()) throw MeshError("split: the mesh has face cuts; face cuts and element splits do not mix");
  const int nt = static_cast<int>(mesh_.tets.rows());
  const int nv = static_cast<int>(mesh_.nodes.rows());
  CutEvent ev;
  ev.nodes_before = nv;
  ev.tets_before = nt;

  // Each node's side, snapped off the surface so that no fragment is a sliver: a node within
  // 5% of an edge of the surface counts as a little on its positive side.
  std::vector<double> phi(static_cast<size_t>(nv));
  for (int v = 0; v < nv; ++v) {
    double s = surface.side(mesh_.nodes.row(v).transpose());
    if (!std::isfinite(s)) throw MeshError(fmt::format("split: the cut surface's side of node {} is not finite", v));
    if (std::abs(s) < snap_) s = snap_;
    phi[static_cast<size_t>(v)] = s;
  }
  // An edge crosses when the surface meets it or passes within the snap of an end (a snapped
  // node may lie a little on the far side).
  auto crossing = [&](int i, int j) {
    return surface.crosses(mesh_.nodes.row(i).transpose(), mesh_.nodes.row(j).transpose(), snap_);
  };

  // The tets cut through: real corners on both sides, every edge between the sides crossing.
  std::vector<std::pair<int, unsigned char>> cut;  // (tet, positive real corners)
  for (int t = 0; t < nt; ++t) {
    const unsigned char real = real_[static_cast<size_t>(t)];
    unsigned char pos = 0;
    for (int a = 0; a < 4; ++a)
      if (((real >> a) & 1) && phi[static_cast<size_t>(mesh_.tets(t, a))] >= 0)
        pos |= static_cast<unsigned char>(1 << a);
    const auto neg = static_cast<unsigned char>(real & ~pos);
    if (pos == 0 || neg == 0) continue;
    bool through = true;
    for (int a = 0; a < 4 && through; ++a)
      for (int b = 0; b < 4 && through; ++b)
        if (((pos >> a) & 1) && ((neg >> b) & 1)) through = crossing(mesh_.tets(t, a), mesh_.tets(t, b));
    if (through) cut.emplace_back(t, pos);
  }
  ev.tets_split = static_cast<int>(cut.size());
  if (cut.empty()) return ev;
  split_elements_ = true;

  // The fragments: the tet keeps the positive side, a new tet takes the negative one.
  std::vector<int> old_index(static_cast<size_t>(nt), -1);
  auto record = [&](int t) {
    if (old_index[static_cast<size_t>(t)] >= 0) return;
    old_index[static_cast<size_t>(t)] = static_cast<int>(ev.changed_tets.size());
    ev.changed_tets.push_back(t);
    ev.old_tets.push_back(mesh_.tets.row(t));
    ev.old_fraction.push_back(fraction_[static_cast<size_t>(t)]);
  };
  const int added = static_cast<int>(cut.size());
  mesh_.tets.conservativeResize(nt + added, Eigen::NoChange);
  if (mesh_.region.size() == static_cast<size_t>(nt)) mesh_.region.resize(static_cast<size_t>(nt + added));
  for (int k = 0; k < added; ++k) {
    const auto [t, pos] = cut[static_cast<size_t>(k)];
    const int u = nt + k;
    record(t);
    mesh_.tets.row(u) = mesh_.tets.row(t);
    if (mesh_.region.size() == static_cast<size_t>(nt + added))
      mesh_.region[static_cast<size_t>(u)] = mesh_.region[static_cast<size_t>(t)];
    SidePlane plane{};
    for (int a = 0; a < 4; ++a) plane.value[static_cast<size_t>(a)] = phi[static_cast<size_t>(mesh_.tets(t, a))];
    source_.push_back(source_[static_cast<size_t>(t)]);
    real_.push_back(static_cast<unsigned char>(real_[static_cast<size_t>(t)] & ~pos));
    real_[static_cast<size_t>(t)] = pos;
    planes_.push_back(planes_[static_cast<size_t>(t)]);
    plane.sign = -1.0;
    planes_.back().push_back(plane);
    plane.sign = 1.0;
    planes_[static_cast<size_t>(t)].push_back(plane);
    fraction_.push_back(material_fraction(planes_.back()));
    fraction_[static_cast<size_t>(t)] = material_fraction(planes_[static_cast<size_t>(t)]);
    ev.tet_copy_of.push_back(t);
    for (int a = 0; a < 4; ++a) node_tets_[static_cast<size_t>(mesh_.tets(u, a))].push_back(u);
  }

  // Face connectivity of two fragments: their source tets share a face, they name the same nodes
  // on it, and a corner of it is real in both (the material continues through the face).
  auto connected = [&](int a, int b) {
    const int sa = source_[static_cast<size_t>(a)], sb = source_[static_cast<size_t>(b)];
    if (sa == sb) return false;
    int fa[4], fb[4], shared = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        if (source_rows_(sa, i) == source_rows_(sb, j)) {
          fa[shared] = i;
          fb[shared] = j;
          ++shared;
        }
    if (shared != 3) return false;
    bool real_in_both = false;
    for (int k = 0; k < 3; ++k) {
      if (mesh_.tets(a, fa[k]) != mesh_.tets(b, fb[k])) return false;
      real_in_both = real_in_both ||
                     (((real_[static_cast<size_t>(a)] >> fa[k]) & 1) && ((real_[static_cast<size_t>(b)] >> fb[k]) & 1));
    }
    return real_in_both;
  };

  std::vector<int> nodes;
  for (const auto& c : cut)
    for (int a = 0; a < 4; ++a) nodes.push_back(mesh_.tets(c.first, a));
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  DisjointSets sides;
  for (int v : nodes) {
    std::vector<int> T = node_tets_[static_cast<size_t>(v)];
    std::sort(T.begin(), T.end());
    const int m = static_cast<int>(T.size());
    sides.reset(m);
    for (int i = 0; i < m; ++i)
      for (int j = i + 1; j < m; ++j)
        if (connected(T[static_cast<size_t>(i)], T[static_cast<size_t>(j)])) sides.unite(i, j);
    // T is sorted, so each component's root (its smallest index) is its lowest tet, and the first
    // component keeps v; the others get copies in the order of their lowest tets.
    std::vector<int> kept;
    std::vector<int> copy_of_root(static_cast<size_t>(m), -1);
    for (int i = 0; i < m; ++i) {
      const int r = sides.find(i);
      const int t = T[static_cast<size_t>(i)];
      if (r == 0) {
        kept.push_back(t);
        continue;
      }
      int& copy = copy_of_root[static_cast<size_t>(r)];
      if (copy < 0) {
        copy = static_cast<int>(mesh_.nodes.rows());
        mesh_.nodes.conservativeResize(copy + 1, Eigen::NoChange);
        mesh_.nodes.row(copy) = mesh_.nodes.row(v);
        ev.copy_of.push_back(v);
        origin_.push_back(origin_[static_cast<size_t>(v)]);
        node_tets_.emplace_back();
      }
      if (t < nt) record(t);
      for (int a = 0; a < 4; ++a)
        if (mesh_.tets(t, a) == v) mesh_.tets(t, a) = copy;
      node_tets_[static_cast<size_t>(copy)].push_back(t);
    }
    node_tets_[static_cast<size_t>(v)] = std::move(kept);
  }

  // changed_tets ascending, with their old rows and fractions.
  std::vector<size_t> order(ev.changed_tets.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ev.changed_tets[a] < ev.changed_tets[b]; });
  CutEvent sorted = ev;
  for (size_t k = 0; k < order.size(); ++k) {
    sorted.changed_tets[k] = ev.changed_tets[order[k]];
    sorted.old_tets[k] = ev.old_tets[order[k]];
    sorted.old_fraction[k] = ev.old_fraction[order[k]];
  }
  return sorted;
}

}  // namespace xpd
