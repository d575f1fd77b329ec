// Every shipped scene against figures stored before the library was reshaped (scene layer, one
// frame loop, collision model/state): per frame the iteration counts (outer, inner, plain), the
// active proxies and a fingerprint of the positions (the displacement's norm and component sums,
// and 32 sampled nodes written with 17 significant digits). Positions must agree to 1e-12 of the
// scene's size, iteration counts exactly.
//
// The stored figures live in tests/data/regression/<scene>.json. They were written by this test
// with XPD_REGRESSION_WRITE=1 from the code before the refactor (commit 0267ac1), and are never
// rewritten to make the test pass. One deliberate change of results is folded in: the refactor
// gives implicit-Euler inertia the same lumped masses as gravity (per-tet density · signed volume
// / 4, summed in tet order; before, inertia summed the first material's density · element volume
// / 4, which rounds differently in the last bit). armadillo_swing.json (then demo.json), the only
// implicit-Euler scene, was therefore written by 0267ac1 with its build_model() summing masses that
// way; with that one change its 60 frames agree bit for bit with the refactored code. Unpatched,
// they differ by one ulp at frame 1, which the swinging armadillo grows to 1.3e-12 of the scene
// size by frame 49.
//
// By default the test runs the first frames of each scene (the suite stays short);
// XPD_REGRESSION_FULL=1 runs every frame that has stored figures.
//
// The figures depend on how the BLAS that CHOLMOD's supernodal factor calls rounds: OpenBLAS picks
// its kernels by CPU and splits work over its threads, and either changes positions at 1e-9 and
// Anderson's iteration counts (the cantilever's frame 1 takes 121, 143, 147 or 174 iterations on
// different settings, all converged to 1e-6; the code before and after the refactor agree on each).
// So does Eigen's blocking of dense products, which follows the cache sizes of the CPU. The figures
// are therefore written and compared with OpenBLAS's AVX2 kernels on one thread and with fixed
// cache sizes for Eigen: ctest sets OPENBLAS_CORETYPE=Haswell (tests/CMakeLists.txt; run by hand,
// set it too), and the test sets OpenBLAS to one thread and Eigen's cache sizes itself
// (docs/validation.md §7). The same holds for the order of the triangular solves' sums: the test
// uses CHOLMOD's serial substitution, as the code that wrote the figures did.
//
// Self contacts (lips, elbow): the figures belong to the one-sided penalty springs to half-way
// targets of the code that wrote them. The default became two-sided springs with the pairing held
// for the frame (CollisionOptions::two_sided_self_contact, hold_self_contact_pairing), a deliberate
// change of results that these figures cannot check; the test runs those scenes with
// self_collision.two_sided = false, so the one-sided path stays guarded, and the two-sided one is
// checked by its own tests (SceneCollision.SelfContactFrames*, CollisionSolver.TwoSided*).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <xpd/config.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>
#include <xpd/solver/sparse_cholesky.hpp>

#include "test_util.hpp"

using namespace xpd;

namespace {

struct Case {
  const char* name;                     // regression file stem
  const char* scene;                    // path under the source tree
  int quick_frames;                     // frames run by default
  int full_frames;                      // frames with stored figures (0 = all of the scene)
  bool one_sided_self_contact = false;  // run with self_collision.two_sided = false (see above)
};

// Quick prefixes reach the interesting paths of each scene: the collision scenes run until their
// first contacts (sphere_slab from frame 1, lips from frame 5); the elbow's contacts start at
// frame 22, which only the full run reaches (XPD_REGRESSION_FULL=1).
const Case kCases[] = {
    {"demo", "scenes/armadillo_swing.json", 3, 60},
    {"twist", "scenes/twist.json", 3, 0},
    {"hand", "scenes/hand.json", 2, 0},
    {"cantilever", "scenes/cantilever.json", 2, 0},
    {"squash", "scenes/squash.json", 2, 0},
    {"sphere_slab", "scenes/sphere_slab.json", 2, 0},
    {"lips", "scenes/lips.json", 6, 0, true},
    // The elbow as it was when its figures were written: scenes/elbow.json became an anatomical
    // flexion (2026-11-26); the copy keeps the stored figures checked.
    {"elbow", "tests/data/regression/scenes/elbow_v1.json", 2, 0, true},
    {"cantilever_end_shear", "scenes/validation/cantilever_end_shear.json", 1, 1},
};

constexpr int kSamples = 32;

nlohmann::ordered_json fingerprint(const SceneSimulation& sim, int frame, const FrameStats& st) {
  const Points& x = sim.positions();
  const Points& X = sim.mesh().nodes;
  const Points u = x - X;
  nlohmann::ordered_json j;
  j["frame"] = frame;
  j["iterations"] = st.iterations;
  j["converged"] = st.converged;
  if (const auto& c = sim.collision_stats()) {
    j["inner_iterations"] = c->inner_iterations;
    j["plain_iterations"] = c->plain_iterations;
    j["active_proxies"] = c->active_proxies;
  }
  j["displacement_norm"] = u.norm();
  j["displacement_sum"] = {u.col(0).sum(), u.col(1).sum(), u.col(2).sum()};
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  const Eigen::Index n = x.rows();
  for (int k = 0; k < kSamples; ++k) {
    const Eigen::Index i = (n - 1) * k / (kSamples - 1);
    samples.push_back({i, x(i, 0), x(i, 1), x(i, 2)});
  }
  j["samples"] = samples;
  return j;
}

std::string regression_path(const Case& c) {
  return std::string(XPD_SOURCE_DIR) + "/tests/data/regression/" + c.name + ".json";
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0";
}

// OpenBLAS's kernel family in this process, lower case ("" when the BLAS is not OpenBLAS).
std::string openblas_core() {
  using CoreName = char* (*)();
  const auto f = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  std::string core = f ? std::string(f()) : std::string();
  for (char& ch : core) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return core;
}

// Sets OpenBLAS to one thread; returns its thread count afterwards (0 when the BLAS is not OpenBLAS).
int openblas_single_thread() {
  using SetThreads = void (*)(int);
  using NumThreads = int (*)();
  if (const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  const auto get = reinterpret_cast<NumThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get ? get() : 0;
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.scene);
  if (XPD_CHOLMOD_LGPL_ONLY)
    GTEST_SKIP() << "the stored figures belong to CHOLMOD's supernodal factor; this build factors simplicially "
                    "(XPD_CHOLMOD_LGPL_ONLY), which rounds differently";
  // Written or compared only under the BLAS settings the figures belong to.
  const std::string core = openblas_core();
  const int blas_threads = openblas_single_thread();
  ASSERT_TRUE(core == "haswell" && blas_threads == 1)
      << "the stored figures belong to OpenBLAS's Haswell kernels on 1 thread; this process uses '" << core << "' on "
      << blas_threads << " thread(s). Set OPENBLAS_CORETYPE=Haswell (ctest does).";
  // Eigen blocks its dense products (Anderson's normal equations among them) by the cache sizes it
  // reads from CPUID, and the blocking decides the order of the sums: the figures are written and
  // compared with these sizes, whatever the machine (its own sizes on a 2-core AMD EPYC (Zen 5) give
  // the cantilever 133 iterations instead of 147).
  Eigen::setCpuCacheSizes(32 * 1024, 256 * 1024, 8 * 1024 * 1024);
  // The figures were written with CHOLMOD's serial substitution; the tree-parallel one that factors
  // use by default sums in another order (equal to 4e-16, SolverCholesky.TreeParallelSolve*), which
  // moves the twist and the cantilever by 3e-10 and 5e-9 of their size through the iterations'
  // stopping rule. Compared under the arithmetic the figures belong to.
  SparseCholesky::set_default_parallel_solve(false);
  Scene scene = load_scene(std::string(XPD_SOURCE_DIR) + "/" + c.scene);
  if (c.one_sided_self_contact) {
    ASSERT_TRUE(scene.collision && scene.collision->self_collision) << "no self collision in " << c.scene;
    scene.collision->two_sided_self_contact = false;
  }
  SceneSimulation sim(std::move(scene));
  const int all = c.full_frames > 0 ? std::min(c.full_frames, sim.num_frames()) : sim.num_frames();
  const bool write = env_on("XPD_REGRESSION_WRITE");
  const int frames = write || env_on("XPD_REGRESSION_FULL") ? all : std::min(c.quick_frames, all);

  nlohmann::json stored;
  if (!write) {
    std::ifstream in(regression_path(c));
    ASSERT_TRUE(in.good()) << "no stored figures at " << regression_path(c);
    stored = nlohmann::json::parse(in);
    ASSERT_GE(static_cast<int>(stored["frames"].size()), frames);
  }
  // Scale of the positions: the rest bounding box diagonal.
  const Points& X = sim.mesh().nodes;
  const double scale = (X.colwise().maxCoeff() - X.colwise().minCoeff()).norm();
  const double tol = 1e-12 * scale;

  nlohmann::ordered_json out = {{"scene", c.scene}, {"frames", nlohmann::ordered_json::array()}};
  for (int f = 1; f <= frames; ++f) {
    const FrameStats st = sim.advance(f);
    const nlohmann::ordered_json now = fingerprint(sim, f, st);
    if (write) {
      out["frames"].push_back(now);
      continue;
    }
    SCOPED_TRACE("frame " + std::to_string(f));
    const nlohmann::json& ref = stored["frames"][static_cast<size_t>(f - 1)];
    ASSERT_EQ(ref["frame"].get<int>(), f);
    EXPECT_EQ(now["iterations"].get<int>(), ref["iterations"].get<int>());
    EXPECT_EQ(now["converged"].get<bool>(), ref["converged"].get<bool>());
    for (const char* key : {"inner_iterations", "plain_iterations", "active_proxies"}) {
      EXPECT_EQ(now.contains(key), ref.contains(key)) << key;
      if (now.contains(key) && ref.contains(key)) {
        EXPECT_EQ(now[key].get<int>(), ref[key].get<int>()) << key;
      }
    }
    const double n_ref = ref["displacement_norm"].get<double>();
    EXPECT_NEAR(now["displacement_norm"].get<double>(), n_ref, 1e-12 * std::max(n_ref, scale));
    const double nn = static_cast<double>(sim.positions().rows());
    for (int a = 0; a < 3; ++a)
      EXPECT_NEAR(now["displacement_sum"][a].get<double>(), ref["displacement_sum"][a].get<double>(), nn * tol);
    double worst = 0.0;
    for (int k = 0; k < kSamples; ++k) {
      const auto& s = ref["samples"][static_cast<size_t>(k)];
      const Eigen::Index i = s[0].get<Eigen::Index>();
      for (int a = 0; a < 3; ++a)
        worst = std::max(worst, std::abs(sim.positions()(i, a) - s[static_cast<size_t>(a + 1)].get<double>()));
    }
    EXPECT_LE(worst, tol) << "sampled nodes moved by " << worst << " (scale " << scale << ")";
    if (::testing::Test::HasFailure()) return;  // later frames only repeat the first difference
  }
  if (write) {
    std::ofstream o(regression_path(c));
    o << std::setprecision(17) << out.dump(1) << "\n";
    ASSERT_TRUE(o.good()) << regression_path(c);
  }
}

}  // namespace

class SceneRegression : public ::testing::TestWithParam<Case> {};

TEST_P(SceneRegression, SameResultsAsStoredFigures) { run_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(ShippedScenes, SceneRegression, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });
