// IPC barrier contact in PD (solver/ipc_solver.hpp): two boxes pressed together by their
// attachments. Oracles: the full 3n × 3n sparse solve against the Schur + Woodbury path, an exact
// (rational) edge–triangle intersection test of the surface in every frame, the force balance of
// the attachments (the contact must carry the load), and plain PD, which lets the boxes overlap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <xpd/collision/distance.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/solver/ipc_solver.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "collision/exact_intersection.hpp"
#include "pd_fixtures.hpp"

namespace xpd {
namespace {

// The mesh boundary as a contact surface: its nodes as proxies, its triangles in proxy indices.
void boundary_surface(const TetMesh& m, ProxySet& proxies, Triangles& surface) {
  const Triangles faces = boundary_faces(m.tets);
  const std::vector<int> nodes = boundary_nodes(faces);
  proxies = proxies_from_nodes(m, nodes);
  std::vector<int> proxy_of(static_cast<std::size_t>(m.nodes.rows()), -1);
  for (std::size_t p = 0; p < nodes.size(); ++p) proxy_of[static_cast<std::size_t>(nodes[p])] = static_cast<int>(p);
  surface.resize(faces.rows(), 3);
  for (Eigen::Index f = 0; f < faces.rows(); ++f)
    for (int k = 0; k < 3; ++k) surface(f, k) = proxy_of[static_cast<std::size_t>(faces(f, k))];
}

struct TwoBoxes {
  ModelDesc desc;
  std::vector<int> top_attachments;  // attachment indices of box B's top face (moved down)
  ProxySet proxies;
  Triangles surface;  // in proxy indices
  int nodes_a = 0;
};

// Box A on [0,1]³ attached at z = 0; box B, smaller and shifted, 0.05 above it, attached at its
// top. Generic offsets so that no two surface features are aligned.
TwoBoxes two_boxes(int n) {
  TwoBoxes t;
  const TetMesh a = make_box(n, n, n, Vec3(0, 0, 0), Vec3(1, 1, 1));
  const TetMesh b = make_box(n, n, n, Vec3(0.13, 0.07, 1.05), Vec3(0.93, 0.87, 1.85));
  TetMesh m;
  m.nodes.resize(a.nodes.rows() + b.nodes.rows(), 3);
  m.nodes << a.nodes, b.nodes;
  m.tets.resize(a.tets.rows() + b.tets.rows(), 4);
  m.tets << a.tets, (b.tets.array() + static_cast<int>(a.nodes.rows())).matrix();
  t.nodes_a = static_cast<int>(a.nodes.rows());
  t.desc.mesh = m;
  t.desc.mu = {1e3};
  t.desc.density = {100.0};
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i) {
    const bool bottom_a = i < t.nodes_a && m.nodes(i, 2) < 1e-9;
    const bool top_b = i >= t.nodes_a && m.nodes(i, 2) > 1.85 - 1e-9;
    if (!bottom_a && !top_b) continue;
    if (top_b) t.top_attachments.push_back(static_cast<int>(t.desc.attachments.size()));
    t.desc.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e5, m.nodes.row(i).transpose()});
  }
  boundary_surface(m, t.proxies, t.surface);
  return t;
}

void lower_top(const TwoBoxes& t, State& s, double dz) {
  for (const int j : t.top_attachments)
    s.inputs.attachment_targets(j, 2) = t.desc.attachments[static_cast<std::size_t>(j)].target.z() - dz;
}

// Net attachment force on each box: k (t − x) summed over its attached nodes.
std::pair<Vec3, Vec3> attachment_forces(const TwoBoxes& t, const State& s) {
  Vec3 fa = Vec3::Zero(), fb = Vec3::Zero();
  for (std::size_t j = 0; j < t.desc.attachments.size(); ++j) {
    const auto& at = t.desc.attachments[j];
    const int node = at.point.nodes[0];
    const Vec3 f = at.stiffness * (s.inputs.attachment_targets.row(static_cast<Eigen::Index>(j)).transpose() -
                                   s.x.row(node).transpose());
    (node < t.nodes_a ? fa : fb) += f;
  }
  return {fa, fb};
}

TEST(Ipc, BoxesPressedTogetherStayIntersectionFreeAndCarryTheLoad) {
  const TwoBoxes t = two_boxes(4);
  const Model model = build_model(t.desc);
  IpcOptions o;
  o.dhat = 0.01;
  SolverOptions so;
  so.max_iterations = 200;
  so.rel_tolerance = 1e-8;
  const double diag = test::bbox_diagonal(model.rest_positions());

  IpcOptions full = o, factored = o, pcg = o;
  full.global_solve = IpcGlobalSolve::FullSparse;
  pcg.global_solve = IpcGlobalSolve::Pcg;
  factored.woodbury_form = IpcOptions::WoodburyForm::Factored;  // the automatic choice takes the block here
  const IpcModel ipc(model, t.proxies, t.surface, o), ipc_full(model, t.proxies, t.surface, full),
      ipc_u(model, t.proxies, t.surface, factored), ipc_pcg(model, t.proxies, t.surface, pcg);
  IpcState state_w(ipc), state_f(ipc_full), state_u(ipc_u), state_p(ipc_pcg);
  State sw = make_state(model), sf = make_state(model), su = make_state(model), sp = make_state(model),
        plain = make_state(model);
  const double drops[] = {0.03, 0.08, 0.12};
  for (int frame = 0; frame < 3; ++frame) {
    SCOPED_TRACE(frame);
    for (State* s : {&sw, &sf, &su, &sp, &plain}) lower_top(t, *s, drops[frame]);
    const IpcFrameStats a = state_w.step(sw, so);
    const IpcFrameStats b = state_f.step(sf, so);
    const IpcFrameStats c = state_u.step(su, so);
    const IpcFrameStats d = state_p.step(sp, so);
    (void)step(model, plain, so);
    EXPECT_TRUE(a.pd.converged) << a.pd.iterations << " iterations, residual " << a.pd.residual;
    EXPECT_TRUE(b.pd.converged);
    EXPECT_TRUE(c.pd.converged);
    // The global solves (Woodbury with the block and with U, the full sparse matrix) give the same
    // trajectory.
    EXPECT_LE((sw.x - sf.x).cwiseAbs().maxCoeff(), 1e-8 * diag);
    EXPECT_LE((su.x - sf.x).cwiseAbs().maxCoeff(), 1e-8 * diag);
    // The PCG baseline (relative residual 1e-8 per solve) reaches the same equilibrium.
    EXPECT_TRUE(d.pd.converged);
    EXPECT_LE((sp.x - sf.x).cwiseAbs().maxCoeff(), 1e-6 * diag);
    // Intersection-free, exactly; every active pair strictly separated and within d̂.
    std::string first;
    EXPECT_EQ(test::count_intersections(ipc.surface_positions(sw.x), t.surface, &first), 0) << first;
    const auto [fa, fb] = attachment_forces(t, sw);
    if (frame == 0) {
      EXPECT_EQ(a.active_pairs, 0);  // the 0.05 gap is not closed by a 0.03 drop
      EXPECT_LE(fb.norm(), 1e-6 * 1e5);
    } else {
      EXPECT_GT(a.active_pairs, 0);
      EXPECT_GT(a.min_distance, 0.0);
      EXPECT_LT(a.min_distance, o.dhat);
      // B's attachments pull it down onto A, A's hold A up: the contact carries the load, and the
      // attachment forces balance each other.
      EXPECT_LT(fb.z(), 0.0);
      EXPECT_LE((fa + fb).norm(), 1e-6 * fb.norm());
      // Plain PD lets B sink into A.
      const double gap_plain = plain.x.bottomRows(plain.x.rows() - t.nodes_a).col(2).minCoeff() -
                               plain.x.topRows(t.nodes_a).col(2).maxCoeff();
      EXPECT_LT(gap_plain, 0.0);
      // … and the intersection oracle sees it (its negative control).
      EXPECT_GT(test::count_intersections(ipc.surface_positions(plain.x), t.surface), 0);
    }
    if (test::verbose())
      std::printf(
          "  frame %d: %d iterations, %d halvings, active %d, min distance %.3e, kappa %.3e, n_c %d, r %d, "
          "alpha_min %.3f, F_B = (%.3f, %.3f, %.3f)\n",
          frame, a.pd.iterations, a.pd.line_search_halvings, a.active_pairs, a.min_distance, a.kappa,
          a.max_touched_nodes, a.max_rank, a.min_step_fraction, fb.x(), fb.y(), fb.z());
  }
}

// A CCD tolerance far above the gaps the contact settles at (1e-3 against ~1e-5): each search
// caps it at a tenth of the closest pair's distance, so the steps do not freeze at α = 0.
TEST(Ipc, CoarseCcdToleranceDoesNotFreezeTightContacts) {
  const TwoBoxes t = two_boxes(4);
  const Model model = build_model(t.desc);
  IpcOptions o;
  o.dhat = 0.01;
  o.ccd.tolerance = 1e-3;
  const IpcModel ipc(model, t.proxies, t.surface, o);
  IpcState st(ipc);
  State s = make_state(model);
  SolverOptions so;
  so.max_iterations = 200;
  so.rel_tolerance = 1e-8;
  for (const double drop : {0.08, 0.12}) {
    lower_top(t, s, drop);
    const IpcFrameStats r = st.step(s, so);
    EXPECT_TRUE(r.pd.converged) << r.pd.iterations << " iterations";
    EXPECT_GT(r.active_pairs, 0);
    EXPECT_GT(r.min_step_fraction, 0.0);
    EXPECT_LT(r.min_distance, 1e-4);  // tighter than the tolerance asked for
  }
}

// One soft box attached at its base and a kinematic icosphere pressed into its top by keyframes.
struct SphereOnBox {
  ModelDesc desc;
  ProxySet proxies;
  Triangles surface;
  IpcObstacle sphere;
};

SphereOnBox sphere_on_box(double press, int key_frame) {
  SphereOnBox t;
  const TetMesh m = make_box(6, 6, 3, Vec3(0, 0, 0), Vec3(1, 1, 0.4));
  t.desc.mesh = m;
  t.desc.mu = {1e3};
  t.desc.density = {100.0};
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
    if (m.nodes(i, 2) < 1e-9)
      t.desc.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e5, m.nodes.row(i).transpose()});
  boundary_surface(m, t.proxies, t.surface);
  // Generic placement: 0.07 above the top, off the grid's symmetry lines; at key_frame `press` into it.
  const SurfaceMesh ball = make_icosphere(Vec3(0.53, 0.46, 0.77), 0.3, 3);
  t.sphere.vertices = ball.nodes;
  t.sphere.triangles = ball.triangles;
  Keyframe k0, k1;
  k1.frame = key_frame;
  k1.translation = Vec3(0, 0, -0.07 - press);
  t.sphere.keyframes = {k0, k1};
  return t;
}

// Body and obstacle surfaces as one, for the exact intersection test.
std::pair<Points, Triangles> merged(const IpcModel& ipc, const IpcState& st, const Points& x) {
  const Points body = ipc.surface_positions(x);
  const Points& o = st.obstacle_positions();
  Points all(body.rows() + o.rows(), 3);
  all << body, o;
  Triangles f(ipc.triangles().rows() + ipc.obstacle_triangles().rows(), 3);
  f << ipc.triangles(), ipc.obstacle_triangles().array() + static_cast<int>(body.rows());
  return {all, f};
}

TEST(Ipc, KinematicObstaclePressesWithoutIntersection) {
  const SphereOnBox t = sphere_on_box(0.1, 3);
  const Model model = build_model(t.desc);
  IpcOptions o;
  o.dhat = 0.01;
  IpcOptions full = o;
  full.global_solve = IpcGlobalSolve::FullSparse;
  const IpcModel ipc(model, t.proxies, t.surface, o, {t.sphere}),
      ipc_full(model, t.proxies, t.surface, full, {t.sphere});
  IpcState sw(ipc), sf(ipc_full);
  State xw = make_state(model), xf = make_state(model);
  SolverOptions so;
  so.max_iterations = 300;
  so.rel_tolerance = 1e-8;
  const double diag = test::bbox_diagonal(model.rest_positions());
  for (int frame = 1; frame <= 3; ++frame) {
    SCOPED_TRACE(frame);
    const IpcFrameStats a = sw.step(xw, so);
    const IpcFrameStats b = sf.step(xf, so);
    EXPECT_TRUE(a.pd.converged) << a.pd.iterations << " iterations, residual " << a.pd.residual;
    EXPECT_TRUE(b.pd.converged);
    // The obstacle stands at its keyframed pose, and both global solves follow the same path.
    EXPECT_EQ(a.obstacle_lag, 0.0);
    EXPECT_LE((sw.obstacle_positions() - ipc.obstacle_pose(frame)).cwiseAbs().maxCoeff(), 0.0);
    EXPECT_LE((xw.x - xf.x).cwiseAbs().maxCoeff(), 1e-8 * diag);
    const auto [x, f] = merged(ipc, sw, xw.x);
    std::string first;
    EXPECT_EQ(test::count_intersections(x, f, &first), 0) << first;
    // Under the sphere's centre: the top vertex nearest to it in x, y lies below the true sphere's
    // surface plus the icosphere's chord error (the polyhedron is inscribed); the sphere's lowest
    // vertex, the most pressed, lies within d̂ of the body's surface.
    const Vec3 centre =
        Vec3(0.53, 0.46, 0.77) + ipc.obstacle_pose(frame).row(0).transpose() - t.sphere.vertices.row(0).transpose();
    const Points body = ipc.surface_positions(xw.x);
    Eigen::Index near = -1;  // among the top face's vertices (the bottom's share their x, y)
    for (Eigen::Index i = 0; i < body.rows(); ++i)
      if (t.proxies.rest(i, 2) > 0.39 &&
          (near < 0 || (body.row(i).head<2>().transpose() - centre.head<2>()).squaredNorm() <
                           (body.row(near).head<2>().transpose() - centre.head<2>()).squaredNorm()))
        near = i;
    const double dxy2 = (body.row(near).head<2>().transpose() - centre.head<2>()).squaredNorm();
    const double sphere_z = centre.z() - std::sqrt(0.09 - dxy2), top = body(near, 2);
    const double sagitta = std::pow(1.33 * 0.3 / 8, 2) / (8 * 0.3);
    Eigen::Index low = 0;
    sw.obstacle_positions().col(2).minCoeff(&low);
    const Vec3 tip = sw.obstacle_positions().row(low).transpose();
    double tip_d2 = std::numeric_limits<double>::infinity();
    for (Eigen::Index f = 0; f < t.surface.rows(); ++f)
      tip_d2 = std::min(tip_d2, point_triangle_squared_distance(tip, body.row(t.surface(f, 0)).transpose(),
                                                                body.row(t.surface(f, 1)).transpose(),
                                                                body.row(t.surface(f, 2)).transpose()));
    Vec3 reaction = Vec3::Zero();  // attachments on the body
    for (std::size_t j = 0; j < t.desc.attachments.size(); ++j) {
      const int node = t.desc.attachments[j].point.nodes[0];
      reaction += 1e5 * (t.desc.attachments[j].target - xw.x.row(node).transpose());
    }
    if (frame == 1) {
      EXPECT_EQ(a.active_pairs, 0);
      EXPECT_EQ(a.obstacle_advances, 1);
      EXPECT_LE(reaction.norm(), 1e-9);
    } else {
      EXPECT_GT(a.active_pairs, 0);
      EXPECT_GT(a.min_distance, 0.0);
      EXPECT_LT(a.min_distance, o.dhat);
      EXPECT_LT(top, sphere_z + sagitta);
      EXPECT_GT(std::sqrt(tip_d2), 0.0);
      EXPECT_LT(std::sqrt(tip_d2), o.dhat);
      EXPECT_GT(reaction.z(), 0.0);  // the base holds the body up against the sphere
    }
    if (test::verbose())
      std::printf(
          "  frame %d: %d iterations, %d advances, active %d, min distance %.3e, top %.6f, sphere %.6f, tip %.3e, R_z "
          "%.3f\n",
          frame, a.pd.iterations, a.obstacle_advances, a.active_pairs, a.min_distance, top, sphere_z, std::sqrt(tip_d2),
          reaction.z());
  }
  EXPECT_LT(sw.obstacle_positions().col(2).minCoeff(), 0.4 - 0.09);  // pressed 0.1 into the rest top
}

// With too few iterations the obstacle cannot reach its pose: the frame reports it (not converged,
// the lag in metres), stays intersection-free, and the next frame goes on from where it stands.
TEST(Ipc, BlockedObstacleLagsAndCatchesUp) {
  const SphereOnBox t = sphere_on_box(0.15, 1);
  const Model model = build_model(t.desc);
  IpcOptions o;
  o.dhat = 0.01;
  const IpcModel ipc(model, t.proxies, t.surface, o, {t.sphere});
  IpcState st(ipc);
  State x = make_state(model);
  SolverOptions so;
  so.max_iterations = 2;
  so.rel_tolerance = 1e-8;
  IpcFrameStats r = st.step(x, so);  // the sphere is to go 0.15 into the top in one frame
  EXPECT_FALSE(r.pd.converged);
  EXPECT_GT(r.obstacle_lag, 0.0);
  {
    const auto [p, f] = merged(ipc, st, x.x);
    EXPECT_EQ(test::count_intersections(p, f), 0);
  }
  so.max_iterations = 300;
  r = st.step(x, so);  // frame 2: the keys hold their last pose; the sphere catches up
  EXPECT_TRUE(r.pd.converged) << r.pd.iterations;
  EXPECT_EQ(r.obstacle_lag, 0.0);
  const auto [p, f] = merged(ipc, st, x.x);
  EXPECT_EQ(test::count_intersections(p, f), 0);
}

TEST(Ipc, RefusesBadSetups) {
  const TwoBoxes t = two_boxes(3);
  const Model model = build_model(t.desc);
  IpcOptions o;
  o.dhat = 0;
  EXPECT_THROW(IpcModel(model, t.proxies, t.surface, o), Error);
  // d̂ larger than the 0.05 gap between the boxes at rest: refused, naming a pair.
  o.dhat = 0.1;
  try {
    IpcModel bad(model, t.proxies, t.surface, o);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closer than dhat"), std::string::npos) << e.what();
  }
  o.dhat = 0.01;
  Triangles wrong = t.surface;
  wrong(0, 0) = t.proxies.size();
  EXPECT_THROW(IpcModel(model, t.proxies, wrong, o), Error);
  // A start in which box B has sunk into box A: refused, naming an edge and the triangle it pierces.
  {
    const IpcModel m2(model, t.proxies, t.surface, o);
    IpcState st2(m2);
    State s2 = make_state(model);
    for (Eigen::Index i = t.nodes_a; i < s2.x.rows(); ++i) s2.x(i, 2) -= 0.1;
    try {
      (void)st2.step(s2, SolverOptions{});
      ADD_FAILURE() << "accepted";
    } catch (const SolverError& e) {
      EXPECT_NE(std::string(e.what()).find("intersect"), std::string::npos) << e.what();
    }
  }
  // Obstacles: one without triangles is refused; one that starts inside the body is refused at
  // the frame, naming the obstacles' vertex range.
  {
    SphereOnBox sb = sphere_on_box(0.1, 3);
    const Model mb = build_model(sb.desc);
    IpcObstacle empty = sb.sphere;
    empty.triangles.resize(0, 3);
    EXPECT_THROW(IpcModel(mb, sb.proxies, sb.surface, o, {empty}), Error);
    sb.sphere.vertices.col(2).array() -= 0.2;  // the sphere's bottom 0.13 inside the box
    const IpcModel mi(mb, sb.proxies, sb.surface, o, {sb.sphere});
    IpcState si(mi);
    State x = make_state(mb);
    try {
      (void)si.step(x, SolverOptions{});
      ADD_FAILURE() << "accepted";
    } catch (const SolverError& e) {
      EXPECT_NE(std::string(e.what()).find("obstacles' vertices"), std::string::npos) << e.what();
    }
  }
  // Chebyshev is refused by name (its iterates are not CCD-checked); Anderson is accepted.
  const IpcModel ipc(model, t.proxies, t.surface, o);
  IpcState st(ipc);
  State s = make_state(model);
  SolverOptions so;
  so.accelerator = Accelerator::Chebyshev;
  try {
    (void)st.step(s, so);
    ADD_FAILURE() << "Chebyshev accepted";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("Chebyshev"), std::string::npos) << e.what();
  }
  so.accelerator = Accelerator::Anderson;
  EXPECT_NO_THROW((void)st.step(s, so));
}

}  // namespace
}  // namespace xpd
