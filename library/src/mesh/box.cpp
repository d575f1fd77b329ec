#include <fmt/format.h>

#include <array>
#include <charconv>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

TetMesh make_box(int nx, int ny, int nz, const Vec3& lo, const Vec3& hi) {
  if (nx < 2 || ny < 2 || nz < 2)
    throw Error(fmt::format("box: need at least 2 nodes per side, got {}x{}x{}", nx, ny, nz));
  if (!(lo.array() < hi.array()).all()) throw Error("box: lower corner must be below the upper corner on every axis");
  TetMesh mesh;
  const Eigen::Index n = Eigen::Index(nx) * ny * nz;
  mesh.nodes.resize(n, 3);
  const auto id = [&](int i, int j, int k) { return i + nx * (j + ny * k); };
  for (int k = 0; k < nz; ++k)
    for (int j = 0; j < ny; ++j)
      for (int i = 0; i < nx; ++i) {
        const Vec3 t(double(i) / (nx - 1), double(j) / (ny - 1), double(k) / (nz - 1));
        mesh.nodes.row(id(i, j, k)) = (lo.array() + t.array() * (hi - lo).array()).matrix().transpose();
      }
  // Kuhn split: each permutation (a,b,c) of the axes gives the path 0 -> e_a -> e_a+e_b -> 1.
  // Even permutations give positive orientation; odd ones are reoriented by swapping two nodes.
  static constexpr std::array<std::array<int, 3>, 6> perms{
      {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}};
  mesh.tets.resize(Eigen::Index(6) * (nx - 1) * (ny - 1) * (nz - 1), 4);
  Eigen::Index t = 0;
  for (int k = 0; k + 1 < nz; ++k)
    for (int j = 0; j + 1 < ny; ++j)
      for (int i = 0; i + 1 < nx; ++i)
        for (int p = 0; p < 6; ++p) {
          std::array<int, 3> c{i, j, k};
          std::array<int, 4> v;
          v[0] = id(c[0], c[1], c[2]);
          for (int s = 0; s < 3; ++s) {
            ++c[perms[p][s]];
            v[s + 1] = id(c[0], c[1], c[2]);
          }
          if (p >= 3) std::swap(v[2], v[3]);
          mesh.tets.row(t++) << v[0], v[1], v[2], v[3];
        }
  return mesh;
}

bool is_generator_spec(const std::string& spec) { return spec.starts_with("box:"); }

TetMesh make_box_from_spec(const std::string& spec) {
  if (!spec.starts_with("box:")) throw Error("unknown mesh generator '" + spec + "' (expected box:N or box:NX,NY,NZ)");
  std::vector<int> n;
  std::string_view rest = std::string_view(spec).substr(4);
  while (true) {
    int v = 0;
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec != std::errc() || v < 2 || v > 1024)
      throw Error("bad box generator '" + spec + "': sizes must be integers in [2, 1024]");
    n.push_back(v);
    rest.remove_prefix(static_cast<std::size_t>(p - rest.data()));
    if (rest.empty()) break;
    if (rest.front() != ',') throw Error("bad box generator '" + spec + "': expected ',' between sizes");
    rest.remove_prefix(1);
  }
  if (n.size() == 1) n = {n[0], n[0], n[0]};
  if (n.size() != 3) throw Error("bad box generator '" + spec + "': give 1 or 3 sizes");
  const double h = 1.0 / (std::max({n[0], n[1], n[2]}) - 1);
  return make_box(n[0], n[1], n[2], Vec3::Zero(), Vec3((n[0] - 1) * h, (n[1] - 1) * h, (n[2] - 1) * h));
}

SurfaceMesh make_box_surface(const Vec3& lo, const Vec3& hi) {
  const TetMesh box = make_box(2, 2, 2, lo, hi);
  SurfaceMesh s;
  s.nodes = box.nodes;
  s.triangles = boundary_faces(box.tets);
  return s;
}

}  // namespace xpd
