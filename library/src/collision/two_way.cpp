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
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/mesh/barycentric.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One linear constraint g(y) = c0 + Σ_v J_v · (y_v − base_v) ≥ 0 on up to 4 vertices (v = −1:
// unused). Contacts are linearized at x⁽ˡ⁾ (base = x⁽ˡ⁾), edge lengths at y^[k+1]; keeping the
// base avoids the cancellation of a folded constant c0 − J·base at large coordinates.
struct Constraint {
  int v[4] = {-1, -1, -1, -1};
  Vec3 J[4];
  Vec3 base[4];
  double c0 = 0;
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

// Lower bound of a pair's distance from its computed squared distance: an allowance of 64 ε M²
// (M the largest coordinate magnitude of the four points) for the rounding of the squared-distance
// formulas is taken off before the square root, so a computed distance never overstates the
// forward step's safe distance by a rounding error.
double distance_lower_bound(double squared, const Vec3* pts) {
  double m = 0;
  for (int k = 0; k < 4; ++k) m = std::max(m, pts[k].cwiseAbs().maxCoeff());
  const double allowance = 64 * std::numeric_limits<double>::epsilon() * m * m;
  return std::sqrt(std::max(0.0, squared - allowance));
}

}  // namespace

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
  return std::nullopt;
}

TwoWayProjector::TwoWayProjector(const Points& rest, Triangles faces, Edges length_edges, Eigen::VectorXd inverse_mass,
                                 TwoWayOptions options)
    : n_(static_cast<int>(rest.rows())),
      faces_(std::move(faces)),
      length_edges_(std::move(length_edges)),
      inverse_mass_(std::move(inverse_mass)),
      options_(options) {
  if (inverse_mass_.size() != n_)
    throw Error(fmt::format("two-way: {} inverse masses for {} vertices", inverse_mass_.size(), n_));
  if (!inverse_mass_.allFinite() || (inverse_mass_.size() > 0 && inverse_mass_.minCoeff() < 0))
    throw Error("two-way: inverse masses must be finite and >= 0");
  if (faces_.size() > 0 && (faces_.minCoeff() < 0 || faces_.maxCoeff() >= n_))
    throw Error(fmt::format("two-way: a contact face index is outside [0, {})", n_));
  if (length_edges_.size() > 0 && (length_edges_.minCoeff() < 0 || length_edges_.maxCoeff() >= n_))
    throw Error(fmt::format("two-way: a length-edge index is outside [0, {})", n_));
  if (!rest.allFinite()) throw Error("two-way: non-finite rest position");
  if (const auto problem = two_way_option_problem(options_))
    throw Error(fmt::format("two-way: {} {}", problem->first, problem->second));
  contact_edges_ = unique_edges(faces_);
  on_surface_.assign(static_cast<std::size_t>(n_), 0);
  for (Eigen::Index f = 0; f < faces_.rows(); ++f)
    for (int k = 0; k < 3; ++k) on_surface_[static_cast<std::size_t>(faces_(f, k))] = 1;
  if (options_.delta == 0 && faces_.rows() > 0) options_.delta = 0.1 * mean_edge_length(rest, contact_edges_);
  if (options_.delta == 0) options_.delta = 1;  // no contact surface: never used
  if (options_.d_min == 0) options_.d_min = 2 * options_.delta;
  if (options_.d_max == 0) options_.d_max = 2 * options_.d_min;
  if (const auto problem = two_way_option_problem(options_))
    throw Error(fmt::format("two-way: {} {} (after the automatic values)", problem->first, problem->second));
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
  if (faces_.rows() > 0) {
    const ProximityPairs pairs = proximity_search(x, faces_, contact_edges_, options_.d_min);
    for (const auto& p : pairs.vertex_triangle) {
      near[static_cast<std::size_t>(p[0])] = 1;
      for (int k = 0; k < 3; ++k) near[static_cast<std::size_t>(faces_(p[1], k))] = 1;
    }
    for (const auto& p : pairs.edge_edge)
      for (int e : p)
        for (int k = 0; k < 2; ++k) near[static_cast<std::size_t>(contact_edges_(e, k))] = 1;
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
  if (const auto hit = find_surface_intersection(x, faces_, contact_edges_))
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

  x = x_safe;
  Points y = y_target;
  std::vector<double> r(nv, 1.0), safe(nv, kInf);
  for (std::size_t i = 0; i < nv; ++i)
    if (!on_surface_[i]) r[i] = 0;  // moved with α = 1 below; never limit convergence
  if (faces_.rows() == 0) {
    x = y_target;
    stats.min_distance = kInf;
    stats.ms_total = total.elapsed_ms();
    return stats;
  }

  // Edge-length constraints, fixed for the projection (linearized at y^[k+1]).
  std::vector<Constraint> length;
  length.reserve(static_cast<std::size_t>(length_edges_.rows()));
  for (Eigen::Index e = 0; e < length_edges_.rows(); ++e) {
    const int i = length_edges_(e, 0), j = length_edges_(e, 1);
    if (inverse_mass_[i] == 0 && inverse_mass_[j] == 0) continue;
    const Vec3 d = y_target.row(i).transpose() - y_target.row(j).transpose();
    const double L = d.norm();
    if (!(L > 0)) continue;
    Constraint c;
    c.v[0] = i;
    c.v[1] = j;
    c.J[0] = -d / (L * L);
    c.J[1] = d / (L * L);
    c.base[0] = y_target.row(i).transpose();
    c.base[1] = y_target.row(j).transpose();
    c.c0 = o.sigma - 1;
    length.push_back(c);
  }

  ProximityPairs pairs;
  std::vector<double> pair_d, pair_lb;  // per pair of P at x⁽ˡ⁾: distance and its lower bound
  double D = 0;
  std::mt19937_64 rng(o.seed);
  std::vector<Constraint> cons;
  std::vector<int> order, colour;
  std::vector<std::uint64_t> used(nv, 0);
  Points x_prev;
  std::vector<double> alpha, zone_alpha;
  std::vector<int> parent, zone;
  Points delta_x;

  auto pair_points = [&](bool ee, const std::array<int, 2>& p, int* v) {
    if (ee) {
      v[0] = contact_edges_(p[0], 0), v[1] = contact_edges_(p[0], 1);
      v[2] = contact_edges_(p[1], 0), v[3] = contact_edges_(p[1], 1);
    } else {
      v[0] = p[0], v[1] = faces_(p[1], 0), v[2] = faces_(p[1], 1), v[3] = faces_(p[1], 2);
    }
  };
  // Pair q of P (vertex–triangle pairs first): its four vertices; true for an edge–edge pair.
  auto pair_vertices = [&](std::size_t q, int* v) {
    const std::size_t nvt = pairs.vertex_triangle.size();
    const bool ee = q >= nvt;
    pair_points(ee, ee ? pairs.edge_edge[q - nvt] : pairs.vertex_triangle[q], v);
    return ee;
  };
  // Squared distance of pair q at positions `at`; its points into p.
  auto pair_squared_distance = [&](std::size_t q, const Points& at, Vec3* p) {
    int v[4];
    const bool ee = pair_vertices(q, v);
    for (int k = 0; k < 4; ++k) p[k] = at.row(v[k]).transpose();
    return ee ? edge_edge_squared_distance(p[0], p[1], p[2], p[3])
              : point_triangle_squared_distance(p[0], p[1], p[2], p[3]);
  };

  for (int l = 0; l < o.max_steps; ++l) {
    bool searched = false;
    if (D < o.d_min) {
      Timer ts;
      pairs = proximity_search(x, faces_, contact_edges_, o.d_max);
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
        const double d2 = pair_squared_distance(q, x, p);
        pair_d[q] = std::sqrt(d2);
        pair_lb[q] = distance_lower_bound(d2, p);
      }
    });

    // Backward step: contact constraints of the pairs closer than δ, linearized at x⁽ˡ⁾.
    cons.clear();
    for (std::size_t q = 0; q < np; ++q) {
      if (!(pair_d[q] < o.delta)) continue;
      int v[4];
      const bool ee = pair_vertices(q, v);
      if (inverse_mass_[v[0]] == 0 && inverse_mass_[v[1]] == 0 && inverse_mass_[v[2]] == 0 && inverse_mass_[v[3]] == 0)
        continue;
      const Vec3 p[4] = {x.row(v[0]).transpose(), x.row(v[1]).transpose(), x.row(v[2]).transpose(),
                         x.row(v[3]).transpose()};
      const double d = pair_d[q];
      Constraint c;
      for (int k = 0; k < 4; ++k) c.v[k] = v[k], c.base[k] = p[k];
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
          const double s = V >= 0 ? 1.0 : -1.0;
          const double Vr = std::abs(V) + base_area * (o.delta - d);  // heights d → δ, base kept
          volume = std::abs(V) > 0 && Vr > 0;
          if (volume) {
            for (int k = 0; k < 4; ++k) c.J[k] = s * g[k] / Vr;
            c.c0 = std::abs(V) / Vr - 1;
          }
        }
      }
      if (!volume) {
        // Gap: n·(p(y) − q(y)) ≥ δ with the closest points' weights frozen at x⁽ˡ⁾.
        double wa[2] = {1, 0}, wb[3] = {0, 0, 0};
        Vec3 pa, pb;
        if (ee) {
          const auto st = closest_on_segments(p[0], p[1], p[2], p[3]);
          wa[0] = 1 - st[0], wa[1] = st[0];
          wb[0] = 1 - st[1], wb[1] = st[1];
          pa = wa[0] * p[0] + wa[1] * p[1];
          pb = wb[0] * p[2] + wb[1] * p[3];
        } else {
          const Vec3 b = closest_point_weights_on_triangle(p[0], p[1], p[2], p[3]);
          wb[0] = b[0], wb[1] = b[1], wb[2] = b[2];
          pa = p[0];
          pb = b[0] * p[1] + b[1] * p[2] + b[2] * p[3];
        }
        const Vec3 dv = pa - pb;
        const double dn = dv.norm();
        if (!(dn > 0)) continue;  // touching: not a safe state; nothing to linearize
        const Vec3 n = dv / dn;
        if (ee) {
          c.J[0] = wa[0] * n / o.delta, c.J[1] = wa[1] * n / o.delta;
          c.J[2] = -wb[0] * n / o.delta, c.J[3] = -wb[1] * n / o.delta;
        } else {
          c.J[0] = n / o.delta;
          for (int k = 0; k < 3; ++k) c.J[k + 1] = -wb[k] * n / o.delta;
        }
        c.c0 = dn / o.delta - 1;
      }
      cons.push_back(c);
    }
    stats.max_active = std::max(stats.max_active, cons.size());
    const std::size_t ncontact = cons.size();
    cons.insert(cons.end(), length.begin(), length.end());
    // Volume floors, linearized at y⁽ˡ⁾ (V is cubic in y: the sweep starts from y⁽ˡ⁾, so that is
    // where the linearization is accurate); only tets near or below the floor take part.
    if (o.min_volume > 0)
      for (Eigen::Index t = 0; t < volume_tets_.rows(); ++t) {
        Constraint c;
        Vec3 p[4];
        bool movable = false;
        for (int k = 0; k < 4; ++k) {
          c.v[k] = volume_tets_(t, k);
          p[k] = y.row(c.v[k]).transpose();
          c.base[k] = p[k];
          movable = movable || inverse_mass_[c.v[k]] > 0;
        }
        const double V0 = rest_volume_[static_cast<std::size_t>(t)];
        const Vec3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
        const double V = u.dot(w1.cross(w2)) / 6;
        if (!movable || V >= 2 * o.min_volume * V0) continue;
        c.J[1] = w1.cross(w2) / (6 * V0), c.J[2] = w2.cross(u) / (6 * V0), c.J[3] = u.cross(w1) / (6 * V0);
        c.J[0] = -(c.J[1] + c.J[2] + c.J[3]);
        c.c0 = V / V0 - o.min_volume;
        cons.push_back(c);
      }

    // Randomized greedy colouring, separately for the edge-length constraints and the contacts:
    // constraints in a seeded random order take the smallest colour that no constraint sharing a
    // movable vertex has; colour 64 collects the rest (run serially). The sweep visits the soft
    // length colours first and the contact colours last, so that a sweep ends with the contacts
    // (hard) satisfied as far as they agree with each other, not undone by the soft constraints.
    std::vector<std::vector<int>> groups;
    std::vector<char> serial;  // per group: the overflow colour (constraints may share vertices)
    auto colour_range = [&](std::size_t first, std::size_t last) {
      order.resize(last - first);
      std::iota(order.begin(), order.end(), static_cast<int>(first));
      std::shuffle(order.begin(), order.end(), rng);
      int ncolours = 0;
      colour.assign(cons.size(), 0);
      for (int ci : order) {
        const Constraint& c = cons[static_cast<std::size_t>(ci)];
        std::uint64_t mask = 0;
        for (int k = 0; k < 4; ++k)
          if (c.v[k] >= 0 && inverse_mass_[c.v[k]] > 0) mask |= used[static_cast<std::size_t>(c.v[k])];
        const int col = ~mask == 0 ? 64 : std::countr_one(mask);
        colour[static_cast<std::size_t>(ci)] = col;
        ncolours = std::max(ncolours, col + 1);
        if (col < 64)
          for (int k = 0; k < 4; ++k)
            if (c.v[k] >= 0 && inverse_mass_[c.v[k]] > 0) used[static_cast<std::size_t>(c.v[k])] |= 1ull << col;
      }
      for (int ci : order)  // reset the masks of the touched vertices only
        for (int k = 0; k < 4; ++k)
          if (cons[static_cast<std::size_t>(ci)].v[k] >= 0)
            used[static_cast<std::size_t>(cons[static_cast<std::size_t>(ci)].v[k])] = 0;
      const std::size_t base = groups.size();
      groups.resize(base + static_cast<std::size_t>(ncolours));
      serial.resize(groups.size(), 0);
      if (ncolours == 65) serial.back() = 1;
      for (int ci : order) groups[base + static_cast<std::size_t>(colour[static_cast<std::size_t>(ci)])].push_back(ci);
    };
    colour_range(ncontact, cons.size());
    colour_range(0, ncontact);

    // One projected Gauss–Seidel sweep from y⁽ˡ⁾ with λ starting at 0: a violated constraint moves
    // its vertices by M⁻¹Jᵀ Δλ, Δλ = −g/(J M⁻¹ Jᵀ) ≥ 0.
    auto relax = [&](const Constraint& c) {
      double g = c.c0, w = 0;
      for (int k = 0; k < 4; ++k) {
        if (c.v[k] < 0) continue;
        g += c.J[k].dot(y.row(c.v[k]).transpose() - c.base[k]);
        w += inverse_mass_[c.v[k]] * c.J[k].squaredNorm();
      }
      if (g >= 0 || !(w > 0)) return;
      const double dl = -g / w;
      for (int k = 0; k < 4; ++k)
        if (c.v[k] >= 0) y.row(c.v[k]) += (inverse_mass_[c.v[k]] * dl) * c.J[k].transpose();
    };
    for (int sweep = 0; sweep < o.sweeps; ++sweep)
      for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& group = groups[gi];
        if (serial[gi] || group.size() < 256) {  // the overflow colour and small groups: serially
          for (int ci : group) relax(cons[static_cast<std::size_t>(ci)]);
        } else {
          tbb::parallel_for(tbb::blocked_range<std::size_t>(0, group.size(), 128), [&](const auto& range) {
            for (std::size_t q = range.begin(); q != range.end(); ++q) relax(cons[static_cast<std::size_t>(group[q])]);
          });
        }
      }
    stats.ms_backward += tb.elapsed_ms();

    // Forward step.
    Timer tf;
    for (std::size_t i = 0; i < nv; ++i) safe[i] = on_surface_[i] ? D : kInf;
    for (std::size_t q = 0; q < np; ++q) {
      int v[4];
      (void)pair_vertices(q, v);
      for (int k = 0; k < 4; ++k)
        safe[static_cast<std::size_t>(v[k])] = std::min(safe[static_cast<std::size_t>(v[k])], pair_lb[q]);
    }
    x_prev = x;
    alpha.assign(nv, 1.0);
    if (o.forward == TwoWayForward::Planes) {
      // Separating planes (our extension; the header comment gives the argument).
      for (std::size_t i = 0; i < nv; ++i) {  // the cap ½γD of every surface vertex
        const double len = (y.row(static_cast<Eigen::Index>(i)) - x.row(static_cast<Eigen::Index>(i))).norm();
        if (on_surface_[i] && len > 0) alpha[i] = std::min(0.5 * o.gamma * D / len, 1.0);
      }
      for (std::size_t q = 0; q < np; ++q) {
        int v[4];
        const bool ee = pair_vertices(q, v);
        const int na = ee ? 2 : 1;
        Vec3 p[4], dx[4];
        double m = 0;
        for (int k = 0; k < 4; ++k) {
          p[k] = x.row(v[k]).transpose();
          dx[k] = y.row(v[k]).transpose() - p[k];
          m = std::max(m, p[k].cwiseAbs().maxCoeff());
        }
        Vec3 pa, pb;
        if (ee) {
          const auto st = closest_on_segments(p[0], p[1], p[2], p[3]);
          pa = (1 - st[0]) * p[0] + st[0] * p[1];
          pb = (1 - st[1]) * p[2] + st[1] * p[3];
        } else {
          const Vec3 b = closest_point_weights_on_triangle(p[0], p[1], p[2], p[3]);
          pa = p[0];
          pb = b[0] * p[1] + b[1] * p[2] + b[2] * p[3];
        }
        const Vec3 diff = pa - pb;
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
          const std::size_t i = static_cast<std::size_t>(v[k]);
          if (gap > 0) {
            const double toward = k < na ? -n.dot(dx[k]) : n.dot(dx[k]);  // motion toward the plane
            if (toward > 0) alpha[i] = std::min(alpha[i], 0.5 * o.gamma * gap / toward);
          } else {
            const double len = dx[k].norm();
            if (len > 0) alpha[i] = std::min(alpha[i], 0.5 * o.gamma * pair_lb[q] / len);
          }
        }
      }
      for (std::size_t i = 0; i < nv; ++i)
        if (!on_surface_[i]) alpha[i] = 1.0;
    } else if (o.forward == TwoWayForward::Vertex) {  // α_i of eq. 17 per vertex
      for (std::size_t i = 0; i < nv; ++i) {
        const double len = (y.row(static_cast<Eigen::Index>(i)) - x.row(static_cast<Eigen::Index>(i))).norm();
        if (on_surface_[i] && len > 0) alpha[i] = std::min(0.5 * o.gamma * safe[i] / len, 1.0);
      }
    } else {
      // Impact zones with a relative-motion bound (our extension of eq. 16). A pair of P cannot meet
      // on the step if the displacement of any of its vertices relative to any vertex of the other
      // side stays below its distance d (a point of a primitive moves by a convex combination of its
      // corners' displacements), and pairs outside P (distance ≥ D) cannot meet if no vertex moves
      // more than D/2. So: every surface vertex is capped at ½γD; the vertices of pairs closer than
      // δ, joined through shared vertices, move with one α per zone (a zone moving as a block does
      // not change its internal distances), and α of a zone is lowered until every pair of P has a
      // relative displacement ≤ γ d. A tight pair whose target separates it then opens by up to
      // γ d per step while its zone travels, instead of creeping at ½γ d per step.
      parent.resize(nv);
      std::iota(parent.begin(), parent.end(), 0);
      auto find = [&](int a) {
        while (parent[static_cast<std::size_t>(a)] != a) {
          parent[static_cast<std::size_t>(a)] = parent[static_cast<std::size_t>(parent[static_cast<std::size_t>(a)])];
          a = parent[static_cast<std::size_t>(a)];
        }
        return a;
      };
      for (std::size_t q = 0; q < np; ++q) {
        if (!(pair_d[q] < o.delta)) continue;
        int v[4];
        (void)pair_vertices(q, v);
        for (int k = 1; k < 4; ++k) {
          const int a = find(v[0]), b = find(v[k]);
          if (a != b) parent[static_cast<std::size_t>(std::max(a, b))] = std::min(a, b);
        }
      }
      zone.resize(nv);
      for (std::size_t i = 0; i < nv; ++i) zone[i] = find(static_cast<int>(i));
      delta_x = y - x;
      zone_alpha.assign(nv, 1.0);
      for (std::size_t i = 0; i < nv; ++i) {  // the cap ½γD of every surface vertex
        const double len = delta_x.row(static_cast<Eigen::Index>(i)).norm();
        if (on_surface_[i] && len > 0)
          zone_alpha[static_cast<std::size_t>(zone[i])] =
              std::min(zone_alpha[static_cast<std::size_t>(zone[i])], 0.5 * o.gamma * D / len);
      }
      auto za = [&](int i) { return zone_alpha[static_cast<std::size_t>(zone[static_cast<std::size_t>(i)])]; };
      auto lower = [&](int i, double value) {
        double& a = zone_alpha[static_cast<std::size_t>(zone[static_cast<std::size_t>(i)])];
        if (value < a) a = value;
      };
      // Lower zones until every pair holds; each round only lowers α, and after max_rounds the
      // per-vertex bound ½γd/|Δ_i| (which satisfies every pair by itself) is applied to the rest.
      const int max_rounds = 32;
      bool changed = true;
      for (int round = 0; changed; ++round) {
        changed = false;
        const bool last = round == max_rounds;
        for (std::size_t q = 0; q < np; ++q) {
          int v[4];
          const bool ee = pair_vertices(q, v);
          const int na = ee ? 2 : 1;
          const double limit = o.gamma * pair_lb[q];
          double rel = 0, rel0 = 0;
          for (int i = 0; i < na; ++i)
            for (int k = na; k < 4; ++k) {
              rel = std::max(rel, (za(v[i]) * delta_x.row(v[i]) - za(v[k]) * delta_x.row(v[k])).norm());
              rel0 = std::max(rel0, (delta_x.row(v[i]) - delta_x.row(v[k])).norm());
            }
          if (last) {  // the per-vertex bound on every pair: satisfies all pairs whatever the order
            for (int k = 0; k < 4; ++k) {
              const double len = delta_x.row(v[k]).norm();
              if (len > 0) lower(v[k], 0.5 * limit / len);
            }
            continue;
          }
          if (rel <= limit) continue;
          const bool one_zone = zone[static_cast<std::size_t>(v[0])] == zone[static_cast<std::size_t>(v[1])] &&
                                zone[static_cast<std::size_t>(v[0])] == zone[static_cast<std::size_t>(v[2])] &&
                                zone[static_cast<std::size_t>(v[0])] == zone[static_cast<std::size_t>(v[3])];
          if (one_zone) {
            lower(v[0], (1 - 1e-12) * limit / rel0);  // rel = α rel0 within one zone
          } else {
            for (int k = 0; k < 4; ++k) {
              const double len = delta_x.row(v[k]).norm();
              if (len > 0) lower(v[k], 0.5 * limit / len);
            }
          }
          changed = true;
        }
        if (last) break;
      }
      for (std::size_t i = 0; i < nv; ++i) alpha[i] = on_surface_[i] ? za(static_cast<int>(i)) : 1.0;
    }
    double max_move = 0, max_r = 0;
    for (std::size_t i = 0; i < nv; ++i) {
      const Eigen::RowVector3d step = y.row(static_cast<Eigen::Index>(i)) - x.row(static_cast<Eigen::Index>(i));
      const double len = step.norm();
      if (len > 0) x.row(static_cast<Eigen::Index>(i)) += alpha[i] * step;
      if (on_surface_[i]) {
        r[i] *= (1 - alpha[i]);
        max_move = std::max(max_move, alpha[i] * len);
        max_r = std::max(max_r, r[i]);
      }
    }
    D -= 2 * max_move;
    stats.ms_forward += tf.elapsed_ms();
    ++stats.steps;
    stats.max_r = max_r;
    if (observe) {
      TwoWayStepInfo info;
      info.step = l;
      info.searched = searched;
      info.D = D + 2 * max_move;
      info.x_before = &x_prev;
      info.x_after = &x;
      info.y = &y;
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
    stats.min_distance = std::min(stats.min_distance, std::sqrt(pair_squared_distance(q, x, p)));
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
