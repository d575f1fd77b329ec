#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

ProxySet proxies_from_nodes(const TetMesh& mesh, const std::vector<int>& nodes) {
  const Eigen::Index nv = mesh.nodes.rows();
  // First (lowest-index) tet and slot of every node: deterministic and independent of `nodes`.
  std::vector<int> first_tet(static_cast<std::size_t>(nv), -1), first_slot(static_cast<std::size_t>(nv), -1);
  for (Eigen::Index t = mesh.tets.rows() - 1; t >= 0; --t)
    for (int a = 3; a >= 0; --a) {
      const int v = mesh.tets(t, a);
      if (v < 0 || v >= nv)
        throw MeshError(fmt::format("proxies_from_nodes: tet {} references node {} out of range [0, {})", t, v, nv));
      first_tet[std::size_t(v)] = static_cast<int>(t);
      first_slot[std::size_t(v)] = a;
    }
  ProxySet out;
  const auto np = static_cast<Eigen::Index>(nodes.size());
  out.tet.resize(nodes.size());
  out.weights = BarycentricWeights::Zero(np, 4);
  out.rest.resize(np, 3);
  for (Eigen::Index i = 0; i < np; ++i) {
    const int v = nodes[std::size_t(i)];
    if (v < 0 || v >= nv)
      throw MeshError(fmt::format("proxies_from_nodes: proxy {} names node {} out of range [0, {})", i, v, nv));
    if (first_tet[std::size_t(v)] < 0)
      throw MeshError(fmt::format("proxies_from_nodes: proxy {} names node {}, which no tet uses", i, v));
    out.tet[std::size_t(i)] = first_tet[std::size_t(v)];
    out.weights(i, first_slot[std::size_t(v)]) = 1.0;
    out.rest.row(i) = mesh.nodes.row(v);
  }
  return out;
}

ProxySet proxies_from_embedding(const TetMesh& mesh, const std::vector<int>& tet_of_point,
                                const BarycentricWeights& weights) {
  const auto np = static_cast<Eigen::Index>(tet_of_point.size());
  if (weights.rows() != np)
    throw MeshError(fmt::format("proxies_from_embedding: {} tets but {} weight rows", np, weights.rows()));
  const Eigen::Index nt = mesh.tets.rows(), nv = mesh.nodes.rows();
  ProxySet out;
  out.tet = tet_of_point;
  out.weights = weights;
  out.rest.resize(np, 3);
  for (Eigen::Index p = 0; p < np; ++p) {
    const int t = tet_of_point[std::size_t(p)];
    if (t < 0 || t >= nt)
      throw MeshError(fmt::format("proxies_from_embedding: proxy {} has tet {} out of range [0, {})", p, t, nt));
    if (!weights.row(p).allFinite())
      throw MeshError(fmt::format("proxies_from_embedding: proxy {} has non-finite weights", p));
    const double sum = weights.row(p).sum();
    if (!(std::abs(sum - 1.0) <= 1e-8))
      throw MeshError(fmt::format("proxies_from_embedding: proxy {} weights sum to {} (must be 1)", p, sum));
    Vec3 x = Vec3::Zero();
    for (int a = 0; a < 4; ++a) {
      const int v = mesh.tets(t, a);
      if (v < 0 || v >= nv)
        throw MeshError(fmt::format("proxies_from_embedding: tet {} references node {} out of range", t, v));
      x += weights(p, a) * mesh.nodes.row(v).transpose();
    }
    out.rest.row(p) = x.transpose();
  }
  return out;
}

std::vector<int> proxy_region_tets(const Tets& tets, const ProxySet& proxies, const std::vector<int>& which) {
  std::vector<int> out;
  const auto add = [&](int p) {
    if (p < 0 || p >= proxies.size())
      throw Error(fmt::format("proxy_region_tets: proxy {} out of range [0, {})", p, proxies.size()));
    const int t = proxies.tet[std::size_t(p)];
    if (t < 0 || t >= tets.rows())
      throw Error(fmt::format("proxy_region_tets: proxy {} has tet {} out of range [0, {})", p, t, tets.rows()));
    out.push_back(t);
  };
  if (which.empty())
    for (int p = 0; p < proxies.size(); ++p) add(p);
  else
    for (int p : which) add(p);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<int> proxy_region_nodes(const Tets& tets, const ProxySet& proxies, const std::vector<int>& which) {
  std::vector<int> out;
  for (int t : proxy_region_tets(tets, proxies, which))
    for (int a = 0; a < 4; ++a) out.push_back(tets(t, a));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace xpd
