#pragma once
// Low-rank maintenance of the dense Schur pair (Σ, Σ⁻¹) of SchurFactorization::modify(): the
// change of K in factored form, and the Sherman–Morrison–Woodbury updates of the two dense
// matrices, and the mirror of a lower triangle that every dense symmetric block of schur.cpp uses.
// Internal to the library (solver/schur.cpp is the only user).
#include <Eigen/Core>
#include <vector>
#include <xpd/solver/dynamic_ldlt.hpp>

namespace xpd::detail {

/// ΔK = K_new − (K ⊕ diag δ) of a FactorModification on an n_old × n_old matrix K, as U Λ Uᵀ with
/// U = E_R V (R = the DOF ids the change touches, V: |R| × r orthonormal columns, Λ = diag(λ) with
/// the r eigenvalues of the dense |R| × |R| block ΔK[R, R] whose magnitude exceeds
/// drop_tolerance · the largest). The new DOFs (ids n_old … n_old + new_dofs − 1) enter K ⊕ diag δ
/// with δ_j = K_new(j, j), so that ΔK has a zero diagonal there and the extended matrix is SPD.
struct LowRankChange {
  std::vector<int> rows;      ///< R, ascending
  Eigen::MatrixXd v;          ///< |R| × r
  Eigen::VectorXd lambda;     ///< r
  std::vector<double> delta;  ///< new_dofs entries
  double largest = 0;         ///< max |eigenvalue| of ΔK[R, R] (0 for an empty change)
  bool too_large = false;     ///< |R| > max_rows: v and lambda left empty (no eigen-decomposition)
};

/// Throws SolverError for a DOF id outside [0, n_old + new_dofs), a non-finite value, or a new DOF
/// whose diagonal in K_new is not positive.
LowRankChange low_rank_change(const FactorModification& mod, int n_old, int max_rows, double drop_tolerance = 1e-13);

/// Z F⁻¹ Zᵀ for an m × r Z and a symmetric r × r F, split by the signs of F's eigenvalues:
/// Z F⁻¹ Zᵀ = P₊P₊ᵀ − P₋P₋ᵀ with P = Z Q |ξ|^(−1/2) (F = Q diag ξ Qᵀ).
struct SignedSquare {
  Eigen::MatrixXd plus, minus;
};
/// Returns false when F is singular to working precision (an eigenvalue of magnitude ≤ 1e-14 · the
/// largest) or not finite.
bool signed_square(const Eigen::MatrixXd& z, const Eigen::MatrixXd& f, SignedSquare& out);

/// Copies the strict lower triangle of a square column-major matrix into its strict upper one
/// (Σ, Σ⁻¹ and the other symmetric blocks of schur.cpp, formed or updated on the lower triangle).
void mirror_lower(Eigen::MatrixXd& a);

/// a += sign · (P₊P₊ᵀ − P₋P₋ᵀ) for a symmetric m × m `a` (both triangles stored): two dsyrk on the
/// lower triangle (m² r flops), then mirrored.
void add_signed_square(Eigen::MatrixXd& a, const SignedSquare& p, double sign);

}  // namespace xpd::detail
