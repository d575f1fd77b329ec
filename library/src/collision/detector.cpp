#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>

namespace xpd {

CollisionDetector::CollisionDetector(const TetMesh& mesh, ProxySet proxies, std::vector<int> region_proxies,
                                     std::vector<Obstacle> obstacles, std::shared_ptr<const SdfGrid> rest_sdf,
                                     const CollisionDetectorOptions& options)
    : num_nodes_(mesh.nodes.rows()),
      tets_(mesh.tets),
      proxies_(std::move(proxies)),
      which_(std::move(region_proxies)),
      obstacles_(std::move(obstacles)),
      margin_(options.margin) {
  if (!(margin_ >= 0) || !std::isfinite(margin_))
    throw Error(fmt::format("CollisionDetector: margin must be finite and >= 0, got {}", margin_));
  for (std::size_t o = 0; o < obstacles_.size(); ++o) {
    try {
      validate(obstacles_[o]);
    } catch (const Error& e) {
      throw Error(fmt::format("CollisionDetector: obstacle {}: {}", o, e.what()));
    }
  }
  if (which_.empty()) {
    which_.resize(std::size_t(proxies_.size()));
    for (int p = 0; p < proxies_.size(); ++p) which_[std::size_t(p)] = p;
  } else {
    std::sort(which_.begin(), which_.end());
    which_.erase(std::unique(which_.begin(), which_.end()), which_.end());
  }
  // Range checks of proxies and their tets (throws Error with the offending index).
  const std::vector<int> region = proxy_region_tets(tets_, proxies_, which_);
  if (rest_sdf)
    self_ = std::make_unique<SelfCollision>(mesh.nodes, mesh.tets, std::move(rest_sdf),
                                            options.self_region.empty() ? region : options.self_region, proxies_,
                                            which_, options.self);
}

void CollisionDetector::detect(const Points& x, double frame, std::vector<ProxyContact>& contacts) {
  contacts.clear();
  if (x.rows() != num_nodes_)
    throw Error(
        fmt::format("CollisionDetector::detect: {} node positions for a mesh of {} nodes", x.rows(), num_nodes_));
  if (which_.empty()) return;
  // Obstacles: evaluated on the region proxies' positions; keyframes at `frame`.
  std::vector<Contact>& hits = hits_;
  hits.clear();
  if (!obstacles_.empty()) {
    proxy_positions(proxies_, tets_, x, which_, proxy_x_);
    find_contacts(obstacles_, frame, proxy_x_, margin_, transforms_, hits);
  }
  if (self_) {
    self_->detect(x, frame, self_contacts_);
  } else {
    self_contacts_.clear();
  }
  // Merge two lists sorted by proxy, keeping the deeper candidate per proxy.
  std::size_t a = 0, b = 0;
  while (a < hits.size() || b < self_contacts_.size()) {
    const int pa = a < hits.size() ? which_[std::size_t(hits[a].proxy)] : -1;
    const int pb = b < self_contacts_.size() ? self_contacts_[b].proxy : -1;
    const auto obstacle_contact = [&](const Contact& h, int p) {
      ProxyContact c;
      c.proxy = p;
      c.target = h.target;
      c.normal = h.normal;
      c.depth = std::max(0.0, h.depth);
      c.source = ProxyContact::Source::Obstacle;
      c.other = h.obstacle;
      return c;
    };
    if (pb < 0 || (pa >= 0 && pa < pb)) {
      contacts.push_back(obstacle_contact(hits[a], pa));
      ++a;
    } else if (pa < 0 || pb < pa) {
      contacts.push_back(self_contacts_[b]);
      ++b;
    } else {
      // Same proxy: signed penetration of the obstacle (−sd, may be < 0 within the margin) against
      // the self-collision depth; the obstacle wins ties.
      if (hits[a].depth >= self_contacts_[b].depth)
        contacts.push_back(obstacle_contact(hits[a], pa));
      else
        contacts.push_back(self_contacts_[b]);
      ++a, ++b;
    }
  }
}

double max_penetration(const std::vector<ProxyContact>& contacts) {
  double m = 0;
  for (const ProxyContact& c : contacts) m = std::max(m, c.depth);
  return m;
}

}  // namespace xpd
