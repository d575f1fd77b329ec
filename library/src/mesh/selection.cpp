#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <numbers>
#include <xpd/core/error.hpp>
#include <xpd/mesh/selection.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {
namespace {

using Face = std::array<int, 3>;

void sort_unique(std::vector<int>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

Vec3 node(const TetMesh& mesh, int i) { return mesh.nodes.row(i).transpose(); }

bool inside(const BoxSelection& b, const Vec3& x) {
  return (x.array() >= b.min.array()).all() && (x.array() <= b.max.array()).all();
}
bool inside(const SphereSelection& s, const Vec3& x) { return (x - s.center).squaredNorm() <= s.radius * s.radius; }
bool inside(const HalfSpaceSelection& h, const Vec3& x) { return h.normal.dot(x) <= h.offset; }
bool inside(const CapsuleSelection& c, const Vec3& x) {
  const Vec3 d = c.b - c.a;
  const double len2 = d.squaredNorm();
  const double s = len2 > 0 ? std::clamp((x - c.a).dot(d) / len2, 0.0, 1.0) : 0.0;
  return (x - (c.a + s * d)).squaredNorm() <= c.radius * c.radius;
}

// Evaluation context: the named map plus the chain of names being evaluated (cycle detection).
struct Evaluator {
  const SelectionMap& named;
  const TetMesh& mesh;
  std::vector<std::string> stack;

  const Selection& lookup(const std::string& name) {
    static const Selection all = AllSelection{};
    if (name == "all") return all;
    const auto it = named.find(name);
    if (it == named.end()) throw Error("selection: unknown selection name '" + name + "'");
    if (std::find(stack.begin(), stack.end(), name) != stack.end())
      throw Error("selection: reference cycle through '" + name + "'");
    return it->second;
  }

  std::vector<int> nodes_of(const std::string& name) {
    const Selection& s = lookup(name);
    stack.push_back(name);
    std::vector<int> r = nodes(s);
    stack.pop_back();
    return r;
  }
  std::vector<int> tets_of(const std::string& name) {
    const Selection& s = lookup(name);
    stack.push_back(name);
    std::vector<int> r = tets(s);
    stack.pop_back();
    return r;
  }

  template <class Region>
  std::vector<int> nodes_inside(const Region& region) const {
    std::vector<int> r;
    for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
      if (inside(region, node(mesh, static_cast<int>(i)))) r.push_back(static_cast<int>(i));
    return r;
  }
  template <class Region>
  std::vector<int> tets_inside(const Region& region) const {
    std::vector<int> r;
    for (Eigen::Index e = 0; e < mesh.tets.rows(); ++e) {
      Vec3 c = Vec3::Zero();
      for (int k = 0; k < 4; ++k) c += node(mesh, mesh.tets(e, k));
      if (inside(region, c / 4.0)) r.push_back(static_cast<int>(e));
    }
    return r;
  }
  // Tets whose four nodes are all in the sorted node list.
  std::vector<int> tets_with_all_nodes(const std::vector<int>& sorted_nodes) const {
    std::vector<char> mark(static_cast<std::size_t>(mesh.nodes.rows()), 0);
    for (int i : sorted_nodes) mark[static_cast<std::size_t>(i)] = 1;
    std::vector<int> r;
    for (Eigen::Index e = 0; e < mesh.tets.rows(); ++e) {
      bool all = true;
      for (int k = 0; k < 4 && all; ++k) all = mark[static_cast<std::size_t>(mesh.tets(e, k))] != 0;
      if (all) r.push_back(static_cast<int>(e));
    }
    return r;
  }

  std::vector<int> surface_nodes(const SurfaceSelection& s) {
    const Triangles tris = boundary_faces(mesh.tets);
    const auto n = static_cast<std::size_t>(mesh.nodes.rows());
    // Area-weighted outward normals (the cross product's length is twice the area).
    std::vector<Vec3> normal(n, Vec3::Zero());
    std::vector<char> on_boundary(n, 0);
    for (Eigen::Index f = 0; f < tris.rows(); ++f) {
      const Vec3 a = node(mesh, tris(f, 0)), b = node(mesh, tris(f, 1)), c = node(mesh, tris(f, 2));
      const Vec3 w = (b - a).cross(c - a);
      for (int k = 0; k < 3; ++k) {
        normal[static_cast<std::size_t>(tris(f, k))] += w;
        on_boundary[static_cast<std::size_t>(tris(f, k))] = 1;
      }
    }
    std::vector<char> allowed;
    if (!s.within.empty()) {
      allowed.assign(n, 0);
      for (int i : nodes_of(s.within)) allowed[static_cast<std::size_t>(i)] = 1;
    }
    const double cos_max = s.cone ? std::cos(s.cone->max_angle_deg * std::numbers::pi / 180.0) : -2.0;
    std::vector<int> r;
    for (std::size_t i = 0; i < n; ++i) {
      if (!on_boundary[i] || (!allowed.empty() && !allowed[i])) continue;
      if (s.cone) {
        const double len = normal[i].norm();
        if (len == 0 || normal[i].dot(s.cone->direction) < cos_max * len * s.cone->direction.norm()) continue;
      }
      r.push_back(static_cast<int>(i));
    }
    return r;
  }

  std::vector<int> checked_indices(const IndexSelection& s) const {
    std::vector<int> r = s.nodes;
    for (int i : r)
      if (i < 0 || i >= mesh.nodes.rows())
        throw Error("selection: node index " + std::to_string(i) + (s.file.empty() ? "" : " (from " + s.file + ")") +
                    " out of range [0, " + std::to_string(mesh.nodes.rows()) + ")");
    sort_unique(r);
    return r;
  }

  // Combines sorted lists of the operands.
  template <class Get>
  std::vector<int> combine(const SetSelection& s, Get get) {
    if (s.operands.empty()) return {};
    std::vector<int> acc = get(s.operands.front());
    for (std::size_t k = 1; k < s.operands.size(); ++k) {
      const std::vector<int> other = get(s.operands[k]);
      std::vector<int> out;
      switch (s.op) {
        case SetSelection::Op::Union:
          std::set_union(acc.begin(), acc.end(), other.begin(), other.end(), std::back_inserter(out));
          break;
        case SetSelection::Op::Intersection:
          std::set_intersection(acc.begin(), acc.end(), other.begin(), other.end(), std::back_inserter(out));
          break;
        case SetSelection::Op::Difference:
          std::set_difference(acc.begin(), acc.end(), other.begin(), other.end(), std::back_inserter(out));
          break;
      }
      acc = std::move(out);
    }
    return acc;
  }

  std::vector<int> nodes(const Selection& selection) {
    return std::visit(
        [&](const auto& s) -> std::vector<int> {
          using T = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<T, AllSelection>) {
            std::vector<int> r(static_cast<std::size_t>(mesh.nodes.rows()));
            for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int>(i);
            return r;
          } else if constexpr (std::is_same_v<T, SurfaceSelection>) {
            return surface_nodes(s);
          } else if constexpr (std::is_same_v<T, IndexSelection>) {
            return checked_indices(s);
          } else if constexpr (std::is_same_v<T, SetSelection>) {
            return combine(s, [&](const std::string& name) { return nodes_of(name); });
          } else {
            return nodes_inside(s);
          }
        },
        selection);
  }

  std::vector<int> tets(const Selection& selection) {
    return std::visit(
        [&](const auto& s) -> std::vector<int> {
          using T = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<T, AllSelection>) {
            std::vector<int> r(static_cast<std::size_t>(mesh.tets.rows()));
            for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int>(i);
            return r;
          } else if constexpr (std::is_same_v<T, SurfaceSelection> || std::is_same_v<T, IndexSelection>) {
            return tets_with_all_nodes(nodes(selection));
          } else if constexpr (std::is_same_v<T, SetSelection>) {
            return combine(s, [&](const std::string& name) { return tets_of(name); });
          } else {
            return tets_inside(s);
          }
        },
        selection);
  }
};

}  // namespace

std::vector<int> select_nodes(const Selection& selection, const SelectionMap& named, const TetMesh& mesh) {
  return Evaluator{named, mesh, {}}.nodes(selection);
}
std::vector<int> select_nodes(const std::string& name, const SelectionMap& named, const TetMesh& mesh) {
  return Evaluator{named, mesh, {}}.nodes_of(name);
}
std::vector<int> select_tets(const Selection& selection, const SelectionMap& named, const TetMesh& mesh) {
  return Evaluator{named, mesh, {}}.tets(selection);
}
std::vector<int> select_tets(const std::string& name, const SelectionMap& named, const TetMesh& mesh) {
  return Evaluator{named, mesh, {}}.tets_of(name);
}

std::vector<double> lumped_boundary_area(const TetMesh& mesh, const std::vector<int>& nodes) {
  std::vector<double> area(nodes.size(), 0.0);
  const auto slot = [&](int i) -> std::ptrdiff_t {
    const auto it = std::lower_bound(nodes.begin(), nodes.end(), i);
    return (it != nodes.end() && *it == i) ? it - nodes.begin() : -1;
  };
  const Triangles tris = boundary_faces(mesh.tets);
  for (Eigen::Index f = 0; f < tris.rows(); ++f) {
    const std::ptrdiff_t s0 = slot(tris(f, 0)), s1 = slot(tris(f, 1)), s2 = slot(tris(f, 2));
    if (s0 < 0 || s1 < 0 || s2 < 0) continue;
    const Vec3 a = node(mesh, tris(f, 0)), b = node(mesh, tris(f, 1)), c = node(mesh, tris(f, 2));
    const double third = (b - a).cross(c - a).norm() / 6.0;
    area[static_cast<std::size_t>(s0)] += third;
    area[static_cast<std::size_t>(s1)] += third;
    area[static_cast<std::size_t>(s2)] += third;
  }
  return area;
}

}  // namespace xpd
