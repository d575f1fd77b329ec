#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/energy/tet_elements.hpp>
#include <xpd/solver/topology_update.hpp>

namespace xpd {

FactorModification cut_modification(const CutEvent& event, const TetMesh& mesh,
                                    const std::vector<double>& weight_stiffness, const std::vector<double>& fraction) {
  if (static_cast<Eigen::Index>(weight_stiffness.size()) != mesh.tets.rows())
    throw SolverError("cut_modification: one stiffness per tet expected");
  if (!fraction.empty() && static_cast<Eigen::Index>(fraction.size()) != mesh.tets.rows())
    throw SolverError("cut_modification: one volume fraction per tet expected (or none)");
  if (!event.old_fraction.empty() && event.old_fraction.size() != event.changed_tets.size())
    throw SolverError("cut_modification: one old fraction per changed tet expected (or none)");
  auto frac = [&](int t) { return fraction.empty() ? 1.0 : fraction[static_cast<size_t>(t)]; };
  FactorModification m;
  const int nv = static_cast<int>(mesh.nodes.rows());
  m.new_dofs = nv - event.nodes_before;
  // Each copy enters the elimination order immediately before the node it duplicates: it couples
  // to a subset of that node's neighbours, so the elimination tree gains it next to its twin. On a
  // plane cut through a 12³ bar (242 events) this gives nnz(L) +17% over the build, against +121%
  // with the paper's "before the earliest neighbour" rule and +39% with the copies appended.
  m.place_before = event.copy_of;
  const int new_tets = event.tet_copy_of.empty() ? 0 : static_cast<int>(mesh.tets.rows()) - event.tets_before;
  if (event.changed_tets.empty() && new_tets == 0) return m;

  // ΔK = Σ_changed (K_t with new ids − K_t with old ids). Every entry between two nodes that keep
  // their ids cancels exactly (same values), so only entries with an endpoint in S = the split
  // nodes and their copies are passed, as the entrywise change that DynamicLdlt writes as one rank-2
  // term per owner (no fill beyond K_new's pattern). Measured on the box:16 plane cut (xpd bench
  // cut, k = 16): 5.8 ms per update, against 17.9 ms with one rank-2 term per changed entry; one
  // removed and one added W_e per changed tet was slower still (BENCHMARKS.md, "Progressive
  // Cholesky").
  std::vector<char> in_s(static_cast<size_t>(nv), 0);
  for (int k = 0; k < m.new_dofs; ++k) {
    in_s[static_cast<size_t>(event.nodes_before + k)] = 1;
    in_s[static_cast<size_t>(event.copy_of[static_cast<size_t>(k)])] = 1;
  }
  auto add_block = [&](const TetRestShape& r, double w, const std::array<int, 4>& n, double sign, bool whole) {
    Vec3 g[4];
    shape_gradients(r.Dm_inv, g);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        const int i = n[static_cast<size_t>(a)], j = n[static_cast<size_t>(b)];
        if (i > j || (!whole && !in_s[static_cast<size_t>(i)] && !in_s[static_cast<size_t>(j)])) continue;
        m.change.emplace_back(i, j, sign * w * g[a].dot(g[b]));
      }
  };
  auto row = [&](int t) {
    return std::array<int, 4>{mesh.tets(t, 0), mesh.tets(t, 1), mesh.tets(t, 2), mesh.tets(t, 3)};
  };
  for (size_t k = 0; k < event.changed_tets.size(); ++k) {
    const int t = event.changed_tets[k];
    // The assembler's formula (make_tet_elements), so Dm⁻¹ and w are the model's (to rounding where
    // a strain limit's μ′ adds; the model's per-tet stiffness is stiffness × fraction).
    const TetRestShape r = tet_rest_shape(mesh, t);
    const double s = weight_stiffness[static_cast<size_t>(t)];
    const double f_old = event.old_fraction.empty() ? 1.0 : event.old_fraction[k];
    const double w_old = 2.0 * (s * f_old) * r.volume, w_new = 2.0 * (s * frac(t)) * r.volume;
    const bool whole = w_old != w_new;
    const Eigen::RowVector4i& old = event.old_tets[k];
    add_block(r, w_old, {old(0), old(1), old(2), old(3)}, -1.0, whole);
    add_block(r, w_new, row(t), 1.0, whole);
  }
  for (int t = event.tets_before; t < event.tets_before + new_tets; ++t) {
    const TetRestShape r = tet_rest_shape(mesh, t);
    add_block(r, 2.0 * (weight_stiffness[static_cast<size_t>(t)] * frac(t)) * r.volume, row(t), 1.0, true);
  }
  return m;
}

FactorModification excision_modification(const ExcisionEvent& event, const TetMesh& before,
                                         const std::vector<double>& weight_stiffness,
                                         const std::vector<std::pair<int, double>>& placeholders) {
  if (static_cast<Eigen::Index>(weight_stiffness.size()) != before.tets.rows())
    throw SolverError("excision_modification: one stiffness per tet of the mesh before the excision expected");
  FactorModification m;
  for (size_t k = 0; k < event.removed.size(); ++k) {
    const int t = event.removed[k];
    if (t < 0 || t >= before.tets.rows() || before.tets.row(t) != event.removed_rows[k])
      throw SolverError(fmt::format("excision_modification: tet {} is not the removed one", t));
    const TetRestShape r = tet_rest_shape(before, t);  // the assembler's formula, as for cuts
    const double w = 2.0 * weight_stiffness[static_cast<size_t>(t)] * r.volume;
    Vec3 g[4];
    shape_gradients(r.Dm_inv, g);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        const int i = before.tets(t, a), j = before.tets(t, b);
        if (i <= j) m.change.emplace_back(i, j, -w * g[a].dot(g[b]));
      }
  }
  for (const auto& [j, delta] : placeholders) m.change.emplace_back(j, j, delta);
  return m;
}

namespace {

// √c · Σ_k sign_k Σ_a weight_a e_node_a over the given points, same nodes merged, zeros dropped.
SparseColumn scaled_column(const char* what, const BaryPoint* const* points, const double* signs, int count,
                           double stiffness, int num_nodes) {
  if (!std::isfinite(stiffness) || stiffness <= 0)
    throw SolverError(fmt::format("{}: stiffness must be finite and > 0 (got {})", what, stiffness));
  SparseColumn col;
  for (int k = 0; k < count; ++k)
    for (size_t a = 0; a < 4; ++a) {
      const int i = points[k]->nodes[a];
      if (i < 0) continue;
      if (i >= num_nodes)
        throw SolverError(fmt::format("{}: node {} out of range (the model has {} nodes)", what, i, num_nodes));
      const double v = signs[k] * points[k]->weights[a];
      const auto it = std::find(col.rows.begin(), col.rows.end(), i);
      if (it == col.rows.end()) {
        col.rows.push_back(i);
        col.values.push_back(v);
      } else {
        col.values[static_cast<size_t>(it - col.rows.begin())] += v;
      }
    }
  const double scale = std::sqrt(stiffness);
  SparseColumn out;
  for (size_t j = 0; j < col.rows.size(); ++j)
    if (col.values[j] != 0.0) {
      out.rows.push_back(col.rows[j]);
      out.values.push_back(scale * col.values[j]);
    }
  if (out.rows.empty())
    throw SolverError(fmt::format("{}: {} (the spring would have no effect)", what,
                                  count == 2 ? "its two ends are the same point" : "the point has no weight"));
  return out;
}

}  // namespace

SparseColumn spring_column(const PointSpring& spring, int num_nodes) {
  const BaryPoint* pts[2] = {&spring.a, &spring.b};
  const double signs[2] = {1.0, -1.0};
  return scaled_column("spring_column", pts, signs, 2, spring.stiffness, num_nodes);
}

SparseColumn attachment_column(const BaryPoint& point, double stiffness, int num_nodes) {
  const BaryPoint* pts[1] = {&point};
  const double signs[1] = {1.0};
  return scaled_column("attachment_column", pts, signs, 1, stiffness, num_nodes);
}

Eigen::SparseMatrix<double> apply_modification(const Eigen::SparseMatrix<double>& K, const FactorModification& mod) {
  if (K.rows() != K.cols())
    throw SolverError(fmt::format("apply_modification: K is {} x {}, not square", K.rows(), K.cols()));
  if (mod.new_dofs < 0) throw SolverError("apply_modification: negative number of new unknowns");
  const auto n = static_cast<int>(K.rows()) + mod.new_dofs;
  auto check = [&](int row, double value) {
    if (row < 0 || row >= n) throw SolverError(fmt::format("apply_modification: unknown {} outside [0, {})", row, n));
    if (!std::isfinite(value)) throw SolverError("apply_modification: a non-finite value");
  };
  std::vector<Eigen::Triplet<double>> delta;
  auto add_column = [&](const SparseColumn& c, double sign) {
    if (c.rows.size() != c.values.size())
      throw SolverError("apply_modification: a column's rows and values differ in length");
    for (size_t a = 0; a < c.rows.size(); ++a) check(c.rows[a], c.values[a]);
    for (size_t a = 0; a < c.rows.size(); ++a)
      for (size_t b = 0; b < c.rows.size(); ++b)
        delta.emplace_back(c.rows[a], c.rows[b], sign * c.values[a] * c.values[b]);
  };
  for (const SparseColumn& c : mod.added) add_column(c, 1.0);
  for (const SparseColumn& c : mod.removed) add_column(c, -1.0);
  for (const Eigen::Triplet<double>& t : mod.change) {
    check(t.row(), t.value());
    check(t.col(), t.value());
    delta.push_back(t);
    if (t.row() != t.col()) delta.emplace_back(t.col(), t.row(), t.value());
  }
  Eigen::SparseMatrix<double> dK(n, n);
  dK.setFromTriplets(delta.begin(), delta.end());
  Eigen::SparseMatrix<double> grown = K;
  grown.conservativeResize(n, n);
  Eigen::SparseMatrix<double> out = grown + dK;
  out.makeCompressed();
  return out;
}

FactorModification with_mass_change(const FactorModification& mod, const Eigen::VectorXd& before,
                                    const Eigen::VectorXd& after, double h) {
  if (after.size() < before.size())
    throw SolverError(
        fmt::format("with_mass_change: {} masses after the change, {} before", after.size(), before.size()));
  if (!(h > 0.0) || !std::isfinite(h)) throw SolverError(fmt::format("with_mass_change: time step {} is not > 0", h));
  FactorModification out = mod;
  const double h2 = h * h;
  for (Eigen::Index i = 0; i < after.size(); ++i) {
    const double delta = after(i) - (i < before.size() ? before(i) : 0.0);
    if (delta != 0.0) out.change.emplace_back(static_cast<int>(i), static_cast<int>(i), delta / h2);
  }
  return out;
}

}  // namespace xpd
