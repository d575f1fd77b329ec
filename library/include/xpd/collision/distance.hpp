#pragma once
// Distances between surface primitives, the IPC log barrier on them and their derivatives: the
// kernels of barrier contact (Li et al. 2020, "Incremental Potential Contact", §4; Li et al. 2023,
// "Efficient Incremental Potential Contact for Actuated Face Simulation", §3). Conventions follow
// the IPC Toolkit: every distance is *squared*, and the barrier is applied to squared distances.
//
// Point–triangle (p; t0, t1, t2): the closest feature decides the formula (the type):
//   P_Tk  point–vertex   D = |p − t_k|²
//   P_Ek  point–edge     D = |(a − p) × (b − p)|² / |b − a|²,  edge k = (t_k, t_{k+1 mod 3})
//   P_T   point–plane    D = ((p − t0)·n)² / |n|²,  n = (t1 − t0) × (t2 − t0)
// Edge–edge (a0, a1; b0, b1): line–line D = ((b0 − a0)·n)² / |n|², n = (a1 − a0) × (b1 − b0), when
// the closest points are interior to both segments and the edges are not near-parallel
// (|n|² ≤ 1e−20 |a1 − a0|² |b1 − b0|²); otherwise the smallest of the four point–edge / point–point
// distances of an end against the other segment (which is then the segment distance).
// D is C¹ across type changes; its Hessian jumps there, as in IPC.
//
// Derivatives are with respect to the 12 coordinates stacked in argument order
// (p, t0, t1, t2) or (a0, a1, b0, b1), each point's x, y, z consecutive.
//
// Barrier (IPC): b(D, D̂) = −(D − D̂)² ln(D / D̂) for 0 < D < D̂, 0 for D ≥ D̂ (C² at D̂), with
// D̂ = d̂². Edge–edge pairs are multiplied by the mollifier χ(c) = (2 − c/ε)(c/ε) for c < ε, 1
// otherwise, c = |(a1 − a0) × (b1 − b0)|², ε = 10⁻³ |a1 − a0|²_rest |b1 − b0|²_rest (Li et al. 2020,
// §4.3), which removes the jump of the type at parallel edges.
#include <Eigen/Core>
#include <xpd/core/types.hpp>

namespace xpd {

enum class PointTriangleType { P_T0, P_T1, P_T2, P_E0, P_E1, P_E2, P_T };
enum class EdgeEdgeType { A0_B0, A0_B1, A1_B0, A1_B1, A_B0, A_B1, A0_B, A1_B, A_B };

using Vec12 = Eigen::Matrix<double, 12, 1>;
using Mat12 = Eigen::Matrix<double, 12, 12>;

/// A scalar of the 12 coordinates with its gradient and Hessian.
struct PairDerivatives {
  double value = 0;
  Vec12 gradient = Vec12::Zero();
  Mat12 hessian = Mat12::Zero();
};

PointTriangleType point_triangle_distance_type(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2);
EdgeEdgeType edge_edge_distance_type(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1);

/// Squared distance from p to the triangle.
double point_triangle_squared_distance(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2);
/// Squared distance between the segments (a0, a1) and (b0, b1).
double edge_edge_squared_distance(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1);

/// Bound on the rounding error of the two squared distances above: 64 ε M², M the largest
/// coordinate magnitude of the four points (|D − D_exact| ≤ it, checked against exact rationals on
/// 10⁵ random and degenerate configurations in tests/collision/test_distance.cpp). The two-way
/// projection takes it off before the square root, so that a computed distance never overstates a
/// safe one.
double squared_distance_rounding_allowance(const Vec3& a, const Vec3& b, const Vec3& c, const Vec3& d);

PairDerivatives point_triangle_squared_distance_derivatives(const Vec3& p, const Vec3& t0, const Vec3& t1,
                                                            const Vec3& t2);
PairDerivatives edge_edge_squared_distance_derivatives(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1);

/// ε of the edge–edge mollifier from the rest positions: 10⁻³ |a1 − a0|² |b1 − b0|².
double edge_edge_mollifier_threshold(const Vec3& a0_rest, const Vec3& a1_rest, const Vec3& b0_rest,
                                     const Vec3& b1_rest);
/// χ(c) and its derivatives in the 12 coordinates (value 1 and zero derivatives when c ≥ ε).
PairDerivatives edge_edge_mollifier(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double eps);

/// b(D, D̂) and its first and second derivatives in D; +∞ / −∞ / +∞ for D ≤ 0 (an intersection),
/// 0 for D ≥ D̂. D̂ > 0.
double barrier(double d, double dhat);
double barrier_first_derivative(double d, double dhat);
double barrier_second_derivative(double d, double dhat);

/// κ b(D(x), d̂²) of a point–triangle pair, with gradient and Hessian (not projected). dhat is the
/// unsquared activation distance d̂ > 0, κ > 0.
PairDerivatives point_triangle_barrier(const Vec3& p, const Vec3& t0, const Vec3& t1, const Vec3& t2, double dhat,
                                       double kappa);
/// κ χ b(D(x), d̂²) of an edge–edge pair with the mollifier threshold eps (> 0).
PairDerivatives edge_edge_barrier(const Vec3& a0, const Vec3& a1, const Vec3& b0, const Vec3& b1, double dhat,
                                  double kappa, double eps);

/// The nearest positive semidefinite matrix in the Frobenius norm: a symmetric eigendecomposition
/// with negative eigenvalues set to 0 (IPC's per-pair Hessian projection).
Mat12 project_to_psd(const Mat12& h);

}  // namespace xpd
