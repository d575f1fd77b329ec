// The one frame loop (solver/frame_loop.hpp) with strategies other than the shipped ones: a step
// bound (the hook of CCD-limited barrier steps) is honoured by the line search and still reaches
// the same equilibrium, and Anderson's extrapolated iterates pass the same bound; the strategy's constant-matrix solve
// (the hook of adjoint passes) is the model's factor; unsupported accelerators are refused by name; a strategy that
// keeps its vectors to itself during a frame (a device) runs the same iterations.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <xpd/core/error.hpp>
#include <xpd/solver/frame_loop.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "solver/anderson.hpp"
#include "solver/pd_fixtures.hpp"

namespace xpd {
namespace {

// Plain PD whose steps may go at most half way (as a continuous-collision bound would cap them).
class HalfBoundedStep final : public GlobalStep {
 public:
  explicit HalfBoundedStep(const Model& model) : pd_(model) {}
  const char* name() const override { return "half-bounded step"; }
  bool supports(Accelerator a) const override { return a == Accelerator::None; }
  const char* unsupported_reason(Accelerator) const override { return "test strategy: no accelerator"; }
  bool in_place() const override { return false; }
  bool line_search() const override { return true; }
  double evaluate(State& s, FrameStats& st) override { return pd_.evaluate(s, st); }
  void iterate(State& s, FrameStats& st) override { pd_.iterate(s, st); }
  double max_step_fraction(const State&) override {
    ++bounds;
    return 0.5;
  }
  void solve_with_matrix(Eigen::MatrixXd& b) const override { pd_.solve_with_matrix(b); }
  int bounds = 0;

 private:
  PdStep pd_;
};

TEST(FrameLoop, StepBoundIsHonouredAndReachesTheSameEquilibrium) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(test::loaded_desc(mesh));
  SolverOptions o;
  o.max_iterations = 5000;
  o.rel_tolerance = 1e-10;
  State plain = make_state(model);
  const FrameStats sp = step(model, plain, o);
  ASSERT_TRUE(sp.converged);

  State bounded = make_state(model);
  HalfBoundedStep half(model);
  // One iteration: the iterate is exactly x + δ/2 (the bound caps α; the Armijo test accepts it on
  // this convex start).
  SolverOptions one = o;
  one.max_iterations = 1;
  State probe = make_state(model);
  HalfBoundedStep half1(model);
  run_frame(model, probe, half1, one);
  State ref = make_state(model);
  PdStep pd(model);
  FrameStats scratch;
  (void)pd.evaluate(ref, scratch);
  pd.iterate(ref, scratch);
  EXPECT_LE((probe.x - (ref.x + 0.5 * ref.step)).cwiseAbs().maxCoeff(), 1e-14 * test::bbox_diagonal(ref.x));

  const FrameStats sb = run_frame(model, bounded, half, o);
  EXPECT_TRUE(sb.converged);
  EXPECT_EQ(half.bounds, sb.iterations);
  EXPECT_GT(sb.iterations, sp.iterations);  // half steps: slower, same fixed point
  EXPECT_LE((bounded.x - plain.x).cwiseAbs().maxCoeff(), 1e-7 * test::bbox_diagonal(plain.x));
}

// Plain PD with Anderson under a bound like CCD's: no node may pass below the floor z = floor along
// the straight path from the iterate (the bound returns 0.8 of the first crossing, as the IPC step
// does). evaluate() records the lowest z it is ever shown: an extrapolated iterate that tunnels
// through the floor would be evaluated there. No barrier pushes back, so the body presses on the
// floor and the frame ends at max_iterations; what is checked is that no iterate crosses.
class FloorBoundedStep final : public GlobalStep {
 public:
  FloorBoundedStep(const Model& model, double floor) : pd_(model), floor_(floor) {}
  const char* name() const override { return "floor-bounded step"; }
  bool supports(Accelerator a) const override { return a == Accelerator::None || a == Accelerator::Anderson; }
  bool in_place() const override { return false; }
  bool line_search() const override { return true; }
  double evaluate(State& s, FrameStats& st) override {
    lowest = std::min(lowest, s.x.col(2).minCoeff());
    return pd_.evaluate(s, st);
  }
  void iterate(State& s, FrameStats& st) override { pd_.iterate(s, st); }
  double max_step_fraction(const State& s) override {
    ++calls;
    double a = 1.0;
    for (Eigen::Index i = 0; i < s.x_prev.rows(); ++i) {
      const double z0 = s.x_prev(i, 2), z1 = z0 + s.step(i, 2);
      if (z1 < floor_) a = std::min(a, 0.8 * (z0 - floor_) / (z0 - z1));
    }
    if (a < 1.0) ++cut;
    return a;
  }
  void solve_with_matrix(Eigen::MatrixXd& b) const override { pd_.solve_with_matrix(b); }
  double lowest = std::numeric_limits<double>::infinity();
  int cut = 0, calls = 0;

 private:
  PdStep pd_;
  double floor_;
};

TEST(FrameLoop, AndersonIteratesPassTheStepBoundLikePlainSteps) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(test::loaded_desc(mesh));
  SolverOptions o;
  o.max_iterations = 5000;
  o.rel_tolerance = 1e-10;
  State free_fall = make_state(model);
  ASSERT_TRUE(step(model, free_fall, o).converged);
  // The floor halfway between the rest's lowest node and the unconstrained equilibrium's.
  const double rest_low = make_state(model).x.col(2).minCoeff(), eq_low = free_fall.x.col(2).minCoeff();
  const double floor = 0.5 * (rest_low + eq_low);
  ASSERT_LT(eq_low, floor);

  o.max_iterations = 60;
  o.accelerator = Accelerator::Anderson;
  State s = make_state(model);
  FloorBoundedStep bounded(model, floor);
  const FrameStats st = run_frame(model, s, bounded, o);
  EXPECT_GE(bounded.lowest, floor);                  // no evaluated iterate, extrapolated or plain, crossed
  EXPECT_GT(bounded.cut, 0);                         // the bound did act
  EXPECT_LT(st.anderson_rejections, st.iterations);  // and Anderson still extrapolated before it did

  // Without contact the same strategy with Anderson reaches the unconstrained equilibrium, faster
  // than without it (the check costs nothing when the bound never cuts).
  FloorBoundedStep unbounded(model, -std::numeric_limits<double>::infinity());
  State u = make_state(model);
  o.max_iterations = 5000;
  const FrameStats su = run_frame(model, u, unbounded, o);
  EXPECT_TRUE(su.converged);
  EXPECT_EQ(unbounded.cut, 0);
  // One bound per iteration: the extrapolated iterate's, or the plain step's when there is no
  // history yet; both only when the energy test rejects the extrapolation (the bound is the CCD of
  // the IPC step, the costliest part of its line search).
  EXPECT_EQ(unbounded.calls, su.iterations + su.anderson_rejections);
  EXPECT_LT(su.anderson_rejections, su.iterations / 2);
  EXPECT_LE((u.x - free_fall.x).cwiseAbs().maxCoeff(), 1e-7 * test::bbox_diagonal(free_fall.x));
  State plain = make_state(model);
  FloorBoundedStep unbounded_plain(model, -std::numeric_limits<double>::infinity());
  o.accelerator = Accelerator::None;
  EXPECT_LT(su.iterations, run_frame(model, plain, unbounded_plain, o).iterations);
}

// Plain PD that keeps its own copy of x and f during a frame, as a device strategy does
// (GlobalStep::resident): the loop must neither read nor need the state's vectors mid-frame. The
// state's x and force are poisoned at begin_frame to prove it.
class ResidentPdStep final : public GlobalStep {
 public:
  // claims_chebyshev: the strategy (wrongly) says it supports Chebyshev; the loop must still refuse.
  explicit ResidentPdStep(const Model& model, bool claims_chebyshev = false)
      : pd_(model), claims_chebyshev_(claims_chebyshev) {}
  const char* name() const override { return "resident step"; }
  bool supports(Accelerator a) const override { return a != Accelerator::Chebyshev || claims_chebyshev_; }
  bool in_place() const override { return true; }
  bool resident() const override { return true; }
  void begin_frame(State& s) override {
    own_ = s;
    s.x.setConstant(std::numeric_limits<double>::quiet_NaN());
    s.force.setConstant(std::numeric_limits<double>::quiet_NaN());
  }
  double evaluate(State&, FrameStats& st) override { return pd_.evaluate(own_, st); }
  void iterate(State&, FrameStats& st) override {
    own_.x_prev = own_.x;
    pd_.iterate(own_, st);
    own_.x += own_.step;
  }
  // The loop's host Anderson on the strategy's own vectors, from x_k and δ as the loop has them.
  bool resident_anderson(int window) override {
    own_.x = own_.x_prev;
    Eigen::Map<Eigen::VectorXd> x(own_.x.data(), own_.x.size());
    detail::anderson_update(own_.anderson, window, x, Eigen::Map<const Eigen::VectorXd>(own_.step.data(), x.size()));
    return own_.anderson.history > 0;
  }
  void resident_anderson_reject() override {
    Eigen::Map<Eigen::VectorXd>(own_.x.data(), own_.x.size()) = own_.anderson.x_pd;
    detail::anderson_reset(own_.anderson);
  }
  void resident_anderson_reset() override { detail::anderson_reset(own_.anderson); }
  double residual_norm(const State&) const override { return own_.force.norm(); }
  void end_frame(State& s, FrameStats&) override {
    s.x = own_.x;
    s.force = own_.force;
  }
  void solve_with_matrix(Eigen::MatrixXd& b) const override { pd_.solve_with_matrix(b); }

 private:
  PdStep pd_;
  bool claims_chebyshev_;
  State own_;
};

TEST(FrameLoop, ResidentStrategyMatchesTheHostLoopAndIsRefusedWhatNeedsHostVectors) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(test::loaded_desc(mesh));
  SolverOptions o;
  o.max_iterations = 5000;
  o.rel_tolerance = 1e-8;
  State plain = make_state(model);
  const FrameStats sp = step(model, plain, o);
  ASSERT_TRUE(sp.converged);
  // The same operations in the same order: the same iterates, bit for bit.
  auto expect_same_frame = [](const FrameStats& a, const State& sa, const FrameStats& b, const State& sb) {
    EXPECT_TRUE(a.converged);
    EXPECT_EQ(a.iterations, b.iterations);
    EXPECT_EQ(a.residual, b.residual);
    EXPECT_EQ(a.energy, b.energy);
    EXPECT_EQ(a.anderson_rejections, b.anderson_rejections);
    EXPECT_TRUE((sa.x.array() == sb.x.array()).all());
    EXPECT_TRUE((sa.force.array() == sb.force.array()).all());
  };
  State resident = make_state(model);
  ResidentPdStep rs(model);
  const FrameStats sr = run_frame(model, resident, rs, o);
  expect_same_frame(sr, resident, sp, plain);
  EXPECT_EQ(resident.frame, 1);
  // The round-off estimate is taken before the strategy takes the state's vectors.
  EXPECT_TRUE(std::isfinite(sr.roundoff_residual) && sr.roundoff_residual > 0);
  EXPECT_EQ(sr.roundoff_residual, sp.roundoff_residual);

  // Anderson through the resident calls: the loop's iterates, rejections included, bit for bit.
  SolverOptions anderson = o;
  anderson.anderson = true;
  State pa = make_state(model);
  const FrameStats spa = step(model, pa, anderson);
  State ra = make_state(model);
  const FrameStats sra = run_frame(model, ra, rs, anderson);
  expect_same_frame(sra, ra, spa, pa);
  EXPECT_LT(sra.iterations, sp.iterations);

  // Chebyshev and implicit Euler need the vectors on the host mid-frame: refused by name.
  auto expect_refused = [](const Model& m, GlobalStep& strategy, const SolverOptions& opt, const char* what) {
    State s = make_state(m);
    try {
      run_frame(m, s, strategy, opt);
      ADD_FAILURE() << "a resident strategy ran although " << what << " was expected";
    } catch (const SolverError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  SolverOptions chebyshev = o;
  chebyshev.accelerator = Accelerator::Chebyshev;
  expect_refused(model, rs, chebyshev, "resident step");
  ResidentPdStep claims(model, true);  // the loop refuses even when the strategy claims support
  expect_refused(model, claims, chebyshev, "Chebyshev acceleration and the line search need them on the host");
  ModelDesc d = test::loaded_desc(mesh);
  d.integrator = Integrator::ImplicitEuler;
  const Model dynamic = build_model(d);
  ResidentPdStep rd(dynamic);
  expect_refused(dynamic, rd, o, "implicit Euler");
}

// An idle frame: no loads, and the state already at equilibrium to round-off (a pulled body solved
// to its floor, then the same inputs again, as between the events of a surgery session). Its scale is
// round-off, so no relative tolerance can be met; it converges at once instead of stagnating.
// A box pulled by its end attachments, no loads, and Anderson options to the tolerance `rel`.
Model pulled_box() { return build_model(test::ends_attached_desc(test::jittered_box(4), 1e3, 1e7, 0.1, 5)); }
SolverOptions anderson_to(double rel) {
  SolverOptions o;
  o.max_iterations = 20000;
  o.rel_tolerance = rel;
  o.anderson = true;
  return o;
}

TEST(FrameLoop, IdleFrameWithoutLoadsConverges) {
  const Model model = pulled_box();
  State s = make_state(model);
  SolverOptions o = anderson_to(1e-16);  // below round-off: the first frame stops at its floor
  const FrameStats first = step(model, s, o);
  ASSERT_TRUE(first.stagnated);
  const Points settled = s.x;
  o.rel_tolerance = 1e-7;
  o.min_iterations = 1;
  const FrameStats idle = step(model, s, o);
  EXPECT_EQ(idle.load_scale, 0.0);
  EXPECT_LE(idle.initial_residual, 4.0 * idle.roundoff_residual);
  EXPECT_TRUE(idle.converged);
  EXPECT_FALSE(idle.stagnated);
  EXPECT_EQ(idle.iterations, 1);
  EXPECT_LE((s.x - settled).cwiseAbs().maxCoeff(), 1e-12 * test::bbox_diagonal(settled));
  test::report("idle frame: start residual / round-off estimate", idle.initial_residual / idle.roundoff_residual, 4.0);
}

// An idle frame after a frame that converged at the tolerance (not at round-off): it starts with the
// residual that frame left, far above round-off, and without loads its own scale would be that
// residual; it keeps the last frame's scale instead and converges at once, positions unchanged. A
// frame that does move (the attachments pulled further) iterates as before.
TEST(FrameLoop, IdleFrameAfterAConvergedFrameKeepsItsScale) {
  const Model model = pulled_box();
  State s = make_state(model);
  const SolverOptions o = anderson_to(1e-6);
  const FrameStats first = step(model, s, o);
  ASSERT_TRUE(first.converged);
  ASSERT_EQ(first.load_scale, 0.0);
  EXPECT_GT(s.converged_scale, 0.0);
  const Points settled = s.x;
  const FrameStats idle = step(model, s, o);
  EXPECT_GT(idle.initial_residual, 1e3 * idle.roundoff_residual);  // not the round-off floor's case
  EXPECT_TRUE(idle.converged);
  EXPECT_FALSE(idle.stagnated);
  EXPECT_EQ(idle.iterations, 0);
  EXPECT_EQ((s.x - settled).cwiseAbs().maxCoeff(), 0.0);
  // Pulled further: a new equilibrium, reached to the tolerance of its own scale.
  s.inputs.attachment_targets.col(0) *= 1.01;
  const FrameStats moved = step(model, s, o);
  EXPECT_TRUE(moved.converged);
  EXPECT_GE(moved.iterations, 1);
  EXPECT_LE(moved.residual, o.rel_tolerance * moved.initial_residual);
  EXPECT_GT((s.x - settled).cwiseAbs().maxCoeff(), 1e-6 * test::bbox_diagonal(settled));
}

TEST(FrameLoop, ConstantMatrixSolveIsTheModelsFactor) {
  const TetMesh mesh = test::jittered_box(4);
  const Model model = build_model(test::loaded_desc(mesh));
  PdStep pd(model);
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(model.num_nodes(), 3);
  const Eigen::MatrixXd rhs = b;
  pd.solve_with_matrix(b);
  const Eigen::MatrixXd residual = model.matrix() * b - rhs;
  EXPECT_LE(residual.norm(), 1e-10 * rhs.norm());
}

TEST(FrameLoop, UnsupportedAcceleratorIsRefusedByName) {
  const TetMesh mesh = test::jittered_box(3);
  const Model model = build_model(test::loaded_desc(mesh));
  State s = make_state(model);
  HalfBoundedStep half(model);
  SolverOptions o;
  o.accelerator = Accelerator::Anderson;
  try {
    run_frame(model, s, half, o);
    FAIL() << "accepted an accelerator the strategy does not support";
  } catch (const SolverError& e) {
    EXPECT_NE(std::string(e.what()).find("half-bounded step: test strategy"), std::string::npos) << e.what();
  }
}

// A tolerance below what double precision resolves (1e-16 relative) used to spin to max_iterations;
// the frame now stops at the round-off floor and says so. Anderson and Chebyshev alike; a reachable
// tolerance is not affected, and stagnation_window = 0 restores the old behaviour.
TEST(FrameLoop, UnreachableToleranceStopsAtTheRoundOffFloor) {
  const Model model = build_model(test::loaded_desc(test::jittered_box(6)));
  for (Accelerator a : {Accelerator::Anderson, Accelerator::Chebyshev}) {
    SCOPED_TRACE(a == Accelerator::Anderson ? "anderson" : "chebyshev");
    SolverOptions o;
    o.accelerator = a;
    o.max_iterations = 20000;
    o.rel_tolerance = 1e-16;
    State s = make_state(model);
    const FrameStats st = step(model, s, o);
    EXPECT_TRUE(st.stagnated);
    EXPECT_FALSE(st.converged);
    EXPECT_GT(st.roundoff_residual, 0.0);
    EXPECT_LE(st.residual, 4.0 * st.roundoff_residual);
    EXPECT_LT(st.iterations, 2000) << "stopped late";
    // Where it stopped is the equilibrium a reachable tolerance gives, to that tolerance.
    SolverOptions r = o;
    r.rel_tolerance = 1e-9;
    State t = make_state(model);
    const FrameStats rt = step(model, t, r);
    EXPECT_TRUE(rt.converged);
    EXPECT_FALSE(rt.stagnated);
    EXPECT_LE(
        (s.x - t.x).norm(),
        1e-6 * (model.rest_positions().colwise().maxCoeff() - model.rest_positions().colwise().minCoeff()).norm());
    // Without the window: the old behaviour, every iteration spent.
    SolverOptions spin = o;
    spin.stagnation_window = 0;
    spin.max_iterations = 3 * st.iterations;
    State u = make_state(model);
    const FrameStats su = step(model, u, spin);
    EXPECT_FALSE(su.stagnated);
    EXPECT_EQ(su.iterations, spin.max_iterations);
  }
}

}  // namespace
}  // namespace xpd
