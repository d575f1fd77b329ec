// IPC barrier contact in PD (ipc_solver.hpp).
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <Eigen/Eigenvalues>
#include <Eigen/SparseCholesky>
#include <algorithm>
#include <cmath>
#include <optional>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/distance.hpp>
#include <xpd/collision/intersection.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/collision/surface_ccd.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/ipc_solver.hpp>
#include <xpd/solver/pd_solver.hpp>

namespace xpd {

namespace {

// One pair within d̂: vertex–face (a = vertex, b = face) or edge–edge (a, b = edges).
struct Pair {
  bool edge_edge = false;
  int a = -1, b = -1;
};

}  // namespace

struct IpcModel::Impl {
  const Model* model = nullptr;
  ProxySet proxies;
  // The contact surface: the body's triangles and edges first (vertices: the proxies), then the
  // obstacles' (vertices from num_body on, kinematic); body_* are the leading rows.
  int num_body = 0;
  Triangles triangles, body_triangles, obstacle_triangles;
  Edges edges, body_edges;
  std::vector<IpcObstacle> obstacles;
  std::vector<Eigen::Index> obstacle_first;  // first row of each obstacle in the obstacle block
  Eigen::Index num_obstacle_vertices = 0;
  IpcOptions options;
  std::vector<int> region;     // x2, region-local order
  std::vector<int> region_of;  // node -> region index or -1
  std::unique_ptr<SchurFactorization> schur;
  Eigen::VectorXd edge_rest_length2;  // per edge, for the mollifier threshold
  double kappa_min = 0;

  // The 4 surface vertices of a pair, in the order of the distance kernels.
  std::array<int, 4> vertices(const Pair& p) const {
    if (!p.edge_edge) return {p.a, triangles(p.b, 0), triangles(p.b, 1), triangles(p.b, 2)};
    return {edges(p.a, 0), edges(p.a, 1), edges(p.b, 0), edges(p.b, 1)};
  }

  double mollifier_eps(const Pair& p) const { return 1e-3 * edge_rest_length2[p.a] * edge_rest_length2[p.b]; }

  // κ b of the pair at surface positions s, with derivatives in the pair's 12 coordinates.
  PairDerivatives barrier(const Pair& p, const Points& s, double kappa) const {
    const auto v = vertices(p);
    auto row = [&](int i) -> Vec3 { return s.row(v[static_cast<std::size_t>(i)]).transpose(); };
    if (!p.edge_edge) return point_triangle_barrier(row(0), row(1), row(2), row(3), options.dhat, kappa);
    return edge_edge_barrier(row(0), row(1), row(2), row(3), options.dhat, kappa, mollifier_eps(p));
  }

  double squared_distance(const Pair& p, const Points& s) const {
    const auto v = vertices(p);
    auto row = [&](int i) -> Vec3 { return s.row(v[static_cast<std::size_t>(i)]).transpose(); };
    if (!p.edge_edge) return point_triangle_squared_distance(row(0), row(1), row(2), row(3));
    return edge_edge_squared_distance(row(0), row(1), row(2), row(3));
  }

  // The candidates c (boxes at s grown by d̂) within d̂, with their squared distances.
  void pairs_within_dhat(const SurfaceCandidates& c, const Points& s, std::vector<Pair>& out,
                         std::vector<double>& d2) const {
    out.clear();
    d2.clear();
    const double dhat2 = options.dhat * options.dhat;
    for (const auto& [v, f] : c.vertex_face) {
      const Pair p{false, v, f};
      const double d = squared_distance(p, s);
      if (d < dhat2) out.push_back(p), d2.push_back(d);
    }
    for (const auto& [a, b] : c.edge_edge) {
      const Pair p{true, a, b};
      const double d = squared_distance(p, s);
      if (d < dhat2) out.push_back(p), d2.push_back(d);
    }
  }

  // Surface vertex v by name: "7" on the body, "obstacle 0 vertex 12" on an obstacle.
  std::string vertex_name(int v) const {
    if (v < num_body) return std::to_string(v);
    const Eigen::Index r = v - num_body;
    std::size_t k = 0;
    while (k + 1 < obstacle_first.size() && obstacle_first[k + 1] <= r) ++k;
    return fmt::format("obstacle {} vertex {}", k, r - obstacle_first[k]);
  }

  std::string describe(const Pair& p) const {
    const auto v = vertices(p);
    auto n = [&](int i) { return vertex_name(v[static_cast<std::size_t>(i)]); };
    return p.edge_edge ? fmt::format("edge ({}, {}) and edge ({}, {})", n(0), n(1), n(2), n(3))
                       : fmt::format("vertex {} and triangle ({}, {}, {})", n(0), n(1), n(2), n(3));
  }

  // The first edge of the surface that meets a triangle without sharing a vertex at s, described;
  // "" when none (collision/intersection.hpp).
  std::string find_intersection(const Points& s) const {
    const auto hit = find_surface_intersection(s, triangles, edges, num_body);
    return hit ? hit->description : std::string();
  }

  Points obstacle_pose(double frame) const {
    Points o(num_obstacle_vertices, 3);
    for (std::size_t k = 0; k < obstacles.size(); ++k) {
      const RigidTransform t = evaluate(obstacles[k].keyframes, frame);
      const Points& v = obstacles[k].vertices;
      for (Eigen::Index i = 0; i < v.rows(); ++i)
        o.row(obstacle_first[k] + i) = t.apply(v.row(i).transpose()).transpose();
    }
    return o;
  }

  // Contact-surface positions: the body's W x, then the obstacles at `obstacle_x`.
  void surface_positions(const Points& x, const Points& obstacle_x, Points& s) const {
    s.resize(num_body + num_obstacle_vertices, 3);
    body_positions(x, s);
    if (num_obstacle_vertices > 0) s.bottomRows(num_obstacle_vertices) = obstacle_x;
  }

  // The body's rows of s (s sized by the caller).
  void body_positions(const Points& x, Points& s) const {
    const Tets& tets = model->tets();
    for (int p = 0; p < proxies.size(); ++p) {
      Eigen::RowVector3d acc = Eigen::RowVector3d::Zero();
      for (int a = 0; a < 4; ++a)
        acc += proxies.weights(p, a) * x.row(tets(proxies.tet[static_cast<std::size_t>(p)], a));
      s.row(p) = acc;
    }
  }
};

IpcModel::IpcModel(const Model& model, ProxySet proxies, Triangles triangles, IpcOptions options,
                   std::vector<IpcObstacle> obstacles)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.model = &model;
  if (model.coupled())
    throw Error("ipc: the model has a coupled 3n x 3n matrix (lambda volume term); IPC needs lambda = 0");
  if (!(options.dhat > 0) || !std::isfinite(options.dhat))
    throw Error(fmt::format("ipc: dhat must be a positive finite length (got {})", options.dhat));
  if (!std::isfinite(options.kappa)) throw Error("ipc: kappa must be finite (<= 0: automatic)");
  if (options.ccd.tolerance <= 0) options.ccd.tolerance = 1e-3 * options.dhat;
  options.ccd.minimum_separation = 0;
  options.ccd.max_time = 1.0;
  if (triangles.rows() == 0) throw Error("ipc: the contact surface has no triangles");
  if (triangles.minCoeff() < 0 || triangles.maxCoeff() >= proxies.size())
    throw Error(fmt::format("ipc: a surface triangle refers to a vertex outside [0, {})", proxies.size()));
  for (int p = 0; p < proxies.size(); ++p) {
    const int t = proxies.tet[static_cast<std::size_t>(p)];
    if (t < 0 || t >= model.num_tets())
      throw Error(fmt::format("ipc: surface vertex {} is bound to tet {}, outside the mesh", p, t));
  }
  d.proxies = std::move(proxies);
  d.num_body = d.proxies.size();
  d.body_triangles = std::move(triangles);
  d.body_edges = unique_edges(d.body_triangles);
  d.options = options;
  // Obstacles after the body: vertex rows from num_body on, their triangles and edges after the
  // body's (so that the body's pairs index both lists alike).
  Eigen::Index nf = 0;
  for (std::size_t k = 0; k < obstacles.size(); ++k) {
    const IpcObstacle& o = obstacles[k];
    if (o.triangles.rows() == 0) throw Error(fmt::format("ipc: obstacle {} has no triangles", k));
    if (o.triangles.minCoeff() < 0 || o.triangles.maxCoeff() >= o.vertices.rows())
      throw Error(
          fmt::format("ipc: a triangle of obstacle {} refers to a vertex outside [0, {})", k, o.vertices.rows()));
    if (!o.vertices.allFinite()) throw Error(fmt::format("ipc: obstacle {} has a non-finite vertex", k));
    for (std::size_t j = 1; j < o.keyframes.size(); ++j)
      if (!(o.keyframes[j].frame > o.keyframes[j - 1].frame))
        throw Error(fmt::format("ipc: the keyframes of obstacle {} must have strictly increasing frames", k));
    d.obstacle_first.push_back(d.num_obstacle_vertices);
    d.num_obstacle_vertices += o.vertices.rows();
    nf += o.triangles.rows();
  }
  d.obstacles = std::move(obstacles);
  d.obstacle_triangles.resize(nf, 3);
  Points rest_all(d.num_body + d.num_obstacle_vertices, 3);  // edge lengths: obstacles in their own frame
  rest_all.topRows(d.num_body) = d.proxies.rest;
  for (Eigen::Index row = 0, k = 0; const IpcObstacle& o : d.obstacles) {
    d.obstacle_triangles.middleRows(row, o.triangles.rows()) =
        o.triangles.array() + static_cast<int>(d.obstacle_first[static_cast<std::size_t>(k)]);
    rest_all.middleRows(d.num_body + d.obstacle_first[static_cast<std::size_t>(k)], o.vertices.rows()) = o.vertices;
    row += o.triangles.rows(), ++k;
  }
  d.triangles.resize(d.body_triangles.rows() + nf, 3);
  d.triangles << d.body_triangles, d.obstacle_triangles.array() + d.num_body;
  const Edges obstacle_edges = unique_edges(d.obstacle_triangles);
  d.edges.resize(d.body_edges.rows() + obstacle_edges.rows(), 2);
  d.edges << d.body_edges, obstacle_edges.array() + d.num_body;
  d.edge_rest_length2.resize(d.edges.rows());
  for (Eigen::Index e = 0; e < d.edges.rows(); ++e)
    d.edge_rest_length2[e] = (rest_all.row(d.edges(e, 0)) - rest_all.row(d.edges(e, 1))).squaredNorm();

  if (const auto hit = find_surface_intersection(d.proxies.rest, d.body_triangles, d.body_edges))
    throw Error("ipc: the contact surface intersects itself at rest: " + hit->description +
                " (surface vertex indices)");
  // Pairs within d̂ at rest would be pre-stressed forever.
  std::vector<Pair> rest_pairs;
  std::vector<double> rest_d2;
  d.pairs_within_dhat(swept_candidates(d.proxies.rest, d.proxies.rest, d.body_triangles, d.body_edges, d.options.dhat),
                      d.proxies.rest, rest_pairs, rest_d2);
  if (!rest_pairs.empty()) {
    const auto i = static_cast<std::size_t>(std::min_element(rest_d2.begin(), rest_d2.end()) - rest_d2.begin());
    throw Error(
        fmt::format("ipc: {} surface pairs are closer than dhat = {} at rest, e.g. {} at distance {}; "
                    "choose a smaller dhat",
                    rest_pairs.size(), d.options.dhat, d.describe(rest_pairs[i]), std::sqrt(rest_d2[i])));
  }

  d.region = proxy_region_nodes(model.tets(), d.proxies);
  d.region_of.assign(static_cast<std::size_t>(model.num_nodes()), -1);
  for (std::size_t i = 0; i < d.region.size(); ++i)
    d.region_of[static_cast<std::size_t>(d.region[i])] = static_cast<int>(i);
  if (d.options.global_solve == IpcGlobalSolve::Woodbury) {
    SchurOptions so = d.options.schur;
    so.precompute_inverse = true;
    d.schur = std::make_unique<SchurFactorization>(model.matrix(), d.region, so);
  }

  // κ_min of the automatic rule (IPC Toolkit's initial stiffness with the PD matrix for the mass).
  const Points& rest = d.proxies.rest;
  const double diag = (rest.colwise().maxCoeff() - rest.colwise().minCoeff()).norm();
  const double d0 = std::pow(1e-8 * diag, 2);
  const double kbar = model.matrix().diagonal().mean();
  d.kappa_min = 1e7 * kbar / (4 * d0 * barrier_second_derivative(d0, d.options.dhat * d.options.dhat));
}

IpcModel::~IpcModel() = default;
IpcModel::IpcModel(IpcModel&&) noexcept = default;
IpcModel& IpcModel::operator=(IpcModel&&) noexcept = default;
const Model& IpcModel::model() const { return *impl_->model; }
const ProxySet& IpcModel::proxies() const { return impl_->proxies; }
const Triangles& IpcModel::triangles() const { return impl_->triangles; }
const Edges& IpcModel::edges() const { return impl_->edges; }
const IpcOptions& IpcModel::options() const { return impl_->options; }
const std::vector<int>& IpcModel::region_nodes() const { return impl_->region; }
double IpcModel::kappa_min() const { return impl_->kappa_min; }
Points IpcModel::surface_positions(const Points& x) const {
  Points s(impl_->num_body, 3);
  impl_->body_positions(x, s);
  return s;
}
const std::vector<IpcObstacle>& IpcModel::obstacles() const { return impl_->obstacles; }
const Triangles& IpcModel::obstacle_triangles() const { return impl_->obstacle_triangles; }
Points IpcModel::obstacle_pose(double frame) const { return impl_->obstacle_pose(frame); }

// The per-state strategy of the frame loop.
struct IpcState::Impl final : public GlobalStep {
  const IpcModel::Impl* m = nullptr;
  SchurWorkspace ws;
  double kappa = 0;
  IpcFrameStats extra;
  std::vector<Pair> pairs;  // active at the last evaluate()
  std::vector<double> pair_d2;
  std::vector<PairDerivatives> pair_barrier;  // barrier of each pair at the last evaluate()
  Points s, s1, x_trial;
  // Obstacles: where they stand, and their pose at the end of the frame.
  Points obstacle_x, obstacle_target, predicted;
  bool obstacles_placed = false, arrived = true;
  Eigen::VectorXd pcg_vn, pcg_bn, pcg_t;
  Eigen::MatrixXd f, y1, g2, u2, u;
  SchurLowRank term;
  std::vector<int> slot;                                               // region index -> position in term.nodes, or -1
  std::vector<Eigen::Matrix<double, 12, Eigen::Dynamic>> pair_factor;  // √λ v of each pair's PSD Hessian
  std::vector<std::array<std::array<int, 4>, 4>> pair_nodes;           // node slots of each pair

  // Broad phase of the barrier pairs and of the CCD, reused while the surface moves less than the
  // margin (broad_phase.hpp). Margin d̂: on scenes/face_ipc.json frames 1–8 the barrier phase took
  // 2.9–3.4 ms and the CCD 2.5–2.8 ms per iteration against 3.8–4.3 and 3.1–3.5 ms with 2 d̂ (larger
  // cached lists to filter; binaries alternated, 3 runs each); 0.5 d̂ measured the same as d̂, and
  // sphere_slab_ipc the same with d̂ and 2 d̂.
  std::optional<CandidateCache> cache;
  CandidateCache& candidates() {
    if (!cache) cache.emplace(m->triangles, m->edges, m->options.dhat, m->options.dhat, m->num_body);
    return *cache;
  }

  // The pairs within d̂ (sharing no vertex, not both of obstacles) at x, the obstacles where they
  // stand: s, pairs and pair_d2.
  void update_pairs(const Points& x) {
    m->surface_positions(x, obstacle_x, s);
    m->pairs_within_dhat(candidates().query(s, s, m->options.dhat), s, pairs, pair_d2);
  }

  const char* name() const override { return "ipc"; }
  // Anderson: the frame loop checks every extrapolated iterate with max_step_fraction (CCD) and
  // extrapolates only from uncut steps; Chebyshev's iterate is not checked.
  bool supports(Accelerator a) const override { return a == Accelerator::None || a == Accelerator::Anderson; }
  const char* unsupported_reason(Accelerator) const override {
    return "IPC contact takes \"none\" or \"anderson\" (a Chebyshev iterate is not checked by CCD)";
  }
  bool in_place() const override { return false; }
  bool line_search() const override { return true; }

  // Barrier energy and forces at state.x added to the PD ones; records the active pairs.
  double add_barrier(State& state) {
    PhaseTimer pt;
    update_pairs(state.x);
    pair_barrier.resize(pairs.size());  // one entry per pair, also when E = ∞ below
    for (std::size_t k = 0; k < pairs.size(); ++k)
      if (!(pair_d2[k] > 0)) {
        pt.lap(extra.barrier_ms);
        return std::numeric_limits<double>::infinity();
      }
    // The pairs' derivatives in parallel (independent), then summed and scattered in pair order, so
    // that the result does not depend on the threads.
    tbb::parallel_for(std::size_t{0}, pairs.size(),
                      [&](std::size_t k) { pair_barrier[k] = m->barrier(pairs[k], s, kappa); });
    double energy = 0;
    const Tets& tets = m->model->tets();
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const PairDerivatives& b = pair_barrier[k];  // iterate() at this x uses its Hessian
      energy += b.value;
      const auto v = m->vertices(pairs[k]);
      for (int c = 0; c < 4; ++c) {
        const int p = v[static_cast<std::size_t>(c)];
        if (p >= m->num_body) continue;  // an obstacle's vertex: kinematic
        const int t = m->proxies.tet[static_cast<std::size_t>(p)];
        for (int a = 0; a < 4; ++a)
          state.force.row(tets(t, a)) -= m->proxies.weights(p, a) * b.gradient.segment<3>(3 * c).transpose();
      }
    }
    pt.lap(extra.barrier_ms);
    return energy;
  }

  // Obstacles toward obstacle_target. With `predict` (the barrier Hessians of the last evaluate()
  // at state.x at hand), the body moves with them by its linear response
  //   δ = −(K ⊗ I₃ + ℬ)⁻¹ Wᵀ H_bo Δo,
  // H_bo the pair Hessians' body–obstacle blocks and Δo the obstacles' remaining motion: a
  // predictor, so that the contact follows the obstacle instead of the gap closing. The joint
  // motion (body x → x + δ, obstacles o → o + Δo) goes as far as the CCD allows with a minimum
  // separation of half the current smallest pair distance g (d̂ when no pair is within d̂): no gap
  // more than halves per advance. Without the predictor (the body standing still), cutting to a
  // fraction of the time of impact as the line search does lets the gaps collapse geometrically:
  // the next body step, a Newton step on the log barrier, at most about doubles a gap; with
  // 0.8 · toi the sphere of scenes/sphere_slab_ipc.json drove the barrier Hessian from 1e3 to 1e23
  // in 33 iterations; with the halving rule alone the gap settled near 3e-6 (d̂ = 8.5e-4) and the
  // sphere advanced ~1e-5 per iteration, frames 6–13 ending 2–23 mm short after 1,000 iterations.
  // Returns whether anything moved.
  bool advance_obstacles(State& state, bool predict) {
    if (arrived) return false;
    PhaseTimer pt;
    const Points delta_o = obstacle_target - obstacle_x;
    const int n = m->model->num_nodes();
    predicted.setZero(n, 3);
    if (predict && !pairs.empty()) {
      const Tets& tets = m->model->tets();
      Points rhs = Points::Zero(n, 3);
      bool coupled = false;
      for (std::size_t k = 0; k < pairs.size(); ++k) {
        const auto v = m->vertices(pairs[k]);
        Eigen::Matrix<double, 12, 1> dv = Eigen::Matrix<double, 12, 1>::Zero();
        bool body = false, obstacle = false;
        for (int c = 0; c < 4; ++c) {
          const int p = v[static_cast<std::size_t>(c)];
          if (p >= m->num_body)
            dv.segment<3>(3 * c) = delta_o.row(p - m->num_body).transpose(), obstacle = true;
          else
            body = true;
        }
        if (!body || !obstacle) continue;
        coupled = true;
        const Eigen::Matrix<double, 12, 1> g = pair_barrier[k].hessian * dv;
        for (int c = 0; c < 4; ++c) {
          const int p = v[static_cast<std::size_t>(c)];
          if (p >= m->num_body) continue;
          const int t = m->proxies.tet[static_cast<std::size_t>(p)];
          for (int a = 0; a < 4; ++a) rhs.row(tets(t, a)) -= m->proxies.weights(p, a) * g.segment<3>(3 * c).transpose();
        }
      }
      if (coupled) {
        build_low_rank();
        solve_global(rhs, predicted);
      }
    }
    m->surface_positions(state.x, obstacle_x, s);
    x_trial = state.x + predicted;
    m->surface_positions(x_trial, obstacle_target, s1);
    double gap2 = m->options.dhat * m->options.dhat;
    for (const double d2 : pair_d2) gap2 = std::min(gap2, d2);
    CcdOptions o = m->options.ccd;
    o.minimum_separation = 0.5 * std::sqrt(gap2);
    o.tolerance = std::min(o.tolerance, 0.1 * o.minimum_separation);
    // With the body standing still only obstacle–body pairs move (the body's own may sit closer
    // than the separation).
    const bool body_moves = predicted.cwiseAbs().maxCoeff() > 0;
    const SurfaceCcdResult r = surface_ccd(s, s1, candidates(), o, !body_moves);
    pt.lap(extra.ccd_ms);
    if (!r.hit) {
      obstacle_x = obstacle_target;
      state.x += predicted;
      arrived = true;
    } else {
      if (!(r.toi > 0)) return false;  // at the separation already: the body must give way first
      obstacle_x += r.toi * delta_o;
      state.x += r.toi * predicted;
    }
    ++extra.obstacle_advances;
    return true;
  }

  // A lagging obstacle and automatic κ: after the obstacles' advance, κ doubles (up to 100 κ_min)
  // while the closest pair is nearer than kKappaRaiseGap · d̂. A soft barrier lets the obstacle press
  // the gaps to a small fraction of d̂, and each advance may then close a gap only by half of it:
  // the obstacle crawls (a box turning into scenes/sphere_slab_ipc.json's slab stalled three
  // frames at κ_min and converged at 100 κ_min). The stiffer barrier holds the gaps wider, which
  // the quasistatic contact is free to do (any gap below d̂ is a contact); the IPC Toolkit raises
  // κ in the same way, for gaps below 1e−9 of the bounding box that keep shrinking.
  static constexpr double kKappaRaiseGap = 0.1;
  bool advance(State& state) override {
    const bool moved = advance_obstacles(state, /*predict=*/true);
    bool raised = false;
    if (!arrived && m->options.kappa <= 0 && kappa < 100 * m->kappa_min && !pair_d2.empty()) {
      const double gap2 = *std::min_element(pair_d2.begin(), pair_d2.end());
      if (gap2 < kKappaRaiseGap * kKappaRaiseGap * m->options.dhat * m->options.dhat) {
        kappa = std::min(2 * kappa, 100 * m->kappa_min);
        ++extra.kappa_raises;
        raised = true;
      }
    }
    return moved || raised;
  }
  bool at_target() const override { return arrived; }

  void begin_frame(State& state) override {
    extra = IpcFrameStats{};
    kappa = m->options.kappa;
    if (m->num_obstacle_vertices > 0) {
      if (!obstacles_placed) obstacle_x = m->obstacle_pose(state.frame);
      obstacles_placed = true;
      obstacle_target = m->obstacle_pose(state.frame + 1);
      arrived = obstacle_target == obstacle_x;
    }
    update_pairs(state.x);
    for (std::size_t k = 0; k < pairs.size(); ++k)
      if (!(pair_d2[k] > 0))
        throw SolverError(fmt::format("ipc: frame {} starts with {} touching or intersecting (distance {})",
                                      state.frame, m->describe(pairs[k]), std::sqrt(std::max(pair_d2[k], 0.0))));
    if (const std::string hit = m->find_intersection(s); !hit.empty())
      throw SolverError(
          fmt::format("ipc: frame {} starts intersecting: {} (surface vertex indices{}); IPC needs an "
                      "intersection-free start",
                      state.frame, hit,
                      m->num_obstacle_vertices > 0 ? fmt::format("; from {} on the obstacles' vertices", m->num_body)
                                                   : std::string()));
    // The obstacles' first move of the frame, so that the residual scale and κ see their push.
    if (advance_obstacles(state, /*predict=*/false)) {  // no barrier Hessians yet
      update_pairs(state.x);
    }
    if (kappa > 0) return;
    // Automatic κ: balance the barrier gradient against the elastic one, clamped to [κ_min, 100 κ_min].
    kappa = m->kappa_min;
    if (pairs.empty()) return;
    (void)xpd::evaluate(*m->model, state);
    const Points f_pd = state.force;  // −∇E_PD
    state.force.setZero();
    kappa = 1.0;
    (void)add_barrier(state);  // −∇B at κ = 1
    const double gb = state.force.squaredNorm();
    const double proposal = gb > 0 ? (f_pd.cwiseProduct(state.force)).sum() / gb : 0.0;  // −∇Bᵀ∇E / ‖∇B‖²
    kappa = std::clamp(-proposal, m->kappa_min, 100 * m->kappa_min);
    if (!std::isfinite(kappa)) kappa = m->kappa_min;
  }

  double evaluate(State& state, FrameStats& stats) override {
    const double e_pd = xpd::evaluate(*m->model, state, &stats.timings_ms);
    return e_pd + add_barrier(state);
  }

  // U columns of the active pairs at state.x (PSD eigenpairs √λ v mapped to tet nodes).
  void build_low_rank() {
    const int mreg = static_cast<int>(m->region.size());
    slot.assign(static_cast<std::size_t>(mreg), -1);
    term.nodes.clear();
    const Tets& tets = m->model->tets();
    pair_nodes.resize(pairs.size());
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const auto v = m->vertices(pairs[k]);
      for (int c = 0; c < 4; ++c) {
        const int p = v[static_cast<std::size_t>(c)];
        if (p >= m->num_body) {  // an obstacle's vertex: no coordinates of the body
          pair_nodes[k][static_cast<std::size_t>(c)].fill(-1);
          continue;
        }
        const int t = m->proxies.tet[static_cast<std::size_t>(p)];
        for (int a = 0; a < 4; ++a) {
          const int r = m->region_of[static_cast<std::size_t>(tets(t, a))];
          int& sl = slot[static_cast<std::size_t>(r)];
          if (sl < 0) {
            sl = static_cast<int>(term.nodes.size());
            term.nodes.push_back(r);
          }
          pair_nodes[k][static_cast<std::size_t>(c)][static_cast<std::size_t>(a)] = sl;
        }
      }
    }
    const int q = static_cast<int>(term.nodes.size());
    // Per pair: the PSD projection of its 12 × 12 Hessian (eigenpairs), and its rank.
    pair_factor.resize(pairs.size());
    // In parallel (each pair's eigendecomposition is independent; about 100 of them per iteration
    // on the face when the lips press).
    tbb::parallel_for(std::size_t{0}, pairs.size(), [&](std::size_t k) {
      // The Hessian of the last evaluate(), which the frame loop runs at the iterate it accepted,
      // restricted to the body's coordinates (an obstacle's rows and columns zeroed: its vertices
      // are not unknowns) and then projected to PSD.
      Mat12 h = pair_barrier[k].hessian;
      const auto v = m->vertices(pairs[k]);
      for (int c = 0; c < 4; ++c)
        if (v[static_cast<std::size_t>(c)] >= m->num_body) {
          h.middleRows<3>(3 * c).setZero();
          h.middleCols<3>(3 * c).setZero();
        }
      const Eigen::SelfAdjointEigenSolver<Mat12> eig(0.5 * (h + h.transpose()));
      const double tiny = 1e-12 * std::max(eig.eigenvalues().cwiseAbs().maxCoeff(), 1e-300);
      Eigen::Matrix<double, 12, Eigen::Dynamic>& f = pair_factor[k];
      int rank = 0;
      for (int e = 0; e < 12; ++e) rank += eig.eigenvalues()[e] > tiny;
      f.resize(12, rank);
      for (int e = 0, j = 0; e < 12; ++e)
        if (eig.eigenvalues()[e] > tiny) f.col(j++) = std::sqrt(eig.eigenvalues()[e]) * eig.eigenvectors().col(e);
    });
    int total_rank = 0;
    for (const auto& f : pair_factor) total_rank += static_cast<int>(f.cols());
    // Few columns: the factored form U (3q × r); many (heavy contact, r above 3q / 2): the dense
    // block ℬ_N (schur.hpp: one Cholesky of ℬ_N + Σ⁻¹[N, N]⁻¹ ⊗ I₃). Near the threshold both cost
    // the same (face_ipc frame 8: block at r = 1,349, q = 479 and factored, forced, at r = 1,382,
    // q = 486 both took 11.2 ms per reduced solve).
    using Form = IpcOptions::WoodburyForm;
    const Form form = m->options.woodbury_form;
    const bool factored = form == Form::Factored || (form == Form::Automatic && 2 * total_rank <= 3 * q);
    if (factored) {
      term.block.resize(0, 0);
      term.u.setZero(3 * q, total_rank);
    } else {
      term.u.resize(0, 0);
      term.block.setZero(3 * q, 3 * q);
    }
    int col = 0;
    for (std::size_t k = 0; k < pairs.size(); ++k) {
      const auto v = m->vertices(pairs[k]);
      const Eigen::Matrix<double, 12, Eigen::Dynamic>& f = pair_factor[k];
      // Node slots and weights of the pair's 16 (point, tet corner) entries.
      std::array<int, 16> sl{};
      std::array<double, 16> wt{};
      for (int c = 0; c < 4; ++c)
        for (int a = 0; a < 4; ++a) {
          const int p = v[static_cast<std::size_t>(c)];
          sl[static_cast<std::size_t>(4 * c + a)] =
              pair_nodes[k][static_cast<std::size_t>(c)][static_cast<std::size_t>(a)];
          wt[static_cast<std::size_t>(4 * c + a)] = p < m->num_body ? m->proxies.weights(p, a) : 0.0;
        }
      if (factored) {
        for (int j = 0; j < f.cols(); ++j, ++col)
          for (int e = 0; e < 16; ++e)
            if (wt[static_cast<std::size_t>(e)] != 0.0)
              term.u.col(col).segment<3>(3 * sl[static_cast<std::size_t>(e)]) +=
                  wt[static_cast<std::size_t>(e)] * f.col(j).segment<3>(3 * (e / 4));
      } else {
        const Mat12 h = f * f.transpose();
        for (int e = 0; e < 16; ++e) {
          if (wt[static_cast<std::size_t>(e)] == 0.0) continue;
          for (int e2 = 0; e2 < 16; ++e2) {
            if (wt[static_cast<std::size_t>(e2)] == 0.0) continue;
            term.block.block<3, 3>(3 * sl[static_cast<std::size_t>(e)], 3 * sl[static_cast<std::size_t>(e2)]) +=
                (wt[static_cast<std::size_t>(e)] * wt[static_cast<std::size_t>(e2)]) *
                h.block<3, 3>(3 * (e / 4), 3 * (e2 / 4));
          }
        }
      }
    }
    extra.max_touched_nodes = std::max(extra.max_touched_nodes, q);
    extra.max_rank = std::max(extra.max_rank, total_rank);
  }

  void iterate(State& state, FrameStats& stats) override {
    PhaseTimer pt;
    build_low_rank();
    pt.lap(extra.barrier_ms);
    solve_global(state.force, state.step);
    pt.lap(stats.timings_ms.solve);
  }

  // out = (K ⊗ I₃ + ℬ)⁻¹ rhs (n × 3) with the ℬ of the last build_low_rank(), by the configured solve.
  void solve_global(const Points& rhs, Points& out) {
    const int n = m->model->num_nodes();
    if (m->options.global_solve == IpcGlobalSolve::Woodbury) {
      f = rhs;
      PhaseTimer parts;
      m->schur->forward(ws, f, y1, g2);
      parts.lap(extra.substitution_ms);
      m->schur->solve_low_rank_system(ws, term, g2, u2);
      parts.lap(extra.reduced_ms);
      m->schur->backward(ws, y1, u2, u);
      parts.lap(extra.substitution_ms);
      out = u;
    } else if (m->options.global_solve == IpcGlobalSolve::Pcg) {
      pcg_solve(rhs, out);
    } else {
      // K ⊗ I₃ + E U Uᵀ Eᵀ, factored afresh.
      std::vector<Eigen::Triplet<double>> trip;
      const auto& K = m->model->matrix();
      for (int j = 0; j < K.outerSize(); ++j)
        for (Eigen::SparseMatrix<double>::InnerIterator it(K, j); it; ++it)
          for (int c = 0; c < 3; ++c) trip.emplace_back(3 * static_cast<int>(it.row()) + c, 3 * j + c, it.value());
      const Eigen::MatrixXd uut = term.block.size() > 0 ? term.block : Eigen::MatrixXd(term.u * term.u.transpose());
      const int q = static_cast<int>(term.nodes.size());
      for (int a = 0; a < q; ++a)
        for (int b = 0; b < q; ++b)
          for (int c = 0; c < 3; ++c)
            for (int e = 0; e < 3; ++e) {
              const double v = uut(3 * a + c, 3 * b + e);
              if (v != 0.0)
                trip.emplace_back(3 * m->region[static_cast<std::size_t>(term.nodes[static_cast<std::size_t>(a)])] + c,
                                  3 * m->region[static_cast<std::size_t>(term.nodes[static_cast<std::size_t>(b)])] + e,
                                  v);
            }
      Eigen::SparseMatrix<double> a3(3 * n, 3 * n);
      a3.setFromTriplets(trip.begin(), trip.end());
      Eigen::SimplicialLLT<Eigen::SparseMatrix<double>> llt(a3);
      if (llt.info() != Eigen::Success) throw SolverError("ipc: the full 3n x 3n matrix is not positive definite");
      const Eigen::Map<const Eigen::VectorXd> b(rhs.data(), 3 * n);
      const Eigen::VectorXd sol = llt.solve(b);
      out.resize(n, 3);
      std::copy(sol.data(), sol.data() + 3 * n, out.data());
    }
  }

  // out = (K ⊗ I₃ + E ℬ_N Eᵀ) v for n × 3 blocks (column c = coordinate c).
  void apply_full(const Eigen::MatrixXd& v, Eigen::MatrixXd& out) {
    out.noalias() = m->model->matrix().selfadjointView<Eigen::Lower>() * v;
    const int q = static_cast<int>(term.nodes.size());
    if (q == 0) return;
    pcg_vn.resize(3 * q);
    for (int a = 0; a < q; ++a)
      pcg_vn.segment<3>(3 * a) =
          v.row(m->region[static_cast<std::size_t>(term.nodes[static_cast<std::size_t>(a)])]).transpose();
    if (term.block.size() > 0) {
      pcg_bn.noalias() = term.block * pcg_vn;
    } else {
      pcg_t.noalias() = term.u.transpose() * pcg_vn;
      pcg_bn.noalias() = term.u * pcg_t;
    }
    for (int a = 0; a < q; ++a)
      out.row(m->region[static_cast<std::size_t>(term.nodes[static_cast<std::size_t>(a)])]) +=
          pcg_bn.segment<3>(3 * a).transpose();
  }

  // Preconditioned CG on the full system (baseline △ of Li et al. 2023), M⁻¹ = K⁻¹ ⊗ I₃.
  void pcg_solve(const Points& rhs, Points& out) {
    const Eigen::MatrixXd f = rhs;
    const double fnorm = f.norm();
    Eigen::MatrixXd x = Eigen::MatrixXd::Zero(f.rows(), 3), r = f, z = r, p, ap(f.rows(), 3);
    m->model->factor().solve_in_place(z);
    p = z;
    double rz = (r.array() * z.array()).sum();
    int it = 0;
    while (r.norm() > m->options.pcg_tolerance * fnorm && fnorm > 0) {
      if (++it > m->options.pcg_max_iterations)
        throw SolverError(fmt::format("ipc: PCG did not reach the relative residual {} in {} iterations (at {:.3e})",
                                      m->options.pcg_tolerance, m->options.pcg_max_iterations, r.norm() / fnorm));
      apply_full(p, ap);
      const double alpha = rz / (p.array() * ap.array()).sum();
      x += alpha * p;
      r -= alpha * ap;
      z = r;
      m->model->factor().solve_in_place(z);
      const double rz_new = (r.array() * z.array()).sum();
      p = z + (rz_new / rz) * p;
      rz = rz_new;
    }
    extra.pcg_iterations += it;
    out = x;
  }

  double max_step_fraction(const State& state) override {
    PhaseTimer pt;
    x_trial = state.x_prev + state.step;
    m->surface_positions(state.x_prev, obstacle_x, s);
    m->surface_positions(x_trial, obstacle_x, s1);
    // The CCD tolerance stays below a tenth of the closest pair's distance at x (pair_d2: the
    // evaluate() at x that preceded the step): a tolerance larger than the current gap would
    // report a hit at t = 0 and freeze the iteration at α = 0 once contacts are pressed tight.
    CcdOptions o = m->options.ccd;
    if (!pair_d2.empty())
      o.tolerance = std::min(o.tolerance, 0.1 * std::sqrt(*std::min_element(pair_d2.begin(), pair_d2.end())));
    const SurfaceCcdResult r = surface_ccd(s, s1, candidates(), o);
    const double alpha = r.hit ? 0.8 * r.toi : 1.0;
    extra.min_step_fraction = std::min(extra.min_step_fraction, alpha);
    pt.lap(extra.ccd_ms);
    return alpha;
  }

  void end_frame(State& state, FrameStats&) override {
    if (m->num_obstacle_vertices > 0) extra.obstacle_lag = (obstacle_target - obstacle_x).rowwise().norm().maxCoeff();
    update_pairs(state.x);
    extra.active_pairs = static_cast<int>(pairs.size());
    extra.min_distance = m->options.dhat;
    for (const double d2 : pair_d2) extra.min_distance = std::min(extra.min_distance, std::sqrt(std::max(d2, 0.0)));
    extra.kappa = kappa;
  }

  void solve_with_matrix(Eigen::MatrixXd& b) const override { m->model->factor().solve_in_place(b); }
};

IpcState::IpcState(const IpcModel& model) : impl_(std::make_unique<Impl>()) { impl_->m = model.impl_.get(); }
IpcState::~IpcState() = default;
IpcState::IpcState(IpcState&&) noexcept = default;
IpcState& IpcState::operator=(IpcState&&) noexcept = default;

const Points& IpcState::obstacle_positions() const { return impl_->obstacle_x; }

void IpcState::place_obstacles(const Points& positions) {
  Impl& d = *impl_;
  if (positions.rows() != d.m->num_obstacle_vertices || positions.cols() != 3)
    throw Error(fmt::format("ipc: place_obstacles needs {} x 3 positions (got {} x {})", d.m->num_obstacle_vertices,
                            positions.rows(), positions.cols()));
  if (!positions.allFinite()) throw Error("ipc: place_obstacles: non-finite position");
  d.obstacle_x = positions;
  d.obstacles_placed = true;
}

IpcFrameStats IpcState::step(State& state, const SolverOptions& options) {
  Impl& d = *impl_;
  const FrameStats pd = run_frame(*d.m->model, state, d, options);
  IpcFrameStats out = d.extra;
  out.pd = pd;
  return out;
}

}  // namespace xpd
