#pragma once
// Slender-beam validation helpers (tests/solver/test_beam.cpp, docs/validation.md): the beam
// [0, L] × [0, b] × [0, b] clamped at x = 0, a follower pure end moment, and the closed forms it
// is checked against (circular arc under a pure moment; the elastica under a dead end shear).
#include <xpd/energy/polar.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/pd_solver.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace xpd::test {

struct BeamSpec {
  double length = 10.0;    ///< L along x
  double side = 0.5;       ///< square section b × b
  double youngs = 1.2e6;   ///< E (ν = 0: μ = E/2, λ = 0)
  int nx = 41, ny = 3, nz = 3;  ///< box nodes per axis (ny, nz odd: a node on the axis at x = L)
  double bending_stiffness() const { return youngs * std::pow(side, 4) / 12.0; }  ///< EI
};

/// Beam model: box mesh, μ = E/2, x = 0 face attached with w = 1e3 · μ · h (h = axial spacing):
/// stiff enough that the clamp moves by ~1e-3 of an element under the reaction, soft enough to
/// keep K well conditioned (see docs/scene-format.md §6).
inline ModelDesc beam_desc(const BeamSpec& b) {
  ModelDesc d;
  d.mesh = make_box(b.nx, b.ny, b.nz, Vec3::Zero(), Vec3(b.length, b.side, b.side));
  const double mu = 0.5 * b.youngs;
  d.mu = {mu};
  d.density = 1000.0;
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
  for (Eigen::Index k = 0; k < cur.rows(); ++k)
    A += (cur.row(k) - xc).transpose() * (m.rest.row(k) - Xc);
  return polar_rotation(A);
}

/// Quasistatic PD under the follower moment `moment`, applied in `increments` equal load steps;
/// at each step the rest-frame forces are rotated with the end face and the frame re-solved
/// (warm-started) until the face rotation changes by < 1e-9 rad. Returns total PD iterations.
inline int solve_follower_moment(const Model& model, State& s, const EndMoment& m, double moment,
                                 int increments, const SolverOptions& opt, bool* converged = nullptr,
                                 double rotation_tolerance = 1e-9) {
  int iterations = 0;
  bool ok = true;
  for (int k = 1; k <= increments; ++k) {
    const double mk = moment * k / increments;
    for (int pass = 0; pass < 200; ++pass) {
      const Mat3 R = face_rotation(m, s.x);
      s.inputs.nodal_forces.setZero();
      for (size_t j = 0; j < m.nodes.size(); ++j)
        s.inputs.nodal_forces.row(m.nodes[j]) = (mk * (R * m.rest_force[j])).transpose();
      const FrameStats st = step(model, s, opt);
      iterations += st.iterations;
      const Mat3 R_after = face_rotation(m, s.x);
      const double change = Eigen::AngleAxisd(R_after * R.transpose()).angle();
      if (std::getenv("XPD_BEAM_TRACE"))
        std::printf("    increment %d pass %d: %d it, converged %d, rotation change %.2e\n", k, pass, st.iterations,
                    int(st.converged), change);
      if (change < rotation_tolerance) {
        ok = ok && st.converged;
        break;
      }
      if (pass == 199) ok = false;
    }
  }
  if (converged) *converged = ok;
  return iterations;
}

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
