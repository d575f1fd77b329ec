#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/bcc_lattice.hpp>

namespace xpd {
namespace {

// Node offsets of the 12 tet templates (axis a, edge e), in doubled integer coordinates relative
// to 2·c (corners even, centres odd); `center` tells which kind each node is. Orientation is
// fixed once per template from the exact integer determinant.
struct Template {
  std::array<Eigen::Vector3i, 4> offset;  // integer cell offset of the node (corner or centre)
  std::array<bool, 4> center;
};

const std::array<Template, 12>& templates() {
  static const std::array<Template, 12> table = [] {
    std::array<Template, 12> t{};
    static constexpr std::array<std::array<int, 2>, 4> square{{{0, 0}, {1, 0}, {1, 1}, {0, 1}}};
    for (int a = 0; a < 3; ++a) {
      const int b = (a + 1) % 3, d = (a + 2) % 3;
      for (int e = 0; e < 4; ++e) {
        Template& tp = t[std::size_t(4 * a + e)];
        tp.offset[0] = Eigen::Vector3i::Zero();
        tp.offset[1] = Eigen::Vector3i::Unit(a);
        for (int s = 0; s < 2; ++s) {
          const auto& sq = square[std::size_t((e + s) % 4)];
          Eigen::Vector3i o = Eigen::Vector3i::Unit(a);
          o[b] += sq[0];
          o[d] += sq[1];
          tp.offset[std::size_t(2 + s)] = o;
        }
        tp.center = {true, true, false, false};
        std::array<Eigen::Vector3i, 4> x2;  // doubled coordinates
        for (int k = 0; k < 4; ++k)
          x2[std::size_t(k)] = 2 * tp.offset[std::size_t(k)] +
                               (tp.center[std::size_t(k)] ? Eigen::Vector3i::Ones() : Eigen::Vector3i::Zero());
        const Eigen::Vector3i e1 = x2[1] - x2[0], e2 = x2[2] - x2[0], e3 = x2[3] - x2[0];
        if (e1.dot(e2.cross(e3)) < 0) {
          std::swap(tp.offset[2], tp.offset[3]);
          std::swap(tp.center[2], tp.center[3]);
        }
      }
    }
    return t;
  }();
  return table;
}

}  // namespace

Vec3 BccGrid::node_position(std::int64_t node) const {
  const bool is_center = node >= num_corners();
  const std::int64_t local = is_center ? node - num_corners() : node;
  const std::int64_t nx = cells[0] + (is_center ? 0 : 1), ny = cells[1] + (is_center ? 0 : 1);
  const double i = double(local % nx), j = double((local / nx) % ny), k = double(local / (nx * ny));
  const double shift = is_center ? 0.5 : 0.0;
  return origin + cell_size * Vec3(i + shift, j + shift, k + shift);
}

bool BccGrid::tet_exists(std::int64_t id) const {
  if (id < 0 || id >= num_tet_ids()) return false;
  const std::int64_t cell = id / 12;
  const int a = int((id % 12) / 4);
  const std::int64_t c[3] = {cell % cells[0], (cell / cells[0]) % cells[1], cell / (std::int64_t(cells[0]) * cells[1])};
  return c[a] + 1 < cells[a];
}

std::array<std::int64_t, 4> BccGrid::tet_nodes(std::int64_t id) const {
  const std::int64_t cell = id / 12;
  const Template& tp = templates()[std::size_t(id % 12)];
  const int ci = int(cell % cells[0]), cj = int((cell / cells[0]) % cells[1]),
            ck = int(cell / (std::int64_t(cells[0]) * cells[1]));
  std::array<std::int64_t, 4> n{};
  for (std::size_t k = 0; k < 4; ++k) {
    const Eigen::Vector3i& o = tp.offset[k];
    n[k] = tp.center[k] ? center_index(ci + o[0], cj + o[1], ck + o[2]) : corner_index(ci + o[0], cj + o[1], ck + o[2]);
  }
  return n;
}

std::array<Vec3, 4> BccGrid::tet_positions(std::int64_t id) const {
  const std::int64_t cell = id / 12;
  const Template& tp = templates()[std::size_t(id % 12)];
  const Vec3 c(double(cell % cells[0]), double((cell / cells[0]) % cells[1]),
               double(cell / (std::int64_t(cells[0]) * cells[1])));
  std::array<Vec3, 4> x;
  for (std::size_t k = 0; k < 4; ++k)
    x[k] = origin + cell_size * (c + tp.offset[k].cast<double>() + Vec3::Constant(tp.center[k] ? 0.5 : 0.0));
  return x;
}

Eigen::Vector3i BccGrid::cell_of(const Vec3& p) const {
  Eigen::Vector3i c;
  for (int a = 0; a < 3; ++a) {
    const double x = std::floor((p[a] - origin[a]) / cell_size);
    c[a] = x < 0 ? 0 : (x >= cells[a] - 1 ? cells[a] - 1 : int(x));
  }
  return c;
}

BccGrid BccGrid::covering(const Eigen::AlignedBox3d& box, double h) {
  if (box.isEmpty() || !box.sizes().allFinite()) throw MeshError("BCC lattice: empty or non-finite bounding box");
  if (!(h > 0) || !std::isfinite(h)) throw MeshError(fmt::format("BCC lattice: cell size must be positive, got {}", h));
  BccGrid g;
  g.cell_size = h;
  for (int a = 0; a < 3; ++a) {
    const double n = std::floor(box.sizes()[a] / h) + 3;
    if (n > 4096) throw MeshError(fmt::format("BCC lattice: {} cells along axis {} (cell size {} too small)", n, a, h));
    g.cells[a] = int(n);
    g.origin[a] = box.center()[a] - 0.5 * n * h;
  }
  return g;
}

TetMesh make_bcc_submesh(const BccGrid& grid, const std::vector<std::int64_t>& tet_ids,
                         std::vector<std::int64_t>* grid_node_of) {
  // Mark used grid nodes, number them in ascending grid order (a dense map over the grid's
  // nodes: linear time), then write the tets.
  std::vector<int> number(std::size_t(grid.num_nodes()), 0);
  for (const std::int64_t id : tet_ids) {
    if (!grid.tet_exists(id)) throw MeshError(fmt::format("BCC lattice: tet id {} does not exist", id));
    for (const std::int64_t n : grid.tet_nodes(id)) number[std::size_t(n)] = 1;
  }
  std::vector<std::int64_t> used;
  for (std::size_t n = 0; n < number.size(); ++n)
    if (number[n]) {
      number[n] = int(used.size());
      used.push_back(std::int64_t(n));
    }
  TetMesh mesh;
  mesh.nodes.resize(Eigen::Index(used.size()), 3);
  for (std::size_t v = 0; v < used.size(); ++v)
    mesh.nodes.row(Eigen::Index(v)) = grid.node_position(used[v]).transpose();
  mesh.tets.resize(Eigen::Index(tet_ids.size()), 4);
  for (std::size_t t = 0; t < tet_ids.size(); ++t) {
    const auto n = grid.tet_nodes(tet_ids[t]);
    for (int k = 0; k < 4; ++k) mesh.tets(Eigen::Index(t), k) = number[std::size_t(n[std::size_t(k)])];
  }
  if (grid_node_of) *grid_node_of = std::move(used);
  return mesh;
}

TetMesh make_bcc_lattice(const BccGrid& grid) {
  std::vector<std::int64_t> ids;
  for (std::int64_t id = 0; id < grid.num_tet_ids(); ++id)
    if (grid.tet_exists(id)) ids.push_back(id);
  return make_bcc_submesh(grid, ids);
}

}  // namespace xpd
