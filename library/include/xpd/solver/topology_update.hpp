#pragma once
// Factor modifications of topology events: a topology change of the mesh expressed as the sparse
// columns to add to and remove from the PD matrix (Li, Liu, Kavan & Chen 2021, eq. 3:
// K = Σ_e W_e W_eᵀ, W_e = √w_e G_eᵀ), so that a DynamicLdlt follows it without refactorization.
#include <utility>
#include <vector>
#include <xpd/energy/springs.hpp>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

/// The modification of the n × n PD matrix Σ_t w_t G_tᵀ G_t (quasistatic: no mass term) made by a
/// face-separating cut: ΔK = Σ over changed tets (block with new node ids − block with old ids;
/// same rest shape and weight, so the same values) as FactorModification::change, only the entries
/// with an endpoint among the split nodes and their copies (all others cancel exactly); the cut's
/// new nodes are new DOFs, each placed in the elimination order immediately before the node it
/// duplicates (less fill than the paper's rule, measured in topology_update.cpp). `mesh` is the
/// mesh after the cut;
/// `weight_stiffness[t]` is the sum of the stiffnesses of the tet terms on tet t (w_t = 2 · stiffness · Vol_t, as
/// make_tet_elements computes it).
/// An element split (FaceCutter::split) also changes weights and adds tets: `fraction` (per tet of
/// the mesh after the event; empty = all 1) scales each tet's weight, a changed tet's old weight is
/// its stiffness × event.old_fraction, and each new tet (event.tets_before, …) adds its whole block;
/// a changed tet whose weight changed passes its whole blocks (nothing cancels).
FactorModification cut_modification(const CutEvent& event, const TetMesh& mesh,
                                    const std::vector<double>& weight_stiffness,
                                    const std::vector<double>& fraction = {});

/// The modification of the PD matrix made by an excision (FaceCutter::excise): minus the removed
/// tets' blocks (read from `before`, the mesh before the excision, with its per-tet
/// `weight_stiffness`), plus a placeholder diagonal δ_j for each node the excision left without a
/// tet (`placeholders`, the same (node, δ) pairs as ModelDesc::inactive_nodes, so the factor and a
/// model built anew agree). Node ids do not change; no new unknowns.
FactorModification excision_modification(const ExcisionEvent& event, const TetMesh& before,
                                         const std::vector<double>& weight_stiffness,
                                         const std::vector<std::pair<int, double>>& placeholders);

/// The column w with w wᵀ = the PD-matrix block of a spring between two points (SpringTerm's
/// c·b bᵀ, b = weights of a and minus those of b; the block does not depend on the rest length):
/// w = √c·b, nodes that appear in both points merged (Li et al. 2021, eq. 3 with a spring as the
/// element). A suture is a zero-rest-length spring between the two sides of a wound: add this
/// column to place it (`FactorModification::added`), remove it to cut the stitch (`removed`).
/// Throws SolverError naming the problem: stiffness not finite and > 0, a node out of
/// [0, num_nodes), or two ends that are the same point (the column would be zero).
SparseColumn spring_column(const PointSpring& spring, int num_nodes);

/// The matrix a modification describes: K_new = K ⊕ 0 (new_dofs zero rows and columns appended) +
/// Σ_added w wᵀ − Σ_removed w wᵀ + the entrywise change (each off-diagonal entry mirrored), as
/// DynamicLdlt::modify applies it to its factor. Both triangles are stored, as build_model's K.
/// Entries the change cancels keep their round-off residue (no pruning). Costs O(nnz(K) + |ΔK|),
/// against the O(#T) terms and a 16·#T-triplet sort of an assembly. Throws SolverError for a
/// non-square K, negative new_dofs, an index out of [0, n_new) or a non-finite value.
Eigen::SparseMatrix<double> apply_modification(const Eigen::SparseMatrix<double>& K, const FactorModification& mod);

/// `mod` plus implicit Euler's share of a change of the lumped masses: ΔM/h² on the diagonal
/// (K = Σ w GᵀG + M/h²), (after_i − before_i)/h² for every node whose mass changed; a node beyond
/// `before` (a new unknown) had none. The one definition of this share for build_model's second
/// form (K) and the surgery session (its factor), so that the two stay equal bit for bit. Throws
/// SolverError when `after` is shorter than `before` or h is not finite and > 0.
FactorModification with_mass_change(const FactorModification& mod, const Eigen::VectorXd& before,
                                    const Eigen::VectorXd& after, double h);

/// The column √c·b of an attachment (a zero-rest-length spring to a target, AttachmentTerm's
/// c·b bᵀ): a skin hook when added, an attachment released by undermining when removed. Throws
/// SolverError like spring_column.
SparseColumn attachment_column(const BaryPoint& point, double stiffness, int num_nodes);

}  // namespace xpd
