// Two-way continuous collision handling (two_way.hpp).
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <xpd/collision/distance.hpp>
#include <xpd/collision/intersection.hpp>
#include <xpd/collision/two_way.hpp>
#include <xpd/core/disjoint_sets.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Linear constraints g(y) = c0 + Σ_e J_e · (y_{node_e} − base_e) ≥ 0, each over a run of entries
// (one per node; an embedded contact's four points give up to 16). Contacts are linearized at x⁽ˡ⁾
// (base = x⁽ˡ⁾), edge lengths at y^[k+1]; keeping the base avoids the cancellation of a folded
// constant c0 − J·base at large coordinates.
struct Constraints {
  std::vector<int> first{0};  // entries of constraint c: [first[c], first[c + 1])
  std::vector<int> node;
  std::vector<Vec3> J, base;
  std::vector<double> c0;

  std::size_t size() const { return c0.size(); }
  void clear() {
    first.assign(1, 0);
    node.clear(), J.clear(), base.clear(), c0.clear();
  }
  // Adds g to the open constraint's entry of node v (merging repeated nodes).
  void add(int v, const Vec3& g, const Vec3& b) {
    for (std::size_t e = static_cast<std::size_t>(first.back()); e < node.size(); ++e)
      if (node[e] == v) {
        J[e] += g;
        return;
      }
    node.push_back(v), J.push_back(g), base.push_back(b);
  }
  void close(double c) {
    c0.push_back(c);
    first.push_back(static_cast<int>(node.size()));
  }
  void discard_open() {
    const auto e = static_cast<std::size_t>(first.back());
    node.resize(e), J.resize(e), base.resize(e);
  }
  void append(const Constraints& o) {
    const int offset = first.back();
    for (std::size_t c = 1; c < o.first.size(); ++c) first.push_back(o.first[c] + offset);
    node.insert(node.end(), o.node.begin(), o.node.end());
    J.insert(J.end(), o.J.begin(), o.J.end());
    base.insert(base.end(), o.base.begin(), o.base.end());
    c0.insert(c0.end(), o.c0.begin(), o.c0.end());
  }
};

// Parameters (s, t) of the closest points p0 + s (p1 − p0), q0 + t (q1 − q0) of two segments
// (Ericson 2004, §5.1.9, with its degenerate-segment branches).
std::array<double, 2> closest_on_segments(const Vec3& p0, const Vec3& p1, const Vec3& q0, const Vec3& q1) {
  const Vec3 d1 = p1 - p0, d2 = q1 - q0, r = p0 - q0;
  const double a = d1.squaredNorm(), e = d2.squaredNorm(), f = d2.dot(r);
  const double tiny = 1e-300;
  auto clamp01 = [](double v) { return std::clamp(v, 0.0, 1.0); };
  if (a <= tiny && e <= tiny) return {0, 0};
  if (a <= tiny) return {0, clamp01(f / e)};
  const double c = d1.dot(r);
  if (e <= tiny) return {clamp01(-c / a), 0};
  const double b = d1.dot(d2), denom = a * e - b * b;
  double s = denom > 0 ? clamp01((b * f - c * e) / denom) : 0;
  double t = (b * s + f) / e;
  if (t < 0) {
    t = 0;
    s = clamp01(-c / a);
  } else if (t > 1) {
    t = 1;
    s = clamp01((b - c) / a);
  }
  return {s, t};
}

// Lower bound of a pair's distance from its computed squared distance: the kernels' rounding
// allowance (collision/distance.hpp, 64 ε M², checked against exact rationals) is taken off before
// the square root, so a computed distance never overstates the forward step's safe distance.
double distance_lower_bound(double squared, const Vec3* pts) {
  return std::sqrt(std::max(0.0, squared - squared_distance_rounding_allowance(pts[0], pts[1], pts[2], pts[3])));
}

// Closest points of a pair (vertex p[0] and triangle p[1..3], or edges p[0]p[1] and p[2]p[3]) as
// weights on its four points: pa = Σ_{k<na} w[k] p[k], pb = Σ_{k≥na} w[k] p[k].
struct ClosestPoints {
  std::array<double, 4> w{};
  Vec3 pa, pb;
};
ClosestPoints closest_points(bool ee, const Vec3* p) {
  ClosestPoints c;
  if (ee) {
    const auto st = closest_on_segments(p[0], p[1], p[2], p[3]);
    c.w = {1 - st[0], st[0], 1 - st[1], st[1]};
  } else {
    const Vec3 b = closest_point_weights_on_triangle(p[0], p[1], p[2], p[3]);
    c.w = {1, b[0], b[1], b[2]};
  }
  const int na = ee ? 2 : 1;
  c.pa.setZero(), c.pb.setZero();
  for (int k = 0; k < 4; ++k) (k < na ? c.pa : c.pb) += c.w[static_cast<std::size_t>(k)] * p[k];
  return c;
}

}  // namespace

TwoWayEmbedding TwoWayEmbedding::identity(Eigen::Index n) {
  TwoWayEmbedding e;
  e.nodes.setConstant(n, 4, -1);
  e.weights.setZero(n, 4);
  for (Eigen::Index i = 0; i < n; ++i) e.nodes(i, 0) = static_cast<int>(i), e.weights(i, 0) = 1;
  return e;
}

double two_way_automatic_delta(const Points& rest, const Triangles& faces) {
  return faces.rows() > 0 ? 0.1 * mean_edge_length(rest, unique_edges(faces)) : 0.0;
}

std::optional<std::pair<std::string, std::string>> two_way_option_problem(const TwoWayOptions& o) {
  auto bad = [](const char* key, std::string msg) {
    return std::optional<std::pair<std::string, std::string>>(std::pair<std::string, std::string>(key, std::move(msg)));
  };
  if (!(o.delta >= 0) || !std::isfinite(o.delta))
    return bad("delta", fmt::format("must be > 0 (or 0 for automatic), got {}", o.delta));
  if (!(o.d_min >= 0) || !std::isfinite(o.d_min))
    return bad("d_min", fmt::format("must be >= delta (or 0 for automatic), got {}", o.d_min));
  if (o.delta > 0 && o.d_min > 0 && o.d_min < o.delta)
    return bad("d_min", fmt::format("must be >= delta = {}, got {}", o.delta, o.d_min));
  if (!(o.d_max >= 0) || !std::isfinite(o.d_max))
    return bad("d_max", fmt::format("must be > d_min (or 0 for automatic), got {}", o.d_max));
  if (o.d_max > 0 && o.d_min > 0 && o.d_max <= o.d_min)
    return bad("d_max", fmt::format("must be > d_min = {}, got {}", o.d_min, o.d_max));
  if (o.d_max > 0 && o.delta > 0 && o.d_max <= o.delta)
    return bad("d_max", fmt::format("must be > delta = {}, got {}", o.delta, o.d_max));
  if (!(o.gamma > 0 && o.gamma < 1)) return bad("gamma", fmt::format("must be in (0, 1), got {}", o.gamma));
  if (!(o.sigma >= 1) || !std::isfinite(o.sigma)) return bad("sigma", fmt::format("must be >= 1, got {}", o.sigma));
  if (o.max_steps < 1) return bad("max_steps", fmt::format("must be >= 1, got {}", o.max_steps));
  if (o.sweeps < 1) return bad("sweeps", fmt::format("must be >= 1, got {}", o.sweeps));
  if (!(o.tolerance > 0 && o.tolerance < 1))
    return bad("tolerance", fmt::format("must be in (0, 1), got {}", o.tolerance));
  if (!(o.min_volume >= 0 && o.min_volume < 1))
    return bad("min_volume", fmt::format("must be in [0, 1), got {}", o.min_volume));
  if (!(o.rest_fraction >= 0 && o.rest_fraction <= 1))
    return bad("rest_fraction", fmt::format("must be in [0, 1], got {}", o.rest_fraction));
  return std::nullopt;
}

TwoWayProjector::TwoWayProjector(const Points& rest, Triangles faces, Edges length_edges, Eigen::VectorXd inverse_mass,
                                 TwoWayOptions options)
    : TwoWayProjector(rest, TwoWayEmbedding::identity(rest.rows()), std::move(faces), std::move(length_edges),
                      std::move(inverse_mass), options) {}

TwoWayProjector::TwoWayProjector(const Points& rest, TwoWayEmbedding embedding, Triangles faces, Edges length_edges,
                                 Eigen::VectorXd inverse_mass, TwoWayOptions options)
    : n_(static_cast<int>(rest.rows())),
      embedding_(std::move(embedding)),
      faces_(std::move(faces)),
      length_edges_(std::move(length_edges)),
      inverse_mass_(std::move(inverse_mass)),
      options_(options) {
  if (inverse_mass_.size() != n_)
    throw Error(fmt::format("two-way: {} inverse masses for {} vertices", inverse_mass_.size(), n_));
  if (!inverse_mass_.allFinite() || (inverse_mass_.size() > 0 && inverse_mass_.minCoeff() < 0))
    throw Error("two-way: inverse masses must be finite and >= 0");
  const Eigen::Index np = embedding_.nodes.rows();
  if (embedding_.weights.rows() != np)
    throw Error(fmt::format("two-way: {} weight rows for {} contact points", embedding_.weights.rows(), np));
  l1_.assign(static_cast<std::size_t>(np), 0.0);
  for (Eigen::Index i = 0; i < np; ++i) {
    double sum = 0, l1 = 0;
    int used = 0;
    for (int k = 0; k < 4; ++k) {
      const int v = embedding_.nodes(i, k);
      const double w = embedding_.weights(i, k);
      if (v < -1 || v >= n_)
        throw Error(fmt::format("two-way: contact point {} names node {} (outside [0, {}))", i, v, n_));
      if (!std::isfinite(w)) throw Error(fmt::format("two-way: contact point {} has a non-finite weight", i));
      if (v == -1 && w != 0) throw Error(fmt::format("two-way: contact point {} weighs an unused entry", i));
      used += v >= 0;
      sum += w, l1 += std::abs(w);
    }
    if (used == 0 || std::abs(sum - 1) > 1e-6)
      throw Error(fmt::format("two-way: the weights of contact point {} sum to {} (must be 1)", i, sum));
    l1_[static_cast<std::size_t>(i)] = l1;
  }
  if (faces_.size() > 0 && (faces_.minCoeff() < 0 || faces_.maxCoeff() >= np))
    throw Error(fmt::format("two-way: a contact face index is outside [0, {})", np));
  if (length_edges_.size() > 0 && (length_edges_.minCoeff() < 0 || length_edges_.maxCoeff() >= n_))
    throw Error(fmt::format("two-way: a length-edge index is outside [0, {})", n_));
  if (!rest.allFinite()) throw Error("two-way: non-finite rest position");
  if (const auto problem = two_way_option_problem(options_))
    throw Error(fmt::format("two-way: {} {}", problem->first, problem->second));
  contact_edges_ = unique_edges(faces_);
  on_surface_.assign(static_cast<std::size_t>(np), 0);
  node_on_surface_.assign(static_cast<std::size_t>(n_), 0);
  for (Eigen::Index f = 0; f < faces_.rows(); ++f)
    for (int k = 0; k < 3; ++k) on_surface_[static_cast<std::size_t>(faces_(f, k))] = 1;
  for (Eigen::Index i = 0; i < np; ++i)
    if (on_surface_[static_cast<std::size_t>(i)])
      for (int k = 0; k < 4; ++k)
        if (embedding_.nodes(i, k) >= 0 && embedding_.weights(i, k) != 0)
          node_on_surface_[static_cast<std::size_t>(embedding_.nodes(i, k))] = 1;
  rest_points_ = contact_points(rest);
  // Connected components of the contact surface (through shared points).
  DisjointSets components(static_cast<int>(np));
  for (Eigen::Index f = 0; f < faces_.rows(); ++f)
    for (int k = 1; k < 3; ++k) components.unite(faces_(f, 0), faces_(f, k));
  component_.resize(static_cast<std::size_t>(np));
  for (Eigen::Index i = 0; i < np; ++i) component_[static_cast<std::size_t>(i)] = components.find(static_cast<int>(i));
  if (options_.delta == 0) options_.delta = two_way_automatic_delta(rest_points_, faces_);
  if (options_.delta == 0) options_.delta = 1;  // no contact surface: never used
  if (options_.d_min == 0) options_.d_min = 2 * options_.delta;
  if (options_.d_max == 0) options_.d_max = 2 * options_.d_min;
  if (const auto problem = two_way_option_problem(options_))
    throw Error(fmt::format("two-way: {} {} (after the automatic values)", problem->first, problem->second));
}

Points TwoWayProjector::contact_points(const Points& x) const {
  if (x.rows() != n_) throw Error(fmt::format("two-way: {} positions for {} nodes", x.rows(), n_));
  const Eigen::Index np = embedding_.nodes.rows();
  Points s = Points::Zero(np, 3);
  tbb::parallel_for(tbb::blocked_range<Eigen::Index>(0, np, 4096), [&](const auto& range) {
    for (Eigen::Index i = range.begin(); i != range.end(); ++i)
      for (int k = 0; k < 4; ++k)
        if (const int v = embedding_.nodes(i, k); v >= 0) s.row(i) += embedding_.weights(i, k) * x.row(v);
  });
  return s;
}

void TwoWayProjector::set_volume_tets(const Points& rest, Tets tets) {
  if (rest.rows() != n_) throw Error(fmt::format("two-way: {} rest positions for {} vertices", rest.rows(), n_));
  if (tets.size() > 0 && (tets.minCoeff() < 0 || tets.maxCoeff() >= n_))
    throw Error(fmt::format("two-way: a volume tet's index is outside [0, {})", n_));
  std::vector<double> volume(static_cast<std::size_t>(tets.rows()));
  for (Eigen::Index t = 0; t < tets.rows(); ++t) {
    volume[static_cast<std::size_t>(t)] =
        signed_volume(rest.row(tets(t, 0)).transpose(), rest.row(tets(t, 1)).transpose(),
                      rest.row(tets(t, 2)).transpose(), rest.row(tets(t, 3)).transpose());
    if (!(volume[static_cast<std::size_t>(t)] > 0))
      throw Error(fmt::format("two-way: volume tet {} has rest volume {} (must be > 0)", t,
                              volume[static_cast<std::size_t>(t)]));
  }
  volume_tets_ = std::move(tets);
  rest_volume_ = std::move(volume);
}

void TwoWayProjector::update_contact_forces(const Points& x, const Points& y, double h, Points& f) const {
  if (x.rows() != n_ || y.rows() != n_)
    throw Error(fmt::format("two-way: {} projected and {} target positions for {} vertices", x.rows(), y.rows(), n_));
  if (!(h > 0) || !std::isfinite(h)) throw Error(fmt::format("two-way: time step must be > 0, got {}", h));
  if (f.rows() != n_ || f.cols() != 3) f = Points::Zero(n_, 3);
  std::vector<char> near(static_cast<std::size_t>(n_), 0);
  auto mark = [&](int point) {
    for (int k = 0; k < 4; ++k)
      if (const int v = embedding_.nodes(point, k); v >= 0 && embedding_.weights(point, k) != 0)
        near[static_cast<std::size_t>(v)] = 1;
  };
  if (faces_.rows() > 0) {
    const ProximityPairs pairs = proximity_search(contact_points(x), faces_, contact_edges_, options_.d_min);
    for (const auto& p : pairs.vertex_triangle) {
      mark(p[0]);
      for (int k = 0; k < 3; ++k) mark(faces_(p[1], k));
    }
    for (const auto& p : pairs.edge_edge)
      for (int e : p)
        for (int k = 0; k < 2; ++k) mark(contact_edges_(e, k));
  }
  for (Eigen::Index i = 0; i < n_; ++i) {
    if (!near[static_cast<std::size_t>(i)] || inverse_mass_[i] == 0) {
      f.row(i).setZero();
      continue;
    }
    f.row(i) += (x.row(i) - y.row(i)) / (inverse_mass_[i] * h * h);
  }
}

void TwoWayProjector::check_intersection_free(const Points& x) const {
  if (x.rows() != n_) throw Error(fmt::format("two-way: {} positions for {} vertices", x.rows(), n_));
  if (!x.allFinite()) throw Error("two-way: non-finite position");
  if (faces_.rows() == 0) return;
  if (const auto hit = find_surface_intersection(contact_points(x), faces_, contact_edges_))
    throw CollisionError("two-way: the contact surface intersects itself: " + hit->description);
}

TwoWayStats TwoWayProjector::project(const Points& x_safe, const Points& y_target, Points& x,
                                     const std::function<void(const TwoWayStepInfo&)>& observe) const {
  Timer total;
  TwoWayStats stats;
  if (x_safe.rows() != n_ || y_target.rows() != n_)
    throw Error(
        fmt::format("two-way: {} safe and {} target positions for {} vertices", x_safe.rows(), y_target.rows(), n_));
  if (!x_safe.allFinite()) throw Error("two-way: non-finite safe position");
  if (!y_target.allFinite()) throw Error("two-way: non-finite target position (the dynamics diverged?)");
  const TwoWayOptions& o = options_;
  const auto nv = static_cast<std::size_t>(n_);
  const auto npts = static_cast<std::size_t>(embedding_.nodes.rows());
  const auto& W = embedding_.weights;
  const auto& N = embedding_.nodes;

  x = x_safe;
  Points y = y_target;
  std::vector<double> r(nv, 1.0), safe(npts, kInf);
  for (std::size_t i = 0; i < nv; ++i)
    if (!node_on_surface_[i]) r[i] = 0;  // moved with α = 1 below; never limit convergence
  if (faces_.rows() == 0) {
    x = y_target;
    stats.min_distance = kInf;
    stats.ms_total = total.elapsed_ms();
    return stats;
  }

  // Edge-length constraints, fixed for the projection (linearized at y^[k+1]).
  Constraints length;
  for (Eigen::Index e = 0; e < length_edges_.rows(); ++e) {
    const int i = length_edges_(e, 0), j = length_edges_(e, 1);
    if (inverse_mass_[i] == 0 && inverse_mass_[j] == 0) continue;
    const Vec3 d = y_target.row(i).transpose() - y_target.row(j).transpose();
    const double L = d.norm();
    if (!(L > 0)) continue;
    length.add(i, -d / (L * L), y_target.row(i).transpose());
    length.add(j, d / (L * L), y_target.row(j).transpose());
    length.close(o.sigma - 1);
  }

  ProximityPairs pairs;
  std::vector<double> pair_d, pair_lb;  // per pair of P at x⁽ˡ⁾: distance and its lower bound
  double D = 0;
  std::mt19937_64 rng(o.seed);
  Constraints cons;
  std::vector<int> order, colour;
  std::vector<std::uint64_t> used(nv, 0);
  Points x_prev, s = contact_points(x), s_prev;
  std::vector<double> alpha, zone_alpha, len;  // len: |y_j − x_j| per node
  std::vector<int> zone;
  DisjointSets zone_sets;
  std::vector<std::size_t> across;  // pairs of P across impact zones
  Points delta_x;

  auto pair_points = [&](bool ee, const std::array<int, 2>& p, int* v) {
    if (ee) {
      v[0] = contact_edges_(p[0], 0), v[1] = contact_edges_(p[0], 1);
      v[2] = contact_edges_(p[1], 0), v[3] = contact_edges_(p[1], 1);
    } else {
      v[0] = p[0], v[1] = faces_(p[1], 0), v[2] = faces_(p[1], 1), v[3] = faces_(p[1], 2);
    }
  };
  // Pair q of P (vertex–triangle pairs first): its four contact points; true for an edge–edge pair.
  auto pair_vertices = [&](std::size_t q, int* v) {
    const std::size_t nvt = pairs.vertex_triangle.size();
    const bool ee = q >= nvt;
    pair_points(ee, ee ? pairs.edge_edge[q - nvt] : pairs.vertex_triangle[q], v);
    return ee;
  };
  // Squared distance of pair q at contact positions `at`; its points into p.
  auto pair_squared_distance = [&](std::size_t q, const Points& at, Vec3* p) {
    int v[4];
    const bool ee = pair_vertices(q, v);
    for (int k = 0; k < 4; ++k) p[k] = at.row(v[k]).transpose();
    return ee ? edge_edge_squared_distance(p[0], p[1], p[2], p[3])
              : point_triangle_squared_distance(p[0], p[1], p[2], p[3]);
  };
  // Calls f(node, weight, ‖w‖₁) for every node carrying a nonzero weight of contact point i.
  auto for_nodes = [&](int i, auto&& f) {
    const double l1 = l1_[static_cast<std::size_t>(i)];
    for (int k = 0; k < 4; ++k)
      if (const int v = N(i, k); v >= 0 && W(i, k) != 0) f(v, W(i, k), l1);
  };
  auto movable = [&](int v) { return inverse_mass_[v] > 0; };

  for (int l = 0; l < o.max_steps; ++l) {
    bool searched = false;
    if (D < o.d_min) {
      Timer ts;
      pairs = proximity_search(s, faces_, contact_edges_, o.d_max);
      D = o.d_max;
      ++stats.searches;
      searched = true;
      stats.max_pairs = std::max(stats.max_pairs, pairs.size());
      stats.ms_search += ts.elapsed_ms();
    }

    // Distances of P at x⁽ˡ⁾.
    Timer tb;
    const std::size_t np = pairs.size();
    pair_d.assign(np, kInf);
    pair_lb.assign(np, kInf);
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, np, 512), [&](const auto& range) {
      for (std::size_t q = range.begin(); q != range.end(); ++q) {
        Vec3 p[4];
        const double d2 = pair_squared_distance(q, s, p);
        pair_d[q] = std::sqrt(d2);
        pair_lb[q] = distance_lower_bound(d2, p);
      }
    });

    // Backward step: contact constraints of the pairs closer than δ, linearized at x⁽ˡ⁾, in the
    // contact points' coordinates (gradients g[k] on point v[k]) and carried to the nodes (Wᵀ).
    cons.clear();
    for (std::size_t q = 0; q < np; ++q) {
      if (!(pair_d[q] < o.delta)) continue;
      int v[4];
      const bool ee = pair_vertices(q, v);
      // The pair's activation distance: δ, or (with ρ > 0) ρ × its rest distance if both sides
      // belong to one connected surface and were closer than δ at rest.
      double delta = o.delta;
      if (o.rest_fraction > 0 &&
          component_[static_cast<std::size_t>(v[0])] == component_[static_cast<std::size_t>(v[3])]) {
        Vec3 rp[4];
        const double rest = std::sqrt(pair_squared_distance(q, rest_points_, rp));
        if (rest < o.delta) delta = o.rest_fraction * rest;
        if (!(pair_d[q] < delta)) continue;
      }
      const Vec3 p[4] = {s.row(v[0]).transpose(), s.row(v[1]).transpose(), s.row(v[2]).transpose(),
                         s.row(v[3]).transpose()};
      const double d = pair_d[q];
      Vec3 J[4];
      double c0 = 0;
      bool volume = false;
      if (o.constraint == TwoWayConstraint::Volume && d > 0) {
        // Signed volume (×6) V = (p1 − p0)·((p2 − p0) × (p3 − p0)) for vertex–triangle, and of
        // (a0, a1, b0, b1) as V = (a1 − a0)·((b0 − a0) × (b1 − a0)) for edge–edge; `base_area`
        // is |n| with V = |n|·h, h the height (= d for the two closest features used here).
        Vec3 g[4];
        double base_area = 0, lmax2 = 0;
        if (!ee && point_triangle_distance_type(p[0], p[1], p[2], p[3]) == PointTriangleType::P_T) {
          const Vec3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
          g[1] = w1.cross(w2), g[2] = w2.cross(u), g[3] = u.cross(w1);
          base_area = (p[2] - p[1]).cross(p[3] - p[1]).norm();
          lmax2 = std::max({(p[2] - p[1]).squaredNorm(), (p[3] - p[1]).squaredNorm(), (p[3] - p[2]).squaredNorm()});
          volume = base_area > 1e-6 * lmax2;
        } else if (ee && edge_edge_distance_type(p[0], p[1], p[2], p[3]) == EdgeEdgeType::A_B) {
          const Vec3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
          g[1] = w1.cross(w2), g[2] = w2.cross(u), g[3] = u.cross(w1);
          base_area = u.cross(p[3] - p[2]).norm();
          lmax2 = u.norm() * (p[3] - p[2]).norm();
          volume = base_area > 1e-3 * lmax2;  // not near-parallel
        }
        if (volume) {
          g[0] = -(g[1] + g[2] + g[3]);
          const double V = (p[1] - p[0]).dot(g[1]);
          const double sgn = V >= 0 ? 1.0 : -1.0;
          const double Vr = std::abs(V) + base_area * (delta - d);  // heights d → δ, base kept
          volume = std::abs(V) > 0 && Vr > 0;
          if (volume) {
            for (int k = 0; k < 4; ++k) J[k] = sgn * g[k] / Vr;
            c0 = std::abs(V) / Vr - 1;
          }
        }
      }
      if (!volume) {
        // Gap: n·(p(y) − q(y)) ≥ δ with the closest points' weights frozen at x⁽ˡ⁾.
        const ClosestPoints cp = closest_points(ee, p);
        const Vec3 dv = cp.pa - cp.pb;
        const double dn = dv.norm();
        if (!(dn > 0)) continue;  // touching: not a safe state; nothing to linearize
        const Vec3 n = dv / dn;
        const int na = ee ? 2 : 1;
        for (int k = 0; k < 4; ++k) J[k] = (k < na ? 1.0 : -1.0) * cp.w[static_cast<std::size_t>(k)] * n / delta;
        c0 = dn / delta - 1;
      }
      bool any_movable = false;
      for (int k = 0; k < 4; ++k)
        for_nodes(v[k], [&](int node, double w, double) {
          cons.add(node, w * J[k], x.row(node).transpose());
          any_movable = any_movable || movable(node);
        });
      if (any_movable)
        cons.close(c0);
      else
        cons.discard_open();  // obstacles only
    }
    stats.max_active = std::max(stats.max_active, cons.size());
    const std::size_t ncontact = cons.size();
    cons.append(length);
    // Volume floors, linearized at y⁽ˡ⁾ (V is cubic in y: the sweep starts from y⁽ˡ⁾, so that is
    // where the linearization is accurate); only tets near or below the floor take part.
    if (o.min_volume > 0)
      for (Eigen::Index t = 0; t < volume_tets_.rows(); ++t) {
        Vec3 p[4];
        bool any_movable = false;
        for (int k = 0; k < 4; ++k) {
          p[k] = y.row(volume_tets_(t, k)).transpose();
          any_movable = any_movable || movable(volume_tets_(t, k));
        }
        const double V0 = rest_volume_[static_cast<std::size_t>(t)];
        const Vec3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
        const double V = u.dot(w1.cross(w2)) / 6;
        if (!any_movable || V >= 2 * o.min_volume * V0) continue;
        const Vec3 g1 = w1.cross(w2) / (6 * V0), g2 = w2.cross(u) / (6 * V0), g3 = u.cross(w1) / (6 * V0);
        cons.add(volume_tets_(t, 0), -(g1 + g2 + g3), p[0]);
        cons.add(volume_tets_(t, 1), g1, p[1]);
        cons.add(volume_tets_(t, 2), g2, p[2]);
        cons.add(volume_tets_(t, 3), g3, p[3]);
        cons.close(V / V0 - o.min_volume);
      }

    // Randomized greedy colouring, separately for the edge-length constraints and the contacts:
    // constraints in a seeded random order take the smallest colour that no constraint sharing a
    // movable node has; colour 64 collects the rest (run serially). The sweep visits the soft
    // length colours first and the contact colours last, so that a sweep ends with the contacts
    // (hard) satisfied as far as they agree with each other, not undone by the soft constraints.
    std::vector<std::vector<int>> groups;
    std::vector<char> serial;  // per group: the overflow colour (constraints may share nodes)
    auto entries = [&](int ci) {
      return std::pair<std::size_t, std::size_t>(
          static_cast<std::size_t>(cons.first[static_cast<std::size_t>(ci)]),
          static_cast<std::size_t>(cons.first[static_cast<std::size_t>(ci) + 1]));
    };
    auto colour_range = [&](std::size_t first, std::size_t last) {
      order.resize(last - first);
      std::iota(order.begin(), order.end(), static_cast<int>(first));
      std::shuffle(order.begin(), order.end(), rng);
      int ncolours = 0;
      colour.assign(cons.size(), 0);
      for (int ci : order) {
        const auto [b, e] = entries(ci);
        std::uint64_t mask = 0;
        for (std::size_t k = b; k < e; ++k)
          if (movable(cons.node[k])) mask |= used[static_cast<std::size_t>(cons.node[k])];
        const int col = ~mask == 0 ? 64 : std::countr_one(mask);
        colour[static_cast<std::size_t>(ci)] = col;
        ncolours = std::max(ncolours, col + 1);
        if (col < 64)
          for (std::size_t k = b; k < e; ++k)
            if (movable(cons.node[k])) used[static_cast<std::size_t>(cons.node[k])] |= 1ull << col;
      }
      for (int ci : order) {  // reset the masks of the touched nodes only
        const auto [b, e] = entries(ci);
        for (std::size_t k = b; k < e; ++k) used[static_cast<std::size_t>(cons.node[k])] = 0;
      }
      const std::size_t base = groups.size();
      groups.resize(base + static_cast<std::size_t>(ncolours));
      serial.resize(groups.size(), 0);
      if (ncolours == 65) serial.back() = 1;
      for (int ci : order) groups[base + static_cast<std::size_t>(colour[static_cast<std::size_t>(ci)])].push_back(ci);
    };
    colour_range(ncontact, cons.size());
    colour_range(0, ncontact);

    // One projected Gauss–Seidel sweep from y⁽ˡ⁾ with λ starting at 0: a violated constraint moves
    // its nodes by M⁻¹Jᵀ Δλ, Δλ = −g/(J M⁻¹ Jᵀ) ≥ 0.
    auto relax = [&](int ci) {
      const auto [b, e] = entries(ci);
      double g = cons.c0[static_cast<std::size_t>(ci)], w = 0;
      for (std::size_t k = b; k < e; ++k) {
        const int v = cons.node[k];
        g += cons.J[k].dot(y.row(v).transpose() - cons.base[k]);
        w += inverse_mass_[v] * cons.J[k].squaredNorm();
      }
      if (g >= 0 || !(w > 0)) return;
      const double dl = -g / w;
      for (std::size_t k = b; k < e; ++k) {
        const int v = cons.node[k];
        y.row(v) += (inverse_mass_[v] * dl) * cons.J[k].transpose();
      }
    };
    for (int sweep = 0; sweep < o.sweeps; ++sweep)
      for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& group = groups[gi];
        if (serial[gi] || group.size() < 256) {  // the overflow colour and small groups: serially
          for (int ci : group) relax(ci);
        } else {
          tbb::parallel_for(tbb::blocked_range<std::size_t>(0, group.size(), 128), [&](const auto& range) {
            for (std::size_t q = range.begin(); q != range.end(); ++q) relax(group[q]);
          });
        }
      }
    stats.ms_backward += tb.elapsed_ms();

    // Forward step: one α per node; every bound on a contact point's motion is imposed on each of
    // its nodes divided by ‖w_i‖₁ (the header comment).
    Timer tf;
    for (std::size_t i = 0; i < npts; ++i) safe[i] = on_surface_[i] ? D : kInf;
    for (std::size_t q = 0; q < np; ++q) {
      int v[4];
      (void)pair_vertices(q, v);
      for (int k = 0; k < 4; ++k)
        safe[static_cast<std::size_t>(v[k])] = std::min(safe[static_cast<std::size_t>(v[k])], pair_lb[q]);
    }
    x_prev = x;
    s_prev = s;
    delta_x = y - x;
    len.resize(nv);
    for (std::size_t j = 0; j < nv; ++j) len[j] = delta_x.row(static_cast<Eigen::Index>(j)).norm();
    alpha.assign(nv, 1.0);
    // lower(j, bound / (‖w‖₁ |Δ_j|)) for every moving node j of contact point i: the node's α
    // (planes, per-vertex) or its zone's.
    auto cap_point_with = [&](int i, double bound, auto&& lower_node) {
      for_nodes(i, [&](int j, double, double l1) {
        const auto ju = static_cast<std::size_t>(j);
        if (len[ju] > 0) lower_node(j, bound / (l1 * len[ju]));
      });
    };
    auto cap_point = [&](int i, double bound, std::vector<double>& a) {
      cap_point_with(i, bound, [&](int j, double value) {
        a[static_cast<std::size_t>(j)] = std::min(a[static_cast<std::size_t>(j)], value);
      });
    };
    if (o.forward == TwoWayForward::Planes) {
      // Separating planes (our extension; the header comment gives the argument).
      for (std::size_t i = 0; i < npts; ++i)  // the cap ½γD of every surface point
        if (on_surface_[i]) cap_point(static_cast<int>(i), 0.5 * o.gamma * D, alpha);
      for (std::size_t q = 0; q < np; ++q) {
        int v[4];
        const bool ee = pair_vertices(q, v);
        const int na = ee ? 2 : 1;
        Vec3 p[4];
        double m = 0;
        for (int k = 0; k < 4; ++k) {
          p[k] = s.row(v[k]).transpose();
          m = std::max(m, p[k].cwiseAbs().maxCoeff());
        }
        const ClosestPoints cp = closest_points(ee, p);
        const Vec3 diff = cp.pa - cp.pb;
        const double dn = diff.norm();
        double gap = -1;
        Vec3 n = Vec3::Zero();
        if (dn > 0) {
          n = diff / dn;
          double smin = kInf, smax = -kInf;
          for (int k = 0; k < na; ++k) smin = std::min(smin, n.dot(p[k]));
          for (int k = na; k < 4; ++k) smax = std::max(smax, n.dot(p[k]));
          // Rounding of the dot products (|n| = 1 to rounding): a few ε M each.
          gap = smin - smax - 16 * std::numeric_limits<double>::epsilon() * m;
        }
        for (int k = 0; k < 4; ++k) {
          if (!(gap > 0)) {
            cap_point(v[k], 0.5 * o.gamma * pair_lb[q], alpha);
            continue;
          }
          // n·Δs ≥ −γg/2 on side A (≤ γg/2 on side B) holds when every node's share w α n·Δ_j does
          // not go toward the plane by more than |w| γg/(2‖w‖₁).
          const double side = k < na ? -1.0 : 1.0;
          for_nodes(v[k], [&](int j, double w, double l1) {
            const double toward = side * (w > 0 ? 1.0 : -1.0) * n.dot(delta_x.row(j).transpose());
            if (toward > 0)
              alpha[static_cast<std::size_t>(j)] =
                  std::min(alpha[static_cast<std::size_t>(j)], 0.5 * o.gamma * gap / (l1 * toward));
          });
        }
      }
    } else if (o.forward == TwoWayForward::Vertex) {  // α_i of eq. 17 per contact point
      for (std::size_t i = 0; i < npts; ++i)
        if (on_surface_[i]) cap_point(static_cast<int>(i), 0.5 * o.gamma * safe[i], alpha);
    } else {
      // Impact zones with a relative-motion bound (our extension of eq. 16). A pair of P cannot meet
      // on the step if the displacement of any of its points relative to any point of the other side
      // stays below its distance d (a point of a primitive moves by a convex combination of its
      // corners' displacements), and pairs outside P (distance ≥ D) cannot meet if no point moves
      // more than D/2. So: every surface point is capped at ½γD; the nodes of pairs closer than δ,
      // joined through shared nodes, move with one α per zone (a zone moving as a block does not
      // change its internal distances), and α of a zone is lowered until every pair of P has a
      // relative displacement ≤ γ d. A tight pair whose target separates it then opens by up to
      // γ d per step while its zone travels, instead of creeping at ½γ d per step. On an embedded
      // surface the relative motion of two points is at most ‖w_a‖₁‖w_b‖₁ times the largest
      // relative motion of their nodes, which is what is bounded.
      zone_sets.reset(n_);
      // The nodes of pair q, side A first: returns (count, count of side A) and the largest ‖w‖₁
      // of each side.
      auto pair_nodes = [&](std::size_t q, int* nodes, int& na_nodes, double& l1a, double& l1b) {
        int v[4];
        const bool ee = pair_vertices(q, v);
        const int na = ee ? 2 : 1;
        int count = 0;
        l1a = l1b = 0;
        for (int k = 0; k < 4; ++k) {
          if (k == na) na_nodes = count;
          for_nodes(v[k], [&](int j, double, double l1) {
            nodes[count++] = j;
            (k < na ? l1a : l1b) = std::max(k < na ? l1a : l1b, l1);
          });
        }
        return count;
      };
      for (std::size_t q = 0; q < np; ++q) {
        if (!(pair_d[q] < o.delta)) continue;
        int nodes[16], na_nodes = 0;
        double l1a, l1b;
        const int count = pair_nodes(q, nodes, na_nodes, l1a, l1b);
        for (int k = 1; k < count; ++k) zone_sets.unite(nodes[0], nodes[k]);
      }
      zone.resize(nv);
      for (std::size_t i = 0; i < nv; ++i) zone[i] = zone_sets.find(static_cast<int>(i));
      zone_alpha.assign(nv, 1.0);
      auto za = [&](int i) { return zone_alpha[static_cast<std::size_t>(zone[static_cast<std::size_t>(i)])]; };
      auto lower = [&](int i, double value) {
        double& a = zone_alpha[static_cast<std::size_t>(zone[static_cast<std::size_t>(i)])];
        if (value < a) a = value;
      };
      for (std::size_t i = 0; i < npts; ++i)  // the cap ½γD of every surface point
        if (on_surface_[i]) cap_point_with(static_cast<int>(i), 0.5 * o.gamma * D, lower);
      // A pair within one zone moves relatively by α rel0 whatever else happens: one pass lowers
      // its zone to γd/rel0 (later rounds only lower α further). Pairs across zones go to rounds
      // that lower zones until every such pair holds; each round only lowers α, and after
      // max_rounds the per-node bound ½ limit/|Δ_j| (which satisfies every pair by itself) is
      // applied to the rest.
      across.clear();
      for (std::size_t q = 0; q < np; ++q) {
        int nodes[16], na_nodes = 0;
        double l1a, l1b;
        const int count = pair_nodes(q, nodes, na_nodes, l1a, l1b);
        bool one_zone = true;
        for (int k = 1; k < count; ++k)
          one_zone = one_zone && zone[static_cast<std::size_t>(nodes[k])] == zone[static_cast<std::size_t>(nodes[0])];
        if (!one_zone) {
          across.push_back(q);
          continue;
        }
        const double limit = o.gamma * pair_lb[q] / (l1a * l1b);
        double rel0 = 0;
        for (int i = 0; i < na_nodes; ++i)
          for (int k = na_nodes; k < count; ++k)
            rel0 = std::max(rel0, (delta_x.row(nodes[i]) - delta_x.row(nodes[k])).norm());
        if (za(nodes[0]) * rel0 > limit) lower(nodes[0], (1 - 1e-12) * limit / rel0);
      }
      const int max_rounds = 32;
      bool changed = true;
      for (int round = 0; changed; ++round) {
        changed = false;
        const bool last = round == max_rounds;
        for (const std::size_t q : across) {
          int nodes[16], na_nodes = 0;
          double l1a, l1b;
          const int count = pair_nodes(q, nodes, na_nodes, l1a, l1b);
          const double limit = o.gamma * pair_lb[q] / (l1a * l1b);
          if (!last) {
            double rel = 0;
            for (int i = 0; i < na_nodes; ++i)
              for (int k = na_nodes; k < count; ++k)
                rel =
                    std::max(rel, (za(nodes[i]) * delta_x.row(nodes[i]) - za(nodes[k]) * delta_x.row(nodes[k])).norm());
            if (rel <= limit) continue;
            changed = true;
          }
          // The per-node bound (every pair of the last round: satisfies all pairs whatever the order).
          for (int k = 0; k < count; ++k)
            if (len[static_cast<std::size_t>(nodes[k])] > 0)
              lower(nodes[k], 0.5 * limit / len[static_cast<std::size_t>(nodes[k])]);
        }
        if (last) break;
      }
      for (std::size_t i = 0; i < nv; ++i) alpha[i] = za(static_cast<int>(i));
    }
    double max_r = 0;
    for (std::size_t j = 0; j < nv; ++j) {
      if (!node_on_surface_[j]) alpha[j] = 1.0;  // moves no contact point
      if (len[j] > 0) x.row(static_cast<Eigen::Index>(j)) += alpha[j] * delta_x.row(static_cast<Eigen::Index>(j));
      if (node_on_surface_[j]) {
        r[j] *= (1 - alpha[j]);
        max_r = std::max(max_r, r[j]);
      }
    }
    s = contact_points(x);
    double max_move = 0;
    for (std::size_t i = 0; i < npts; ++i)
      if (on_surface_[i])
        max_move =
            std::max(max_move, (s.row(static_cast<Eigen::Index>(i)) - s_prev.row(static_cast<Eigen::Index>(i))).norm());
    const double D_step = D;  // D⁽ˡ⁾, for the observer (D − 2m + 2m need not round back to D)
    D -= 2 * max_move;
    stats.ms_forward += tf.elapsed_ms();
    ++stats.steps;
    stats.max_r = max_r;
    if (observe) {
      TwoWayStepInfo info;
      info.step = l;
      info.searched = searched;
      info.D = D_step;
      info.x_before = &x_prev;
      info.x_after = &x;
      info.y = &y;
      info.s_before = &s_prev;
      info.s_after = &s;
      info.safe_distance = &safe;
      info.pairs = &pairs;
      observe(info);
    }
    if (max_r < o.tolerance) break;
  }
  stats.converged = stats.max_r < o.tolerance;

  // Result figures: distances of P at the result (P still holds every pair closer than D).
  stats.min_distance = kInf;
  for (std::size_t q = 0; q < pairs.size(); ++q) {
    Vec3 p[4];
    stats.min_distance = std::min(stats.min_distance, std::sqrt(pair_squared_distance(q, s, p)));
  }
  stats.max_displacement = (x - y_target).rowwise().norm().maxCoeff();
  for (Eigen::Index e = 0; e < length_edges_.rows(); ++e) {
    const int i = length_edges_(e, 0), j = length_edges_(e, 1);
    const double L = (y_target.row(i) - y_target.row(j)).norm();
    if (L > 0) stats.max_stretch = std::max(stats.max_stretch, (x.row(i) - x.row(j)).norm() / L);
  }
  stats.ms_total = total.elapsed_ms();
  return stats;
}

}  // namespace xpd
