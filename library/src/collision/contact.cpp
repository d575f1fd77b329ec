#include <fmt/format.h>

#include <xpd/collision/contact.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

Points proxy_positions(const ProxySet& proxies, const Tets& tets, const Points& x, const std::vector<int>& which) {
  Points out;
  proxy_positions(proxies, tets, x, which, out);
  return out;
}

void proxy_positions(const ProxySet& proxies, const Tets& tets, const Points& x, const std::vector<int>& which,
                     Points& out) {
  const int count = which.empty() ? proxies.size() : static_cast<int>(which.size());
  if (out.rows() != count) out.resize(count, 3);
  for (int i = 0; i < count; ++i) {
    const int p = which.empty() ? i : which[static_cast<size_t>(i)];
    if (p < 0 || p >= proxies.size()) throw Error(fmt::format("proxy_positions: proxy {} out of range", p));
    const int t = proxies.tet[static_cast<size_t>(p)];
    if (t < 0 || t >= tets.rows()) throw Error(fmt::format("proxy_positions: proxy {} has no tet", p));
    Vec3 q = Vec3::Zero();
    for (int a = 0; a < 4; ++a) q += proxies.weights(p, a) * x.row(tets(t, a)).transpose();
    out.row(i) = q.transpose();
  }
}

}  // namespace xpd
