#include <fmt/format.h>

#include <cmath>
#include <numeric>
#include <xpd/core/disjoint_sets.hpp>
#include <xpd/core/error.hpp>
#include <xpd/energy/corotated.hpp>
#include <xpd/energy/loads.hpp>
#include <xpd/energy/shape_target.hpp>
#include <xpd/energy/strain_limit.hpp>
#include <xpd/energy/volume.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/topology_update.hpp>

namespace xpd {

namespace {

void validate_desc(const ModelDesc& d) {
  const auto nv = d.mesh.nodes.rows();
  const auto nt = d.mesh.tets.rows();
  if (nv == 0 || nt == 0) throw SolverError("model: the mesh has no nodes or no tets");
  if (!d.mesh.nodes.allFinite()) throw SolverError("model: mesh node coordinates are not finite");
  if (d.mesh.tets.minCoeff() < 0 || d.mesh.tets.maxCoeff() >= nv)
    throw SolverError(fmt::format("model: tet node index out of range [0, {})", nv));
  if (d.mu.size() != 1 && d.mu.size() != static_cast<size_t>(nt))
    throw SolverError(fmt::format("model: mu needs 1 or #T = {} values, got {}", nt, d.mu.size()));
  for (size_t t = 0; t < d.mu.size(); ++t)
    if (!(d.mu[t] > 0.0) || !std::isfinite(d.mu[t]))
      throw SolverError(fmt::format("model: mu must be positive and finite, tet {} has mu={}", t, d.mu[t]));
  if (!d.lambda.empty() && d.lambda.size() != 1 && d.lambda.size() != static_cast<size_t>(nt))
    throw SolverError(fmt::format("model: lambda needs 0, 1 or #T = {} values, got {}", nt, d.lambda.size()));
  for (size_t t = 0; t < d.lambda.size(); ++t)
    if (!(d.lambda[t] >= 0.0) || !std::isfinite(d.lambda[t]))
      throw SolverError(fmt::format("model: lambda must be >= 0 and finite, tet {} has lambda={}", t, d.lambda[t]));
  if (d.density.size() != 1 && d.density.size() != static_cast<size_t>(nt))
    throw SolverError(fmt::format("model: density needs 1 or #T = {} values, got {}", nt, d.density.size()));
  for (size_t t = 0; t < d.density.size(); ++t)
    if (!(d.density[t] > 0.0) || !std::isfinite(d.density[t]))
      throw SolverError(
          fmt::format("model: density must be positive and finite, tet {} has density={}", t, d.density[t]));
  if (d.integrator == Integrator::ImplicitEuler && (!(d.time_step > 0.0) || !std::isfinite(d.time_step)))
    throw SolverError(fmt::format("model: time step h must be positive, got {}", d.time_step));
  if (!d.gravity.allFinite()) throw SolverError("model: gravity is not finite");
  if (d.nodal_forces.rows() != 0 && (d.nodal_forces.rows() != nv || !d.nodal_forces.allFinite()))
    throw SolverError("model: nodal_forces must be empty or a finite #V x 3 matrix");
  for (size_t j = 0; j < d.attachments.size(); ++j)
    if (!d.attachments[j].target.allFinite()) throw SolverError(fmt::format("attachment #{}: target is not finite", j));
  if (d.allow_unattached && !(d.free_body_regularization > 0.0))
    throw SolverError("model: free_body_regularization must be positive");
}

}  // namespace

// K assembled from the terms, or (previous and change given) updated from previous's by the change.
Model detail::build_model(const ModelDesc& d, const Model* previous, const FactorModification* change) {
  validate_desc(d);
  Model m;
  const int nv = static_cast<int>(d.mesh.nodes.rows());
  const int nt = static_cast<int>(d.mesh.tets.rows());
  m.rest_ = d.mesh.nodes;
  m.tets_ = d.mesh.tets;
  m.integrator_ = d.integrator;
  m.h_ = d.integrator == Integrator::ImplicitEuler ? d.time_step : 1.0;
  auto mu_of = [&](int t) { return d.mu.size() == 1 ? d.mu[0] : d.mu[static_cast<size_t>(t)]; };
  auto lambda_of = [&](int t) {
    return d.lambda.empty() ? 0.0 : d.lambda.size() == 1 ? d.lambda[0] : d.lambda[static_cast<size_t>(t)];
  };
  std::vector<int> volume_ids;
  std::vector<double> volume_half_lambda;
  for (int t = 0; t < nt; ++t)
    if (lambda_of(t) > 0.0) {
      volume_ids.push_back(t);
      volume_half_lambda.push_back(0.5 * lambda_of(t));  // make_tet_elements: w = 2 (λ/2) Vol = λ Vol
    }
  m.has_volume_ = !volume_ids.empty();

  // Partition tets: shape-targeted ones use ShapeTargetTerm, the rest CorotatedTerm.
  std::vector<int> target_row(static_cast<size_t>(nt), -1);
  for (size_t s = 0; s < d.shape_targets.size(); ++s) {
    const int t = d.shape_targets[s].tet;
    if (t < 0 || t >= nt) throw SolverError(fmt::format("shape target #{}: tet {} out of range", s, t));
    if (target_row[static_cast<size_t>(t)] >= 0)
      throw SolverError(fmt::format("shape target #{}: tet {} already has a shape target", s, t));
    target_row[static_cast<size_t>(t)] = static_cast<int>(s);
  }
  std::vector<int> coro_ids;
  std::vector<double> coro_mu;
  for (int t = 0; t < nt; ++t)
    if (target_row[static_cast<size_t>(t)] < 0) {
      coro_ids.push_back(t);
      coro_mu.push_back(mu_of(t));
    }
  TetElements coro = make_tet_elements(d.mesh, coro_ids, coro_mu);  // validates volumes too
  // Lumped masses from the rest volumes.
  m.masses_ = Eigen::VectorXd::Zero(nv);
  // One mass path: gravity (LoadTerm, and the scene layer's gravity forces) and inertia (M/h²,
  // implicit Euler) use these masses, each tet with its own density, summed in tet order.
  auto density_of = [&](int t) { return d.density.size() == 1 ? d.density[0] : d.density[static_cast<size_t>(t)]; };
  for (int t = 0; t < nt; ++t) {
    const auto x = [&](int a) -> Vec3 { return d.mesh.nodes.row(d.mesh.tets(t, a)).transpose(); };
    const double quarter = density_of(t) * std::abs(signed_volume(x(0), x(1), x(2), x(3))) / 4.0;
    for (int a = 0; a < 4; ++a) m.masses_(d.mesh.tets(t, a)) += quarter;
  }
  if (coro.size() > 0) m.terms_.push_back(std::make_unique<CorotatedTerm>(std::move(coro)));
  if (m.has_volume_)
    m.terms_.push_back(
        std::make_unique<VolumeTerm>(make_tet_elements(d.mesh, volume_ids, volume_half_lambda), d.volume_matrix));
  if (!d.shape_targets.empty()) {
    std::vector<int> ids;
    std::vector<double> mus;
    for (const auto& s : d.shape_targets) {
      ids.push_back(s.tet);
      mus.push_back(mu_of(s.tet));
    }
    TetElements st = make_tet_elements(d.mesh, ids, mus);
    m.terms_.push_back(std::make_unique<ShapeTargetTerm>(std::move(st)));
  }
  if (!d.strain_limits.empty()) {
    std::vector<int> ids;
    std::vector<double> mus;
    std::vector<Eigen::Vector2d> lims;
    for (const auto& s : d.strain_limits) {
      ids.push_back(s.tet);
      mus.push_back(s.stiffness);
      lims.emplace_back(s.sigma_min, s.sigma_max);
    }
    m.terms_.push_back(std::make_unique<StrainLimitTerm>(make_tet_elements(d.mesh, ids, mus), std::move(lims)));
  }
  if (!d.attachments.empty()) {
    std::vector<AttachmentSpring> a;
    for (const auto& s : d.attachments) a.push_back({s.point, s.stiffness});
    m.terms_.push_back(std::make_unique<AttachmentTerm>(std::move(a), nv));
  }
  if (!d.springs.empty()) m.terms_.push_back(std::make_unique<SpringTerm>(d.springs, nv));
  m.terms_.push_back(std::make_unique<LoadTerm>(m.masses_));

  // Frame inputs.
  m.inputs0_.attachment_targets.resize(static_cast<Eigen::Index>(d.attachments.size()), 3);
  for (size_t j = 0; j < d.attachments.size(); ++j)
    m.inputs0_.attachment_targets.row(static_cast<Eigen::Index>(j)) = d.attachments[j].target.transpose();
  m.inputs0_.shape_targets.resize(static_cast<Eigen::Index>(d.shape_targets.size()), 6);
  for (size_t s = 0; s < d.shape_targets.size(); ++s)
    for (int c = 0; c < 6; ++c)
      m.inputs0_.shape_targets(static_cast<Eigen::Index>(s), c) = d.shape_targets[s].params[static_cast<size_t>(c)];
  m.inputs0_.gravity = d.gravity;
  m.inputs0_.nodal_forces = d.nodal_forces;

  // Connected components (through tets and springs) and their anchors; checked BEFORE factorizing.
  DisjointSets uf(static_cast<int>(nv));
  std::vector<char> used(static_cast<size_t>(nv), 0), anchored(static_cast<size_t>(nv), 0);
  for (int t = 0; t < nt; ++t)
    for (int a = 0; a < 4; ++a) {
      used[static_cast<size_t>(d.mesh.tets(t, a))] = 1;
      uf.unite(d.mesh.tets(t, 0), d.mesh.tets(t, a));
    }
  for (const auto& s : d.springs) {
    int first = -1;
    for (const BaryPoint* p : {&s.a, &s.b})
      for (int a = 0; a < 4; ++a) {
        const int i = p->nodes[static_cast<size_t>(a)];
        if (i < 0 || p->weights[static_cast<size_t>(a)] == 0.0) continue;
        if (first < 0) first = i;
        uf.unite(first, i);
      }
  }
  for (const auto& s : d.attachments)
    for (int a = 0; a < 4; ++a) {
      const int i = s.point.nodes[static_cast<size_t>(a)];
      if (i >= 0 && i < nv && s.point.weights[static_cast<size_t>(a)] != 0.0) anchored[static_cast<size_t>(i)] = 1;
    }
  std::vector<char> inactive(static_cast<size_t>(nv), 0);
  for (const auto& [i, delta] : d.inactive_nodes) {
    if (i < 0 || i >= nv) throw SolverError(fmt::format("model: inactive node {} out of range", i));
    if (used[static_cast<size_t>(i)]) throw SolverError(fmt::format("model: inactive node {} is used by a tet", i));
    if (!std::isfinite(delta) || delta <= 0)
      throw SolverError(fmt::format("model: inactive node {} needs a finite placeholder diagonal > 0", i));
    if (anchored[static_cast<size_t>(i)])
      throw SolverError(fmt::format("model: inactive node {} has an attachment", i));
    inactive[static_cast<size_t>(i)] = 1;
    anchored[static_cast<size_t>(i)] = 1;  // held by its placeholder
  }
  for (const auto& s : d.springs)
    for (const BaryPoint* p : {&s.a, &s.b})
      for (int a = 0; a < 4; ++a) {
        const int i = p->nodes[static_cast<size_t>(a)];
        if (i >= 0 && i < nv && inactive[static_cast<size_t>(i)] && p->weights[static_cast<size_t>(a)] != 0.0)
          throw SolverError(fmt::format("model: a spring uses inactive node {}", i));
      }
  for (int i = 0; i < nv; ++i)
    if (!used[static_cast<size_t>(i)] && !inactive[static_cast<size_t>(i)])
      throw SolverError(fmt::format("model: node {} is not referenced by any tet (remove unused nodes)", i));
  std::vector<int> root_size(static_cast<size_t>(nv), 0);
  std::vector<char> root_anchored(static_cast<size_t>(nv), 0);
  for (int i = 0; i < nv; ++i) {
    const int r = uf.find(i);
    ++root_size[static_cast<size_t>(r)];
    root_anchored[static_cast<size_t>(r)] |= anchored[static_cast<size_t>(i)];
  }
  std::vector<char> free_root(static_cast<size_t>(nv), 0);
  int comp = 0;
  for (int r = 0; r < nv; ++r) {
    if (root_size[static_cast<size_t>(r)] == 0) continue;
    ++m.num_components_;
    if (d.integrator == Integrator::Quasistatic && !root_anchored[static_cast<size_t>(r)]) {
      if (!d.allow_unattached)
        throw SolverError(
            fmt::format("model: connected component #{} ({} nodes, e.g. node {}) has no attachment; a "
                        "quasistatic solve is singular for it (add an attachment spring, or set "
                        "allow_unattached to regularize it)",
                        comp, root_size[static_cast<size_t>(r)], r));
      free_root[static_cast<size_t>(r)] = 1;
      ++m.num_free_components_;
    }
    ++comp;
  }

  for (const auto& term : m.terms_) m.coupled_ = m.coupled_ || term->couples_coordinates();
  m.reg_ = Eigen::VectorXd::Zero(nv);
  if (previous) {
    // K from the previous model's by the caller's change: the terms' blocks, attachments, springs
    // and placeholders are in `change`; the lumped masses' share is the one part computed here.
    if (m.coupled_ || previous->coupled() || m.num_free_components_ > 0 ||
        previous->regularization().cwiseAbs().maxCoeff() > 0.0)
      throw SolverError(
          "build_model: a model updated from a previous one's matrix must be neither coupled (lambda with the "
          "coupled volume matrix) nor regularized (allow_unattached)");
    if (previous->num_nodes() + change->new_dofs != nv)
      throw SolverError(fmt::format("build_model: the previous model's {} nodes + {} new ones are not the {} of desc",
                                    previous->num_nodes(), change->new_dofs, nv));
    FactorModification with_mass;
    const FactorModification* c = change;
    if (d.integrator == Integrator::ImplicitEuler) {
      if (previous->integrator() != Integrator::ImplicitEuler || previous->time_step() != m.h_)
        throw SolverError("build_model: the previous model has another integrator or time step");
      with_mass = with_mass_change(*change, previous->masses(), m.masses_, m.h_);
      c = &with_mass;
    }
    m.K_ = apply_modification(previous->matrix(), *c);
  } else {
    // Assemble K (n × n, one block for x, y, z).
    std::vector<Triplet> trip;
    for (const auto& term : m.terms_) term->add_matrix(trip);
    if (d.integrator == Integrator::ImplicitEuler)
      for (int i = 0; i < nv; ++i) trip.emplace_back(i, i, m.masses_(i) / (m.h_ * m.h_));
    for (const auto& [i, delta] : d.inactive_nodes) trip.emplace_back(i, i, delta);
    m.K_.resize(nv, nv);
    m.K_.setFromTriplets(trip.begin(), trip.end());
  }
  if (m.num_free_components_ > 0) {
    for (int i = 0; i < nv; ++i)
      if (free_root[static_cast<size_t>(uf.find(i))]) m.reg_(i) = d.free_body_regularization * m.K_.coeff(i, i);
    for (int i = 0; i < nv; ++i)
      if (m.reg_(i) != 0.0) m.K_.coeffRef(i, i) += m.reg_(i);
  }
  m.K_.makeCompressed();
  if (d.factorize) m.factor_ = std::make_unique<SparseCholesky>(d.backend);
  if (!m.coupled_) {
    if (m.factor_) m.factor_->compute(m.K_);
    return m;
  }
  // Coupled 3n × 3n matrix: K ⊗ I₃ (with inertia and regularization) plus the coupling terms.
  std::vector<Triplet> trip3;
  trip3.reserve(3 * static_cast<size_t>(m.K_.nonZeros()));
  for (int j = 0; j < m.K_.outerSize(); ++j)
    for (Eigen::SparseMatrix<double>::InnerIterator it(m.K_, j); it; ++it)
      for (int c = 0; c < 3; ++c) trip3.emplace_back(3 * static_cast<int>(it.row()) + c, 3 * j + c, it.value());
  for (const auto& term : m.terms_)
    if (term->couples_coordinates()) term->add_matrix3(trip3);
  m.K3_.resize(3 * nv, 3 * nv);
  m.K3_.setFromTriplets(trip3.begin(), trip3.end());
  m.K3_.makeCompressed();
  if (m.factor_) m.factor_->compute(m.K3_);
  return m;
}

Model build_model(const ModelDesc& desc) { return detail::build_model(desc, nullptr, nullptr); }

Model build_model(const ModelDesc& desc, const Model& previous, const FactorModification& change) {
  return detail::build_model(desc, &previous, &change);
}

const SparseCholesky& Model::factor() const {
  if (!factor_)
    throw SolverError("Model::factor: this model was built without a factorization (ModelDesc::factorize = false)");
  return *factor_;
}

}  // namespace xpd
