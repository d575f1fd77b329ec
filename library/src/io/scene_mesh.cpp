// Kept apart from scene.cpp so that parsing scenes does not pull in every mesh-file reader.
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/scene.hpp>

namespace xpd {

TetMesh build_scene_mesh(const MeshSource& source) {
  if (source.kind == MeshSource::Kind::Box) return make_generated_mesh(source);
  io::ReadOptions options;
  options.validation.fix_orientation = source.fix_orientation;
  return io::read_tet_mesh(source.file, options);
}

}  // namespace xpd
