// `xpd info MESH [--json]`: counts, volume and element quality of a tet mesh or a surface.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/quality.hpp>
#include <xpd/mesh/surface.hpp>

#include "commands.hpp"

namespace xpd::cli {

bool is_tet_format(const std::string& path) {
  if (is_generator_spec(path)) return true;
  const std::string ext = io::format_extension(path);
  return ext == "msh" || ext == "mesh" || ext == "node" || ext == "ele" || ext == "vtu";
}

namespace {

struct InfoOptions {
  std::string mesh;
  bool json = false;
  bool fix_orientation = false;
};

void run_info(const InfoOptions& o) {
  io::ReadOptions read;
  read.validation.fix_orientation = o.fix_orientation;
  nlohmann::ordered_json j;
  j["file"] = o.mesh;
  if (is_tet_format(o.mesh)) {
    TetMesh mesh = is_generator_spec(o.mesh) ? make_box_from_spec(o.mesh) : io::read_tet_mesh(o.mesh, read);
    const Triangles surface = boundary_faces(mesh.tets);
    const MeshQuality q = mesh_quality(mesh);
    j["kind"] = "tetrahedral";
    j["nodes"] = mesh.nodes.rows();
    j["tets"] = mesh.tets.rows();
    j["surface_triangles"] = surface.rows();
    j["volume"] = q.total_volume;
    j["min_volume"] = q.min_volume;
    j["max_volume"] = q.max_volume;
    j["min_dihedral_deg"] = q.min_dihedral_deg;
    j["max_dihedral_deg"] = q.max_dihedral_deg;
    j["max_aspect_ratio"] = q.max_aspect_ratio;
    j["mean_edge_length"] = q.mean_edge_length;
    j["bbox_min"] = {q.bbox_min.x(), q.bbox_min.y(), q.bbox_min.z()};
    j["bbox_max"] = {q.bbox_max.x(), q.bbox_max.y(), q.bbox_max.z()};
  } else {
    const SurfaceMesh s = io::read_surface(o.mesh, read);
    j["kind"] = "surface";
    j["nodes"] = s.nodes.rows();
    j["triangles"] = s.triangles.rows();
    const Eigen::RowVector3d lo = s.nodes.colwise().minCoeff(), hi = s.nodes.colwise().maxCoeff();
    j["bbox_min"] = {lo.x(), lo.y(), lo.z()};
    j["bbox_max"] = {hi.x(), hi.y(), hi.z()};
  }
  print_result(j, o.json);
}

}  // namespace

void print_result(const nlohmann::ordered_json& result, bool json, int width) {
  if (json) {
    std::cout << result.dump(2) << "\n";
    return;
  }
  for (const auto& [key, value] : result.items()) std::cout << fmt::format("{:<{}} {}\n", key, width, value.dump());
}

void add_info_command(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Print counts, volume and element quality of a mesh");
  cmd->add_option("mesh", o->mesh,
                  "Mesh file (.msh .mesh .node/.ele .vtu .obj .off .ply .stl, optionally .gz) or box:N")
      ->required();
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->add_flag("--fix-orientation", o->fix_orientation, "Reorient inverted tets instead of rejecting the mesh");
  cmd->callback([o] { run_info(*o); });
}

}  // namespace xpd::cli
