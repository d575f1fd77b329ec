// Kept apart from scene.cpp so that parsing scenes does not pull in every mesh-file reader.
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/embedding.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/scene.hpp>

namespace xpd {

SurfaceMesh shell_skin_surface(const MeshSource& source) {
  SurfaceMesh s = io::read_surface(source.surface);
  if (source.shell_crop) s = crop_surface(s, source.shell_crop->first, source.shell_crop->second);
  return subdivide_midpoint(s, source.shell_subdivide);
}

TetMesh make_generated_mesh(const MeshSource& source) {
  if (source.kind == MeshSource::Kind::File)
    throw Error("make_generated_mesh: the mesh source is a file, not a generator");
  if (source.kind == MeshSource::Kind::Shell) return make_shell(shell_skin_surface(source), source.shell).mesh;
  if (source.kind == MeshSource::Kind::Lattice) {
    const SurfaceMesh surface = io::read_surface(source.surface);
    BccOptions options;
    options.resolution = source.resolution;
    options.cell_size = source.cell_size;
    return make_bcc_embedding(surface, options).lattice;
  }
  TetMesh box = make_box(source.nodes[0], source.nodes[1], source.nodes[2], source.min, source.max);
  if (source.carve.empty()) return box;
  // Carving: drop the tets whose centroid lies in a carve box, then the nodes no tet uses.
  std::vector<int> keep;
  for (Eigen::Index t = 0; t < box.tets.rows(); ++t) {
    Vec3 c = Vec3::Zero();
    for (int a = 0; a < 4; ++a) c += box.nodes.row(box.tets(t, a)).transpose();
    c /= 4.0;
    bool carved = false;
    for (const auto& [lo, hi] : source.carve)
      carved = carved || ((c.array() >= lo.array()).all() && (c.array() <= hi.array()).all());
    if (!carved) keep.push_back(static_cast<int>(t));
  }
  if (keep.empty()) throw Error("mesh: the carve boxes remove every tet of the box");
  std::vector<int> new_index(static_cast<std::size_t>(box.nodes.rows()), -1);
  int used = 0;
  for (const int t : keep)
    for (int a = 0; a < 4; ++a)
      if (new_index[static_cast<std::size_t>(box.tets(t, a))] < 0)
        new_index[static_cast<std::size_t>(box.tets(t, a))] = 0;
  for (auto& v : new_index)
    if (v >= 0) v = used++;
  TetMesh out;
  out.nodes.resize(used, 3);
  for (Eigen::Index i = 0; i < box.nodes.rows(); ++i)
    if (new_index[static_cast<std::size_t>(i)] >= 0)
      out.nodes.row(new_index[static_cast<std::size_t>(i)]) = box.nodes.row(i);
  out.tets.resize(static_cast<Eigen::Index>(keep.size()), 4);
  for (std::size_t k = 0; k < keep.size(); ++k)
    for (int a = 0; a < 4; ++a)
      out.tets(static_cast<Eigen::Index>(k), a) = new_index[static_cast<std::size_t>(box.tets(keep[k], a))];
  return out;
}

TetMesh build_scene_mesh(const MeshSource& source) {
  if (source.kind != MeshSource::Kind::File) return make_generated_mesh(source);
  io::ReadOptions options;
  options.validation.fix_orientation = source.fix_orientation;
  options.validation.reject_duplicate_nodes = !source.coincident_nodes;
  return io::read_tet_mesh(source.file, options);
}

}  // namespace xpd
