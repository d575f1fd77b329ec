// The corotated hot path (four elements per batch, AVX2 or baseline build) against the generic
// per-element path (TetTerm::project / add_force_given / energy_given with polar_rotation), on
// meshes whose colours leave partial batches and with inverted, flat and collapsed elements (SVD
// fallback lanes next to Newton lanes).
#include <gtest/gtest.h>

#include <random>
#include <xpd/energy/corotated.hpp>
#include <xpd/energy/polar.hpp>
#include <xpd/solver/model.hpp>

#include "energy/tet_kernel.hpp"
#include "solver/pd_fixtures.hpp"

using namespace xpd;

namespace {

const CorotatedTerm& corotated_of(const Model& m) {
  for (const auto& t : m.terms())
    if (const auto* c = dynamic_cast<const CorotatedTerm*>(t.get())) return *c;
  throw std::runtime_error("no corotated term");
}

void expect_matches_generic(const Model& model, const Points& x) {
  const CorotatedTerm& term = corotated_of(model);
  const FrameInputs& in = model.initial_inputs();
  const size_t np = static_cast<size_t>(term.num_constraints()) * 9;
  std::vector<double> p_ref(np), p_fast(np);
  term.project(x, in, p_ref.data());  // generic loop, project_element = polar_rotation
  const double e_ref = term.energy_given(x, in, p_ref.data());
  Points f_ref = Points::Zero(x.rows(), 3);
  term.add_force_given(x, in, p_ref.data(), f_ref);

  Points f_fast = Points::Zero(x.rows(), 3);
  const double e_fast = term.project_add_force(x, in, f_fast, p_fast.data());
  ASSERT_TRUE(f_fast.allFinite());
  EXPECT_NEAR(e_fast, e_ref, 1e-12 * std::max(1.0, std::abs(e_ref)));
  double dp = 0.0;
  for (size_t i = 0; i < np; ++i) dp = std::max(dp, std::abs(p_fast[i] - p_ref[i]));
  EXPECT_LE(dp, 1e-12);
  const double scale = std::max(1.0, f_ref.cwiseAbs().maxCoeff());
  EXPECT_LE((f_fast - f_ref).cwiseAbs().maxCoeff(), 1e-12 * scale);
  // Every projection is a rotation.
  for (int k = 0; k < term.num_constraints(); ++k) {
    const Eigen::Map<const Mat3> R(p_fast.data() + 9 * k);
    EXPECT_LE((R.transpose() * R - Mat3::Identity()).norm(), 1e-10);
    EXPECT_NEAR(R.determinant(), 1.0, 1e-10);
  }
  // Deterministic: a second call is bitwise identical.
  Points f2 = Points::Zero(x.rows(), 3);
  EXPECT_EQ(e_fast, term.project_add_force(x, in, f2, nullptr));
  EXPECT_EQ(0, std::memcmp(f2.data(), f_fast.data(), sizeof(double) * static_cast<size_t>(f2.size())));
  // The baseline and AVX2 builds of the kernel round identically (no FMA).
  if (const auto avx2 = detail::corotated_range_variant(1)) {
    Points fb = Points::Zero(x.rows(), 3), fa = Points::Zero(x.rows(), 3);
    std::vector<double> pb(np), pa(np);
    const double eb =
        detail::corotated_project_add_force(term.elements(), x, fb, pb.data(), detail::corotated_range_variant(0));
    const double ea = detail::corotated_project_add_force(term.elements(), x, fa, pa.data(), avx2);
    EXPECT_EQ(eb, ea);
    EXPECT_EQ(0, std::memcmp(fb.data(), fa.data(), sizeof(double) * static_cast<size_t>(fb.size())));
    EXPECT_EQ(0, std::memcmp(pb.data(), pa.data(), sizeof(double) * np));
  }
}

}  // namespace

TEST(EnergyCorotatedBatch, MatchesGenericPathOnSmoothDeformation) {
  for (int n : {3, 4, 7}) {  // small colours: partial batches of 1-3 elements
    SCOPED_TRACE(n);
    const Model model = build_model(test::loaded_desc(test::jittered_box(n), 30.0));
    Points x = model.rest_positions();
    for (Eigen::Index i = 0; i < x.rows(); ++i) {  // bend + twist
      const double z = x(i, 2);
      const double c = std::cos(0.4 * z), s = std::sin(0.4 * z);
      const double x0 = x(i, 0), y0 = x(i, 1);
      x(i, 0) = c * x0 - s * y0 + 0.05 * z * z;
      x(i, 1) = s * x0 + c * y0;
      x(i, 2) = 1.1 * z;
    }
    expect_matches_generic(model, x);
  }
}

TEST(EnergyCorotatedBatch, MatchesGenericPathWithInvertedAndDegenerateElements) {
  const Model model = build_model(test::loaded_desc(test::jittered_box(6), 30.0));
  std::mt19937 rng(5);
  std::normal_distribution<double> nd(0.0, 0.12);
  Points x = model.rest_positions();
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] += nd(rng);  // many inverted elements
  const Tets& tet = model.tets();
  for (int k = 1; k < 4; ++k) x.row(tet(3, k)) = x.row(tet(3, 0));                    // collapsed to a point
  x.row(tet(7, 0)) = (x.row(tet(7, 1)) + x.row(tet(7, 2)) + x.row(tet(7, 3))) / 3.0;  // flat
  int inverted = 0;
  const CorotatedTerm& term = corotated_of(model);
  for (int k = 0; k < term.num_constraints(); ++k)
    inverted += deformation_gradient(term.elements(), k, x).determinant() <= 0.0;
  EXPECT_GT(inverted, 10);
  expect_matches_generic(model, x);
}
