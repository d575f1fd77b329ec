#include <gtest/gtest.h>

#include <Eigen/Geometry>
#include <random>
#include <xpd/energy/polar.hpp>

using namespace xpd;

namespace {
Eigen::Matrix3d random_rotation(std::mt19937& rng) {
  std::normal_distribution<double> n;
  Eigen::Quaterniond q(n(rng), n(rng), n(rng), n(rng));
  q.normalize();
  return q.toRotationMatrix();
}
void expect_rotation(const Eigen::Matrix3d& R, double tol = 1e-12) {
  ASSERT_TRUE(R.allFinite());
  EXPECT_LE((R.transpose() * R - Eigen::Matrix3d::Identity()).norm(), tol);
  EXPECT_NEAR(R.determinant(), 1.0, tol);
}
}  // namespace

TEST(EnergyPolar, SignedSvdReconstructsWithRotations) {
  std::mt19937 rng(1);
  std::normal_distribution<double> n;
  for (int k = 0; k < 200; ++k) {
    Eigen::Matrix3d F;
    for (int i = 0; i < 9; ++i) F(i) = n(rng);
    const SignedSvd3 s = signed_svd(F);
    expect_rotation(s.U);
    expect_rotation(s.V);
    EXPECT_LE((s.U * s.sigma.asDiagonal() * s.V.transpose() - F).norm(), 1e-12 * F.norm());
    EXPECT_EQ(s.sigma(2) < 0, F.determinant() < 0);
    EXPECT_GE(s.sigma(0), s.sigma(1));
    EXPECT_GE(s.sigma(1), std::abs(s.sigma(2)));
  }
}

TEST(EnergyPolar, FastPolarMatchesSvd) {
  std::mt19937 rng(2);
  std::normal_distribution<double> n;
  std::uniform_real_distribution<double> u(0.05, 5.0);
  for (int k = 0; k < 2000; ++k) {
    // F = R diag(σ) Vᵀ covering near-rest, large stretch, strong compression, inversion.
    Eigen::Vector3d sig(u(rng), u(rng), u(rng));
    if (k % 3 == 0) sig = Eigen::Vector3d::Ones() + 1e-3 * Eigen::Vector3d(n(rng), n(rng), n(rng));
    if (k % 7 == 0) sig(2) = -sig(2);
    const Eigen::Matrix3d F = random_rotation(rng) * sig.asDiagonal() * random_rotation(rng).transpose();
    const Eigen::Matrix3d R = polar_rotation(F);
    expect_rotation(R);
    const SignedSvd3 s = signed_svd(F);
    EXPECT_LE((R - s.U * s.V.transpose()).norm(), 1e-10) << "k=" << k << " sigma=" << sig.transpose();
  }
}

TEST(EnergyPolar, InvertedAndDegenerateGiveRotations) {
  std::mt19937 rng(3);
  std::vector<Eigen::Matrix3d> cases;
  cases.push_back(Eigen::Matrix3d::Zero());
  cases.push_back(Eigen::Vector3d(1, 1, 0).asDiagonal());   // flat
  cases.push_back(Eigen::Vector3d(1, 0, 0).asDiagonal());   // collapsed to a line
  cases.push_back(Eigen::Vector3d(1, 1, -1).asDiagonal());  // reflection
  cases.push_back(-Eigen::Matrix3d::Identity());            // point inversion
  cases.push_back(random_rotation(rng) * Eigen::Vector3d(2, 0.5, -1e-9).asDiagonal());
  for (const auto& F : cases) {
    const Eigen::Matrix3d R = polar_rotation(F);
    expect_rotation(R);
    // R maximizes tr(Rᵀ F) over rotations: no random rotation does better.
    for (int k = 0; k < 50; ++k)
      EXPECT_GE((R.transpose() * F).trace(), (random_rotation(rng).transpose() * F).trace() - 1e-12);
  }
}
