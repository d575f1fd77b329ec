// One mass path: gravity and implicit-Euler inertia use the same lumped masses, each tet with the
// density of its own material. A bar of two materials (ρ = 500 and 4000 kg/m³) must fall freely as
// a rigid body (every node displaced by h²g after one step from rest) and its linear momentum,
// measured with masses computed here from the tets' volumes and densities, must change by exactly
// the impulse of the external forces.
#include <gtest/gtest.h>

#include <xpd/scene/scene.hpp>
#include <xpd/scene/scene_simulation.hpp>

namespace xpd {
namespace {

using nlohmann::json;

// A 2 × 0.5 × 0.5 m bar, the half x < 1 light (500 kg/m³), the half x > 1 heavy (4000 kg/m³).
Scene two_material_bar(const json& loads) {
  json j = json::parse(R"({
    "mesh": {"generator": "box", "nodes": [9, 3, 3], "min": [0, 0, 0], "max": [2, 0.5, 0.5]},
    "selections": {
      "heavy": {"type": "half_space", "normal": [-1, 0, 0], "offset": -1.0},
      "tip": {"type": "half_space", "normal": [-1, 0, 0], "offset": -1.99}
    },
    "materials": [{"mu": 1e4, "density": 500}, {"region": "heavy", "mu": 1e4, "density": 4000}],
    "solver": {"type": "implicit_euler", "time_step": 0.01, "frames": 4, "max_iterations": 500,
               "tolerance": 1e-12}
  })");
  j["loads"] = loads;
  return parse_scene(j, "two_materials.json", "");
}

// Lumped masses from the mesh and the materials, independently of the library's mass path.
Eigen::VectorXd true_masses(const SceneSimulation& sim) {
  const TetMesh& mesh = sim.mesh();
  Eigen::VectorXd m = Eigen::VectorXd::Zero(mesh.nodes.rows());
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t) {
    const double rho = sim.scene().materials[static_cast<size_t>(sim.tet_material()[static_cast<size_t>(t)])].density;
    const auto x = [&](int k) -> Vec3 { return mesh.nodes.row(mesh.tets(t, k)).transpose(); };
    const double vol = std::abs(signed_volume(x(0), x(1), x(2), x(3)));
    for (int k = 0; k < 4; ++k) m(mesh.tets(t, k)) += rho * vol / 4.0;
  }
  return m;
}

TEST(TwoMaterials, BothDensitiesAreUsed) {
  SceneSimulation sim(two_material_bar(json::array()));
  int light = 0, heavy = 0;
  for (int mat : sim.tet_material()) (mat == 0 ? light : heavy) += 1;
  EXPECT_GT(light, 0);
  EXPECT_GT(heavy, 0);
  const Eigen::VectorXd m = true_masses(sim);
  EXPECT_LE((sim.model().masses() - m).cwiseAbs().maxCoeff(), 1e-12 * m.maxCoeff());
}

TEST(TwoMaterials, FreeFallIsRigid) {
  SceneSimulation sim(two_material_bar(json::parse(R"([{"type": "gravity", "acceleration": [0, 0, -9.81]}])")));
  const Points x0 = sim.positions();
  const FrameStats st = sim.advance(1);
  EXPECT_TRUE(st.converged);
  // One implicit Euler step from rest under uniform gravity: v = h g, x = x0 + h² g for every node
  // (a rigid translation has no elastic force). Wrong inertia in one material bends the bar.
  const double h = 0.01;
  const Vec3 expected(0, 0, -9.81 * h * h);
  double worst = 0;
  for (Eigen::Index i = 0; i < x0.rows(); ++i)
    worst = std::max(worst, (sim.positions().row(i) - x0.row(i) - expected.transpose()).norm());
  EXPECT_LE(worst, 1e-9 * expected.norm()) << "free fall is not rigid: worst node off by " << worst;
}

TEST(TwoMaterials, ImplicitEulerMomentumMatchesImpulse) {
  // A push on the tip during frames 1-2 (ramp scale 1, 1, then 0), no gravity: internal elastic
  // forces cancel, so Σ m_i v_i = h Σ_frames F_ext exactly, with the true masses.
  SceneSimulation sim(two_material_bar(json::parse(
      R"([{"type": "total_force", "selection": "tip", "force": [30, 10, -20], "ramp": {"scale": [1, 1, 0, 0]}}])")));
  const Eigen::VectorXd m = true_masses(sim);
  const double h = 0.01;
  Vec3 impulse = Vec3::Zero();
  for (int f = 1; f <= 4; ++f) {
    sim.advance(f);
    impulse += h * sim.state().inputs.nodal_forces.colwise().sum().transpose();
    const Vec3 p = (sim.state().velocity.array().colwise() * m.array()).colwise().sum().transpose();
    EXPECT_LE((p - impulse).norm(), 1e-8 * impulse.norm())
        << "frame " << f << ": momentum " << p.transpose() << " vs impulse " << impulse.transpose();
  }
  EXPECT_GT(impulse.norm(), 0.0);
}

}  // namespace
}  // namespace xpd
