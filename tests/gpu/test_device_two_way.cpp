// The device two-way projection (gpu/two_way.hpp) against the CPU projector, its reference: the
// device proximity search finds the CPU's pairs (up to pairs whose distance rounds across D) with
// the same distances; a free motion ends where the CPU's does, step for step; a projection with
// contacts satisfies the CPU's invariants and CCD audit at every step (tests/collision/
// two_way_audit.hpp) and ends intersection-free by exact predicates; two device runs are bitwise
// equal; embedded surfaces and scenes run through the device path. Every test but the first needs a
// device and skips with the reason without one; the first checks the error paths everywhere.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <xpd/collision/proximity.hpp>
#include <xpd/collision/two_way.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/gpu/device.hpp>
#include <xpd/gpu/two_way.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

#include "collision/exact_intersection.hpp"
#include "collision/two_way_audit.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

using json = nlohmann::json;
using test::Auditor;
using test::two_spheres;
using test::unit_inverse_masses;
using test::verbose;

#define XPD_REQUIRE_GPU()                                                            \
  if (gpu::cuda_devices().empty())                                                   \
  GTEST_SKIP() << (gpu::cuda_compiled() ? "no CUDA device or driver on this machine" \
                                        : "built without the CUDA backend (-DXPD_WITH_CUDA=ON)")

// The lattice ball pressed by a plate (tests/scene/test_scene_two_way.cpp), on `device`.
json ball_scene(const std::filesystem::path& dir, const std::string& device) {
  const SurfaceMesh ball = test::icosphere(3, Vec3(0, 0, 0.1), 0.1);
  io::write_surface((dir / "ball.obj").string(), ball);
  return {{"mesh", {{"generator", "lattice"}, {"surface", (dir / "ball.obj").string()}, {"resolution", 6}}},
          {"selections", {{"base", {{"type", "half_space"}, {"normal", {0, 0, -1}}, {"offset", -0.03}}}}},
          {"materials", {{{"mu", 1e3}, {"density", 1000}}}},
          {"attachments", {{{"type", "fixed"}, {"selection", "base"}, {"stiffness", 1e5}}}},
          {"solver", {{"type", "quasistatic"}, {"frames", 10}, {"tolerance", 1e-6}}},
          {"two_way",
           {{"device", device},
            {"obstacles",
             {{{"type", "box"},
               {"center", {0, 0, 0.25}},
               {"half_extents", {0.2, 0.2, 0.04}},
               {"keyframes", {{{"frame", 0}}, {{"frame", 10}, {"translation", {0, 0, -0.06}}}}}}}}}}};
}

TEST(DeviceTwoWay, RefusesWhatItDoesNotRun) {
  const test::Bodies s = two_spheres(1, Vec3(3, 0, 0));
  const std::filesystem::path dir = test::scratch_dir("device_two_way_refuse");
  json j = ball_scene(dir, "cuda");
  j["two_way"]["device"] = "gpu";
  EXPECT_THROW((void)parse_scene(j, "ball.json", "."), SceneError);
  if (gpu::cuda_devices().empty()) {
    const TwoWayProjector p(s.x, s.faces, unique_edges(s.faces), unit_inverse_masses(s.x.rows()));
    EXPECT_THROW(gpu::DeviceTwoWay{p}, GpuError);
    // Without a backend or device the simulation refuses "cuda" at /two_way/device.
    try {
      SceneSimulation sim(parse_scene(ball_scene(dir, "cuda"), "ball.json", "."));
      ADD_FAILURE() << "accepted";
    } catch (const SceneError& e) {
      EXPECT_NE(std::string(e.what()).find("/two_way/device"), std::string::npos) << e.what();
    }
    return;
  }
  const TwoWayProjector p(s.x, s.faces, unique_edges(s.faces), unit_inverse_masses(s.x.rows()));
  gpu::DeviceTwoWay d(p);
  Points x;
  EXPECT_THROW(d.project(s.x.topRows(3), s.x, x), Error);
  Points bad = s.x;
  bad(0, 0) = NAN;
  EXPECT_THROW(d.project(s.x, bad, x), Error);
  EXPECT_THROW(d.proximity_search(s.x, 0.0), Error);
}

// Pairs equal but for pairs within 1e−12 D of D (their distance rounds differently), distances to
// 1e−9 D.
void expect_same_pairs(const ProximityPairs& cpu, const ProximityPairs& gpu, double D) {
  auto compare = [&](const std::vector<std::array<int, 2>>& a, const std::vector<double>& da,
                     const std::vector<std::array<int, 2>>& b, const std::vector<double>& db, const char* kind) {
    std::map<std::array<int, 2>, double> mb;
    for (std::size_t q = 0; q < b.size(); ++q) mb[b[q]] = db[q];
    int missing = 0, far = 0, matched = 0;
    for (std::size_t q = 0; q < a.size(); ++q) {
      const auto it = mb.find(a[q]);
      if (it == mb.end()) {
        missing += da[q] < D * (1 - 1e-12);
        continue;
      }
      ++matched;
      far += std::abs(it->second - da[q]) > 1e-9 * D;
      mb.erase(it);
    }
    int extra = 0;
    for (const auto& [pair, d] : mb) extra += d < D * (1 - 1e-12);
    EXPECT_EQ(missing, 0) << kind << ": CPU pairs the device did not find";
    EXPECT_EQ(extra, 0) << kind << ": device pairs the CPU did not find";
    EXPECT_EQ(far, 0) << kind << ": distances that differ";
    EXPECT_GT(matched, 0) << kind;
  };
  compare(cpu.vertex_triangle, cpu.vertex_triangle_distance, gpu.vertex_triangle, gpu.vertex_triangle_distance, "VT");
  compare(cpu.edge_edge, cpu.edge_edge_distance, gpu.edge_edge, gpu.edge_edge_distance, "EE");
  // Sorted like the CPU's.
  EXPECT_TRUE(std::is_sorted(gpu.vertex_triangle.begin(), gpu.vertex_triangle.end()));
  EXPECT_TRUE(std::is_sorted(gpu.edge_edge.begin(), gpu.edge_edge.end()));
}

TEST(DeviceTwoWay, ProximitySearchEqualsTheCpuSearch) {
  XPD_REQUIRE_GPU();
  {  // two spheres 0.05 apart, at several D
    const test::Bodies s = two_spheres(3, Vec3(2.05, 0, 0));
    const TwoWayProjector p(s.x, s.faces, Edges(0, 2), unit_inverse_masses(s.x.rows()));
    gpu::DeviceTwoWay d(p);
    for (const double D : {0.06, 0.2, 0.5}) {
      SCOPED_TRACE(D);
      expect_same_pairs(proximity_search(s.x, p.faces(), p.contact_edges(), D), d.proximity_search(s.x, D), D);
    }
  }
  // Simulation frames of the scalable-CCD benchmark at D = 1e−3 × the bounding-box diagonal.
  for (const char* file : {"cloth-funnel/frames/227.ply", "cloth-ball/frames/cloth_ball92.ply.gz"}) {
    SCOPED_TRACE(file);
    const SurfaceMesh m = io::read_surface(test::data_path(std::string("scalable-ccd-sample/") + file));
    const double D = 1e-3 * (m.nodes.colwise().maxCoeff() - m.nodes.colwise().minCoeff()).norm();
    TwoWayOptions o;
    o.delta = D / 4;
    const TwoWayProjector p(m.nodes, m.triangles, Edges(0, 2), unit_inverse_masses(m.nodes.rows()), o);
    gpu::DeviceTwoWay d(p);
    Timer tc;
    const ProximityPairs cpu = proximity_search(m.nodes, p.faces(), p.contact_edges(), D);
    const double cpu_ms = tc.elapsed_ms();
    (void)d.proximity_search(m.nodes, D);  // warm-up (allocations)
    Timer tg;
    const ProximityPairs gpu = d.proximity_search(m.nodes, D);
    const double gpu_ms = tg.elapsed_ms();
    expect_same_pairs(cpu, gpu, D);
    if (verbose())
      std::printf("  %s: %zu VT + %zu EE pairs; CPU %.1f ms, device %.2f ms\n", file, gpu.vertex_triangle.size(),
                  gpu.edge_edge.size(), cpu_ms, gpu_ms);
  }
}

// A primitive far larger than the grid's cells (a kinematic plate of two triangles 60 × 60 under a
// sphere of edges ~0.3) is kept out of the grid and scanned by every query: the search still equals
// the CPU's, and a sphere dropped onto the plate stops above it, every step audited.
TEST(DeviceTwoWay, LargeObstacleTrianglesAreFoundAndStopABody) {
  XPD_REQUIRE_GPU();
  const test::SphereOverPlate s = test::sphere_over_plate(30);
  const Points& x = s.x;
  const Triangles& faces = s.faces;
  const int n0 = s.n0;
  const Points plate = x.bottomRows(4);
  const TwoWayProjector p(x, faces, s.sphere_edges, s.inverse_mass);
  gpu::DeviceTwoWay d(p);
  const double D = 0.5;  // larger than the sphere's edges: pairs of both kinds with the plate
  Points low = x;
  low.topRows(n0).col(2).array() -= x.topRows(n0).col(2).minCoeff() - 0.5 * D;  // lowest vertex at D/2
  expect_same_pairs(proximity_search(low, p.faces(), p.contact_edges(), D), d.proximity_search(low, D), D);
  Points y = x;
  y.topRows(n0).col(2).array() -= 0.6;  // would sink 0.5 below the plate
  ASSERT_GT(test::count_intersections(y, faces), 0);
  Auditor audit{p};
  Points out;
  const TwoWayStats st = d.project(x, y, out, std::ref(audit));
  EXPECT_EQ(test::count_intersections(out, faces), 0);
  test::expect_clean_audit(audit, st);
  EXPECT_TRUE(st.converged) << st.max_r;
  EXPECT_EQ((out.bottomRows(4) - plate).cwiseAbs().maxCoeff(), 0.0);
  EXPECT_GT(out.topRows(n0).col(2).minCoeff(), 0.0);
}

// No pair within reach: the forward step alone, the same bounds on both: the same steps and result.
TEST(DeviceTwoWay, FreeMotionEqualsTheCpu) {
  XPD_REQUIRE_GPU();
  const test::Bodies s = two_spheres(2, Vec3(5, 0, 0));
  Points y = s.x;
  y.col(1).array() += 0.7;
  y.col(0).array() += 0.1 * s.x.col(2).array();  // a shear: per-vertex step lengths differ
  const TwoWayProjector p(s.x, s.faces, unique_edges(s.faces), unit_inverse_masses(s.x.rows()));
  gpu::DeviceTwoWay d(p);
  Points xc, xg;
  const TwoWayStats c = p.project(s.x, y, xc), g = d.project(s.x, y, xg);
  EXPECT_EQ(g.steps, c.steps);
  EXPECT_EQ(g.searches, c.searches);
  EXPECT_TRUE(g.converged);
  EXPECT_LT((xg - xc).cwiseAbs().maxCoeff(), 1e-12);
  EXPECT_LT((xg - y).cwiseAbs().maxCoeff(), 1e-12);
}

// Head-on spheres driven 0.8 into each other: for the three forward rules and both constraint
// kinds, every step passes the invariants and the CCD audit, the result is intersection-free, and
// a second run is bitwise equal.
TEST(DeviceTwoWay, HeadOnSpheresEndIntersectionFreeAlongASafePath) {
  XPD_REQUIRE_GPU();
  const test::Bodies s = two_spheres(2, Vec3(2.2, 0.05, 0));
  const Eigen::Index n = s.x.rows(), half = n / 2;
  Points y = s.x;
  for (Eigen::Index i = 0; i < n; ++i)
    y.row(i) += (i < half ? Eigen::RowVector3d(0.4, 0.02, 0.0) : Eigen::RowVector3d(-0.4, -0.02, 0.01));
  ASSERT_GT(test::count_intersections(y, s.faces), 0);
  for (const TwoWayForward forward : {TwoWayForward::Planes, TwoWayForward::Zones, TwoWayForward::Vertex})
    for (const TwoWayConstraint kind : {TwoWayConstraint::Volume, TwoWayConstraint::Gap}) {
      const char* name = forward == TwoWayForward::Planes  ? "planes"
                         : forward == TwoWayForward::Zones ? "zones"
                                                           : "vertex";
      SCOPED_TRACE(std::string(name) + (kind == TwoWayConstraint::Volume ? " volume" : " gap"));
      TwoWayOptions o;
      o.constraint = kind;
      o.forward = forward;
      const TwoWayProjector p(s.x, s.faces, unique_edges(s.faces), unit_inverse_masses(n), o);
      gpu::DeviceTwoWay d(p);
      Auditor audit{p};
      Points x, x2, xc;
      const TwoWayStats st = d.project(s.x, y, x, std::ref(audit));
      std::string first;
      EXPECT_EQ(test::count_intersections(x, s.faces, &first), 0) << first;
      test::expect_clean_audit(audit, st);
      EXPECT_TRUE(st.converged) << "max r " << st.max_r << " after " << st.steps << " steps";
      EXPECT_GT(st.max_active, 0u);
      EXPECT_GT(st.min_distance, 0.0);
      EXPECT_GT(st.max_displacement, 0.1);
      const TwoWayStats again = d.project(s.x, y, x2);  // without the observer
      EXPECT_EQ(again.steps, st.steps);
      EXPECT_TRUE(x2 == x) << "not bitwise repeatable";
      const TwoWayStats cpu = p.project(s.x, y, xc);
      EXPECT_TRUE(cpu.converged);
      if (verbose())
        std::printf(
            "  %s %s: device %d steps (%.1f ms, max active %zu, min distance %.3g), CPU %d steps (%.1f ms), "
            "max |x_dev - x_cpu| %.3g\n",
            name, kind == TwoWayConstraint::Volume ? "volume" : "gap", st.steps, st.ms_total, st.max_active,
            st.min_distance, cpu.steps, cpu.ms_total, (x - xc).rowwise().norm().maxCoeff());
    }
}

// An embedded surface through the scene: the lattice ball under the plate, every frame
// intersection-free (exact test) and converged, as on the CPU.
TEST(DeviceTwoWay, EmbeddedSceneStaysIntersectionFree) {
  XPD_REQUIRE_GPU();
  const std::filesystem::path dir = test::scratch_dir("device_two_way_embedded");
  SceneSimulation sim(parse_scene(ball_scene(dir, "cuda"), "ball.json", "."));
  const SurfaceMesh ball = test::icosphere(3, Vec3(0, 0, 0.1), 0.1);
  const Triangles& plate = sim.two_way_obstacle_faces();
  const auto nb = static_cast<int>(ball.nodes.rows());
  Triangles faces(ball.triangles.rows() + plate.rows(), 3);
  faces << ball.triangles, plate.array() + nb;
  for (int frame = 1; frame <= 10; ++frame) {
    SCOPED_TRACE(frame);
    sim.advance(frame);
    const Points& p = sim.two_way_obstacle_positions();
    Points all(nb + p.rows(), 3);
    all << sim.embedded_surface()->nodes, p;
    std::string first;
    ASSERT_EQ(test::count_intersections(all, faces, &first), 0) << first;
    EXPECT_TRUE(sim.two_way_stats()->projection.converged) << sim.two_way_stats()->projection.max_r;
    EXPECT_LT(sim.embedded_surface()->nodes.col(2).maxCoeff(), p.col(2).minCoeff());
  }
  EXPECT_LT(sim.embedded_surface()->nodes.col(2).maxCoeff(), 0.16);
}

// The shipped mat (scenes/mat_twist.json, 3,200 nodes) for its first frames on the device: every
// frame intersection-free by the exact count and converged.
TEST(DeviceTwoWay, MatTwistFramesAreIntersectionFree) {
  XPD_REQUIRE_GPU();
  // The source tree: XPD_SOURCE_DIR from the environment when set (binaries built on one machine
  // and run on another, scripts/gpu-check), else the build's; the mesh from the data folder.
  const char* env = std::getenv("XPD_SOURCE_DIR");
  json j = test::read_json_with_comments(std::string(env && *env ? env : XPD_SOURCE_DIR) + "/scenes/mat_twist.json");
  ASSERT_TRUE(j.contains("two_way"));
  j["mesh"]["file"] = test::data_path("ipc-tetmeshes/mat40x40.msh");
  j["two_way"]["device"] = "cuda";
  SceneSimulation sim(parse_scene(j, "mat_twist.json", "."));
  const Triangles& faces = sim.two_way()->faces();
  const int frames = 30;
  int steps = 0;
  for (int frame = 1; frame <= frames; ++frame) {
    SCOPED_TRACE(frame);
    sim.advance(frame);
    ASSERT_EQ(test::count_intersections_broad_phase(sim.positions(), faces), 0);
    EXPECT_TRUE(sim.two_way_stats()->projection.converged) << sim.two_way_stats()->projection.max_r;
    steps += sim.two_way_stats()->projection.steps;
  }
  if (verbose())
    std::printf("  mat_twist frames 1-%d on the device: %.1f steps per frame\n", frames, double(steps) / frames);
}

}  // namespace
}  // namespace xpd
