// `xpd convert IN OUT`: tet mesh -> .vtu (or its boundary surface -> .obj/.ply); surface -> .obj/.ply.
#include <fmt/format.h>

#include <memory>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/vtu.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/surface.hpp>

#include "commands.hpp"

namespace xpd::cli {
namespace {

struct ConvertOptions {
  std::string in, out;
  bool fix_orientation = false;
};

void run_convert(const ConvertOptions& o) {
  io::ReadOptions read;
  read.validation.fix_orientation = o.fix_orientation;
  const std::string out_ext = io::format_extension(o.out);
  if (out_ext != "vtu" && out_ext != "obj" && out_ext != "ply")
    throw Error(fmt::format("{}: unsupported output format '{}' (supported: .vtu, .obj, .ply)", o.out, out_ext));
  if (is_tet_format(o.in)) {
    TetMesh mesh = is_generator_spec(o.in) ? make_box_from_spec(o.in) : io::read_tet_mesh(o.in, read);
    if (out_ext == "vtu") {
      io::write_vtu(o.out, mesh.nodes, mesh.tets);
    } else {
      io::write_surface(o.out, SurfaceMesh{mesh.nodes, boundary_faces(mesh.tets)});
    }
    fmt::print("wrote {} ({} nodes, {} tets)\n", o.out, mesh.nodes.rows(), mesh.tets.rows());
  } else {
    if (out_ext == "vtu") throw Error(fmt::format("{}: a surface cannot be written as .vtu (tets only)", o.in));
    const SurfaceMesh s = io::read_surface(o.in, read);
    io::write_surface(o.out, s);
    fmt::print("wrote {} ({} vertices, {} triangles)\n", o.out, s.nodes.rows(), s.triangles.rows());
  }
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto o = std::make_shared<ConvertOptions>();
  CLI::App* cmd = app.add_subcommand("convert", "Convert a mesh between formats");
  cmd->add_option("input", o->in, "Input mesh or box:N")->required();
  cmd->add_option("output", o->out, "Output file: .vtu (tets), .obj/.ply (surface or boundary of a tet mesh)")
      ->required();
  cmd->add_flag("--fix-orientation", o->fix_orientation, "Reorient inverted tets instead of rejecting the mesh");
  cmd->callback([o] { run_convert(*o); });
}

}  // namespace xpd::cli
