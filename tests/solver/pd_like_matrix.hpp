#pragma once
// PD-like SPD test matrices for the solver tests: the scalar corotated-PD global matrix
// Σ_tets 2 μ Vol Dᵀ D (D = 3 × 4 gradient operator of the linear shape functions, DESIGN §3 with
// λ = 0) plus diagonal attachment weights, and the collision-prone region / proxies of a mesh.
#include <Eigen/LU>
#include <Eigen/SparseCore>
#include <algorithm>
#include <random>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/solver/schur.hpp>

namespace xpd::test {

/// K = Σ_t 2 μ V_t D_tᵀ D_t + Σ_{i ∈ attached} w e_i e_iᵀ (n × n, SPD when attached is non-empty).
inline Eigen::SparseMatrix<double> pd_like_matrix(const TetMesh& mesh, double mu, const std::vector<int>& attached,
                                                  double w) {
  const auto n = static_cast<int>(mesh.nodes.rows());
  std::vector<Eigen::Triplet<double>> trip;
  trip.reserve(static_cast<size_t>(mesh.tets.rows()) * 16 + attached.size());
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t) {
    Eigen::Matrix3d dm;
    for (int c = 0; c < 3; ++c)
      dm.col(c) = (mesh.nodes.row(mesh.tets(t, c + 1)) - mesh.nodes.row(mesh.tets(t, 0))).transpose();
    const double vol = std::abs(dm.determinant()) / 6.0;
    const Eigen::Matrix3d dinv = dm.inverse();  // rows: gradients of barycentric λ1..λ3
    Eigen::Matrix<double, 3, 4> d;
    d.rightCols<3>() = dinv.transpose();
    d.col(0) = -d.rightCols<3>().rowwise().sum();
    const Eigen::Matrix4d ke = 2.0 * mu * vol * d.transpose() * d;
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) trip.emplace_back(mesh.tets(t, a), mesh.tets(t, b), ke(a, b));
  }
  for (int i : attached) trip.emplace_back(i, i, w);
  Eigen::SparseMatrix<double> k(n, n);
  k.setFromTriplets(trip.begin(), trip.end());
  k.makeCompressed();
  return k;
}

/// Nodes whose coordinate `axis` lies in the lowest (`top` = false) or highest fraction `frac` of
/// the mesh extent.
inline std::vector<int> nodes_in_band(const TetMesh& mesh, int axis, double frac, bool top) {
  const double lo = mesh.nodes.col(axis).minCoeff(), hi = mesh.nodes.col(axis).maxCoeff();
  std::vector<int> out;
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i) {
    const double z = mesh.nodes(i, axis);
    if (top ? z >= hi - frac * (hi - lo) : z <= lo + frac * (hi - lo)) out.push_back(static_cast<int>(i));
  }
  return out;
}

/// Collision-prone region (DESIGN §3 "Partition"): all nodes of the tets E_β that touch a node in
/// `seeds`, in increasing node order; `beta_tets` receives E_β.
inline std::vector<int> region_from_seeds(const TetMesh& mesh, const std::vector<int>& seeds,
                                          std::vector<int>* beta_tets) {
  const auto n = static_cast<size_t>(mesh.nodes.rows());
  std::vector<char> seed(n, 0), in(n, 0);
  for (int s : seeds) seed[static_cast<size_t>(s)] = 1;
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t) {
    bool touch = false;
    for (int a = 0; a < 4; ++a) touch = touch || seed[static_cast<size_t>(mesh.tets(t, a))];
    if (!touch) continue;
    if (beta_tets) beta_tets->push_back(static_cast<int>(t));
    for (int a = 0; a < 4; ++a) in[static_cast<size_t>(mesh.tets(t, a))] = 1;
  }
  std::vector<int> out;
  for (size_t i = 0; i < n; ++i)
    if (in[i]) out.push_back(static_cast<int>(i));
  return out;
}

/// k proxies at random barycentric points of random E_β tets (region-local node indices), with
/// stiffness uniform in [0.5, 2] · stiffness. two_sided: each spring also joins a random point of a
/// second random E_β tet (slots 4-7, negated weights), as a two-sided self-contact spring does.
inline std::vector<SchurProxy> random_proxies(const TetMesh& mesh, const std::vector<int>& beta_tets,
                                              const SchurFactorization& schur, int k, double stiffness, unsigned seed,
                                              bool two_sided = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, beta_tets.size() - 1);
  std::uniform_real_distribution<double> u(0.05, 1.0), s(0.5, 2.0);
  std::vector<SchurProxy> out(static_cast<size_t>(k));
  for (SchurProxy& p : out) {
    const int t = beta_tets[pick(rng)];
    double sum = 0;
    for (int a = 0; a < 4; ++a) {
      p.nodes[static_cast<size_t>(a)] = schur.region_index(mesh.tets(t, a));
      p.weights[static_cast<size_t>(a)] = u(rng);
      sum += p.weights[static_cast<size_t>(a)];
    }
    for (double& w : p.weights) w /= sum;
    if (two_sided) {
      const int t2 = beta_tets[pick(rng)];
      double sum2 = 0;
      for (size_t a = 4; a < 8; ++a) {
        p.nodes[a] = schur.region_index(mesh.tets(t2, static_cast<int>(a - 4)));
        p.weights[a] = u(rng);
        sum2 += p.weights[a];
      }
      for (size_t a = 4; a < 8; ++a) p.weights[a] /= -sum2;
    }
    p.stiffness = stiffness * s(rng);
  }
  return out;
}

}  // namespace xpd::test
