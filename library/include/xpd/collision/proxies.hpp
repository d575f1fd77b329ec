#pragma once
// Building collision proxies (collision/contact.hpp) and the collision-prone region they define.
//
// Wang et al. 2021, §3.2 / §4.2: proxies are either surface vertices of the simulation
// mesh (one weight 1) or points embedded in simulation tets by barycentric weights. The tets that
// hold proxies form E_β; their nodes form the collision-prone set x2 of the Schur partition
// (DESIGN.md §3 "Partition").
#include <vector>
#include <xpd/collision/contact.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

/// Proxies at mesh nodes: proxy i sits at node nodes[i], bound to the lowest-index tet that uses
/// that node, with weight 1 in the node's slot of that tet and 0 in the other three slots
/// (so x_p = x[nodes[i]] exactly). rest = mesh.nodes rows. Duplicates in `nodes` are allowed
/// (they give duplicate proxies). Throws MeshError when a node index is out of range or the node
/// is used by no tet, or when a tet references a node out of range.
ProxySet proxies_from_nodes(const TetMesh& mesh, const std::vector<int>& nodes);

/// Proxies from an embedding (e.g. mesh/embedding.hpp embed_points or make_bcc_embedding):
/// proxy p is bound to tet tet_of_point[p] with weights.row(p). Validates: sizes agree
/// (#P entries, #P × 4 weights), every tet index in range (no −1: unbound points must be removed
/// or snapped first), weights finite with |Σ_a w_a − 1| ≤ 1e-8. rest = Σ_a w_a X_{tets(t, a)}.
/// Throws MeshError on violation.
ProxySet proxies_from_embedding(const TetMesh& mesh, const std::vector<int>& tet_of_point,
                                const BarycentricWeights& weights);

/// Sorted unique tets holding the proxies `which` (all proxies when `which` is empty, as in
/// proxy_positions): the element set E_β of Wang et al. 2021, §4.2. Throws Error on an index out
/// of range.
std::vector<int> proxy_region_tets(const Tets& tets, const ProxySet& proxies, const std::vector<int>& which = {});

/// Sorted unique nodes of proxy_region_tets(tets, proxies, which): the collision-prone node set x2
/// (all four nodes of every region tet, including those with zero weight, because the region tets'
/// elastic terms act on them in the inner loop). Throws Error on an index out of range.
std::vector<int> proxy_region_nodes(const Tets& tets, const ProxySet& proxies, const std::vector<int>& which = {});

}  // namespace xpd
