// Parameter validation and the unattached-component guard.
#include <gtest/gtest.h>

#include <xpd/core/error.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/face_cut.hpp>

#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(SolverModel, RejectsBadParameters) {
  const ModelDesc base = test::loaded_desc(test::jittered_box(3));
  {
    ModelDesc d = base;
    d.mu[4] = 0.0;
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "mu must be positive"))
        << error_of([&] { build_model(d); });
  }
  {
    ModelDesc d = base;
    d.strain_limits.push_back({0, 10.0, 1.1, 1.5});
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "sigma_min < 1 < sigma_max"));
  }
  {
    ModelDesc d = base;
    d.strain_limits.push_back({0, -1.0, 0.9, 1.5});
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "stiffness must be positive"));
  }
  {
    ModelDesc d = base;
    d.integrator = Integrator::ImplicitEuler;
    d.time_step = 0.0;
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "time step h must be positive"));
  }
  {
    ModelDesc d = base;
    d.attachments[0].stiffness = 0.0;
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "attachment #0"));
  }
  {
    ModelDesc d = base;
    d.springs.push_back({BaryPoint::node(0), BaryPoint::node(10000), 1.0, 0.0});
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "out of range"));
  }
  {
    ModelDesc d = base;
    d.mesh.nodes.row(0).swap(d.mesh.nodes.row(1));  // inverts the tets using nodes 0 and 1
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "rest volume"));
  }
  {
    ModelDesc d = base;
    d.lambda.assign(d.mesh.tets.rows(), -5.0);
    EXPECT_TRUE(contains(error_of([&] { build_model(d); }), "lambda"));
  }
}

TEST(SolverModel, UnattachedComponentIsReportedBeforeFactorizing) {
  // Two disjoint boxes; only the first is attached.
  const TetMesh a = test::jittered_box(3);
  TetMesh m;
  m.nodes.resize(2 * a.nodes.rows(), 3);
  m.nodes << a.nodes, (a.nodes.rowwise() + Eigen::RowVector3d(5, 0, 0));
  m.tets.resize(2 * a.tets.rows(), 4);
  m.tets << a.tets, (a.tets.array() + static_cast<int>(a.nodes.rows())).matrix();
  ModelDesc d;
  d.mesh = m;
  d.mu = {100.0};
  for (int i = 0; i < 3; ++i) d.attachments.push_back({BaryPoint::node(i), 1e3, m.nodes.row(i).transpose()});
  const std::string msg = error_of([&] { build_model(d); });
  EXPECT_TRUE(contains(msg, "component #1 (27 nodes, e.g. node 27) has no attachment")) << msg;
  // The documented exception: regularize it.
  d.allow_unattached = true;
  const Model model = build_model(d);
  EXPECT_EQ(model.num_components(), 2);
  EXPECT_EQ(model.num_free_components(), 1);
  // Implicit Euler needs no attachment (mass makes K definite).
  d.allow_unattached = false;
  d.integrator = Integrator::ImplicitEuler;
  EXPECT_NO_THROW(build_model(d));
}

TEST(SolverModel, MatrixIsTheSumOfTermMatricesAndFactorIsShared) {
  const ModelDesc d = test::loaded_desc(test::jittered_box(4));
  const Model model = build_model(d);
  const Eigen::SparseMatrix<double>& K = model.matrix();
  EXPECT_EQ(K.rows(), model.num_nodes());
  EXPECT_LE((K - Eigen::SparseMatrix<double>(K.transpose())).norm(), 1e-12 * K.norm());
  // Translation is in the null space of the elastic part: K·1 = attachment stiffness only.
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(K.rows());
  EXPECT_NEAR((K * ones).sum(), 1e6 * static_cast<double>(d.attachments.size()), 1e-6 * K.norm());
}

// build_model's second form: the previous model's K changed by a topology event's modification
// (a cut half way through, a suture across it, an attachment released; implicit Euler, so the
// lumped masses' change enters too) equals the assembly of the new description; a node count that
// does not match, or a regularized model, is refused.
TEST(SolverModel, AModelChangedByAnEventEqualsItsAssembly) {
  const TetMesh box = test::jittered_box(5);
  ModelDesc d = test::loaded_desc(box);
  d.integrator = Integrator::ImplicitEuler;
  d.time_step = 0.01;
  d.mu.assign(static_cast<size_t>(box.tets.rows()), 0.0);
  for (size_t t = 0; t < d.mu.size(); ++t) d.mu[t] = 1e4 * (1.0 + 0.5 * static_cast<double>(t % 3));
  d.factorize = false;
  const Model before = build_model(d);
  FaceCutter cutter(box);
  auto faces = faces_across_plane(box, Vec3::UnitX(), 0.5, Vec3(0.0, 1.0, 0.01));
  faces.resize(faces.size() / 2);
  const CutEvent ev = cutter.cut(faces);
  ASSERT_FALSE(ev.copy_of.empty());
  ModelDesc after = d;
  after.mesh = cutter.mesh();
  FactorModification mod = cut_modification(ev, cutter.mesh(), d.mu);
  const PointSpring suture{BaryPoint::node(ev.nodes_before), BaryPoint::node(ev.copy_of.front()), 1e3, 0.0};
  after.springs.push_back(suture);
  mod.added.push_back(spring_column(suture, static_cast<int>(after.mesh.nodes.rows())));
  mod.removed.push_back(attachment_column(d.attachments.back().point, d.attachments.back().stiffness,
                                          static_cast<int>(after.mesh.nodes.rows())));
  after.attachments.pop_back();
  const Model changed = build_model(after, before, mod), assembled = build_model(after);
  const double err = (changed.matrix() - assembled.matrix()).norm() / assembled.matrix().norm();
  test::report("K changed by a cut, a suture and a release vs assembled", err, 1e-14);
  EXPECT_LT(err, 1e-14);
  EXPECT_EQ(changed.masses(), assembled.masses());
  // Without the lumped masses' share the matrices would differ: the cut moved no mass, but the
  // copies' masses are their tets' shares, taken from their twins.
  EXPECT_GT((before.masses().head(ev.nodes_before) - assembled.masses().head(ev.nodes_before)).norm(), 0.0);
  FactorModification short_of_nodes = mod;
  short_of_nodes.new_dofs -= 1;
  EXPECT_TRUE(contains(error_of([&] { (void)build_model(after, before, short_of_nodes); }), "new ones"));
  ModelDesc free = d;
  free.attachments.clear();
  free.integrator = Integrator::Quasistatic;
  free.allow_unattached = true;
  const Model regularized = build_model(free);
  EXPECT_TRUE(contains(error_of([&] { (void)build_model(free, regularized, FactorModification{}); }), "regularized"));
}

// Implicit Euler's share of a mass change, (after_i − before_i)/h² on the diagonal: appended to the
// event's own entries, only for nodes whose mass changed, a new node counted from zero.
TEST(SolverModel, TheMassChangeEntersTheDiagonalOverTheTimeStepSquared) {
  FactorModification mod;
  mod.new_dofs = 1;
  mod.change.emplace_back(0, 1, 5.0);
  const Eigen::VectorXd before = Eigen::Vector3d(1.0, 2.0, 3.0);
  Eigen::VectorXd after(4);
  after << 1.0, 2.5, 2.0, 0.75;
  const FactorModification m = with_mass_change(mod, before, after, 0.5);
  ASSERT_EQ(m.change.size(), 4u);
  EXPECT_EQ(m.new_dofs, 1);
  EXPECT_EQ(m.change[0].value(), 5.0);
  const std::vector<std::pair<int, double>> expected = {{1, 2.0}, {2, -4.0}, {3, 3.0}};
  for (size_t k = 0; k < expected.size(); ++k) {
    EXPECT_EQ(m.change[k + 1].row(), expected[k].first);
    EXPECT_EQ(m.change[k + 1].col(), expected[k].first);
    EXPECT_EQ(m.change[k + 1].value(), expected[k].second);
  }
  EXPECT_TRUE(contains(error_of([&] { (void)with_mass_change(mod, after, before, 0.5); }), "masses after"));
  EXPECT_TRUE(contains(error_of([&] { (void)with_mass_change(mod, before, after, 0.0); }), "time step"));
}
