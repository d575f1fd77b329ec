#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/energy/tet_elements.hpp>
#include <xpd/solver/topology_update.hpp>

namespace xpd {

void append_tet_columns(const Mat3& Dm_inv, double weight, const std::array<int, 4>& nodes,
                        std::vector<SparseColumn>& out) {
  Vec3 g[4];
  shape_gradients(Dm_inv, g);
  const double s = std::sqrt(weight);
  for (int c = 0; c < 3; ++c) {
    SparseColumn w;
    for (int a = 0; a < 4; ++a) {
      w.rows.push_back(nodes[static_cast<size_t>(a)]);
      w.values.push_back(s * g[a](c));
    }
    out.push_back(std::move(w));
  }
}

FactorModification cut_modification(const CutEvent& event, const TetMesh& mesh,
                                    const std::vector<double>& weight_stiffness) {
  if (static_cast<Eigen::Index>(weight_stiffness.size()) != mesh.tets.rows())
    throw SolverError("cut_modification: one stiffness per tet expected");
  FactorModification m;
  m.new_dofs = static_cast<int>(mesh.nodes.rows()) - event.nodes_before;
  // Each copy enters the elimination order immediately before the node it duplicates: it couples
  // to a subset of that node's neighbours, so the elimination tree gains it next to its twin. On a
  // plane cut through a 12³ bar (242 events) this gives nnz(L) +17% over the build, against +121%
  // with the paper's "before the earliest neighbour" rule and +39% with the copies appended.
  m.place_before = event.copy_of;
  if (event.changed_tets.empty()) return m;
  for (size_t k = 0; k < event.changed_tets.size(); ++k) {
    const int t = event.changed_tets[k];
    // The assembler's formula (make_tet_elements), so Dm⁻¹ and w are bit-identical to the model's.
    const TetRestShape r = tet_rest_shape(mesh, t);
    const double w = 2.0 * weight_stiffness[static_cast<size_t>(t)] * r.volume;
    const Eigen::RowVector4i& old = event.old_tets[k];
    append_tet_columns(r.Dm_inv, w, {old(0), old(1), old(2), old(3)}, m.removed);
    append_tet_columns(r.Dm_inv, w, {mesh.tets(t, 0), mesh.tets(t, 1), mesh.tets(t, 2), mesh.tets(t, 3)}, m.added);
  }
  return m;
}

}  // namespace xpd
