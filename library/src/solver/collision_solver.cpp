#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

#include "anderson.hpp"

namespace xpd {

std::string to_string(CollisionMethod method) {
  switch (method) {
    case CollisionMethod::schur:
      return "schur";
    case CollisionMethod::full_refactor:
      return "full_refactor";
    case CollisionMethod::projective_skinning:
      return "projective_skinning";
    case CollisionMethod::pcg:
      return "pcg";
  }
  return "?";
}

CollisionMethod collision_method_from_string(const std::string& name) {
  for (CollisionMethod m : {CollisionMethod::schur, CollisionMethod::full_refactor,
                            CollisionMethod::projective_skinning, CollisionMethod::pcg})
    if (to_string(m) == name) return m;
  throw Error(
      fmt::format("unknown collision method '{}' (expected schur, full_refactor, projective_skinning or pcg)", name));
}

void accumulate(CollisionTimings& a, const CollisionTimings& b, double scale) {
  a.detect += scale * b.detect;
  a.local_beta += scale * b.local_beta;
  a.schur_update += scale * b.schur_update;
  a.schur_factor += scale * b.schur_factor;
  a.schur_solve += scale * b.schur_solve;
  a.forward += scale * b.forward;
  a.backward += scale * b.backward;
  a.refactor += scale * b.refactor;
  a.pcg += scale * b.pcg;
}

namespace {

struct BetaList {
  const TetTerm* term = nullptr;
  std::vector<int> elements;  // element-order indices of the term whose 4 nodes lie in x2
};

}  // namespace

struct CollisionSolver::Impl {
  const Model* model = nullptr;
  ProxySet proxies;
  std::vector<int> region;  // proxy indices
  ContactDetector* detector = nullptr;
  CollisionOptions opt;
  std::vector<int> nodes2;    // x2, region-local order
  std::vector<int> local_of;  // node → region-local index or −1
  std::vector<BetaList> beta;
  int num_beta = 0;
  Eigen::SparseMatrix<double> a22_beta;  // m × m, region-local: Σ_β w Gᵀ G
  std::optional<SchurFactorization> schur;
  std::optional<SparseCholesky> sparse;  // baseline (a): analyzed on K; (b): K + all region springs
  double setup_ms = 0;
  std::vector<ProxyContact> contacts;
  // Springs of the current global step: every proxy active at some detection of this frame
  // (keep_active_in_frame) or of the last detection; target = contact target, or the proxy's
  // current position when it is not in contact now (zero force, stiffness kept in the matrix).
  std::vector<char> in_springs;   // per proxy
  std::vector<int> out_count;     // per proxy: detections in a row out of contact while in springs
  std::vector<int> spring_proxy;  // sorted
  std::vector<Vec3> spring_target;
  // Scratch.
  Points fb;  // #V × 3, zero outside of use (only x2 rows are ever written)
  Eigen::MatrixXd rhs, y1, g2, g_alpha, fbeta, fcol, g, u2, u2_total, sigma_u2, u;
  Points x_old, delta;  // Anderson: the iterate before the global step, and the step
  std::vector<double> inner_residuals;  // see CollisionSolver::inner_residuals()
  std::vector<SchurProxy> schur_proxies;

  int m() const { return static_cast<int>(nodes2.size()); }

  Vec3 proxy_position(const Points& x, int p) const {
    const Tets& tets = model->tets();
    const int t = proxies.tet[static_cast<size_t>(p)];
    Vec3 xp = Vec3::Zero();
    for (int a = 0; a < 4; ++a) xp += proxies.weights(p, a) * x.row(tets(t, a)).transpose();
    return xp;
  }

  void reset_springs() {
    for (const int p : spring_proxy) in_springs[static_cast<size_t>(p)] = 0, out_count[static_cast<size_t>(p)] = 0;
    spring_proxy.clear();
    spring_target.clear();
  }

  // Springs after a detection at x (contacts sorted by proxy). A spring out of contact keeps its
  // stiffness (target = its current position) until it has been out for release_after detections
  // in a row: proxies that flicker in and out on the contact boundary keep one matrix, proxies that
  // really separate are freed after a few detections instead of being dragged by their springs.
  void update_springs(const Points& x) {
    if (!opt.keep_active_in_frame) reset_springs();
    for (const ProxyContact& ct : contacts) {
      out_count[static_cast<size_t>(ct.proxy)] = 0;
      if (!in_springs[static_cast<size_t>(ct.proxy)]) {
        in_springs[static_cast<size_t>(ct.proxy)] = 1;
        spring_proxy.push_back(ct.proxy);
      }
    }
    std::sort(spring_proxy.begin(), spring_proxy.end());
    spring_target.clear();
    size_t c = 0, kept = 0;
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      while (c < contacts.size() && contacts[c].proxy < p) ++c;
      const bool touching = c < contacts.size() && contacts[c].proxy == p;
      if (!touching && ++out_count[static_cast<size_t>(p)] >= opt.release_after) {
        in_springs[static_cast<size_t>(p)] = 0;
        out_count[static_cast<size_t>(p)] = 0;
        continue;
      }
      spring_proxy[kept++] = p;
      if (!touching) {
        spring_target.push_back(proxy_position(x, p));
      } else if (contacts[c].source == ProxyContact::Source::Self) {
        // Both sides of a self-contact are proxies, each pulled towards the other side's surface:
        // with full targets the two surfaces would swap places every iteration (a 2-cycle for a
        // stiff penalty). Half-way targets make the pair meet in the middle.
        const Vec3 xp = proxy_position(x, p);
        spring_target.push_back(xp + 0.5 * (contacts[c].target - xp));
      } else {
        spring_target.push_back(contacts[c].target);
      }
    }
    spring_proxy.resize(kept);
  }

  // Collision energy Σ c/2 ||x_p − t||² of the springs at x; adds −c (x_p − t) w_a to f rows.
  double add_collision_forces(const Points& x, Points& f) const {
    const Tets& tets = model->tets();
    const double c = opt.stiffness;
    double e = 0.0;
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      const int t = proxies.tet[static_cast<size_t>(p)];
      const Vec3 d = proxy_position(x, p) - spring_target[i];
      e += 0.5 * c * d.squaredNorm();
      for (int a = 0; a < 4; ++a) f.row(tets(t, a)) -= (c * proxies.weights(p, a)) * d.transpose();
    }
    return e;
  }

  void detect(const Points& x, double frame, CollisionTimings& tm) {
    PhaseTimer pt;
    detector->detect(x, frame, contacts);
    for (size_t i = 0; i < contacts.size(); ++i) {
      const ProxyContact& ct = contacts[i];
      if (ct.proxy < 0 || ct.proxy >= proxies.size() || !in_region_proxy(ct.proxy))
        throw SolverError(
            fmt::format("collision detector reported proxy {}, which is not in the collision region", ct.proxy));
      if (i > 0 && !(contacts[i - 1].proxy < ct.proxy))
        throw SolverError("collision detector: contacts must be sorted by proxy, one per proxy");
      if (!ct.target.allFinite())
        throw SolverError(fmt::format("collision detector: non-finite target of proxy {}", ct.proxy));
    }
    update_springs(x);
    pt.lap(tm.detect);
  }

  std::vector<char> region_mask;  // per proxy
  bool in_region_proxy(int p) const { return region_mask[static_cast<size_t>(p)] != 0; }

  // E_β forces at x, gathered into out (m × 3, region-local).
  void beta_forces(const State& s, Eigen::MatrixXd& out) {
    for (const BetaList& b : beta) b.term->project_add_force_subset(s.x, s.inputs, fb, b.elements);
    out.resize(m(), 3);
    for (int i = 0; i < m(); ++i) {
      const int node = nodes2[static_cast<size_t>(i)];
      out.row(i) = fb.row(node);
      fb.row(node).setZero();
    }
  }

  // The springs as region-local SchurProxy springs, and their forces (m × 3) at x.
  void contact_springs(const Points& x, Eigen::MatrixXd& force) {
    const Tets& tets = model->tets();
    schur_proxies.clear();
    force.setZero(m(), 3);
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      const int t = proxies.tet[static_cast<size_t>(p)];
      SchurProxy sp;
      Vec3 xp = Vec3::Zero();
      for (int a = 0; a < 4; ++a) {
        sp.nodes[static_cast<size_t>(a)] = local_of[static_cast<size_t>(tets(t, a))];
        sp.weights[static_cast<size_t>(a)] = proxies.weights(p, a);
        xp += proxies.weights(p, a) * x.row(tets(t, a)).transpose();
      }
      sp.stiffness = opt.stiffness;
      const Vec3 d = xp - spring_target[i];
      for (int a = 0; a < 4; ++a)
        force.row(sp.nodes[static_cast<size_t>(a)]) -=
            (opt.stiffness * sp.weights[static_cast<size_t>(a)]) * d.transpose();
      schur_proxies.push_back(sp);
    }
  }

  // K + Σ_springs c w wᵀ with K's pattern (every spring lies in one tet, so its entries exist).
  Eigen::SparseMatrix<double> matrix_with_springs(const std::vector<int>& proxy_ids) const {
    Eigen::SparseMatrix<double> A = model->matrix();
    const Tets& tets = model->tets();
    for (const int p : proxy_ids) {
      const int t = proxies.tet[static_cast<size_t>(p)];
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) {
          const double v = opt.stiffness * proxies.weights(p, a) * proxies.weights(p, b);
          if (v != 0.0) A.coeffRef(tets(t, a), tets(t, b)) += v;
        }
    }
    return A;
  }

  // One outer iteration of Algorithm 1 from s.x with s.force = f(x) + f_col(x).
  void schur_iteration(State& s, double frame, CollisionFrameStats& st) {
    CollisionTimings& tm = st.timings_ms;
    PhaseTimer pt;
    SchurFactorization& S = *schur;
    rhs = s.force;  // row-major → column-major n × 3
    S.forward(rhs, y1, g2);
    pt.lap(tm.forward);
    // g_α = g2 − f_β(x) − f_col(x): the α part of the reduced right-hand side.
    beta_forces(s, fbeta);
    pt.lap(tm.local_beta);
    contact_springs(s.x, fcol);
    g_alpha = g2 - fbeta - fcol;
    u2_total.setZero(m(), 3);
    inner_residuals.clear();
    pt.lap(tm.schur_update);
    for (int j = 0; j < opt.inner_iterations; ++j) {
      if (j > 0) {
        pt.skip();
        detect(s.x, frame, tm);
        beta_forces(s, fbeta);  // R_β at the moved x2 (step 4.2)
        pt.lap(tm.local_beta);
        contact_springs(s.x, fcol);
        pt.lap(tm.schur_update);
      }
      g = g_alpha + fbeta + fcol;
      inner_residuals.push_back(g.norm());
      pt.skip();
      S.solve_collision_system(schur_proxies, g, opt.schur_solve, u2);
      const SchurSolveTimings& lt = S.last_timings();
      tm.schur_update += lt.update;
      tm.schur_factor += lt.factor;
      tm.schur_solve += lt.solve;
      pt.skip();
      for (int i = 0; i < m(); ++i) s.x.row(nodes2[static_cast<size_t>(i)]) += u2.row(i);
      u2_total += u2;
      // Step 4.7: g_α −= Σ_α u2 with Σ_α u2 = (g − C22 u2) − A22^(β) u2 (H u2 = g, H = Σ + C22).
      sigma_u2 = g;
      for (const SchurProxy& sp : schur_proxies) {
        Eigen::RowVector3d wu = Eigen::RowVector3d::Zero();
        for (int a = 0; a < 4; ++a) wu += sp.weights[static_cast<size_t>(a)] * u2.row(sp.nodes[static_cast<size_t>(a)]);
        for (int a = 0; a < 4; ++a)
          sigma_u2.row(sp.nodes[static_cast<size_t>(a)]) -= (sp.stiffness * sp.weights[static_cast<size_t>(a)]) * wu;
      }
      sigma_u2.noalias() -= a22_beta * u2;
      g_alpha -= sigma_u2;
      ++st.inner_iterations;
      pt.lap(tm.schur_solve);
    }
    S.backward(y1, u2_total, u);
    for (Eigen::Index i = 0; i < u.rows(); ++i)
      if (local_of[static_cast<size_t>(i)] < 0) s.x.row(i) += u.row(i);
    pt.lap(tm.backward);
  }

  // PCG with a Jacobi preconditioner on A δ = b (3 independent columns), fixed iteration count.
  Eigen::MatrixXd pcg(const Eigen::SparseMatrix<double>& A, const Eigen::MatrixXd& b, int iterations) const {
    const Eigen::VectorXd inv_diag = A.diagonal().cwiseInverse();
    Eigen::MatrixXd xk = Eigen::MatrixXd::Zero(b.rows(), b.cols());
    for (Eigen::Index c = 0; c < b.cols(); ++c) {
      Eigen::VectorXd r = b.col(c);
      Eigen::VectorXd z = inv_diag.cwiseProduct(r);
      Eigen::VectorXd p = z;
      double rz = r.dot(z);
      const double b_norm = b.col(c).norm();
      for (int it = 0; it < iterations && r.norm() > 1e-14 * b_norm; ++it) {
        const Eigen::VectorXd Ap = A * p;
        const double alpha = rz / p.dot(Ap);
        xk.col(c) += alpha * p;
        r -= alpha * Ap;
        z = inv_diag.cwiseProduct(r);
        const double rz_new = r.dot(z);
        p = z + (rz_new / rz) * p;
        rz = rz_new;
      }
    }
    return xk;
  }
};

CollisionSolver::CollisionSolver(const Model& model, const ProxySet& proxies, std::vector<int> region,
                                 ContactDetector& detector, CollisionOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  Timer setup;
  d.model = &model;
  d.proxies = proxies;
  d.detector = &detector;
  d.opt = options;
  if (model.has_volume_term())
    throw SolverError(
        "collision: the collision solver needs lambda = 0 (its Schur complement is built on the n x n "
        "PD matrix; the lambda volume term needs a line-searched global step)");
  if (!(options.stiffness > 0.0) || !std::isfinite(options.stiffness))
    throw SolverError(fmt::format("collision: penalty stiffness must be > 0 (got {})", options.stiffness));
  if (options.inner_iterations < 1)
    throw SolverError(fmt::format("collision: inner_iterations must be >= 1 (got {})", options.inner_iterations));
  if (options.release_after < 1)
    throw SolverError(fmt::format("collision: release_after must be >= 1 (got {})", options.release_after));
  if (options.pcg_iterations < 1)
    throw SolverError(fmt::format("collision: pcg_iterations must be >= 1 (got {})", options.pcg_iterations));
  const int n = model.num_nodes();
  const Tets& tets = model.tets();
  if (proxies.weights.rows() != proxies.size()) throw SolverError("collision: proxy weights and tets differ in count");
  std::sort(region.begin(), region.end());
  region.erase(std::unique(region.begin(), region.end()), region.end());
  d.region_mask.assign(static_cast<size_t>(proxies.size()), 0);
  d.in_springs.assign(static_cast<size_t>(proxies.size()), 0);
  d.out_count.assign(static_cast<size_t>(proxies.size()), 0);
  d.local_of.assign(static_cast<size_t>(n), -1);
  for (const int p : region) {
    if (p < 0 || p >= proxies.size())
      throw SolverError(fmt::format("collision: region proxy {} out of range [0, {})", p, proxies.size()));
    const int t = proxies.tet[static_cast<size_t>(p)];
    if (t < 0 || t >= model.num_tets())
      throw SolverError(fmt::format("collision: proxy {} is bound to tet {}, outside the mesh", p, t));
    d.region_mask[static_cast<size_t>(p)] = 1;
    for (int a = 0; a < 4; ++a) d.local_of[static_cast<size_t>(tets(t, a))] = 0;  // mark
  }
  for (const int t : options.region_tets) {
    if (t < 0 || t >= model.num_tets())
      throw SolverError(fmt::format("collision: region tet {} out of range [0, {})", t, model.num_tets()));
    for (int a = 0; a < 4; ++a) d.local_of[static_cast<size_t>(tets(t, a))] = 0;
  }
  d.region = std::move(region);
  for (int i = 0; i < n; ++i)
    if (d.local_of[static_cast<size_t>(i)] >= 0) {
      d.local_of[static_cast<size_t>(i)] = static_cast<int>(d.nodes2.size());
      d.nodes2.push_back(i);
    }
  const int m = d.m();
  // E_β: elements of every tet term whose four nodes lie in x2; and A22^(β) = Σ_β w Gᵀ G.
  std::vector<Eigen::Triplet<double>> trip;
  for (const auto& term : model.terms()) {
    const auto* tt = dynamic_cast<const TetTerm*>(term.get());
    if (!tt || m == 0) continue;
    BetaList b;
    b.term = tt;
    const TetElements& e = tt->elements();
    for (int k = 0; k < e.size(); ++k) {
      const auto& nk = e.nodes[static_cast<size_t>(k)];
      bool all = true;
      for (int a = 0; a < 4; ++a) all = all && d.local_of[static_cast<size_t>(nk[a])] >= 0;
      if (!all) continue;
      b.elements.push_back(k);
      Vec3 g[4];
      shape_gradients(e.Dm_inv[static_cast<size_t>(k)], g);
      const double w = e.weight[static_cast<size_t>(k)];
      for (int a = 0; a < 4; ++a)
        for (int c = 0; c < 4; ++c)
          trip.emplace_back(d.local_of[static_cast<size_t>(nk[a])], d.local_of[static_cast<size_t>(nk[c])],
                            w * g[a].dot(g[c]));
    }
    d.num_beta += static_cast<int>(b.elements.size());
    if (!b.elements.empty()) d.beta.push_back(std::move(b));
  }
  d.a22_beta.resize(m, m);
  d.a22_beta.setFromTriplets(trip.begin(), trip.end());
  d.fb = Points::Zero(n, 3);
  switch (options.method) {
    case CollisionMethod::schur:
      if (m > 0) {
        SchurOptions so = options.schur;
        if (options.schur_solve != SchurSolveMethod::dense_refactor) so.precompute_inverse = true;
        d.schur.emplace(model.matrix(), d.nodes2, so);
      }
      break;
    case CollisionMethod::full_refactor:
      d.sparse.emplace(CholeskyBackend::Cholmod);
      d.sparse->analyze(model.matrix());
      break;
    case CollisionMethod::projective_skinning:
      d.sparse.emplace(CholeskyBackend::Cholmod);
      d.sparse->compute(d.matrix_with_springs(d.region));
      break;
    case CollisionMethod::pcg:
      break;
  }
  d.setup_ms = setup.elapsed_ms();
}

CollisionSolver::~CollisionSolver() = default;
CollisionSolver::CollisionSolver(CollisionSolver&&) noexcept = default;
CollisionSolver& CollisionSolver::operator=(CollisionSolver&&) noexcept = default;

const CollisionOptions& CollisionSolver::options() const { return impl_->opt; }
void CollisionSolver::set_inner_iterations(int j) {
  if (j < 1) throw SolverError(fmt::format("collision: inner_iterations must be >= 1 (got {})", j));
  impl_->opt.inner_iterations = j;
}
const std::vector<int>& CollisionSolver::region_nodes() const { return impl_->nodes2; }
int CollisionSolver::num_beta_elements() const { return impl_->num_beta; }
const SchurFactorization* CollisionSolver::schur() const { return impl_->schur ? &*impl_->schur : nullptr; }
double CollisionSolver::setup_ms() const { return impl_->setup_ms; }
const std::vector<ProxyContact>& CollisionSolver::contacts() const { return impl_->contacts; }
const std::vector<double>& CollisionSolver::inner_residuals() const { return impl_->inner_residuals; }

CollisionFrameStats CollisionSolver::step(State& s, const SolverOptions& opt, double frame) {
  Impl& d = *impl_;
  const Model& model = *d.model;
  if (opt.max_iterations < 0) throw SolverError("collision step: max_iterations must be >= 0");
  if (s.x.rows() != model.num_nodes()) throw SolverError("collision step: state does not belong to the model");
  if (!s.inputs.attachment_targets.allFinite() || !s.inputs.shape_targets.allFinite() ||
      !s.inputs.gravity.allFinite() || !s.inputs.nodal_forces.allFinite())
    throw SolverError(fmt::format("collision step: non-finite frame input at frame {}", s.frame));
  Timer wall;
  CollisionFrameStats cs;
  FrameStats& st = cs.pd;
  CollisionTimings& tm = cs.timings_ms;
  PhaseTimer pt;
  s.x_start = s.x;
  if (model.integrator() == Integrator::ImplicitEuler) {
    s.inertia_target = s.x + model.time_step() * s.velocity;
    s.x = s.inertia_target;
  }
  st.load_scale = load_norm(model, s);
  pt.lap(st.timings_ms.other);

  // f(x) + f_col(x) into s.force, objective into the return value.
  auto evaluate_all = [&]() {
    double e = evaluate(model, s, &st.timings_ms);
    pt.skip();
    if (d.m() > 0)
      d.detect(s.x, frame, tm);
    else
      d.contacts.clear();  // (no springs either)
    pt.skip();
    e += d.add_collision_forces(s.x, s.force);
    pt.lap(st.timings_ms.rhs);
    return e;
  };
  auto check_finite = [&](double e, double r) {
    if (!std::isfinite(e) || !std::isfinite(r))
      throw SolverError(fmt::format("non-finite {} at frame {}, iteration {} (energy={}, residual={})",
                                    std::isfinite(e) ? "forces" : "energy", s.frame, st.iterations, e, r));
  };

  d.reset_springs();
  double energy = evaluate_all();
  double residual = s.force.norm();
  check_finite(energy, residual);
  st.initial_residual = residual;
  const double scale = std::max(residual, st.load_scale);
  // Round-off floor: a frame that starts at equilibrium (nothing moves, no loads) has a residual of
  // pure round-off, ~ε ||K|| ||x||, that no iteration can reduce relative to itself.
  const double floor = 1e-13 * model.matrix().diagonal().cwiseAbs().maxCoeff() * s.x.norm();
  auto converged = [&](double r) { return r <= opt.rel_tolerance * scale || r <= opt.abs_tolerance || r <= floor; };
  // Anderson acceleration of the outer iteration x ↦ G(x). G depends on the spring set (the matrix
  // K + WᵀCW); an accelerated iterate whose total energy (elastic + penalty) exceeds the previous one
  // is replaced by the plain iterate and the history restarts. (Restarting on every change of the
  // spring set was tried: the set changes every few iterations at the contact rim, so Anderson
  // never engaged.)
  const bool anderson = opt.anderson || opt.accelerator == Accelerator::Anderson;
  if (anderson && opt.anderson_window < 1) throw SolverError("collision step: anderson_window must be >= 1");
  if (anderson) {
    s.anderson.history = s.anderson.head = 0;
    s.anderson.has_prev = false;
  }
  Points& x_old = d.x_old;
  while ((!converged(residual) || st.iterations < opt.min_iterations) && st.iterations < opt.max_iterations) {
    pt.skip();
    if (anderson) {
      x_old = s.x;
    }
    const bool plain = d.m() == 0 || (d.spring_proxy.empty() && d.opt.plain_path_without_contacts &&
                                      d.opt.method != CollisionMethod::projective_skinning);
    if (plain) {
      solve_global(model, s);
      pt.lap(st.timings_ms.solve);
      s.force = s.rhs;
      s.x += s.force;
      ++cs.plain_iterations;
    } else {
      switch (d.opt.method) {
        case CollisionMethod::schur:
          d.schur_iteration(s, frame, cs);
          break;
        case CollisionMethod::full_refactor:
        case CollisionMethod::projective_skinning:
          if (d.opt.method == CollisionMethod::full_refactor) {
            d.sparse->factorize(d.matrix_with_springs(d.spring_proxy));
            pt.lap(tm.refactor);
          }
          d.rhs = s.force;
          d.sparse->solve_in_place(d.rhs);
          s.force = d.rhs;
          s.x += s.force;
          pt.lap(st.timings_ms.solve);
          break;
        case CollisionMethod::pcg: {
          const Eigen::SparseMatrix<double> A = d.matrix_with_springs(d.spring_proxy);
          d.rhs = s.force;
          s.force = d.pcg(A, d.rhs, d.opt.pcg_iterations);
          s.x += s.force;
          pt.lap(tm.pcg);
          break;
        }
      }
    }
    ++st.iterations;
    if (!s.x.allFinite())
      throw SolverError(
          fmt::format("non-finite positions after the global step at frame {}, iteration {}", s.frame, st.iterations));
    bool accelerated = false;
    if (anderson) {
      Points& delta = d.delta;
      delta = s.x - x_old;
      s.x = x_old;
      Eigen::Map<Eigen::VectorXd> xv(s.x.data(), s.x.size());
      detail::anderson_update(s.anderson, opt.anderson_window, xv,
                              Eigen::Map<const Eigen::VectorXd>(delta.data(), delta.size()));
      accelerated = s.anderson.history > 0;
    }
    const double previous = energy;
    energy = evaluate_all();
    if (accelerated && !(energy <= previous + 1e-12 * std::abs(previous))) {
      Eigen::Map<Eigen::VectorXd>(s.x.data(), s.x.size()) = s.anderson.x_pd;
      s.anderson.history = s.anderson.head = 0;
      s.anderson.has_prev = false;
      ++st.anderson_rejections;
      energy = evaluate_all();
    }
    residual = s.force.norm();
    check_finite(energy, residual);
  }
  st.converged = converged(residual);
  if (model.integrator() == Integrator::ImplicitEuler) s.velocity = (s.x - s.x_start) / model.time_step();
  st.energy = energy;
  st.residual = residual;
  cs.active_proxies = static_cast<int>(d.contacts.size());
  for (const ProxyContact& ct : d.contacts) cs.max_penetration = std::max(cs.max_penetration, ct.depth);
  ++s.frame;
  st.wall_ms = wall.elapsed_ms();
  return cs;
}

}  // namespace xpd
