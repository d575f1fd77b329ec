#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/energy/tet_term.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

namespace xpd {

std::string to_string(CollisionMethod method) {
  switch (method) {
    case CollisionMethod::Schur:
      return "schur";
    case CollisionMethod::FullRefactor:
      return "full_refactor";
    case CollisionMethod::ProjectiveSkinning:
      return "projective_skinning";
    case CollisionMethod::Pcg:
      return "pcg";
  }
  return "?";
}

CollisionMethod collision_method_from_string(const std::string& name) {
  for (CollisionMethod m : {CollisionMethod::Schur, CollisionMethod::FullRefactor, CollisionMethod::ProjectiveSkinning,
                            CollisionMethod::Pcg})
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

using BetaList = CollisionBetaElements;

}  // namespace

// ---------------------------------------------------------------------------------------------
// The constant part: partition, E_β, A22^(β), the factorization of the method.
struct CollisionModel::Impl {
  const Model* model = nullptr;
  ProxySet proxies;
  std::vector<int> region;        // proxy indices
  std::vector<char> region_mask;  // per proxy
  CollisionOptions opt;
  std::vector<int> nodes2;    // x2, region-local order
  std::vector<int> local_of;  // node → region-local index or −1
  std::vector<BetaList> beta;
  int num_beta = 0;
  Eigen::SparseMatrix<double> a22_beta;  // m × m, region-local: Σ_β w Gᵀ G
  std::optional<SchurFactorization> schur;
  std::optional<SparseCholesky> skinning;  // baseline (b): K + all region springs, factored once
  double setup_ms = 0;

  int m() const { return static_cast<int>(nodes2.size()); }
  bool in_region_proxy(int p) const { return region_mask[static_cast<size_t>(p)] != 0; }

  void check_contacts(const std::vector<ProxyContact>& contacts) const {
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
  }

  Vec3 proxy_position(const Points& x, int p) const {
    const Tets& tets = model->tets();
    const int t = proxies.tet[static_cast<size_t>(p)];
    Vec3 xp = Vec3::Zero();
    for (int a = 0; a < 4; ++a) xp += proxies.weights(p, a) * x.row(tets(t, a)).transpose();
    return xp;
  }

  // K + Σ_springs c w wᵀ. A one-sided spring lies in one tet, so its entries exist in K's pattern;
  // a two-sided one (surface_tet[i] ≥ 0) couples the proxy's tet with the other side's and adds
  // entries (coeffRef inserts them).
  Eigen::SparseMatrix<double> matrix_with_springs(const std::vector<int>& proxy_ids,
                                                  const std::vector<int>& surface_tet = {},
                                                  const std::vector<Vec4>& surface_w = {}) const {
    Eigen::SparseMatrix<double> A = model->matrix();
    const Tets& tets = model->tets();
    for (size_t i = 0; i < proxy_ids.size(); ++i) {
      const int p = proxy_ids[i];
      const int t = proxies.tet[static_cast<size_t>(p)];
      std::array<int, 8> nodes{};
      std::array<double, 8> w{};
      for (int a = 0; a < 4; ++a)
        nodes[static_cast<size_t>(a)] = tets(t, a), w[static_cast<size_t>(a)] = proxies.weights(p, a);
      const int st = i < surface_tet.size() ? surface_tet[i] : -1;
      for (int a = 0; a < 4; ++a) {
        nodes[static_cast<size_t>(4 + a)] = st >= 0 ? tets(st, a) : 0;
        w[static_cast<size_t>(4 + a)] = st >= 0 ? -surface_w[i][a] : 0.0;
      }
      for (size_t a = 0; a < 8; ++a)
        for (size_t b = 0; b < 8; ++b) {
          const double v = opt.stiffness * w[a] * w[b];
          if (v != 0.0) A.coeffRef(nodes[a], nodes[b]) += v;
        }
    }
    A.makeCompressed();
    return A;
  }
};

// ---------------------------------------------------------------------------------------------
// The per-state part: springs, contacts, scratch of the solves.
struct CollisionState::Impl {
  const CollisionModel::Impl* cm = nullptr;
  ContactDetector* detector = nullptr;
  int inner_iterations = 1;
  std::vector<ProxyContact> contacts;
  // Springs of the current global step: every proxy active at some detection of this frame
  // (keep_active_in_frame) or of the last detection; target = contact target, or the proxy's
  // current position when it is not in contact now (zero force, stiffness kept in the matrix).
  std::vector<char> in_springs;   // per proxy
  std::vector<int> out_count;     // per proxy: detections in a row out of contact while in springs
  std::vector<int> spring_proxy;  // sorted
  // Per spring: the other side's surface point for a two-sided self-contact spring (tet, weights;
  // tet −1: one-sided) and the constant offset o, so the spring's vector is
  // d = x_p − Σ_a spring_surface_w[a] x[tets(spring_surface_tet, a)] − o (o = the target in space for
  // one-sided springs, 0 for a touching two-sided one, the current d for a spring out of contact).
  std::vector<int> spring_surface_tet;
  std::vector<Vec4> spring_surface_w;
  std::vector<Vec3> spring_offset;
  // Per spring: the held contact normal of a half-space spring (self_contact_half_space; zero: the
  // spring acts on all of d), whose vector is then min(0, n·d) n.
  std::vector<Vec3> spring_normal;
  std::vector<int> last_surface_tet;  // per proxy: the surface of its last self contact (−1: none)
  std::vector<Vec4> last_surface_w;
  std::vector<Vec3> last_surface_n;        // per proxy: the normal held with that pairing
  int repair_rounds = 0;                   // this frame's rounds of half-space re-pairing
  bool repair_pending = false;             // the next detection re-pairs slid half-space springs
  std::optional<SparseCholesky> refactor;  // baseline (a): analyzed on K, refactored per iteration
  bool refactor_pattern_is_k = true;       // false after an analysis with two-sided springs
  SchurWorkspace ws;
  // Scratch.
  Points fb;  // #V × 3, zero outside of use (only x2 rows are ever written)
  Eigen::MatrixXd rhs, y1, g2, g_alpha, fbeta, fcol, g, u2, u2_total, sigma_u2, u;
  std::vector<double> inner_residuals;  // see CollisionState::inner_residuals()
  std::vector<SchurProxy> schur_proxies;

  int m() const { return cm->m(); }

  void reset_springs() {
    for (const int p : spring_proxy) {
      in_springs[static_cast<size_t>(p)] = 0, out_count[static_cast<size_t>(p)] = 0;
      last_surface_tet[static_cast<size_t>(p)] = -1;
    }
    spring_proxy.clear();
    spring_surface_tet.clear();
    spring_surface_w.clear();
    spring_offset.clear();
    spring_normal.clear();
  }

  Vec3 surface_point(const Points& x, int tet, const Vec4& w) const {
    const Tets& tets = cm->model->tets();
    Vec3 q = Vec3::Zero();
    for (int a = 0; a < 4; ++a) q += w[a] * x.row(tets(tet, a)).transpose();
    return q;
  }

  // Spring i's vector at x: d (see spring_offset), or for a half-space spring d minus its
  // projection onto the half-space n·d ≥ 0, min(0, n·d) n.
  Vec3 spring_vector(const Points& x, size_t i) const {
    Vec3 d = cm->proxy_position(x, spring_proxy[i]) - spring_offset[i];
    if (spring_surface_tet[i] >= 0) d -= surface_point(x, spring_surface_tet[i], spring_surface_w[i]);
    if (const Vec3& n = spring_normal[i]; n != Vec3::Zero()) return std::min(0.0, n.dot(d)) * n;
    return d;
  }

  // Springs after a detection at x (contacts sorted by proxy). A spring out of contact keeps its
  // stiffness (target = its current position) until it has been out for release_after detections
  // in a row: proxies that flicker in and out on the contact boundary keep one matrix, proxies that
  // really separate are freed after a few detections instead of being dragged by their springs.
  void update_springs(const Points& x) {
    if (!cm->opt.keep_active_in_frame) reset_springs();
    for (const ProxyContact& ct : contacts) {
      out_count[static_cast<size_t>(ct.proxy)] = 0;
      if (!in_springs[static_cast<size_t>(ct.proxy)]) {
        in_springs[static_cast<size_t>(ct.proxy)] = 1;
        spring_proxy.push_back(ct.proxy);
      }
    }
    std::sort(spring_proxy.begin(), spring_proxy.end());
    spring_surface_tet.clear();
    spring_surface_w.clear();
    spring_offset.clear();
    spring_normal.clear();
    const bool half_space = cm->opt.self_contact_half_space;
    size_t c = 0, kept = 0;
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      const auto pi = static_cast<size_t>(p);
      while (c < contacts.size() && contacts[c].proxy < p) ++c;
      const bool touching = c < contacts.size() && contacts[c].proxy == p;
      // A half-space spring is not released within the frame: outside its plane it has no force
      // already, and releasing it lets a proxy on the contact boundary cycle (out for
      // release_after detections, released, back in, paired afresh: the energy jumps each time).
      // A held half-space pairing whose proxy has slid beyond half_space_repair_distance from the
      // paired point is made afresh (or dropped when out of contact): the held plane is the other
      // side's surface only near that point.
      // Only at a re-pairing detection (repair_pending, once the frame has converged with the
      // pairings held; see revise()), so that every round minimizes one energy.
      // Out of contact then, the plane is dropped with the pairing.
      const bool slid = repair_pending && slid_from_pairing(x, p);
      const bool persists = half_space && last_surface_tet[pi] >= 0 && !slid;
      if (!touching && (slid || (!persists && ++out_count[pi] >= cm->opt.release_after))) {
        in_springs[pi] = 0;
        out_count[pi] = 0;
        last_surface_tet[pi] = -1;
        continue;
      }
      spring_proxy[kept++] = p;
      const Vec3 xp = cm->proxy_position(x, p);
      if (!touching) {
        // Zero force; the same matrix row as while touching (a two-sided spring stays two-sided).
        // A half-space spring keeps its plane: outside it, its force is zero already; where the
        // detector and the plane disagree, the plane rules, so the frame keeps one energy.
        const int st = last_surface_tet[pi];
        spring_surface_tet.push_back(st);
        spring_surface_w.push_back(last_surface_w[pi]);
        if (persists) {
          spring_offset.push_back(Vec3::Zero());
          spring_normal.push_back(last_surface_n[pi]);
        } else {
          spring_offset.push_back(st >= 0 ? Vec3(xp - surface_point(x, st, last_surface_w[pi])) : xp);
          spring_normal.push_back(Vec3::Zero());
        }
        continue;
      }
      const ProxyContact& ct = contacts[c];
      if (ct.source == ProxyContact::Source::Self && cm->opt.two_sided_self_contact && ct.surface_tet >= 0) {
        // The target is material of the other side: c/2 ||x_p − Σ b'_a x_a||² acts on both sides,
        // equal and opposite, and the global step moves them together (no swap, no half-way rule).
        // With hold_self_contact_pairing the proxy keeps the material point it was first paired
        // with in this frame while its spring lasts: re-projecting every iteration lets the target
        // slide along the surface as the proxy moves, a force that is not the gradient of any energy
        // (the frame loop's energy rises, Anderson rejects, frames stall).
        check_surface_tet(ct);
        if (!(cm->opt.hold_self_contact_pairing && last_surface_tet[pi] >= 0) || slid) {
          last_surface_tet[pi] = ct.surface_tet;
          last_surface_w[pi] = ct.surface_weights;
          last_surface_n[pi] = ct.normal;
        }
        spring_surface_tet.push_back(last_surface_tet[pi]);
        spring_surface_w.push_back(last_surface_w[pi]);
        spring_offset.push_back(Vec3::Zero());
        spring_normal.push_back(half_space ? last_surface_n[pi] : Vec3::Zero());
      } else if (ct.source == ProxyContact::Source::Self) {
        // One-sided (two_sided_self_contact = false): both sides of a self-contact are proxies,
        // each pulled towards the other side's surface frozen in space; with full targets the two
        // surfaces would swap places every iteration (a 2-cycle for a stiff penalty), so half-way
        // targets make the pair meet in the middle.
        last_surface_tet[pi] = -1;
        spring_surface_tet.push_back(-1);
        spring_surface_w.push_back(Vec4::Zero());
        spring_offset.push_back(xp + 0.5 * (ct.target - xp));
        spring_normal.push_back(Vec3::Zero());
      } else {
        last_surface_tet[pi] = -1;
        spring_surface_tet.push_back(-1);
        spring_surface_w.push_back(Vec4::Zero());
        spring_offset.push_back(ct.target);
        spring_normal.push_back(Vec3::Zero());
      }
    }
    spring_proxy.resize(kept);
  }

  // Whether proxy p's held half-space pairing has slid farther than half_space_repair_distance
  // from the paired point along the held plane, ||(I − n nᵀ) d||.
  bool slid_from_pairing(const Points& x, int p) const {
    const auto pi = static_cast<size_t>(p);
    if (!cm->opt.self_contact_half_space || cm->opt.half_space_repair_distance <= 0 || last_surface_tet[pi] < 0)
      return false;
    const Vec3 d = cm->proxy_position(x, p) - surface_point(x, last_surface_tet[pi], last_surface_w[pi]);
    const Vec3& n = last_surface_n[pi];
    return (d - n.dot(d) * n).norm() > cm->opt.half_space_repair_distance;
  }

  // The Schur path keeps the springs in x2: the other side's tet must lie in the region.
  void check_surface_tet(const ProxyContact& ct) const {
    const Tets& tets = cm->model->tets();
    if (ct.surface_tet < 0 || ct.surface_tet >= cm->model->num_tets())
      throw SolverError(
          fmt::format("collision detector: proxy {} has surface tet {} outside the mesh", ct.proxy, ct.surface_tet));
    if (cm->opt.method != CollisionMethod::Schur) return;
    for (int a = 0; a < 4; ++a)
      if (cm->local_of[static_cast<size_t>(tets(ct.surface_tet, a))] < 0)
        throw SolverError(fmt::format(
            "collision: self contact of proxy {} reaches tet {}, whose nodes are not all in the collision region "
            "(add the self-collision detector's tets to CollisionOptions::region_tets)",
            ct.proxy, ct.surface_tet));
  }

  // Collision energy Σ c/2 ||d_i||² of the springs at x; adds −c d_i w_a to f rows (and +c d_i b'_a
  // on the other side of a two-sided spring).
  double add_collision_forces(const Points& x, Points& f) const {
    const Tets& tets = cm->model->tets();
    const double c = cm->opt.stiffness;
    double e = 0.0;
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      const int t = cm->proxies.tet[static_cast<size_t>(p)];
      const Vec3 d = spring_vector(x, i);
      e += 0.5 * c * d.squaredNorm();
      for (int a = 0; a < 4; ++a) f.row(tets(t, a)) -= (c * cm->proxies.weights(p, a)) * d.transpose();
      if (const int st = spring_surface_tet[i]; st >= 0)
        for (int a = 0; a < 4; ++a) f.row(tets(st, a)) += (c * spring_surface_w[i][a]) * d.transpose();
    }
    return e;
  }

  void detect(const Points& x, double frame, CollisionTimings& tm) {
    PhaseTimer pt;
    detector->detect(x, frame, contacts);
    cm->check_contacts(contacts);
    update_springs(x);
    repair_pending = false;
    pt.lap(tm.detect);
  }

  // E_β forces at x, gathered into out (m × 3, region-local).
  void beta_forces(const State& s, Eigen::MatrixXd& out) {
    for (const BetaList& b : cm->beta) b.term->project_add_force_subset(s.x, s.inputs, fb, b.elements);
    out.resize(m(), 3);
    for (int i = 0; i < m(); ++i) {
      const int node = cm->nodes2[static_cast<size_t>(i)];
      out.row(i) = fb.row(node);
      fb.row(node).setZero();
    }
  }

  // The springs as region-local SchurProxy springs, and their forces (m × 3) at x.
  void contact_springs(const Points& x, Eigen::MatrixXd& force) {
    const Tets& tets = cm->model->tets();
    schur_proxies.clear();
    force.setZero(m(), 3);
    for (size_t i = 0; i < spring_proxy.size(); ++i) {
      const int p = spring_proxy[i];
      const int t = cm->proxies.tet[static_cast<size_t>(p)];
      SchurProxy sp;
      for (int a = 0; a < 4; ++a) {
        sp.nodes[static_cast<size_t>(a)] = cm->local_of[static_cast<size_t>(tets(t, a))];
        sp.weights[static_cast<size_t>(a)] = cm->proxies.weights(p, a);
      }
      if (const int st = spring_surface_tet[i]; st >= 0)
        for (int a = 0; a < 4; ++a) {
          sp.nodes[static_cast<size_t>(4 + a)] = cm->local_of[static_cast<size_t>(tets(st, a))];
          sp.weights[static_cast<size_t>(4 + a)] = -spring_surface_w[i][a];
        }
      sp.stiffness = cm->opt.stiffness;
      const Vec3 d = spring_vector(x, i);
      for (int a = 0; a < kSchurProxySlots; ++a)
        if (sp.weights[static_cast<size_t>(a)] != 0.0)
          force.row(sp.nodes[static_cast<size_t>(a)]) -=
              (cm->opt.stiffness * sp.weights[static_cast<size_t>(a)]) * d.transpose();
      schur_proxies.push_back(sp);
    }
  }

  // One outer iteration of Algorithm 1 from s.x with s.force = f(x) + f_col(x).
  void schur_iteration(State& s, double frame, CollisionFrameStats& st) {
    CollisionTimings& tm = st.timings_ms;
    PhaseTimer pt;
    const SchurFactorization& S = *cm->schur;
    rhs = s.force;  // row-major → column-major n × 3
    S.forward(ws, rhs, y1, g2);
    pt.lap(tm.forward);
    // g_α = g2 − f_β(x) − f_col(x): the α part of the reduced right-hand side.
    beta_forces(s, fbeta);
    pt.lap(tm.local_beta);
    contact_springs(s.x, fcol);
    g_alpha = g2 - fbeta - fcol;
    u2_total.setZero(m(), 3);
    inner_residuals.clear();
    pt.lap(tm.schur_update);
    for (int j = 0; j < inner_iterations; ++j) {
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
      S.solve_collision_system(ws, schur_proxies, g, cm->opt.schur_solve, u2);
      const SchurSolveTimings& lt = ws.last_timings();
      tm.schur_update += lt.update;
      tm.schur_factor += lt.factor;
      tm.schur_solve += lt.solve;
      pt.skip();
      for (int i = 0; i < m(); ++i) s.x.row(cm->nodes2[static_cast<size_t>(i)]) += u2.row(i);
      u2_total += u2;
      // Step 4.7: g_α −= Σ_α u2 with Σ_α u2 = (g − C22 u2) − A22^(β) u2 (H u2 = g, H = Σ + C22).
      sigma_u2 = g;
      for (const SchurProxy& sp : schur_proxies) {
        Eigen::RowVector3d wu = Eigen::RowVector3d::Zero();
        for (int a = 0; a < kSchurProxySlots; ++a)
          wu += sp.weights[static_cast<size_t>(a)] * u2.row(sp.nodes[static_cast<size_t>(a)]);
        for (int a = 0; a < kSchurProxySlots; ++a)
          sigma_u2.row(sp.nodes[static_cast<size_t>(a)]) -= (sp.stiffness * sp.weights[static_cast<size_t>(a)]) * wu;
      }
      sigma_u2.noalias() -= cm->a22_beta * u2;
      g_alpha -= sigma_u2;
      ++st.inner_iterations;
      pt.lap(tm.schur_solve);
    }
    S.backward(ws, y1, u2_total, u);
    for (Eigen::Index i = 0; i < u.rows(); ++i)
      if (cm->local_of[static_cast<size_t>(i)] < 0) s.x.row(i) += u.row(i);
    pt.lap(tm.backward);
  }

  // PCG with a Jacobi preconditioner on A δ = b (3 independent columns), fixed iteration count.
  static Eigen::MatrixXd pcg(const Eigen::SparseMatrix<double>& A, const Eigen::MatrixXd& b, int iterations) {
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

std::vector<int> collision_region_nodes(const Tets& tets, const ProxySet& proxies, const std::vector<int>& region,
                                        const std::vector<int>& region_tets) {
  const auto num_tets = static_cast<int>(tets.rows());
  std::vector<int> nodes;
  auto take = [&](int t) {
    for (int a = 0; a < 4; ++a) nodes.push_back(tets(t, a));
  };
  for (const int p : region) {
    if (p < 0 || p >= proxies.size())
      throw SolverError(fmt::format("collision: region proxy {} out of range [0, {})", p, proxies.size()));
    const int t = proxies.tet[static_cast<size_t>(p)];
    if (t < 0 || t >= num_tets)
      throw SolverError(fmt::format("collision: proxy {} is bound to tet {}, outside the mesh", p, t));
    take(t);
  }
  for (const int t : region_tets) {
    if (t < 0 || t >= num_tets)
      throw SolverError(fmt::format("collision: region tet {} out of range [0, {})", t, num_tets));
    take(t);
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

CollisionModel::CollisionModel(const Model& model, const ProxySet& proxies, std::vector<int> region,
                               CollisionOptions options)
    : CollisionModel(model, proxies, std::move(region), std::move(options), std::nullopt) {}

CollisionModel::CollisionModel(const Model& model, const ProxySet& proxies, std::vector<int> region,
                               CollisionOptions options, std::optional<SchurFactorization> schur)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  Timer setup;
  d.model = &model;
  d.proxies = proxies;
  d.opt = options;
  if (model.coupled())
    throw SolverError(
        "collision: the collision solver needs an n x n matrix (its Schur complement and the springs act on "
        "x, y and z alike); with lambda > 0 use the isotropic volume matrix (solver.volume_matrix = \"isotropic\")");
  if (!(options.stiffness > 0.0) || !std::isfinite(options.stiffness))
    throw SolverError(fmt::format("collision: penalty stiffness must be > 0 (got {})", options.stiffness));
  if (options.inner_iterations < 1)
    throw SolverError(fmt::format("collision: inner_iterations must be >= 1 (got {})", options.inner_iterations));
  if (options.release_after < 1)
    throw SolverError(fmt::format("collision: release_after must be >= 1 (got {})", options.release_after));
  if (!(options.half_space_repair_distance >= 0.0) || !std::isfinite(options.half_space_repair_distance))
    throw SolverError(
        fmt::format("collision: half_space_repair_distance must be >= 0 (got {})", options.half_space_repair_distance));
  if (options.half_space_repair_rounds < 0)
    throw SolverError(
        fmt::format("collision: half_space_repair_rounds must be >= 0 (got {})", options.half_space_repair_rounds));
  if (options.pcg_iterations < 1)
    throw SolverError(fmt::format("collision: pcg_iterations must be >= 1 (got {})", options.pcg_iterations));
  const int n = model.num_nodes();
  const Tets& tets = model.tets();
  if (proxies.weights.rows() != proxies.size()) throw SolverError("collision: proxy weights and tets differ in count");
  std::sort(region.begin(), region.end());
  region.erase(std::unique(region.begin(), region.end()), region.end());
  d.nodes2 = collision_region_nodes(tets, proxies, region, options.region_tets);
  d.region_mask.assign(static_cast<size_t>(proxies.size()), 0);
  for (const int p : region) d.region_mask[static_cast<size_t>(p)] = 1;
  d.region = std::move(region);
  d.local_of.assign(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < d.nodes2.size(); ++i) d.local_of[static_cast<size_t>(d.nodes2[i])] = static_cast<int>(i);
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
  switch (options.method) {
    case CollisionMethod::Schur:
      if (schur) {
        // A factorization carried through a change of the model (SchurFactorization::modify): it must
        // be the one the constructor would build, up to round-off.
        if (schur->n() != n || schur->region_nodes() != d.nodes2)
          throw SolverError(fmt::format(
              "collision: the Schur factorization given has n = {} and {} region nodes; the model has n = {} and "
              "the region {} nodes{}",
              schur->n(), schur->m(), n, m, schur->m() == m ? " (different ones)" : ""));
        if (options.schur_solve != SchurSolveMethod::DenseRefactor && schur->schur_inverse().rows() != m)
          throw SolverError("collision: the Schur factorization given has no Σ⁻¹ (precompute_inverse)");
        d.schur.emplace(std::move(*schur));
      } else if (m > 0) {
        SchurOptions so = options.schur;
        if (options.schur_solve != SchurSolveMethod::DenseRefactor) so.precompute_inverse = true;
        d.schur.emplace(model.matrix(), d.nodes2, so);
      }
      break;
    case CollisionMethod::FullRefactor:  // analyzed and refactored per state (CollisionState)
      break;
    case CollisionMethod::ProjectiveSkinning:
      d.skinning.emplace(CholeskyBackend::Cholmod);
      d.skinning->compute(d.matrix_with_springs(d.region));
      break;
    case CollisionMethod::Pcg:
      break;
  }
  d.setup_ms = setup.elapsed_ms();
}

CollisionModel::~CollisionModel() = default;
CollisionModel::CollisionModel(CollisionModel&&) noexcept = default;
CollisionModel& CollisionModel::operator=(CollisionModel&&) noexcept = default;

const Model& CollisionModel::model() const { return *impl_->model; }
const ProxySet& CollisionModel::proxies() const { return impl_->proxies; }
const std::vector<int>& CollisionModel::region() const { return impl_->region; }
const CollisionOptions& CollisionModel::options() const { return impl_->opt; }
const std::vector<int>& CollisionModel::region_nodes() const { return impl_->nodes2; }
int CollisionModel::num_beta_elements() const { return impl_->num_beta; }
const SchurFactorization* CollisionModel::schur() const { return impl_->schur ? &*impl_->schur : nullptr; }
std::optional<SchurFactorization> CollisionModel::release_schur() {
  std::optional<SchurFactorization> out = std::move(impl_->schur);
  impl_->schur.reset();
  return out;
}
double CollisionModel::setup_ms() const { return impl_->setup_ms; }
const std::vector<CollisionBetaElements>& CollisionModel::beta_elements() const { return impl_->beta; }
const Eigen::SparseMatrix<double>& CollisionModel::beta_matrix() const { return impl_->a22_beta; }
void CollisionModel::check_contacts(const std::vector<ProxyContact>& contacts) const {
  impl_->check_contacts(contacts);
}

CollisionState::CollisionState(const CollisionModel& model, ContactDetector& detector)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  const CollisionModel::Impl& cm = *model.impl_;
  d.cm = &cm;
  d.detector = &detector;
  d.inner_iterations = cm.opt.inner_iterations;
  d.in_springs.assign(static_cast<size_t>(cm.proxies.size()), 0);
  d.out_count.assign(static_cast<size_t>(cm.proxies.size()), 0);
  d.last_surface_tet.assign(static_cast<size_t>(cm.proxies.size()), -1);
  d.last_surface_w.assign(static_cast<size_t>(cm.proxies.size()), Vec4::Zero());
  d.last_surface_n.assign(static_cast<size_t>(cm.proxies.size()), Vec3::Zero());
  d.fb = Points::Zero(cm.model->num_nodes(), 3);
  if (cm.opt.method == CollisionMethod::FullRefactor) {
    d.refactor.emplace(CholeskyBackend::Cholmod);
    d.refactor->analyze(cm.model->matrix());
  }
}
CollisionState::~CollisionState() = default;
CollisionState::CollisionState(CollisionState&&) noexcept = default;
CollisionState& CollisionState::operator=(CollisionState&&) noexcept = default;

void CollisionState::set_inner_iterations(int j) {
  if (j < 1) throw SolverError(fmt::format("collision: inner_iterations must be >= 1 (got {})", j));
  impl_->inner_iterations = j;
}
int CollisionState::inner_iterations() const { return impl_->inner_iterations; }
const std::vector<ProxyContact>& CollisionState::contacts() const { return impl_->contacts; }
const std::vector<double>& CollisionState::inner_residuals() const { return impl_->inner_residuals; }
const SchurWorkspace& CollisionState::schur_workspace() const { return impl_->ws; }

namespace {

// Algorithm 1 and its baselines as a strategy of the frame loop. The global step moves x in place
// (the Schur path updates x2 inside the inner loop, then x1), so the loop takes δ as the difference
// when Anderson needs it.
class CollisionStep final : public GlobalStep {
 public:
  CollisionStep(const CollisionModel::Impl& cm, CollisionState::Impl& cs, double frame, CollisionFrameStats& stats)
      : cm_(cm), d_(cs), frame_(frame), stats_(stats) {}

  const char* name() const override { return "collision step"; }
  bool supports(Accelerator a) const override { return a != Accelerator::Chebyshev; }
  const char* unsupported_reason(Accelerator) const override {
    return "Chebyshev acceleration is not defined while the contact set (hence the matrix) changes; use "
           "Anderson";
  }
  bool in_place() const override { return true; }
  // The λ volume term is not a PD energy: its plain steps are line-searched in the outer loop (the
  // inner loop keeps the term's forces of the outer iterate, linearized through the matrix: its
  // isotropic share of Σ).
  bool line_search() const override { return cm_.model->has_volume_term(); }
  void begin_frame(State&) override {
    d_.reset_springs();
    d_.repair_rounds = 0;
    d_.repair_pending = false;
  }
  // Converged with the pairings held: a round of re-pairing when some half-space spring's proxy has
  // slid beyond half_space_repair_distance (at most half_space_repair_rounds per frame). Re-pairing
  // at any detection instead changes the energy under the accelerator: on scenes/face_jaw.json with
  // a distance of 1e-4 the energy test rejected Anderson's extrapolation at nearly every
  // re-pairing and frame 8 stopped at 800 iterations.
  bool revise(State& s) override {
    if (d_.repair_rounds >= cm_.opt.half_space_repair_rounds) return false;
    bool any = false;
    for (size_t i = 0; i < d_.spring_proxy.size() && !any; ++i) any = d_.slid_from_pairing(s.x, d_.spring_proxy[i]);
    if (!any) return false;
    ++d_.repair_rounds;
    d_.repair_pending = true;
    return true;
  }
  // Round-off floor: what double precision resolves of ||f|| at x, the frame loop's 4 ε ||(K_ii |x_i|)_i||.
  // Per node, not ε max K_ii ||x|| (the floor before): with stiff attachments the latter is hundreds
  // of times the attainable residual, and frames stopped there left their positions undetermined to
  // ~1e-5 of the bar in scenes/bar_cut_table.json.
  bool converges_at_roundoff() const override { return true; }

  // f(x) + f_col(x) into s.force, objective (elastic + penalty) into the return value.
  double evaluate(State& s, FrameStats& st) override {
    PhaseTimer pt;
    double e = xpd::evaluate(*cm_.model, s, &st.timings_ms);
    pt.skip();
    if (cm_.m() > 0)
      d_.detect(s.x, frame_, stats_.timings_ms);
    else
      d_.contacts.clear();  // (no springs either)
    pt.skip();
    e += d_.add_collision_forces(s.x, s.force);
    pt.lap(st.timings_ms.rhs);
    return e;
  }

  void iterate(State& s, FrameStats& st) override {
    PhaseTimer pt;
    CollisionTimings& tm = stats_.timings_ms;
    const Model& model = *cm_.model;
    const bool plain = cm_.m() == 0 || (d_.spring_proxy.empty() && cm_.opt.plain_path_without_contacts &&
                                        cm_.opt.method != CollisionMethod::ProjectiveSkinning);
    if (plain) {
      if (model.has_factor()) {
        solve_global(model, s);
      } else {  // a model assembled without its factor (a surgery session's): the Schur factorization's solve
        if (!cm_.schur)
          throw SolverError("collision step: the model has no factor and the region no Schur factorization");
        s.rhs = cm_.schur->solve(d_.ws, s.force);
      }
      pt.lap(st.timings_ms.solve);
      s.step = s.rhs;
      s.x += s.step;
      ++stats_.plain_iterations;
      return;
    }
    switch (cm_.opt.method) {
      case CollisionMethod::Schur:
        d_.schur_iteration(s, frame_, stats_);
        break;
      case CollisionMethod::FullRefactor:
      case CollisionMethod::ProjectiveSkinning: {
        const SparseCholesky* factor = &*cm_.skinning;
        if (cm_.opt.method == CollisionMethod::FullRefactor) {
          const Eigen::SparseMatrix<double> A =
              cm_.matrix_with_springs(d_.spring_proxy, d_.spring_surface_tet, d_.spring_surface_w);
          // Two-sided springs add entries outside K's pattern: analyze that pattern anew.
          // (A ⊇ K's pattern, so equal counts mean K's pattern, which the factor may hold already.)
          const bool k_pattern = A.nonZeros() == cm_.model->matrix().nonZeros();
          if (k_pattern && d_.refactor_pattern_is_k) {
            d_.refactor->factorize(A);
          } else {
            d_.refactor->compute(A);
            d_.refactor_pattern_is_k = k_pattern;
          }
          pt.lap(tm.refactor);
          factor = &*d_.refactor;
        }
        d_.rhs = s.force;
        factor->solve_in_place(d_.rhs);
        s.step = d_.rhs;
        s.x += s.step;
        pt.lap(st.timings_ms.solve);
        break;
      }
      case CollisionMethod::Pcg: {
        const Eigen::SparseMatrix<double> A =
            cm_.matrix_with_springs(d_.spring_proxy, d_.spring_surface_tet, d_.spring_surface_w);
        d_.rhs = s.force;
        s.step = CollisionState::Impl::pcg(A, d_.rhs, cm_.opt.pcg_iterations);
        s.x += s.step;
        pt.lap(tm.pcg);
        break;
      }
    }
  }

  void end_frame(State&, FrameStats&) override {
    stats_.active_proxies = static_cast<int>(d_.contacts.size());
    stats_.repair_rounds = d_.repair_rounds;
    for (const ProxyContact& ct : d_.contacts) stats_.max_penetration = std::max(stats_.max_penetration, ct.depth);
  }

  // The constant PD matrix of the model (the contact springs change per iteration and are not part
  // of it): adjoint solves of a contact-free state.
  void solve_with_matrix(Eigen::MatrixXd& b) const override {
    if (cm_.model->has_factor() || !cm_.schur)
      cm_.model->factor().solve_in_place(b);
    else
      b = cm_.schur->solve(d_.ws, b);
  }

 private:
  const CollisionModel::Impl& cm_;
  CollisionState::Impl& d_;
  double frame_;
  CollisionFrameStats& stats_;
};

}  // namespace

CollisionFrameStats collision_step(const CollisionModel& model, CollisionState& cstate, State& s,
                                   const SolverOptions& options, double frame) {
  const CollisionModel::Impl& cm = *model.impl_;
  CollisionState::Impl& cs = *cstate.impl_;
  if (cs.cm != &cm) throw SolverError("collision step: the collision state belongs to another collision model");
  if (s.x.rows() != cm.model->num_nodes()) throw SolverError("collision step: state does not belong to the model");
  CollisionFrameStats stats;
  CollisionStep strategy(cm, cs, frame, stats);
  stats.pd = run_frame(*cm.model, s, strategy, options);
  return stats;
}

// ---------------------------------------------------------------------------------------------
CollisionSolver::CollisionSolver(const Model& model, const ProxySet& proxies, std::vector<int> region,
                                 ContactDetector& detector, CollisionOptions options)
    : model_(std::make_unique<CollisionModel>(model, proxies, std::move(region), std::move(options))),
      state_(std::make_unique<CollisionState>(*model_, detector)) {}
CollisionSolver::~CollisionSolver() = default;
CollisionSolver::CollisionSolver(CollisionSolver&&) noexcept = default;
CollisionSolver& CollisionSolver::operator=(CollisionSolver&&) noexcept = default;

CollisionFrameStats CollisionSolver::step(State& state, const SolverOptions& options, double frame) {
  return collision_step(*model_, *state_, state, options, frame);
}

}  // namespace xpd
