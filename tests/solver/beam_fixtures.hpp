#pragma once
// Slender-beam validation helpers (tests/solver/test_beam.cpp, docs/validation.md): the beam
// [0, L] × [0, b] × [0, b] clamped at x = 0, a follower pure end moment, and the closed forms it
// is checked against (circular arc under a pure moment; the elastica under a dead end shear).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/energy/polar.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/newton.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

namespace xpd::test {

struct BeamSpec {
  double length = 10.0;         ///< L along x
  double side = 0.5;            ///< square section b × b
  double youngs = 1.2e6;        ///< E (ν = 0: μ = E/2, λ = 0)
  int nx = 41, ny = 3, nz = 3;  ///< box nodes per axis (ny, nz odd: a node on the axis at x = L)
  /// false: make_box's Kuhn split (every cell cut along its (0,0,0)–(1,1,1) diagonal: the mesh has
  /// a handedness, so bending couples to twist). true: the cells of the lower half y < b/2 as in
  /// make_box, the upper half their mirror image in y = b/2 (conforming: the mirror plane's faces
  /// are cut along the same x–z diagonals), so the mesh is symmetric in y = b/2 (needs ny odd).
  bool mirror_y = false;
  double bending_stiffness() const { return youngs * std::pow(side, 4) / 12.0; }  ///< EI
};

/// The beam's box mesh (see BeamSpec::mirror_y).
inline TetMesh beam_mesh(const BeamSpec& b) {
  TetMesh box = make_box(b.nx, b.ny, b.nz, Vec3::Zero(), Vec3(b.length, b.side, b.side));
  if (!b.mirror_y) return box;
  const int nx = b.nx, ny = b.ny, mid = (b.ny - 1) / 2;
  const auto j_of = [&](int v) { return (v / nx) % ny; };
  const auto mirror = [&](int v) { return v % nx + nx * ((ny - 1 - j_of(v)) + ny * (v / (nx * ny))); };
  std::vector<Eigen::RowVector4i> tets;
  for (Eigen::Index t = 0; t < box.tets.rows(); ++t) {
    const Eigen::RowVector4i v = box.tets.row(t);
    if (j_of(v(0)) > mid || j_of(v(1)) > mid || j_of(v(2)) > mid || j_of(v(3)) > mid) continue;
    tets.push_back(v);
    tets.push_back(Eigen::RowVector4i(mirror(v(0)), mirror(v(1)), mirror(v(3)), mirror(v(2))));  // reflected: reorient
  }
  box.tets.resize(static_cast<Eigen::Index>(tets.size()), 4);
  for (size_t t = 0; t < tets.size(); ++t) box.tets.row(static_cast<Eigen::Index>(t)) = tets[t];
  return box;
}

/// Beam model: box mesh, μ = E/2, x = 0 face attached with w = 1e3 · μ · h (h = axial spacing):
/// stiff enough that the clamp moves by ~1e-3 of an element under the reaction, soft enough to
/// keep K well conditioned (see docs/scene-format.md §6).
inline ModelDesc beam_desc(const BeamSpec& b) {
  ModelDesc d;
  d.mesh = beam_mesh(b);
  const double mu = 0.5 * b.youngs;
  d.mu = {mu};
  d.density = {1000.0};
  const double h = b.length / (b.nx - 1);
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i)
    if (d.mesh.nodes(i, 0) < 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e3 * mu * h, d.mesh.nodes.row(i).transpose()});
  d.nodal_forces = Points::Zero(d.mesh.nodes.rows(), 3);
  return d;
}

/// Node nearest to p.
inline int nearest_node(const Points& x, const Vec3& p) {
  Eigen::Index k = 0;
  (x.rowwise() - p.transpose()).rowwise().squaredNorm().minCoeff(&k);
  return static_cast<int>(k);
}

/// End-face nodes (x = L) and their unit-moment forces in the rest frame: f_i = −(z_i − z_c) a_i
/// e_x / Σ_j a_j (z_j − z_c)², a_i the trapezoidal area share of node i (z_c = b/2). Zero
/// resultant and a moment of exactly 1 (the discrete second moment normalises it); compression
/// above the axis, so a positive multiple curls the beam towards +z.
struct EndMoment {
  std::vector<int> nodes;
  std::vector<Vec3> rest_force;  ///< per unit moment
  Points rest;                   ///< rest positions of the face nodes
};

inline EndMoment end_moment(const ModelDesc& d, const BeamSpec& b) {
  EndMoment m;
  const double hy = b.side / (b.ny - 1), hz = b.side / (b.nz - 1), zc = 0.5 * b.side;
  std::vector<double> a;
  for (Eigen::Index i = 0; i < d.mesh.nodes.rows(); ++i) {
    if (d.mesh.nodes(i, 0) < b.length - 1e-9) continue;
    const double y = d.mesh.nodes(i, 1), z = d.mesh.nodes(i, 2);
    const bool ey = y < 1e-9 || y > b.side - 1e-9, ez = z < 1e-9 || z > b.side - 1e-9;
    m.nodes.push_back(static_cast<int>(i));
    a.push_back(hy * hz * (ey ? 0.5 : 1.0) * (ez ? 0.5 : 1.0));
  }
  double I = 0;
  for (size_t k = 0; k < m.nodes.size(); ++k) I += a[k] * std::pow(d.mesh.nodes(m.nodes[k], 2) - zc, 2);
  m.rest.resize(static_cast<Eigen::Index>(m.nodes.size()), 3);
  for (size_t k = 0; k < m.nodes.size(); ++k) {
    const double z = d.mesh.nodes(m.nodes[k], 2);
    // Compression above the axis (z > z_c), tension below: the beam curls towards +z.
    m.rest_force.push_back(Vec3(-(z - zc) * a[k] / I, 0, 0));
    m.rest.row(static_cast<Eigen::Index>(k)) = d.mesh.nodes.row(m.nodes[k]);
  }
  return m;
}

/// Best-fit rotation of the end face (polar factor of Σ (x − x̄)(X − X̄)ᵀ).
inline Mat3 face_rotation(const EndMoment& m, const Points& x) {
  Points cur(m.rest.rows(), 3);
  for (Eigen::Index k = 0; k < m.rest.rows(); ++k) cur.row(k) = x.row(m.nodes[static_cast<size_t>(k)]);
  const Eigen::RowVector3d xc = cur.colwise().mean(), Xc = m.rest.colwise().mean();
  Mat3 A = Mat3::Zero();
  for (Eigen::Index k = 0; k < cur.rows(); ++k) A += (cur.row(k) - xc).transpose() * (m.rest.row(k) - Xc);
  return polar_rotation(A);
}

/// One static solve of the follower loop: iterations taken and whether it converged.
struct SolveCount {
  int iterations = 0;
  bool converged = false;
};

/// Angle of the end face in the bending (x, z) plane: the face normal R e_x = (cos θ, ·, −sin θ)
/// of R = rotation about y by θ (the beam curls towards +z for θ < 0), measured from `from`.
inline double face_angle(const Mat3& R, const Mat3& from) {
  const Vec3 n = R.col(0), n0 = from.col(0);
  return std::atan2(-(n0.x() * n.z() - n0.z() * n.x()), n0.x() * n.x() + n0.z() * n.z());
}
inline Mat3 rotation_y(double angle) { return Eigen::AngleAxisd(angle, Vec3::UnitY()).toRotationMatrix(); }

/// Quasistatic equilibrium under the follower moment `moment`, applied in `increments` equal load
/// steps. At each step the rest-frame forces are rotated by R_y(φ) (about y: the forces stay in
/// the bending plane) and the static problem is solved (warm-started) by
/// `solve(state) -> SolveCount`; the follower equilibrium is the fixed point φ = θ(x(φ)), θ the
/// angle of the end face's best-fit rotation in the bending plane, iterated until
/// |θ − φ| < `rotation_tolerance` rad. `on_increment(k, moment_k)` is called after step k has
/// converged (state at the equilibrium of moment_k). Returns the total solver iterations.
///
/// Why only the in-plane angle and not the full best-fit rotation: the Kuhn tets of make_box are
/// not mirror-symmetric, so bending comes with a small out-of-plane rotation of the end face
/// (0.03–0.05 rad about x at t ≤ 3π/4 on 41×5×5). Rotating the forces with it tilts them out of
/// the bending plane, which adds a torque about the beam axis; with the full rotation the
/// 41×5×5 beam twisted away (face turning by 2–3 rad, out of plane) at t = 3π/4 under every force
/// change tried. The pure moment of the closed form lies in the bending plane.
/// The fixed-point iteration φ ← θ slows down as the beam curls (contraction 0.6 at t = π on
/// 21×3×3, 0.9 at t = π/2 on 41×5×5), so it is accelerated by the secant method on θ(φ) − φ,
/// each update capped at 0.2 rad; the first applied angle of an increment is the face's turn over
/// the previous one.
/// Where follow_moment stands: increments done, the face turn over the last one, and a stop
/// request (set by on_increment to end early; resuming from a saved state continues at done + 1).
struct FollowProgress {
  int done = 0;
  double last_turn = 0;
  bool stop = false;
};

template <class Solve, class OnIncrement>
int follow_moment(State& s, const EndMoment& m, double moment, int increments, Solve&& solve,
                  OnIncrement&& on_increment, bool* converged = nullptr, double rotation_tolerance = 1e-9,
                  FollowProgress* progress = nullptr) {
  int iterations = 0;
  bool ok = true;
  if (s.inputs.nodal_forces.rows() != s.x.rows()) s.inputs.nodal_forces = Points::Zero(s.x.rows(), 3);
  FollowProgress local;
  FollowProgress& pr = progress ? *progress : local;
  double last_turn = pr.last_turn;  // face turn over the previous increment: first guess of the next one
  for (int k = pr.done + 1; k <= increments; ++k) {
    const double mk = moment * k / increments;
    const Mat3 R0 = face_rotation(m, s.x);
    const double theta0 = face_angle(R0, Mat3::Identity());
    double phi = last_turn, prev_phi = 0, prev_r = 0;  // applied angle relative to theta0, secant history
    for (int pass = 0; pass < 200; ++pass) {
      const Mat3 R = rotation_y(theta0 + phi);
      s.inputs.nodal_forces.setZero();
      for (size_t j = 0; j < m.nodes.size(); ++j)
        s.inputs.nodal_forces.row(m.nodes[j]) = (mk * (R * m.rest_force[j])).transpose();
      const SolveCount st = solve(s);
      iterations += st.iterations;
      const Mat3 R_after = face_rotation(m, s.x);
      const double theta = face_angle(R_after, R0), r = theta - phi;
      if (std::getenv("XPD_BEAM_TRACE")) {
        const Vec3 out = Eigen::AngleAxisd(rotation_y(theta0 + theta).transpose() * R_after).angle() *
                         Eigen::AngleAxisd(rotation_y(theta0 + theta).transpose() * R_after).axis();
        std::printf(
            "    increment %d pass %d: %d it, converged %d, face angle %.6f, applied %.6f, out-of-plane "
            "rotation (%.1e, %.1e, %.1e)\n",
            k, pass, st.iterations, int(st.converged), theta0 + theta, theta0 + phi, out.x(), out.y(), out.z());
      }
      if (std::abs(r) < rotation_tolerance) {
        ok = ok && st.converged;
        last_turn = theta;
        break;
      }
      if (pass == 199) {
        ok = false;
        break;
      }
      double next = theta;                                                            // plain fixed-point update
      if (pass > 0 && r != prev_r) next = phi - r * (phi - prev_phi) / (r - prev_r);  // secant
      prev_phi = phi, prev_r = r;
      phi += std::clamp(next - phi, -0.2, 0.2);
    }
    pr.done = k;
    pr.last_turn = last_turn;
    if (converged) *converged = ok;
    on_increment(k, mk);
    if (pr.stop) break;
  }
  if (converged) *converged = ok;
  return iterations;
}

/// follow_moment with quasistatic PD (step()). Returns total PD iterations.
inline int solve_follower_moment(const Model& model, State& s, const EndMoment& m, double moment, int increments,
                                 const SolverOptions& opt, bool* converged = nullptr,
                                 double rotation_tolerance = 1e-9) {
  return follow_moment(
      s, m, moment, increments,
      [&](State& st) {
        const FrameStats f = step(model, st, opt);
        return SolveCount{f.iterations, f.converged};
      },
      [](int, double) {}, converged, rotation_tolerance);
}

/// Mirror-symmetric Newton for beams built with BeamSpec::mirror_y: Newton's method on the energy
/// of `model` (the same energy as step() and newton_solve) restricted to states symmetric about
/// y = b/2 (node q = mirror(p): x_q = x_p, y_q = b − y_p, z_q = z_p; y = b/2 on the mirror plane).
/// The energy, the attachments and the end-moment loads are invariant under the mirror, so the
/// full gradient at a symmetric state is itself symmetric: a zero of the reduced gradient Pᵀ∇E
/// is an equilibrium of the full model (checked: the full ||∇E|| is what is tested for
/// convergence). Why it is needed: beyond t ≈ 3π/4 (41×5×5) the planar equilibrium is unstable
/// against out-of-plane (antisymmetric: twist + lateral bending) modes under the fixed-direction
/// forces of one solve; newton_solve (a minimizer, PSD fallback) and PD drift off it. The reduced
/// Hessian Pᵀ H P excludes those modes. Per iteration: the exact Hessian if Pᵀ H P is positive
/// definite, else the element-wise PSD-projected one; Armijo backtracking on E.
struct SymmetricNewton {
  std::vector<int> mirror;        ///< node → mirror node
  double side = 0;                ///< b
  Eigen::SparseMatrix<double> P;  ///< 3n × m: reduced → full displacement
  SparseCholesky chol{CholeskyBackend::Cholmod};
  Eigen::Index analyzed_nnz = -1;

  SymmetricNewton(const Model& model, const BeamSpec& b) : side(b.side) {
    const Points& X = model.rest_positions();
    const int n = model.num_nodes();
    mirror.assign(static_cast<size_t>(n), -1);
    for (int v = 0; v < n; ++v) {
      const int i = v % b.nx, j = (v / b.nx) % b.ny, k = v / (b.nx * b.ny);
      mirror[static_cast<size_t>(v)] = i + b.nx * ((b.ny - 1 - j) + b.ny * k);
    }
    std::vector<Triplet> trip;
    int m = 0;
    for (int v = 0; v < n; ++v) {
      const int q = mirror[static_cast<size_t>(v)];
      if (q < v) continue;
      if (std::abs(X(q, 1) - (b.side - X(v, 1))) > 1e-9 || std::abs(X(q, 0) - X(v, 0)) > 1e-12)
        throw SolverError("SymmetricNewton: the mesh is not mirror-symmetric in y");
      trip.emplace_back(3 * v, m, 1.0);  // x
      if (q != v) trip.emplace_back(3 * q, m, 1.0);
      ++m;
      if (q != v) {  // y: antisymmetric displacement; fixed on the mirror plane
        trip.emplace_back(3 * v + 1, m, 1.0);
        trip.emplace_back(3 * q + 1, m, -1.0);
        ++m;
      }
      trip.emplace_back(3 * v + 2, m, 1.0);  // z
      if (q != v) trip.emplace_back(3 * q + 2, m, 1.0);
      ++m;
    }
    P.resize(3 * n, m);
    P.setFromTriplets(trip.begin(), trip.end());
  }

  bool have_factor = false;  ///< chol holds a factorization of the reduced Hessian at an earlier state
  int factorizations = 0;    ///< reduced Hessians assembled and factorized (all solves)

  /// Newton from s.x (symmetrized first); converged when the full ||∇E|| ≤ rel · ||loads||.
  /// Chord steps first: while the factorization kept from the previous iteration (possibly of the
  /// previous solve: the follower passes change the loads only slightly) cuts ||∇E|| by at least
  /// half per full step, it is reused; otherwise the reduced Hessian is reassembled at s.x.
  SolveCount solve(const Model& model, State& s, double rel_tolerance, int max_iterations, double* rel_gradient) {
    const Eigen::Index n = s.x.rows();
    for (Eigen::Index v = 0; v < n; ++v) {  // exact symmetry of the start
      const Eigen::Index q = mirror[static_cast<size_t>(v)];
      if (q < v) continue;
      const Eigen::RowVector3d a = s.x.row(v), c = s.x.row(q);
      s.x(v, 0) = s.x(q, 0) = 0.5 * (a.x() + c.x());
      s.x(v, 2) = s.x(q, 2) = 0.5 * (a.z() + c.z());
      s.x(v, 1) = 0.5 * (a.y() + side - c.y());
      s.x(q, 1) = side - s.x(v, 1);
    }
    const double loads = s.inputs.nodal_forces.norm();
    SolveCount res;
    double energy = evaluate(model, s);
    const auto flat = [&](const Points& p) {
      Eigen::VectorXd f(3 * n);
      for (Eigen::Index i = 0; i < n; ++i)
        for (int d = 0; d < 3; ++d) f(3 * i + d) = p(i, d);
      return f;
    };
    bool chord = have_factor;
    for (; res.iterations < max_iterations; ++res.iterations) {
      if (!std::isfinite(energy)) throw SolverError("SymmetricNewton: non-finite energy");
      if (s.force.norm() <= rel_tolerance * loads) {
        res.converged = true;
        break;
      }
      const Eigen::VectorXd g = P.transpose() * flat(s.force);  // −reduced gradient
      Eigen::VectorXd d;
      if (chord) d = chol.solve(g);
      for (int psd = 0; psd < 2 && d.size() == 0; ++psd) {
        Eigen::SparseMatrix<double> H = P.transpose() * newton_hessian(model, s, psd == 1) * P;
        H.makeCompressed();
        ++factorizations;
        if (psd == 1 && std::getenv("XPD_BEAM_TRACE"))
          std::printf("      exact reduced Hessian not positive definite\n");
        try {
          if (H.nonZeros() != analyzed_nnz) chol.analyze(H), analyzed_nnz = H.nonZeros();
          chol.factorize(H);
          have_factor = true;
          d = chol.solve(g);
        } catch (const SolverError&) {
          have_factor = false;
          d.resize(0);
          if (psd == 1) throw;
        }
      }
      if (std::getenv("XPD_BEAM_TRACE"))
        std::printf("      newton %d: |grad E|/|loads| %.2e, %s\n", res.iterations, s.force.norm() / loads,
                    chord ? "chord" : "fresh Hessian");
      const Eigen::VectorXd dx = P * d;
      const double slope = -g.dot(d);
      const Points x0 = s.x;
      const double g_old = s.force.norm();
      if (chord) {  // full chord step, kept only if it halves ||∇E||
        for (Eigen::Index i = 0; i < n; ++i)
          for (int c = 0; c < 3; ++c) s.x(i, c) = x0(i, c) + dx(3 * i + c);
        const double e_new = evaluate(model, s);
        if (std::isfinite(e_new) && s.force.norm() <= 0.5 * g_old) {
          energy = e_new;
          continue;
        }
        s.x = x0;
        energy = evaluate(model, s);
        chord = false;
        --res.iterations;  // redo this iteration with a fresh Hessian
        continue;
      }
      chord = true;  // next iteration: try reusing this factorization
      const bool energy_resolves = std::abs(slope) > 1e-10 * std::max(1.0, std::abs(energy));
      bool accepted = false;
      double e_new = energy;
      for (double alpha = 1.0; alpha > 1e-12 && !accepted; alpha *= 0.5) {
        for (Eigen::Index i = 0; i < n; ++i)
          for (int c = 0; c < 3; ++c) s.x(i, c) = x0(i, c) + alpha * dx(3 * i + c);
        e_new = evaluate(model, s);
        accepted = energy_resolves ? e_new <= energy + 1e-4 * alpha * slope : s.force.norm() < g_old;
        if (!energy_resolves && !accepted) break;
      }
      if (!accepted) {
        s.x = x0;
        energy = evaluate(model, s);
        break;
      }
      energy = e_new;
    }
    if (rel_gradient) *rel_gradient = s.force.norm() / loads;
    return res;
  }
};

/// Closed-form pure bending: tip displacement (axial, transverse) of a beam of length L bent into
/// a circular arc of end rotation t = M L / EI: (L (sin t / t − 1), (L / t)(1 − cos t)).
inline Eigen::Vector2d arc_tip_displacement(double L, double t) {
  if (t < 1e-12) return Eigen::Vector2d::Zero();
  return {L * (std::sin(t) / t - 1.0), L / t * (1.0 - std::cos(t))};
}

/// Elastica of a cantilever under a dead transverse end load, α = P L² / EI (Mattiasson 1981):
/// θ'' = −α cos θ on s ∈ [0, 1], θ(0) = 0, θ'(1) = 0, solved by shooting on θ'(0) (bisection, RK4
/// with `steps` steps). Returns (w/L, u/L, θ(1)): tip deflection along the load, axial shortening,
/// tip rotation.
inline Eigen::Vector3d elastica_end_shear(double alpha, int steps = 2000) {
  auto shoot = [&](double k0) {
    Eigen::Vector4d y(0, k0, 0, 0);  // θ, θ', ∫ sin θ, ∫ cos θ
    auto f = [&](const Eigen::Vector4d& v) {
      return Eigen::Vector4d(v(1), -alpha * std::cos(v(0)), std::sin(v(0)), std::cos(v(0)));
    };
    const double h = 1.0 / steps;
    for (int i = 0; i < steps; ++i) {
      const Eigen::Vector4d a = f(y), b = f(y + 0.5 * h * a), c = f(y + 0.5 * h * b), d = f(y + h * c);
      y += h / 6.0 * (a + 2 * b + 2 * c + d);
    }
    return y;
  };
  // θ'(0) ∈ (0, α]: θ'(1) is increasing in θ'(0) on this bracket (the first-mode branch).
  double lo = 0.0, hi = alpha;
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    (shoot(mid)(1) > 0 ? hi : lo) = mid;
  }
  const Eigen::Vector4d y = shoot(0.5 * (lo + hi));
  return {y(2), 1.0 - y(3), y(0)};
}

}  // namespace xpd::test
