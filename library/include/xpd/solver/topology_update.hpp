#pragma once
// Factor modifications of topology events: a topology change of the mesh expressed as the sparse
// columns to add to and remove from the PD matrix (Li, Liu, Kavan & Chen 2021, eq. 3:
// K = Σ_e W_e W_eᵀ, W_e = √w_e G_eᵀ), so that a DynamicLdlt follows it without refactorization.
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/topology/face_cut.hpp>

namespace xpd {

/// Appends the 3 columns of tet block w G_eᵀ G_e (G_e the 3 × 4 gradient of F = Ds Dm⁻¹ with respect
/// to the 4 nodes, energy/tet_elements.hpp): column c has entry √w · g_a[c] on node `nodes[a]`.
/// Their outer products sum to the entries w g_a · g_b that the assembler adds (to round-off).
void append_tet_columns(const Mat3& Dm_inv, double weight, const std::array<int, 4>& nodes,
                        std::vector<SparseColumn>& out);

/// The modification of the n × n PD matrix Σ_t w_t G_tᵀ G_t (quasistatic: no mass term) made by a
/// face-separating cut: ΔK = Σ over changed tets (block with new node ids − block with old ids;
/// same rest shape and weight, so the same values) as FactorModification::change, only the entries
/// with an endpoint among the split nodes and their copies (all others cancel exactly); the cut's
/// new nodes are new DOFs, each placed in the elimination order immediately before the node it
/// duplicates (less fill than the paper's rule, measured in topology_update.cpp). `mesh` is the
/// mesh after the cut;
/// `weight_stiffness[t]` is the sum of the stiffnesses of the tet terms on tet t (w_t = 2 · stiffness · Vol_t, as
/// make_tet_elements computes it).
FactorModification cut_modification(const CutEvent& event, const TetMesh& mesh,
                                    const std::vector<double>& weight_stiffness);

}  // namespace xpd
