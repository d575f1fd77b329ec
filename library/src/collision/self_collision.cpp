#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <xpd/collision/self_collision.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/surface.hpp>

namespace xpd {

std::shared_ptr<const SdfGrid> rest_surface_sdf(const TetMesh& mesh, const SdfGridOptions& options) {
  SurfaceMesh s{mesh.nodes, boundary_faces(mesh.tets)};
  return std::make_shared<const SdfGrid>(s, options);
}

SelfCollision::SelfCollision(const Points& rest_nodes, const Tets& tets, std::shared_ptr<const SdfGrid> rest_sdf,
                             std::vector<int> region, ProxySet proxies, std::vector<int> region_proxies,
                             const SelfCollisionOptions& options)
    : rest_(rest_nodes),
      tets_(tets),
      sdf_(std::move(rest_sdf)),
      region_(std::move(region)),
      proxies_(std::move(proxies)),
      which_(std::move(region_proxies)) {
  if (!sdf_) throw Error("SelfCollision: the rest signed distance grid is missing (null)");
  if (!rest_.allFinite()) throw Error("SelfCollision: rest nodes must be finite");
  const Eigen::Index nv = rest_.rows(), nt = tets_.rows();
  for (Eigen::Index t = 0; t < nt; ++t)
    for (int a = 0; a < 4; ++a)
      if (tets_(t, a) < 0 || tets_(t, a) >= nv)
        throw Error(fmt::format("SelfCollision: tet {} references node {} out of range [0, {})", t, tets_(t, a), nv));
  std::sort(region_.begin(), region_.end());
  region_.erase(std::unique(region_.begin(), region_.end()), region_.end());
  for (int t : region_)
    if (t < 0 || t >= nt) throw Error(fmt::format("SelfCollision: region tet {} out of range [0, {})", t, nt));
  if (proxies_.weights.rows() != proxies_.size() || proxies_.rest.rows() != proxies_.size())
    throw Error("SelfCollision: proxy set has inconsistent sizes");
  for (int p = 0; p < proxies_.size(); ++p)
    if (proxies_.tet[std::size_t(p)] < 0 || proxies_.tet[std::size_t(p)] >= nt)
      throw Error(
          fmt::format("SelfCollision: proxy {} has tet {} out of range [0, {})", p, proxies_.tet[std::size_t(p)], nt));
  if (which_.empty()) {
    which_.resize(std::size_t(proxies_.size()));
    for (int p = 0; p < proxies_.size(); ++p) which_[std::size_t(p)] = p;
  } else {
    std::sort(which_.begin(), which_.end());
    which_.erase(std::unique(which_.begin(), which_.end()), which_.end());
    for (int p : which_)
      if (p < 0 || p >= proxies_.size())
        throw Error(fmt::format("SelfCollision: region proxy {} out of range [0, {})", p, proxies_.size()));
  }
  if (!std::isfinite(options.exclusion_radius) || !(options.tolerance >= 0) || !std::isfinite(options.tolerance) ||
      options.projection_iterations < 1 || !std::isfinite(options.projection_tolerance) || !(options.margin >= 0) ||
      !std::isfinite(options.margin))
    throw Error("SelfCollision: options must be finite, tolerance >= 0, margin >= 0 and projection_iterations >= 1");
  margin_ = options.margin;
  tolerance_ = options.tolerance;
  iterations_ = options.projection_iterations;
  projection_tolerance_ = options.projection_tolerance > 0 ? options.projection_tolerance : 1e-6 * sdf_->cell_size();
  if (!region_.empty()) {
    Tets sub(static_cast<Eigen::Index>(region_.size()), 4);
    for (std::size_t k = 0; k < region_.size(); ++k) sub.row(Eigen::Index(k)) = tets_.row(region_[k]);
    rest_locator_ = std::make_unique<TetLocator>(rest_, sub);
  }
  if (options.exclusion_radius > 0) {
    exclusion_radius_ = options.exclusion_radius;
  } else {
    Tets sub(static_cast<Eigen::Index>(region_.size()), 4);
    for (std::size_t r = 0; r < region_.size(); ++r) sub.row(Eigen::Index(r)) = tets_.row(region_[r]);
    exclusion_radius_ = region_.empty() ? 0.0 : 1.5 * mean_edge_length(rest_, sub);
  }
}

void SelfCollision::check_positions(const Points& x) const {
  if (x.rows() != rest_.rows())
    throw Error(fmt::format("SelfCollision::detect: {} node positions for a mesh of {} nodes", x.rows(), rest_.rows()));
}

void SelfCollision::consider(const Points& x, int i, const Vec3& xp, int T, ProxyContact& best,
                             double& best_phi) const {
  const int p = which_[std::size_t(i)];
  const int own = proxies_.tet[std::size_t(p)];
  if (T == own) return;
  for (int a = 0; a < 4; ++a)
    for (int c = 0; c < 4; ++c)
      if (tets_(T, a) == tets_(own, c)) return;  // shares a node with the proxy's own tet
  const Vec3 x0 = x.row(tets_(T, 0)).transpose(), x1 = x.row(tets_(T, 1)).transpose(),
             x2 = x.row(tets_(T, 2)).transpose(), x3 = x.row(tets_(T, 3)).transpose();
  const Vec4 b = barycentric(xp, x0, x1, x2, x3);
  if (!b.allFinite() || b.minCoeff() < -tolerance_) return;  // degenerate deformed tet, or outside
  const Vec3 X0 = rest_.row(tets_(T, 0)).transpose(), X1 = rest_.row(tets_(T, 1)).transpose(),
             X2 = rest_.row(tets_(T, 2)).transpose(), X3 = rest_.row(tets_(T, 3)).transpose();
  // An inverted deformed tet maps nothing meaningfully back to rest space (its "inside" is a
  // folded region): it cannot witness a penetration.
  if ((x1 - x0).cross(x2 - x0).dot(x3 - x0) * (X1 - X0).cross(X2 - X0).dot(X3 - X0) <= 0.0) return;
  const Vec3 X = b[0] * X0 + b[1] * X1 + b[2] * X2 + b[3] * X3;
  // Same material in rest space: a smooth deformation maps x_p into tets whose rest image of x_p is
  // near X_p. Only material from farther away counts as "the other side".
  if ((X - proxies_.rest.row(p).transpose()).norm() < exclusion_radius_) return;
  Vec3 g;
  const double phi = sdf_->value_and_gradient(X, g);
  // Numerically on the rest surface (|φ| at projection tolerance) is not a penetration: such a
  // contact would have zero depth and only pin the proxy where it is. With a margin δ, the offset
  // surface φ = δ plays the surface's part.
  if (!(phi < margin_ - projection_tolerance_)) return;
  if (phi > best_phi || (phi == best_phi && T > best.other)) return;  // keep the deepest, lowest tet
  // Project X onto the rest surface. A true SDF needs one step X − φ ∇φ (|∇φ| = 1); the trilinear
  // field does not have unit gradient, so Newton steps along ∇φ (step φ/|∇φ|, the gradient length
  // bounded below by 1/2 so that steps are not blown up where ∇φ shrinks). On the medial axis the
  // piecewise-trilinear gradient can vanish exactly (e.g. at a node where two faces are equally
  // near: the one-sided differences of the cell cancel), so a short gradient is replaced by central
  // differences over one cell, which see both faces and point to one of them (or between them).
  const double hc = sdf_->cell_size();
  const auto direction = [&](const Vec3& at, const Vec3& grad) -> Vec3 {
    if (grad.norm() >= 0.5) return grad;
    Vec3 cd;
    for (int d = 0; d < 3; ++d) {
      const Vec3 e = hc * Vec3::Unit(d);
      cd[d] = (sdf_->value(at + e) - sdf_->value(at - e)) / (2 * hc);
    }
    return cd.norm() > grad.norm() ? cd : grad;
  };
  Vec3 Y = X, gy = direction(X, g);
  double fy = phi - margin_;
  for (int k = 0; k < iterations_; ++k) {
    const double len = gy.norm();
    if (!(len > 1e-12)) break;
    Y -= (fy / std::max(len, 0.5)) * (gy / len);
    fy = sdf_->value_and_gradient(Y, gy) - margin_;
    if (std::abs(fy) <= projection_tolerance_) break;
    gy = direction(Y, gy);
  }
  // A perfectly symmetric point (no direction at all) cannot be projected: no contact this pass.
  if (Y == X) return;
  // The surface point found must belong to the other side as well: near the apex of a fold (an
  // elbow crease) the nearest rest surface to X can be the proxy's own neighbourhood, and a spring
  // to it would drag the proxy along its own skin instead of out of the other side.
  if ((Y - proxies_.rest.row(p).transpose()).norm() < exclusion_radius_) return;
  // The target is the rest-surface point carried to deformed space by the region tet containing it
  // (the projection leaves T when the penetration is deeper than T; T's affine map extended that
  // far would amplify T's distortion), or by T's map when no region tet holds it.
  int S = T;
  if (rest_locator_) {
    const TetLocation loc = rest_locator_->find_tet(Y, 1e-9);
    if (loc.found()) S = region_[std::size_t(loc.tet)];
  }
  const Vec3 s0 = x.row(tets_(S, 0)).transpose(), s1 = x.row(tets_(S, 1)).transpose(),
             s2 = x.row(tets_(S, 2)).transpose(), s3 = x.row(tets_(S, 3)).transpose();
  const Vec4 bp = barycentric(Y, rest_.row(tets_(S, 0)).transpose(), rest_.row(tets_(S, 1)).transpose(),
                              rest_.row(tets_(S, 2)).transpose(), rest_.row(tets_(S, 3)).transpose());
  const Vec3 t = bp[0] * s0 + bp[1] * s1 + bp[2] * s2 + bp[3] * s3;
  ProxyContact c;
  c.proxy = p;
  c.target = t;
  const double distance = (t - xp).norm();
  c.depth = std::max(0.0, distance - margin_);
  c.source = ProxyContact::Source::Self;
  c.other = T;
  c.surface_tet = S;
  c.surface_weights = bp;
  if (distance > 0) {
    c.normal = (t - xp) / distance;
  } else {
    // Rest normal carried to deformed space: n ∝ F^{-T} ∇φ with F = Ds Dm^{-1}, i.e. Ds^{-T} Dm^T ∇φ.
    Mat3 Ds, Dm;
    Ds << x1 - x0, x2 - x0, x3 - x0;
    Dm << X1 - X0, X2 - X0, X3 - X0;
    const Vec3 n = Ds.transpose().inverse() * (Dm.transpose() * g);
    c.normal = n.norm() > 0 && n.allFinite() ? Vec3(n.normalized()) : Vec3::UnitZ();
  }
  best = c;
  best_phi = phi;
}

void SelfCollision::detect(const Points& x, double /*frame*/, std::vector<ProxyContact>& contacts) {
  check_positions(x);
  contacts.clear();
  const std::size_t nr = region_.size(), np = which_.size();
  if (nr == 0 || np == 0) return;
  // 1. Deformed bounding boxes of the region tets, enlarged by 3·tolerance·extent: a point whose
  // barycentric weights are all ≥ −tol lies within that margin of the box (the negative weights sum
  // to at least −3 tol), so the hash never misses a tet the brute-force rule accepts.
  box_lo_.resize(nr);
  box_hi_.resize(nr);
  tbb::parallel_for(std::size_t(0), nr, [&](std::size_t r) {
    Vec3 lo = x.row(tets_(region_[r], 0)).transpose(), hi = lo;
    for (int a = 1; a < 4; ++a) {
      const Vec3 q = x.row(tets_(region_[r], a)).transpose();
      lo = lo.cwiseMin(q), hi = hi.cwiseMax(q);
    }
    const Vec3 pad = (3 * tolerance_ + 1e-12) * (hi - lo) + Vec3::Constant(1e-300);
    box_lo_[r] = lo - pad;
    box_hi_[r] = hi + pad;
  });
  Vec3 lo = box_lo_[0], hi = box_hi_[0];
  double mean_extent = 0;
  for (std::size_t r = 0; r < nr; ++r) {
    if (!box_lo_[r].allFinite() || !box_hi_[r].allFinite())
      throw Error(fmt::format("SelfCollision::detect: tet {} has a non-finite node position", region_[r]));
    lo = lo.cwiseMin(box_lo_[r]), hi = hi.cwiseMax(box_hi_[r]);
    mean_extent += (box_hi_[r] - box_lo_[r]).maxCoeff();
  }
  mean_extent /= double(nr);
  // 2. Uniform grid (CSR) with cells about one mean tet extent, capped at 8·#tets + 4096 cells so a
  // body flung apart cannot blow up memory.
  const Vec3 ext = (hi - lo).cwiseMax(1e-300);
  double cell = std::max(mean_extent, 1e-300);
  const double cap = 8.0 * double(nr) + 4096.0;
  while ((ext / cell).array().ceil().prod() > cap) cell *= 1.26;
  Eigen::Vector3i dims;
  for (int d = 0; d < 3; ++d) dims[d] = std::max(1, static_cast<int>(std::ceil(ext[d] / cell)));
  const auto cell_coord = [&](const Vec3& p, int d) {
    return std::clamp(static_cast<int>(std::floor((p[d] - lo[d]) / cell)), 0, dims[d] - 1);
  };
  const std::size_t ncells = std::size_t(dims[0]) * std::size_t(dims[1]) * std::size_t(dims[2]);
  const auto cell_id = [&](int i, int j, int k) {
    return std::size_t(i) + std::size_t(dims[0]) * (std::size_t(j) + std::size_t(dims[1]) * std::size_t(k));
  };
  cell_start_.assign(ncells + 1, 0);
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) {
      for (std::size_t c = 0; c < ncells; ++c) cell_start_[c + 1] += cell_start_[c];
      cell_tets_.resize(std::size_t(cell_start_[ncells]));
      cell_fill_.assign(cell_start_.begin(), cell_start_.end() - 1);
    }
    for (std::size_t r = 0; r < nr; ++r) {
      const int i0 = cell_coord(box_lo_[r], 0), i1 = cell_coord(box_hi_[r], 0);
      const int j0 = cell_coord(box_lo_[r], 1), j1 = cell_coord(box_hi_[r], 1);
      const int k0 = cell_coord(box_lo_[r], 2), k1 = cell_coord(box_hi_[r], 2);
      for (int k = k0; k <= k1; ++k)
        for (int j = j0; j <= j1; ++j)
          for (int i = i0; i <= i1; ++i) {
            if (pass == 0)
              ++cell_start_[cell_id(i, j, k) + 1];
            else
              cell_tets_[std::size_t(cell_fill_[cell_id(i, j, k)]++)] = region_[r];
          }
    }
  }
  // 3. Per proxy: the candidates registered in its cell (each proxy writes its own slot).
  slot_.assign(np, ProxyContact{});
  slot_phi_.assign(np, std::numeric_limits<double>::infinity());
  tbb::parallel_for(std::size_t(0), np, [&](std::size_t i) {
    const int p = which_[i];
    const int own = proxies_.tet[std::size_t(p)];
    Vec3 xp = Vec3::Zero();
    for (int a = 0; a < 4; ++a) xp += proxies_.weights(p, a) * x.row(tets_(own, a)).transpose();
    bool outside = false;
    for (int d = 0; d < 3; ++d) outside = outside || !(xp[d] >= lo[d] && xp[d] <= hi[d]);
    if (outside) return;
    const std::size_t c = cell_id(cell_coord(xp, 0), cell_coord(xp, 1), cell_coord(xp, 2));
    for (int e = cell_start_[c]; e < cell_start_[c + 1]; ++e)
      consider(x, int(i), xp, cell_tets_[std::size_t(e)], slot_[i], slot_phi_[i]);
  });
  for (std::size_t i = 0; i < np; ++i)
    if (slot_[i].proxy >= 0) contacts.push_back(slot_[i]);
}

void SelfCollision::detect_brute_force(const Points& x, std::vector<ProxyContact>& contacts) const {
  check_positions(x);
  contacts.clear();
  for (std::size_t i = 0; i < which_.size(); ++i) {
    const int p = which_[i];
    const int own = proxies_.tet[std::size_t(p)];
    Vec3 xp = Vec3::Zero();
    for (int a = 0; a < 4; ++a) xp += proxies_.weights(p, a) * x.row(tets_(own, a)).transpose();
    ProxyContact best;
    double best_phi = std::numeric_limits<double>::infinity();
    for (int T : region_) consider(x, int(i), xp, T, best, best_phi);
    if (best.proxy >= 0) contacts.push_back(best);
  }
}

}  // namespace xpd
