#pragma once
// Test helpers for the PD core: meshes, loaded models, tolerances. Every helper accepts any
// TetMesh (real meshes plug in the same way as boxes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>
#include <vector>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/state.hpp>

#include "test_util.hpp"  // verbose(), report()

namespace xpd::test {

/// Length of the bounding-box diagonal.
inline double bbox_diagonal(const Points& x) { return (x.colwise().maxCoeff() - x.colwise().minCoeff()).norm(); }

/// Box of n³ nodes on [0,1]³ with interior nodes jittered by up to `jitter` × spacing
/// (keeps every tet positively oriented for jitter ≤ 0.2).
inline TetMesh jittered_box(int n, double jitter = 0.15, unsigned seed = 7) {
  TetMesh m = make_box(n, n, n, Vec3::Zero(), Vec3::Ones());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double h = 1.0 / (n - 1);
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i) {
    const Vec3 p = m.nodes.row(i).transpose();
    if ((p.array() > 1e-9).all() && (p.array() < 1 - 1e-9).all())
      for (int d = 0; d < 3; ++d) m.nodes(i, d) += jitter * h * u(rng);
  }
  return m;
}

/// Attaches every node with coordinate `axis` within 1e-9 of its minimum to its rest position.
inline void attach_min_face(ModelDesc& d, int axis = 2, double stiffness = 1e7) {
  const double lo = d.mesh.nodes.col(axis).minCoeff();
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
    if (d.mesh.nodes(i, axis) < lo + 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), stiffness, d.mesh.nodes.row(i).transpose()});
}

/// A cantilever-like loaded model: min-z face attached, gravity, per-tet μ varying ±30%.
inline ModelDesc loaded_desc(const TetMesh& mesh, double gravity = 30.0, unsigned seed = 3) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.7, 1.3);
  d.mu.resize(static_cast<size_t>(mesh.tets.rows()));
  for (auto& m : d.mu) m = 1e3 * u(rng);
  d.density = {100.0};
  d.gravity = Vec3(0.3, 0.0, -1.0) * gravity;
  attach_min_face(d, 0, 1e6);  // attach the x = min face: the body bends under gravity
  return d;
}

/// A bar with both x-ends attached with stiffness `attach`, each end's targets moved outwards along
/// x by `pull`; per-tet μ = mu · U(0.5, 2) (seeded). Stays positive definite when a cut separates
/// its middle (the cut tests of the updatable factor and the surgery session).
inline ModelDesc ends_attached_desc(const TetMesh& mesh, double mu, double attach, double pull, unsigned seed) {
  ModelDesc d;
  d.mesh = mesh;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  d.mu.resize(static_cast<size_t>(mesh.tets.rows()));
  for (auto& m : d.mu) m = mu * u(rng);
  const double lo = mesh.nodes.col(0).minCoeff(), hi = mesh.nodes.col(0).maxCoeff();
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i) {
    const double x = mesh.nodes(i, 0);
    if (x < lo + 1e-9 || x > hi - 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), attach,
                               mesh.nodes.row(i).transpose() + Vec3((x < 0.5 * (lo + hi) ? -1 : 1) * pull, 0, 0)});
  }
  return d;
}

/// Options of a tight solve: Anderson, `max_iterations`, relative tolerance `rel_tolerance`.
inline SolverOptions anderson_options(int max_iterations, double rel_tolerance) {
  SolverOptions o;
  o.max_iterations = max_iterations;
  o.rel_tolerance = rel_tolerance;
  o.anderson = true;
  return o;
}

struct PdNewtonResult {
  FrameStats pd;
  NewtonResult newton;
  double error = 0;         ///< max node distance PD − Newton / rest bbox diagonal
  double displacement = 0;  ///< max PD node displacement / rest bbox diagonal
};

/// Solves the model's equilibrium with PD (`o`) and with the Newton oracle, from rest.
inline PdNewtonResult pd_vs_newton(const Model& model, const SolverOptions& o) {
  PdNewtonResult r;
  State pd = make_state(model), nt = make_state(model);
  r.pd = step(model, pd, o);
  r.newton = newton_solve(model, nt);
  const double diag = bbox_diagonal(model.rest_positions());
  r.error = (pd.x - nt.x).rowwise().norm().maxCoeff() / diag;
  r.displacement = (pd.x - model.rest_positions()).rowwise().norm().maxCoeff() / diag;
  return r;
}

struct PatchTestResult {
  double interior_force = 0;  ///< max interior elastic force at the affine state / ||f_el||
  double error = 0;           ///< max node distance to the affine motion / its bbox diagonal
  bool converged = false;
};

/// Patch test on the unit-box mesh d.mesh (materials already in d): boundary nodes are attached
/// (w = 1e5) to the affine motion x ↦ A x + b and loaded with −(elastic force of the affine state),
/// the consistent tractions of its uniform stress; interior nodes get nothing, so the affine state
/// is the equilibrium exactly when the elements reproduce uniform stress.
inline PatchTestResult patch_test(ModelDesc d, const Mat3& A, const Vec3& b, const SolverOptions& o) {
  const TetMesh& mesh = d.mesh;
  Points affine(mesh.nodes.rows(), 3);
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
    affine.row(i) = (A * mesh.nodes.row(i).transpose() + b).transpose();
  std::vector<char> boundary(static_cast<size_t>(mesh.nodes.rows()), 0);
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i) {
    const Vec3 p = mesh.nodes.row(i);
    boundary[static_cast<size_t>(i)] = (p.array() < 1e-9).any() || (p.array() > 1 - 1e-9).any();
    if (boundary[static_cast<size_t>(i)])
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e5, affine.row(i).transpose()});
  }
  PatchTestResult r;
  {
    const Model probe = build_model(d);
    Points f_el = Points::Zero(mesh.nodes.rows(), 3);
    for (const auto& t : probe.terms())
      if (t->name() != "attachment" && t->name() != "loads")
        t->project_add_force(affine, probe.initial_inputs(), f_el, nullptr);
    d.nodal_forces = Points::Zero(mesh.nodes.rows(), 3);
    for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i) {
      if (boundary[static_cast<size_t>(i)])
        d.nodal_forces.row(i) = -f_el.row(i);
      else
        r.interior_force = std::max(r.interior_force, f_el.row(i).norm());
    }
    r.interior_force /= f_el.norm();
  }
  const Model model = build_model(d);
  State s = make_state(model);
  r.converged = step(model, s, o).converged;
  r.error = (s.x - affine).rowwise().norm().maxCoeff() / bbox_diagonal(affine);
  return r;
}

/// Runs `iterations` plain PD iterations from the state's positions, checking after every global
/// and every local step that the surrogate energy Ê(x, p) = Σ_terms w/2 ||G x − p||² did not
/// increase (relative slack 1e−10; GoogleTest expectations name the step and iteration).
/// Returns {energy after the first local step, final energy}.
inline std::pair<double, double> expect_monotone_pd_energy(const Model& model, State& s, int iterations) {
  std::vector<std::vector<double>> p = s.projections;
  const auto energy = [&] {
    double e = 0;
    for (size_t t = 0; t < model.terms().size(); ++t) e += model.terms()[t]->energy_given(s.x, s.inputs, p[t].data());
    return e;
  };
  const auto local_step = [&] {
    for (size_t t = 0; t < model.terms().size(); ++t) model.terms()[t]->project(s.x, s.inputs, p[t].data());
  };
  local_step();
  const double e0 = energy();
  double e = e0;
  for (int it = 0; it < iterations; ++it) {
    // Global: K δ = −∇Ê(x, p) minimizes Ê(·, p) exactly.
    s.force.setZero();
    for (size_t t = 0; t < model.terms().size(); ++t)
      model.terms()[t]->add_force_given(s.x, s.inputs, p[t].data(), s.force);
    solve_global(model, s);
    s.x += Points(s.rhs);
    const double e_global = energy();
    EXPECT_LE(e_global, e + 1e-10 * std::abs(e)) << "global step, iteration " << it;
    local_step();
    const double e_local = energy();
    EXPECT_LE(e_local, e_global + 1e-10 * std::abs(e_global)) << "local step, iteration " << it;
    e = e_local;
  }
  return {e0, e};
}

}  // namespace xpd::test
