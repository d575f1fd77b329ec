// Node forces of a scene's loads (docs/scene-format.md §7).
#include <xpd/core/error.hpp>
#include <xpd/scene/scene.hpp>

namespace xpd {

std::vector<double> tet_densities(const Scene& scene, const std::vector<int>& tet_material) {
  std::vector<double> rho(tet_material.size());
  for (std::size_t t = 0; t < tet_material.size(); ++t)
    rho[t] = scene.materials.at(static_cast<std::size_t>(tet_material[t])).density;
  return rho;
}

Points external_forces(const Scene& scene, const TetMesh& mesh, const Eigen::VectorXd& masses, int frame) {
  if (masses.size() != mesh.nodes.rows())
    throw Error("external_forces: " + std::to_string(masses.size()) + " masses for " +
                std::to_string(mesh.nodes.rows()) + " nodes");
  Points f = Points::Zero(mesh.nodes.rows(), 3);
  for (std::size_t i = 0; i < scene.loads.size(); ++i) {
    const Load& load = scene.loads[i];
    const double scale = load.scale_at(frame);
    if (scale == 0) continue;
    const Vec3 v = scale * load.value;
    if (load.type == Load::Type::Gravity) {
      for (Eigen::Index n = 0; n < f.rows(); ++n) f.row(n) += masses(n) * v.transpose();
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
