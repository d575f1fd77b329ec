// DESIGN.md: "a step never allocates". After a warm-up step (which sizes the scratch buffers and
// CHOLMOD's workspaces), a PD step makes no heap allocation on the calling thread.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <numeric>
#include <xpd/collision/detector.hpp>
#include <xpd/collision/proxies.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/collision_solver.hpp>
#include <xpd/solver/pd_solver.hpp>

#include "alloc/malloc_counter.hpp"
#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {

long allocations_of_second_step(const ModelDesc& d, SolverOptions o) {
  const Model model = build_model(d);
  State s = make_state(model);
  step(model, s, o);  // warm-up
  s.inputs.gravity *= 1.1;
  test::CountAllocations count;
  step(model, s, o);
  return count.count();
}

}  // namespace

TEST(NoAllocation, CounterSeesAllocations) {
  test::CountAllocations count;
  std::vector<double>* v = new std::vector<double>(100);
  Eigen::MatrixXd m(10, 10);
  delete v;
  EXPECT_GE(count.count(), 3);
  m.setZero();
}

TEST(NoAllocation, PdStepAllocatesNothing) {
  const ModelDesc base = test::loaded_desc(test::jittered_box(5), 50.0);
  SolverOptions o;
  o.max_iterations = 20;
  o.rel_tolerance = 0.0;
  EXPECT_EQ(allocations_of_second_step(base, o), 0) << "plain";
  o.anderson = true;
  EXPECT_EQ(allocations_of_second_step(base, o), 0) << "Anderson";
  o.anderson = false;
  o.accelerator = Accelerator::Chebyshev;
  EXPECT_EQ(allocations_of_second_step(base, o), 0) << "Chebyshev";
  o.accelerator = Accelerator::Anderson;
  for (VolumeMatrix m : {VolumeMatrix::Coupled, VolumeMatrix::Isotropic}) {
    ModelDesc d = base;
    d.lambda = {2e3};
    d.volume_matrix = m;
    EXPECT_EQ(allocations_of_second_step(d, o), 0) << (m == VolumeMatrix::Coupled ? "coupled" : "isotropic");
  }
  ModelDesc ie = base;
  ie.integrator = Integrator::ImplicitEuler;
  EXPECT_EQ(allocations_of_second_step(ie, o), 0) << "implicit Euler";
}

// A slab pressed by a sphere (tests/solver/test_collision_solver.cpp's case), in the model/state
// form: one constant CollisionModel serves two CollisionStates (each with its detector and its PD
// State, the second pressed deeper). After a warm-up frame of each, collision frames with contacts
// allocate nothing either. OpenBLAS's threaded dpotrf and
// dsymm allocate their own job descriptors on every call; that is the BLAS's, not xpd's, so the
// test runs OpenBLAS single-threaded when it is the BLAS in use.
TEST(NoAllocation, CollisionStepAllocatesNothing) {
  if (auto* set_threads = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_threads(1);
  const TetMesh mesh = make_box(9, 9, 5, Vec3::Zero(), Vec3(1.0, 1.0, 0.5));
  ModelDesc d;
  d.mesh = mesh;
  d.mu = {1e4};
  test::attach_min_face(d, 2, 1e7);
  const Model model = build_model(d);
  std::vector<int> top;
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
    if (mesh.nodes(i, 2) > 0.5 - 1e-9) top.push_back(static_cast<int>(i));
  const ProxySet proxies = proxies_from_nodes(mesh, top);
  std::vector<int> region(static_cast<size_t>(proxies.size()));
  std::iota(region.begin(), region.end(), 0);
  const std::vector<Obstacle> obstacles = {Obstacle{Sphere{Vec3(0.5, 0.5, 0.85), 0.4}, {}}};
  for (SchurSolveMethod method : {SchurSolveMethod::DenseRefactor, SchurSolveMethod::Woodbury})
    for (int inner : {1, 3}) {
      SCOPED_TRACE(testing::Message() << (method == SchurSolveMethod::Woodbury ? "Woodbury" : "dense refactor")
                                      << ", J = " << inner);
      const std::vector<Obstacle> deeper = {Obstacle{Sphere{Vec3(0.5, 0.5, 0.8), 0.4}, {}}};
      CollisionDetector detector_a(mesh, proxies, region, obstacles);
      CollisionDetector detector_b(mesh, proxies, region, deeper);
      CollisionOptions co;
      co.stiffness = 1e5;
      co.schur_solve = method;
      co.inner_iterations = inner;
      const CollisionModel cmodel(model, proxies, region, co);
      CollisionState ca(cmodel, detector_a), cb(cmodel, detector_b);
      State sa = make_state(model), sb = make_state(model);
      SolverOptions o;
      o.max_iterations = 15;
      o.rel_tolerance = 0.0;
      o.anderson = true;
      collision_step(cmodel, ca, sa, o, 1.0);  // warm-up: sizes the buffers for this contact set
      collision_step(cmodel, cb, sb, o, 1.0);
      long count = 0;
      CollisionFrameStats st_a, st_b;
      {
        test::CountAllocations counter;
        st_a = collision_step(cmodel, ca, sa, o, 1.0);
        st_b = collision_step(cmodel, cb, sb, o, 1.0);
        count = counter.count();
      }
      EXPECT_GT(st_a.active_proxies, 0);
      EXPECT_GT(st_b.active_proxies, st_a.active_proxies);
      EXPECT_EQ(count, 0);
    }
}
