// Chebyshev semi-iterative acceleration (Wang 2015) of the PD iteration, min_iterations, and the
// accelerator / thread settings of scenes.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <xpd/core/error.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "solver/beam_fixtures.hpp"
#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {

// A slender cantilever (20:1) sagging under its own weight: plain PD converges slowly (the
// bending modes are the slow ones), the case acceleration is for.
ModelDesc sagging_beam() {
  test::BeamSpec b;
  b.length = 5.0;
  b.side = 0.25;
  b.nx = 21;
  b.ny = b.nz = 3;
  b.youngs = 1e5;
  ModelDesc d = test::beam_desc(b);
  d.gravity = Vec3(0, 0, -9.81);
  return d;
}

SolverOptions beam_options(Accelerator a) {
  SolverOptions o;
  o.max_iterations = 20000;
  o.rel_tolerance = 1e-6;
  o.accelerator = a;
  return o;
}

}  // namespace

TEST(SolverPdChebyshev, ConvergesInFewerIterationsOnASlenderBeamWithMonotoneEnergy) {
  const Model model = build_model(sagging_beam());
  State plain_s = make_state(model), cheb_s = make_state(model), fixed_s = make_state(model);
  const FrameStats plain = step(model, plain_s, beam_options(Accelerator::None));
  const FrameStats cheb = step(model, cheb_s, beam_options(Accelerator::Chebyshev));
  SolverOptions fixed = beam_options(Accelerator::Chebyshev);
  fixed.chebyshev_rho = 0.99;
  const FrameStats fixed_rho = step(model, fixed_s, fixed);
  if (test::verbose())
    std::printf("  plain %d iterations, chebyshev (rho estimated %.5f) %d (%d rejected), rho 0.99: %d (%d rejected)\n",
                plain.iterations, cheb.chebyshev_rho, cheb.iterations, cheb.chebyshev_rejections, fixed_rho.iterations,
                fixed_rho.chebyshev_rejections);
  ASSERT_TRUE(plain.converged);
  ASSERT_TRUE(cheb.converged);
  ASSERT_TRUE(fixed_rho.converged);
  EXPECT_GT(cheb.chebyshev_rho, 0.0);
  EXPECT_LT(cheb.iterations, plain.iterations / 2);
  EXPECT_LT(fixed_rho.iterations, plain.iterations);
  // Same equilibrium.
  const double diag = test::bbox_diagonal(plain_s.x);
  EXPECT_LE((plain_s.x - cheb_s.x).rowwise().norm().maxCoeff(), 1e-4 * diag);
  EXPECT_LE((plain_s.x - fixed_s.x).rowwise().norm().maxCoeff(), 1e-4 * diag);

  // The energy after k accelerated iterations never increases with k (the safeguard replaces an
  // accelerated iterate that would raise it by the plain one).
  double prev = std::numeric_limits<double>::infinity();
  for (int k = 1; k <= 60; ++k) {
    State s = make_state(model);
    SolverOptions o = beam_options(Accelerator::Chebyshev);
    o.max_iterations = k;
    o.rel_tolerance = 0.0;
    const FrameStats st = step(model, s, o);
    EXPECT_LE(st.energy, prev + 1e-12 * std::abs(prev)) << "after " << k << " iterations";
    prev = st.energy;
  }
}

TEST(SolverPdChebyshev, OvershootingRhoIsCaughtByTheEnergySafeguard) {
  const Model model = build_model(sagging_beam());
  State s = make_state(model);
  SolverOptions o = beam_options(Accelerator::Chebyshev);
  o.chebyshev_rho = 0.99999;  // far too optimistic: the ω sequence overshoots
  o.max_iterations = 400;
  double prev = std::numeric_limits<double>::infinity();
  int rejections = 0;
  for (int k = 0; k < 10; ++k) {
    o.max_iterations = 40;
    o.rel_tolerance = 0.0;
    const FrameStats st = step(model, s, o);  // continues from the previous frame's x
    rejections += st.chebyshev_rejections;
    EXPECT_LE(st.energy, prev + 1e-12 * std::abs(prev));
    prev = st.energy;
  }
  EXPECT_GT(rejections, 0);
}

TEST(SolverPdChebyshev, BadOptionsThrow) {
  const Model model = build_model(sagging_beam());
  State s = make_state(model);
  SolverOptions o = beam_options(Accelerator::Chebyshev);
  o.chebyshev_rho = 1.0;
  EXPECT_THROW(step(model, s, o), SolverError);
  o.chebyshev_rho = 0.0;
  o.chebyshev_warmup = 1;  // the estimate needs two steps
  EXPECT_THROW(step(model, s, o), SolverError);
}

TEST(SolverPd, MinIterationsIsHonoured) {
  const Model model = build_model(test::loaded_desc(test::jittered_box(4), 30.0));
  State s = make_state(model);
  SolverOptions o;
  o.rel_tolerance = 1e-3;
  o.max_iterations = 1000;
  const FrameStats loose = step(model, s, o);
  ASSERT_TRUE(loose.converged);
  ASSERT_LT(loose.iterations, 40);
  for (Accelerator a : {Accelerator::None, Accelerator::Anderson, Accelerator::Chebyshev}) {
    State t = make_state(model);
    o.min_iterations = 40;
    o.accelerator = a;
    const FrameStats st = step(model, t, o);
    EXPECT_EQ(st.iterations, 40);
    EXPECT_TRUE(st.converged);
    // Also with the energy stopping test, and from an already converged state.
    o.energy_tolerance = 1e-2;
    EXPECT_EQ(step(model, t, o).iterations, 40);
    o.energy_tolerance = 0.0;
  }
  o.min_iterations = 50;
  o.max_iterations = 10;  // max_iterations wins
  State u = make_state(model);
  EXPECT_EQ(step(model, u, o).iterations, 10);
}

namespace {
Scene beam_scene(const std::string& accelerator, int threads, int min_iterations) {
  // A 2 m × 0.1 m × 0.1 m bar clamped at x = 0, sagging under gravity (clamp w = 1e3 · μ · h).
  const std::string json = R"({
    "mesh": { "generator": "box", "nodes": [21, 3, 3], "min": [0, 0, 0], "max": [2, 0.1, 0.1] },
    "selections": { "clamp": { "type": "half_space", "normal": [1, 0, 0], "offset": 0.001 } },
    "materials": [{ "youngs_modulus": 1e6, "poisson_ratio": 0.0, "density": 1000 }],
    "attachments": [{ "type": "fixed", "selection": "clamp", "stiffness": 5e7 }],
    "loads": [{ "type": "gravity", "acceleration": [0, 0, -9.81] }],
    "solver": { "type": "quasistatic", "frames": 2, "max_iterations": 5000, "tolerance": 1e-6 }
  })";
  nlohmann::json j = nlohmann::json::parse(json);
  j["solver"]["accelerator"] = accelerator;
  j["solver"]["threads"] = threads;
  j["solver"]["min_iterations"] = min_iterations;
  return parse_scene(j, "beam.json", ".");
}
}  // namespace

TEST(SolverSceneSettings, ChebyshevMinIterationsAndThreadsReachTheSolver) {
  std::vector<Points> results;
  int plain_iterations = 0;
  {
    SceneSimulation sim(beam_scene("none", 0, 1));
    EXPECT_EQ(sim.options().accelerator, Accelerator::None);
    plain_iterations = sim.advance(1).iterations;
  }
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    SceneSimulation sim(beam_scene("chebyshev", threads, 1));
    EXPECT_EQ(sim.options().accelerator, Accelerator::Chebyshev);
    const FrameStats st = sim.advance(1);
    EXPECT_EQ(st.threads, threads);
    EXPECT_TRUE(st.converged);
    EXPECT_LT(st.iterations, plain_iterations);
    sim.advance(2);
    results.push_back(sim.positions());
  }
  // The colouring and fixed-grain reductions make results independent of the thread count.
  EXPECT_EQ(0,
            std::memcmp(results[0].data(), results[1].data(), sizeof(double) * static_cast<size_t>(results[0].size())));
  SceneSimulation sim(beam_scene("anderson", 0, 4000));
  EXPECT_EQ(sim.options().accelerator, Accelerator::Anderson);
  EXPECT_EQ(sim.options().min_iterations, 4000);
  EXPECT_EQ(sim.advance(1).iterations, 4000);
}
