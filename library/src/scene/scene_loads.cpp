// Node forces of a scene's loads (docs/scene-format.md §7).
#include <xpd/core/error.hpp>
#include <xpd/io/scene.hpp>

namespace xpd {

std::vector<double> lumped_masses(const Scene& scene, const TetMesh& mesh, const std::vector<int>& tet_material) {
  if (tet_material.size() != static_cast<std::size_t>(mesh.tets.rows()))
    throw Error("lumped_masses: tet_material has " + std::to_string(tet_material.size()) + " entries for " +
                std::to_string(mesh.tets.rows()) + " tets");
  std::vector<double> mass(static_cast<std::size_t>(mesh.nodes.rows()), 0.0);
  for (Eigen::Index e = 0; e < mesh.tets.rows(); ++e) {
    const Material& m = scene.materials.at(static_cast<std::size_t>(tet_material[static_cast<std::size_t>(e)]));
    const auto x = [&](int k) -> Vec3 { return mesh.nodes.row(mesh.tets(e, k)).transpose(); };
    const double quarter = m.density * std::abs(signed_volume(x(0), x(1), x(2), x(3))) / 4.0;
    for (int k = 0; k < 4; ++k) mass[static_cast<std::size_t>(mesh.tets(e, k))] += quarter;
  }
  return mass;
}

Points external_forces(const Scene& scene, const TetMesh& mesh, const std::vector<int>& tet_material, int frame) {
  Points f = Points::Zero(mesh.nodes.rows(), 3);
  std::vector<double> mass;  // computed on first use
  for (std::size_t i = 0; i < scene.loads.size(); ++i) {
    const Load& load = scene.loads[i];
    const double scale = load.scale_at(frame);
    if (scale == 0) continue;
    const Vec3 v = scale * load.value;
    if (load.type == Load::Type::Gravity) {
      if (mass.empty()) mass = lumped_masses(scene, mesh, tet_material);
      for (Eigen::Index n = 0; n < f.rows(); ++n) f.row(n) += mass[static_cast<std::size_t>(n)] * v.transpose();
      continue;
    }
    const std::string pointer = "/loads/" + std::to_string(i) + "/selection";
    std::vector<int> nodes;
    try {
      nodes = select_nodes(load.selection, scene.selections, mesh);
    } catch (const SceneError&) {
      throw;
    } catch (const Error& e) {
      throw SceneError(scene.file, pointer, e.what());
    }
    if (nodes.empty()) throw SceneError(scene.file, pointer, "selection '" + load.selection + "' contains no node");
    if (load.type == Load::Type::NodeForce) {
      for (int n : nodes) f.row(n) += v.transpose();
    } else if (load.distribution == Load::Distribution::Equal) {
      const Vec3 share = v / static_cast<double>(nodes.size());
      for (int n : nodes) f.row(n) += share.transpose();
    } else {
      const std::vector<double> area = lumped_boundary_area(mesh, nodes);
      double total = 0;
      for (double a : area) total += a;
      if (!(total > 0))
        throw SceneError(scene.file, pointer,
                         "selection '" + load.selection +
                             "' has no boundary area ('area' distribution needs boundary triangles whose three nodes "
                             "are all selected)");
      for (std::size_t k = 0; k < nodes.size(); ++k) f.row(nodes[k]) += (area[k] / total) * v.transpose();
    }
  }
  return f;
}

}  // namespace xpd
