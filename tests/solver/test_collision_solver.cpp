// Collision-aware PD (solver/collision_solver.hpp): Algorithm 1 against its oracles — the full
// sparse refactorization with the springs (baseline a), the plain PD iteration when nothing
// collides, and the equilibrium reached by the other baselines.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <xpd/collision/contact.hpp>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/collision_solver.hpp>

#include "pd_fixtures.hpp"

namespace xpd {
namespace {

// A slab [0,1]×[0,1]×[0,0.5] (nodes n×n×(n/2+1)), bottom attached, top-face nodes as proxies,
// pressed by a sphere from above.
struct SlabCase {
  TetMesh mesh;
  ModelDesc desc;
  Model model;
  ProxySet proxies;
  std::vector<int> region;
  std::vector<Obstacle> obstacles;
  std::unique_ptr<CollisionDetector> detector;

  explicit SlabCase(int n = 9, double sphere_z = 0.85, Integrator integ = Integrator::Quasistatic) {
    mesh = make_box(n, n, n / 2 + 1, Vec3::Zero(), Vec3(1.0, 1.0, 0.5));
    desc.mesh = mesh;
    desc.mu = {1e4};
    desc.integrator = integ;
    desc.time_step = 0.01;
    test::attach_min_face(desc, 2, 1e7);
    model = build_model(desc);
    std::vector<int> top;
    for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
      if (mesh.nodes(i, 2) > 0.5 - 1e-9) top.push_back(static_cast<int>(i));
    proxies = proxies_from_nodes(mesh, top);
    for (int i = 0; i < proxies.size(); ++i) region.push_back(i);
    obstacles = {Obstacle{Sphere{Vec3(0.5, 0.5, sphere_z), 0.4}, {}}};
    detector = std::make_unique<CollisionDetector>(mesh, proxies, region, obstacles);
  }
  CollisionSolver solver(CollisionOptions o) { return CollisionSolver(model, proxies, region, *detector, o); }
};

double max_row_diff(const Points& a, const Points& b) { return (a - b).rowwise().norm().maxCoeff(); }

CollisionOptions options(CollisionMethod m, SchurSolveMethod s = SchurSolveMethod::Automatic, int inner = 1) {
  CollisionOptions o;
  o.stiffness = 1e5;
  o.method = m;
  o.schur_solve = s;
  o.inner_iterations = inner;
  return o;
}

SolverOptions iterations(int k, double tol = 0.0) {
  SolverOptions so;
  so.max_iterations = k;
  so.rel_tolerance = tol;
  return so;
}

TEST(CollisionSolver, RegionIsTheNodesOfTheProxyTetsAndBetaElementsLieInIt) {
  SlabCase c;
  CollisionSolver s = c.solver(options(CollisionMethod::Schur));
  const auto& x2 = s.region_nodes();
  std::vector<int> expected;
  for (int p = 0; p < c.proxies.size(); ++p)
    for (int a = 0; a < 4; ++a) expected.push_back(c.mesh.tets(c.proxies.tet[static_cast<size_t>(p)], a));
  std::sort(expected.begin(), expected.end());
  expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
  EXPECT_EQ(x2, expected);
  EXPECT_GT(s.num_beta_elements(), 0);
  ASSERT_NE(s.schur(), nullptr);
  EXPECT_EQ(s.schur()->m(), static_cast<int>(x2.size()));
}

// One outer iteration with J = 1 solves (K + WᵀCW) δ = f + f_col exactly: dense refactor, Woodbury
// and the full sparse refactorization (baseline a) agree.
TEST(CollisionSolver, OneInnerIterationEqualsFullRefactorizationStep) {
  SlabCase c;
  Points results[3];
  const CollisionOptions opts[3] = {options(CollisionMethod::Schur, SchurSolveMethod::DenseRefactor),
                                    options(CollisionMethod::Schur, SchurSolveMethod::Woodbury),
                                    options(CollisionMethod::FullRefactor)};
  int active = 0;
  for (int i = 0; i < 3; ++i) {
    CollisionSolver s = c.solver(opts[i]);
    State st = make_state(c.model);
    const CollisionFrameStats fs = s.step(st, iterations(1), 1.0);
    EXPECT_EQ(fs.pd.iterations, 1);
    EXPECT_EQ(fs.plain_iterations, 0);
    active = fs.active_proxies;
    results[i] = st.x;
  }
  EXPECT_GT(active, 0);
  const double scale = (results[2] - c.mesh.nodes).cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 1e-3);
  for (int i = 0; i < 2; ++i) {
    const double err = max_row_diff(results[i], results[2]) / scale;
    test::report(i == 0 ? "dense refactor vs baseline (a)" : "woodbury vs baseline (a)", err, 1e-8);
    EXPECT_LT(err, 1e-8) << i;
  }
}

// Without contacts, the Schur path (forced) is the plain PD iteration up to round-off, and the
// default plain path is the collision-free step bit for bit.
TEST(CollisionSolver, WithoutContactsEqualsPlainPd) {
  SlabCase c(9, 5.0);  // sphere far above: no contact
  ModelDesc loaded = c.desc;
  loaded.gravity = Vec3(0, 0, -30.0);
  Model model = build_model(loaded);
  // Forced Schur path, one iteration.
  CollisionOptions forced = options(CollisionMethod::Schur);
  forced.plain_path_without_contacts = false;
  CollisionSolver s(model, c.proxies, c.region, *c.detector, forced);
  State a = make_state(model), b = make_state(model);
  s.step(a, iterations(1), 1.0);
  step(model, b, iterations(1));
  const double scale = (b.x - model.rest_positions()).cwiseAbs().maxCoeff();
  ASSERT_GT(scale, 1e-6);
  const double err = max_row_diff(a.x, b.x) / scale;
  test::report("forced Schur iteration vs plain PD", err, 1e-10);
  EXPECT_LT(err, 1e-10);
  // Default: plain path, whole frame, bitwise.
  CollisionSolver p(model, c.proxies, c.region, *c.detector, options(CollisionMethod::Schur));
  State x = make_state(model), y = make_state(model);
  SolverOptions so;
  so.max_iterations = 30;
  const CollisionFrameStats cs = p.step(x, so, 1.0);
  const FrameStats fs = step(model, y, so);
  EXPECT_EQ(cs.pd.iterations, fs.iterations);
  EXPECT_EQ(cs.plain_iterations, cs.pd.iterations);
  EXPECT_EQ(cs.active_proxies, 0);
  EXPECT_TRUE((x.x.array() == y.x.array()).all()) << "plain path must be bitwise the collision-free step";
}

// An empty region: every iteration is plain, bitwise the collision-free step.
TEST(CollisionSolver, EmptyRegionIsBitwisePlain) {
  SlabCase c;
  ModelDesc loaded = c.desc;
  loaded.gravity = Vec3(0, 0, -30.0);
  Model model = build_model(loaded);
  CollisionDetector none(c.mesh, c.proxies, {}, {});
  CollisionSolver s(model, c.proxies, {}, none, options(CollisionMethod::Schur));
  EXPECT_EQ(s.schur(), nullptr);
  State x = make_state(model), y = make_state(model);
  s.step(x, iterations(10), 1.0);
  step(model, y, iterations(10));
  EXPECT_TRUE((x.x.array() == y.x.array()).all());
}

// All methods converge to the same penalty equilibrium (a moderate penalty, so that the slowly
// converging projective-skinning baseline gets there in a test's time).
TEST(CollisionSolver, MethodsReachTheSameEquilibrium) {
  SlabCase c;
  auto opts = [](CollisionMethod m, int inner = 1) {
    CollisionOptions o = options(m, SchurSolveMethod::Automatic, inner);
    o.stiffness = 1e4;
    return o;
  };
  const SolverOptions so = iterations(3000, 1e-8);
  CollisionSolver ref = c.solver(opts(CollisionMethod::Schur, 3));
  State r = make_state(c.model);
  const CollisionFrameStats rs = ref.step(r, so, 1.0);
  ASSERT_TRUE(rs.pd.converged) << rs.pd.residual;
  EXPECT_GT(rs.active_proxies, 0);
  const double scale = (r.x - c.mesh.nodes).cwiseAbs().maxCoeff();
  for (CollisionMethod m : {CollisionMethod::FullRefactor, CollisionMethod::ProjectiveSkinning, CollisionMethod::Pcg}) {
    CollisionSolver s = c.solver(opts(m));
    State st = make_state(c.model);
    const CollisionFrameStats fs = s.step(st, so, 1.0);
    EXPECT_TRUE(fs.pd.converged) << to_string(m) << " residual " << fs.pd.residual;
    const double err = max_row_diff(st.x, r.x) / scale;
    test::report(("equilibrium " + to_string(m)).c_str(), err, 1e-6);
    if (test::verbose()) std::printf("  %s: %d iterations\n", to_string(m).c_str(), fs.pd.iterations);
    EXPECT_LT(err, 1e-6) << to_string(m);
    EXPECT_EQ(fs.active_proxies, rs.active_proxies) << to_string(m);
  }
}

// Anderson acceleration of the outer iteration (restarted when the spring set changes, energy
// safeguard) reaches the same equilibrium in fewer iterations.
TEST(CollisionSolver, AndersonReachesTheSameEquilibriumFaster) {
  SlabCase c;
  CollisionOptions o = options(CollisionMethod::Schur);
  o.stiffness = 1e4;
  SolverOptions plain = iterations(3000, 1e-8);
  SolverOptions accel = plain;
  accel.anderson = true;
  CollisionSolver a = c.solver(o);
  State sa = make_state(c.model), sb = make_state(c.model);
  const CollisionFrameStats fa = a.step(sa, plain, 1.0);
  CollisionSolver b = c.solver(o);
  const CollisionFrameStats fb = b.step(sb, accel, 1.0);
  ASSERT_TRUE(fa.pd.converged);
  ASSERT_TRUE(fb.pd.converged);
  if (test::verbose())
    std::printf("  plain %d iterations, Anderson %d (%d rejections)\n", fa.pd.iterations, fb.pd.iterations,
                fb.pd.anderson_rejections);
  EXPECT_LT(fb.pd.iterations, fa.pd.iterations);
  const double scale = (sa.x - c.mesh.nodes).cwiseAbs().maxCoeff();
  const double err = max_row_diff(sa.x, sb.x) / scale;
  test::report("Anderson vs plain equilibrium", err, 1e-6);
  EXPECT_LT(err, 1e-6);
}

// Inner iterations reduce the residual of the outer iteration.
TEST(CollisionSolver, InnerIterationsReduceTheResidual) {
  SlabCase c(9, 0.8);
  double residual[2];
  const int inner[2] = {1, 5};
  for (int i = 0; i < 2; ++i) {
    CollisionSolver s = c.solver(options(CollisionMethod::Schur, SchurSolveMethod::Automatic, inner[i]));
    State st = make_state(c.model);
    const CollisionFrameStats fs = s.step(st, iterations(2), 1.0);
    residual[i] = fs.pd.residual;
    EXPECT_EQ(fs.inner_iterations, 2 * inner[i]);
  }
  EXPECT_LT(residual[1], residual[0]);
}

// Penalty springs release: once the obstacle moves away the body returns to its rest shape.
TEST(CollisionSolver, ContactsReleaseWhenTheObstacleLeaves) {
  SlabCase c;
  c.obstacles[0].keyframes = {Keyframe{1.0, Vec3::Zero(), Eigen::Quaterniond::Identity()},
                              Keyframe{2.0, Vec3(0, 0, 2.0), Eigen::Quaterniond::Identity()}};
  c.detector = std::make_unique<CollisionDetector>(c.mesh, c.proxies, c.region, c.obstacles);
  CollisionSolver s = c.solver(options(CollisionMethod::Schur));
  State st = make_state(c.model);
  const CollisionFrameStats pressed = s.step(st, iterations(300, 1e-8), 1.0);
  EXPECT_GT(pressed.active_proxies, 0);
  EXPECT_GT((st.x - c.mesh.nodes).cwiseAbs().maxCoeff(), 0.02);
  const CollisionFrameStats released = s.step(st, iterations(300, 1e-8), 2.0);
  EXPECT_EQ(released.active_proxies, 0);
  EXPECT_LT((st.x - c.mesh.nodes).cwiseAbs().maxCoeff(), 1e-6);
}

TEST(CollisionSolver, PenetrationShrinksWithStiffness) {
  SlabCase c;
  double depth[2];
  const double stiffness[2] = {1e4, 1e6};
  for (int i = 0; i < 2; ++i) {
    CollisionOptions o = options(CollisionMethod::Schur, SchurSolveMethod::Automatic, 2);
    o.stiffness = stiffness[i];
    CollisionSolver s = c.solver(o);
    State st = make_state(c.model);
    const CollisionFrameStats fs = s.step(st, iterations(3000, 1e-6), 1.0);
    EXPECT_TRUE(fs.pd.converged) << fs.pd.residual << " after " << fs.pd.iterations << " of " << fs.pd.initial_residual
                                 << " depth " << fs.max_penetration;
    depth[i] = fs.max_penetration;
  }
  EXPECT_GT(depth[0], 0.0);
  EXPECT_LT(depth[1], 0.05 * depth[0]);
}

Vec3 tet_centroid(const TetMesh& mesh, int t) {
  Vec3 m = Vec3::Zero();
  for (int a = 0; a < 4; ++a) m += 0.25 * mesh.nodes.row(mesh.tets(t, a)).transpose();
  return m;
}

int nearest_tet(const TetMesh& mesh, const Vec3& at) {
  int best = 0;
  for (int t = 1; t < mesh.tets.rows(); ++t)
    if ((tet_centroid(mesh, t) - at).norm() < (tet_centroid(mesh, best) - at).norm()) best = t;
  return best;
}

// Frame 1 of the slab from rest with `det`'s contacts, to 1e-10 with Anderson (expected to converge).
std::pair<CollisionFrameStats, Points> converged_frame(SlabCase& c, ContactDetector& det, const CollisionOptions& o) {
  CollisionSolver solver(c.model, c.proxies, c.region, det, o);
  State st = make_state(c.model);
  SolverOptions so = iterations(2000, 1e-10);
  so.anderson = true;
  const CollisionFrameStats fs = solver.step(st, so, 1.0);
  EXPECT_TRUE(fs.pd.converged) << fs.pd.iterations << " iterations, residual " << fs.pd.residual;
  return {fs, Points(st.x)};
}

// The proxy nearest the top face's centre (0.5, 0.5, 0.5).
int top_centre_proxy(const SlabCase& c) {
  int p = 0;
  for (int i = 0; i < c.proxies.size(); ++i)
    if ((c.proxies.rest.row(i) - Eigen::RowVector3d(0.5, 0.5, 0.5)).norm() <
        (c.proxies.rest.row(p) - Eigen::RowVector3d(0.5, 0.5, 0.5)).norm())
      p = i;
  return p;
}

// A self contact of proxy p with the centroid q of tet S (its material point), as the rest-pose
// detector would report it, with the given normal.
ProxyContact centroid_contact(const SlabCase& c, int p, int S, const Vec3& normal) {
  ProxyContact ct;
  ct.proxy = p;
  ct.source = ProxyContact::Source::Self;
  ct.surface_tet = S;
  ct.surface_weights = Vec4::Constant(0.25);
  ct.target = tet_centroid(c.mesh, S);
  ct.normal = normal;
  ct.depth = (ct.target - c.proxies.rest.row(p).transpose()).norm();
  return ct;
}

// A self contact held fixed (FixedContactDetector): the top-centre proxy of the slab paired with
// the centroid q of a tet near the slab's corner, d = x_p − q. The half-space spring
// (CollisionOptions::self_contact_half_space) is the PD projection of d onto n·d ≥ 0, min(0, n·d) n:
// with n = −d/|d| at the start it is d itself, so one iteration equals the zero-rest-length spring's;
// with the plane saying "outside" (n·d > 0: a proxy that slid along the other side's tangent plane
// and off it) it has no force at all, where the spring still pulls p towards q; and its equilibrium is the same
// through the Schur complement as through the full sparse refactorization (baseline a).
TEST(CollisionSolver, HalfSpaceSelfContactIsTheProjectionOntoTheTangentPlane) {
  SlabCase c;
  const int p = top_centre_proxy(c);
  const int S = nearest_tet(c.mesh, Vec3(0.2, 0.2, 0.45));
  const Vec3 d = c.proxies.rest.row(p).transpose() - tet_centroid(c.mesh, S);
  ASSERT_GT(d.norm(), 0.3);
  auto contact = [&](const Vec3& normal) { return centroid_contact(c, p, S, normal); };
  // Frame 1 from rest with the contact held: `k` iterations, or to 1e-10.
  auto frame = [&](const ProxyContact& ct, bool half_space, CollisionMethod method, int k, int* iterations_done) {
    FixedContactDetector fixed({ct});
    CollisionOptions o = options(method);
    o.stiffness = 1e3;
    o.self_contact_half_space = half_space;
    o.region_tets = {S};
    CollisionSolver solver(c.model, c.proxies, c.region, fixed, o);
    State st = make_state(c.model);
    SolverOptions so = iterations(k, k > 1 ? 1e-10 : 0.0);
    so.anderson = k > 1;
    const CollisionFrameStats fs = solver.step(st, so, 1.0);
    if (k > 1) {
      EXPECT_TRUE(fs.pd.converged) << fs.pd.iterations << " iterations, residual " << fs.pd.residual;
    }
    if (iterations_done) *iterations_done = fs.pd.iterations;
    return Points(st.x);
  };
  const Points spring1 = frame(contact(-d.normalized()), false, CollisionMethod::Schur, 1, nullptr);
  const Points along1 = frame(contact(-d.normalized()), true, CollisionMethod::Schur, 1, nullptr);
  const double step = (spring1 - c.mesh.nodes).rowwise().norm().maxCoeff();
  EXPECT_GT(step, 1e-3);  // the contact moves the slab
  EXPECT_LT(max_row_diff(spring1, along1), 1e-12 * step);
  // n at 45° to d, n·d > 0: the proxy is on the free side of the plane; the rest state is already
  // the equilibrium.
  const Vec3 tangent = (d.cross(Vec3::UnitZ()).normalized() + d.normalized()).normalized();
  int its = -1;
  const Points slid = frame(contact(tangent), true, CollisionMethod::Schur, 2000, &its);
  EXPECT_EQ(its, 0);
  EXPECT_EQ((slid - c.mesh.nodes).cwiseAbs().maxCoeff(), 0.0);
  const Points slid_spring = frame(contact(tangent), false, CollisionMethod::Schur, 1, nullptr);
  EXPECT_LT(max_row_diff(slid_spring, spring1), 1e-12 * step);  // the full spring ignores n
  // The equilibrium of the half-space spring: Schur complement = full sparse refactorization.
  const Points schur = frame(contact(-d.normalized()), true, CollisionMethod::Schur, 2000, nullptr);
  const Points full = frame(contact(-d.normalized()), true, CollisionMethod::FullRefactor, 2000, nullptr);
  const double moved = (schur - c.mesh.nodes).rowwise().norm().maxCoeff();
  EXPECT_LT(max_row_diff(schur, full), 1e-8 * moved);
  // ... and not the spring's: the contact force stays along the first normal while d turns.
  const Points spring = frame(contact(-d.normalized()), false, CollisionMethod::Schur, 2000, nullptr);
  EXPECT_GT(max_row_diff(schur, spring), 1e-3 * moved);
}

// A detector that reports its contacts on the first `calls` detections of each frame only (the
// proxy seen in contact early in a frame and not afterwards, as on a contact boundary).
class FirstCallsDetector final : public ContactDetector {
 public:
  FirstCallsDetector(std::vector<ProxyContact> contacts, int calls) : contacts_(std::move(contacts)), calls_(calls) {}
  void detect(const Points&, double frame, std::vector<ProxyContact>& contacts) override {
    if (frame != frame_) frame_ = frame, seen_ = 0;
    contacts.clear();
    if (seen_++ < calls_) contacts = contacts_;
  }

 private:
  std::vector<ProxyContact> contacts_;
  int calls_;
  double frame_ = -1;
  int seen_ = 0;
};

// A half-space spring stays for the rest of its frame once made: with the contact reported on the
// first two detections only, the frame reaches the equilibrium of the contact reported throughout
// (the plane still says "inside"), where the default spring is released after release_after
// detections out of contact and the slab returns to rest.
TEST(CollisionSolver, HalfSpaceSpringsStayForTheFrame) {
  SlabCase c;
  const int p = 0;  // the first top-face proxy; S: a tet under the top face near the corner (1, 1)
  const int S = nearest_tet(c.mesh, Vec3(0.95, 0.95, 0.45));
  const Vec3 q = tet_centroid(c.mesh, S);
  const ProxyContact ct = centroid_contact(c, p, S, (q - c.proxies.rest.row(p).transpose()).normalized());
  auto frame = [&](ContactDetector& det, bool half_space) {
    CollisionOptions o = options(CollisionMethod::Schur);
    o.stiffness = 1e3;
    o.self_contact_half_space = half_space;
    o.region_tets = {S};
    return converged_frame(c, det, o).second;
  };
  FixedContactDetector always({ct});
  FirstCallsDetector early({ct}, 2), early_again({ct}, 2);
  const Points held = frame(always, true);
  const double moved = (held - c.mesh.nodes).rowwise().norm().maxCoeff();
  EXPECT_GT(moved, 1e-3);
  EXPECT_LT(max_row_diff(frame(early, true), held), 1e-8 * moved);
  EXPECT_LT((frame(early_again, false) - c.mesh.nodes).rowwise().norm().maxCoeff(), 1e-8 * moved);
}

// A detector that reports one contact on the first detection of each frame and another one
// afterwards (the same proxy paired with another point of the other side once it has moved).
class SwitchingDetector final : public ContactDetector {
 public:
  SwitchingDetector(ProxyContact first, ProxyContact then) : first_(first), then_(then) {}
  void detect(const Points&, double frame, std::vector<ProxyContact>& contacts) override {
    if (frame != frame_) frame_ = frame, seen_ = 0;
    contacts = {seen_++ == 0 ? first_ : then_};
  }

 private:
  ProxyContact first_, then_;
  double frame_ = -1;
  int seen_ = 0;
};

// CollisionOptions::half_space_repair_distance: the top-centre proxy p is first paired with A
// (a tet near one corner, its plane tilted 45° from d_A, so p lies |d_A|/√2 from A's point along the
// plane) and then reported paired with B (a tet near the opposite corner, likewise). Held
// pairings (distance 0, or no re-pairing round) end the frame at A's equilibrium; with a distance
// below p's slide, the frame converged at A's equilibrium goes on with the pairing made afresh (B)
// and ends at B's. Out of contact, a slid pairing is dropped: with the contact reported on the
// first two detections only, the slab returns to rest, where the held plane keeps pressing
// (HalfSpaceSpringsStayForTheFrame).
TEST(CollisionSolver, HalfSpacePairingSlidFartherThanTheRepairDistanceIsMadeAfresh) {
  SlabCase c;
  const int p = top_centre_proxy(c);
  const Vec3 xp = c.proxies.rest.row(p).transpose();
  const int SA = nearest_tet(c.mesh, Vec3(0.2, 0.2, 0.45)), SB = nearest_tet(c.mesh, Vec3(0.8, 0.8, 0.45));
  const Vec3 dA = xp - tet_centroid(c.mesh, SA), dB = xp - tet_centroid(c.mesh, SB);
  auto tilted = [](const Vec3& d) { return Vec3((d.cross(Vec3::UnitZ()).normalized() - d.normalized()).normalized()); };
  for (const Vec3& d : {dA, dB}) {
    ASSERT_LT(tilted(d).dot(d), 0.0);                           // p inside the plane
    ASSERT_GT((d - tilted(d).dot(d) * tilted(d)).norm(), 0.2);  // and 0.2 along it
  }
  const ProxyContact A = centroid_contact(c, p, SA, tilted(dA)), B = centroid_contact(c, p, SB, tilted(dB));
  const double repair = 0.05;
  int rounds_done = -1;
  auto frame = [&](ContactDetector& det, double distance, int rounds = 8) {
    CollisionOptions o = options(CollisionMethod::Schur);
    o.stiffness = 1e3;
    o.self_contact_half_space = true;
    o.half_space_repair_distance = distance;
    o.half_space_repair_rounds = rounds;
    o.region_tets = {SA, SB};
    auto [fs, x] = converged_frame(c, det, o);
    rounds_done = fs.repair_rounds;
    return x;
  };
  FixedContactDetector only_a({A}), only_b({B});
  const Points at_a = frame(only_a, 0.0), at_b = frame(only_b, 0.0);
  const double moved =
      std::min((at_a - c.mesh.nodes).rowwise().norm().maxCoeff(), (at_b - c.mesh.nodes).rowwise().norm().maxCoeff());
  EXPECT_GT(moved, 1e-3);
  EXPECT_GT(max_row_diff(at_a, at_b), 1e-2 * moved);  // the two pairings' equilibria differ
  SwitchingDetector held(A, B), repaired(A, B);
  EXPECT_LT(max_row_diff(frame(held, 0.0), at_a), 1e-8 * moved);
  EXPECT_EQ(rounds_done, 0);
  EXPECT_LT(max_row_diff(frame(repaired, repair), at_b), 1e-8 * moved);
  EXPECT_GE(rounds_done, 1);
  FirstCallsDetector early_held({A}, 2), early_repaired({A}, 2);
  EXPECT_LT(max_row_diff(frame(early_held, 0.0), at_a), 1e-8 * moved);
  EXPECT_LT((frame(early_repaired, repair) - c.mesh.nodes).rowwise().norm().maxCoeff(), 1e-8 * moved);
  for (const int rounds : {0, 1, 3}) {
    SwitchingDetector switching(A, B);
    EXPECT_LT(max_row_diff(frame(switching, repair, rounds), rounds > 0 ? at_b : at_a), 1e-8 * moved)
        << rounds << " rounds";
  }
}

TEST(CollisionSolver, GuardsAndBudget) {
  SlabCase c;
  CollisionOptions bad = options(CollisionMethod::Schur);
  bad.stiffness = 0;
  EXPECT_THROW(c.solver(bad), SolverError);
  bad = options(CollisionMethod::Schur);
  bad.inner_iterations = 0;
  EXPECT_THROW(c.solver(bad), SolverError);
  bad = options(CollisionMethod::Schur);
  bad.half_space_repair_distance = -1e-3;
  EXPECT_THROW(c.solver(bad), SolverError);
  bad = options(CollisionMethod::Schur);
  bad.half_space_repair_rounds = -1;
  EXPECT_THROW(c.solver(bad), SolverError);
  CollisionOptions tiny = options(CollisionMethod::Schur);
  tiny.schur.dense_memory_budget_bytes = 1000;
  try {
    c.solver(tiny);
    FAIL() << "over-budget region accepted";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("budget"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CollisionSolver(c.model, c.proxies, {static_cast<int>(c.proxies.size())}, *c.detector,
                               options(CollisionMethod::Schur)),
               SolverError);
  EXPECT_EQ(collision_method_from_string("pcg"), CollisionMethod::Pcg);
  EXPECT_THROW(collision_method_from_string("magic"), Error);
}

// Model / state: one constant CollisionModel serves two states (two sphere depths, each with its
// own detector) interleaved frame by frame, and each ends bit for bit where a CollisionSolver of its
// own (own model, own state) ends; both kinds of object keep working after a move.
TEST(CollisionModelState, OneModelServesManyStates) {
  SlabCase slab;
  const std::vector<Obstacle> deep = {Obstacle{Sphere{Vec3(0.5, 0.5, 0.8), 0.4}, {}}};
  CollisionDetector det_a(slab.mesh, slab.proxies, slab.region, slab.obstacles);
  CollisionDetector det_b(slab.mesh, slab.proxies, slab.region, deep);
  CollisionDetector ref_det_a(slab.mesh, slab.proxies, slab.region, slab.obstacles);
  CollisionDetector ref_det_b(slab.mesh, slab.proxies, slab.region, deep);
  const CollisionOptions o = options(CollisionMethod::Schur, SchurSolveMethod::Automatic, 2);
  CollisionModel shared_model(slab.model, slab.proxies, slab.region, o);
  CollisionModel model = std::move(shared_model);  // movable
  CollisionState a(model, det_a), b0(model, det_b);
  CollisionState b = std::move(b0);
  CollisionSolver ref_a(slab.model, slab.proxies, slab.region, ref_det_a, o);
  CollisionSolver ref_b(slab.model, slab.proxies, slab.region, ref_det_b, o);
  State sa = make_state(slab.model), sb = make_state(slab.model);
  State ra = make_state(slab.model), rb = make_state(slab.model);
  SolverOptions so = iterations(12);
  so.anderson = true;
  for (int frame = 1; frame <= 2; ++frame) {
    const CollisionFrameStats fa = collision_step(model, a, sa, so, frame);
    const CollisionFrameStats fb = collision_step(model, b, sb, so, frame);
    const CollisionFrameStats ga = ref_a.step(ra, so, frame);
    const CollisionFrameStats gb = ref_b.step(rb, so, frame);
    EXPECT_EQ(fa.inner_iterations, ga.inner_iterations);
    EXPECT_EQ(fb.inner_iterations, gb.inner_iterations);
    EXPECT_EQ(fa.active_proxies, ga.active_proxies);
    EXPECT_EQ(fb.active_proxies, gb.active_proxies);
  }
  EXPECT_GT(b.contacts().size(), a.contacts().size());
  EXPECT_EQ(max_row_diff(sa.x, ra.x), 0.0);
  EXPECT_EQ(max_row_diff(sb.x, rb.x), 0.0);
  EXPECT_GT(max_row_diff(sa.x, sb.x), 1e-3);  // the two states really differ
}

TEST(CollisionModelState, StateOfAnotherModelIsRefused) {
  SlabCase slab;
  const CollisionOptions o = options(CollisionMethod::Schur);
  CollisionModel m1(slab.model, slab.proxies, slab.region, o);
  CollisionModel m2(slab.model, slab.proxies, slab.region, o);
  CollisionState st(m1, *slab.detector);
  State s = make_state(slab.model);
  EXPECT_THROW(collision_step(m2, st, s, iterations(2), 1.0), SolverError);
}

TEST(CollisionModelState, ChebyshevIsRefusedByName) {
  SlabCase slab;
  CollisionSolver solver = slab.solver(options(CollisionMethod::Schur));
  State s = make_state(slab.model);
  SolverOptions so = iterations(3);
  so.accelerator = Accelerator::Chebyshev;
  try {
    solver.step(s, so, 1.0);
    FAIL() << "Chebyshev accepted";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("Chebyshev"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xpd
