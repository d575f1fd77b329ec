#include <fmt/format.h>

#include <cmath>
#include <xpd/core/error.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>

namespace xpd {

Eigen::SparseMatrix<double> newton_hessian(const Model& model, const State& s, bool psd_project) {
  const int n = model.num_nodes();
  std::vector<Triplet> trip;
  for (const auto& t : model.terms()) t->add_hessian(s.x, s.inputs, trip, psd_project);
  const double inv_h2 =
      model.integrator() == Integrator::ImplicitEuler ? 1.0 / (model.time_step() * model.time_step()) : 0.0;
  for (int i = 0; i < n; ++i) {
    const double diag = model.masses()(i) * inv_h2 + model.regularization()(i);
    if (diag != 0.0)
      for (int d = 0; d < 3; ++d) trip.emplace_back(3 * i + d, 3 * i + d, diag);
  }
  Eigen::SparseMatrix<double> H(3 * n, 3 * n);
  H.setFromTriplets(trip.begin(), trip.end());
  return H;
}

NewtonResult newton_solve(const Model& model, State& s, const NewtonOptions& opt) {
  const Eigen::Index n = s.x.rows();
  NewtonResult res;
  double energy = evaluate(model, s);
  double gnorm = s.force.norm();
  double loads = 0.0;
  for (Eigen::Index i = 0; i < n; ++i) {
    Eigen::RowVector3d l = model.masses()(i) * s.inputs.gravity.transpose();
    if (s.inputs.nodal_forces.rows() == n) l += s.inputs.nodal_forces.row(i);
    loads += l.squaredNorm();
  }
  const double scale = std::max(gnorm, std::sqrt(loads));
  SparseCholesky chol(CholeskyBackend::Cholmod);
  bool analyzed = false;
  Points x0(n, 3);
  for (; res.iterations < opt.max_iterations; ++res.iterations) {
    if (!std::isfinite(energy) || !std::isfinite(gnorm))
      throw SolverError(fmt::format("Newton: non-finite energy or gradient at iteration {}", res.iterations));
    if (gnorm <= opt.rel_tolerance * scale || gnorm <= opt.abs_tolerance) {
      res.converged = true;
      break;
    }
    Eigen::VectorXd rhs(3 * n);
    for (Eigen::Index i = 0; i < n; ++i)
      for (int d = 0; d < 3; ++d) rhs(3 * i + d) = s.force(i, d);
    Eigen::VectorXd dir;
    // Exact Hessian first: descent direction whenever it is positive definite.
    {
      const Eigen::SparseMatrix<double> He = newton_hessian(model, s, /*psd_project=*/false);
      try {
        if (!analyzed) {
          chol.analyze(He);
          analyzed = true;
        }
        chol.factorize(He);
        dir = chol.solve(rhs);
      } catch (const SolverError&) {
        dir.resize(0);
      }
    }
    // Otherwise the PSD-projected Hessian, with a diagonal shift if it is singular.
    const Eigen::SparseMatrix<double> H = dir.size() ? Eigen::SparseMatrix<double>() : newton_hessian(model, s);
    const double mean_diag = dir.size() ? 0.0 : H.diagonal().mean();
    for (double shift = 0.0; dir.size() == 0; shift = shift == 0.0 ? 1e-10 * mean_diag : 10.0 * shift) {
      Eigen::SparseMatrix<double> Hs = H;
      if (shift > 0.0)
        for (Eigen::Index i = 0; i < Hs.rows(); ++i) Hs.coeffRef(i, i) += shift;
      try {
        if (!analyzed) {
          chol.analyze(Hs);
          analyzed = true;
        }
        chol.factorize(Hs);
        dir = chol.solve(rhs);
        break;
      } catch (const SolverError&) {
        if (shift > mean_diag) throw;
      }
    }
    // Backtracking (Armijo) line search on E. Near the minimum the decrease predicted by the slope
    // falls below the round-off of E; there the full step is accepted when it reduces ||∇E||.
    const double slope = -rhs.dot(dir);  // ∇E · d < 0
    const bool energy_resolves = std::abs(slope) > 1e-10 * std::max(1.0, std::abs(energy));
    const double g_old = gnorm;
    x0 = s.x;
    double alpha = 1.0, e_new = energy;
    bool accepted = false;
    for (int ls = 0; ls < 60 && !accepted; ++ls, alpha *= 0.5) {
      for (Eigen::Index i = 0; i < n; ++i)
        for (int d = 0; d < 3; ++d) s.x(i, d) = x0(i, d) + alpha * dir(3 * i + d);
      e_new = evaluate(model, s);
      if (energy_resolves) {
        accepted = e_new <= energy + 1e-4 * alpha * slope;
      } else {
        accepted = s.force.norm() < g_old;
        if (!accepted) break;
      }
    }
    if (!accepted) {  // no progress possible at this precision: stop at the previous point
      s.x = x0;
      energy = evaluate(model, s);
      gnorm = s.force.norm();
      res.converged = gnorm <= std::sqrt(opt.rel_tolerance) * scale;
      break;
    }
    energy = e_new;
    gnorm = s.force.norm();
  }
  res.energy = energy;
  res.gradient_norm = gnorm;
  return res;
}

}  // namespace xpd
