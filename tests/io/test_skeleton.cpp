// libigl skeleton (.tgf) and matrix (.dmat) readers on the shared tutorial data and on broken input.
#include <gtest/gtest.h>

#include <cstring>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/skeleton.hpp>

#include "test_util.hpp"

namespace xpd::io {
namespace {

std::string data(const std::string& name) { return test::data_path("libigl-tutorial-data/" + name); }

TEST(SceneSkeleton, ArmTgfIsAChain) {
  const Skeleton s = read_tgf(data("arm.tgf"));
  ASSERT_EQ(s.joints.rows(), 5);
  ASSERT_EQ(s.bones.rows(), 4);
  EXPECT_TRUE(s.joints.row(0).transpose().isApprox(Vec3(-0.72962893, 0.011729617, -0.1327604)));
  EXPECT_TRUE(s.joints.row(4).transpose().isApprox(Vec3(0.73572894, -0.17523362, 0.090210152)));
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(s.bones(b, 0), b);
    EXPECT_EQ(s.bones(b, 1), b + 1);
  }
  // SOURCES.md: bone lengths 0.25 / 0.87 / 0.59 / 0.17.
  const double expected[4] = {0.25, 0.87, 0.59, 0.17};
  for (int b = 0; b < 4; ++b)
    EXPECT_NEAR((s.joints.row(s.bones(b, 1)) - s.joints.row(s.bones(b, 0))).norm(), expected[b], 0.01) << b;
}

TEST(SceneSkeleton, HandAndElephantTgf) {
  const Skeleton hand = read_tgf(data("hand.tgf"));
  EXPECT_EQ(hand.joints.rows(), 21);
  EXPECT_EQ(hand.bones.rows(), 20);
  EXPECT_GE(hand.bones.minCoeff(), 0);
  EXPECT_LT(hand.bones.maxCoeff(), 21);
  const Skeleton elephant = read_tgf(data("elephant.tgf"));
  EXPECT_EQ(elephant.joints.rows(), 25);
  EXPECT_EQ(elephant.bones.rows(), 24);
}

TEST(SceneSkeleton, AsciiDmat) {
  const Eigen::MatrixXd pose = read_dmat(data("hand-pose.dmat"));
  ASSERT_EQ(pose.rows(), 80);
  ASSERT_EQ(pose.cols(), 1);
  EXPECT_DOUBLE_EQ(pose(0, 0), 0.61618142029453848);
  // 20 unit quaternions, one per bone of hand.tgf.
  for (int b = 0; b < 20; ++b) EXPECT_NEAR(pose.block(4 * b, 0, 4, 1).norm(), 1.0, 1e-6) << b;
  const Eigen::MatrixXd w = read_dmat(data("arm-weights.dmat"));
  EXPECT_EQ(w.rows(), 8311);
  EXPECT_EQ(w.cols(), 4);
  EXPECT_DOUBLE_EQ(w(0, 0), 0.5761395659334769);  // column-major: first values fill column 0
  EXPECT_DOUBLE_EQ(w(1, 0), 0.5538895866673019);
}

TEST(SceneSkeleton, BinaryGzippedDmat) {
  const Eigen::MatrixXd w = read_dmat(data("elephant-weights.dmat.gz"));
  ASSERT_EQ(w.rows(), 6034);
  ASSERT_EQ(w.cols(), 24);
  EXPECT_TRUE(w.allFinite());
  // Independent check of the layout: the first stored double is (0, 0), the second (1, 0).
  const std::string bytes = read_file_bytes(data("elephant-weights.dmat.gz"));
  const std::size_t start = bytes.find('\n', bytes.find('\n') + 1) + 1;
  double first = 0, second = 0;
  std::memcpy(&first, bytes.data() + start, 8);
  std::memcpy(&second, bytes.data() + start + 8, 8);
  EXPECT_EQ(w(0, 0), first);
  EXPECT_EQ(w(1, 0), second);
  EXPECT_EQ(bytes.size() - start, std::size_t{6034} * 24 * 8);
}

TEST(SceneSkeleton, TgfErrorsNameTheLine) {
  const auto line_of = [](const std::string& text) -> std::size_t {
    try {
      (void)parse_tgf(text, "t.tgf");
    } catch (const IoError& e) {
      return e.line();
    }
    return 999;
  };
  EXPECT_EQ(line_of("1 0 0 0\n3 1 0 0\n#\n"), 2u);               // out of sequence
  EXPECT_EQ(line_of("1 0 0 0\n2 1 0 0\n#\n1 2\n2 3\n#\n"), 5u);  // joint 3 missing
  EXPECT_EQ(line_of("1 0 0 0\n2 1 x 0\n#\n"), 2u);               // bad coordinate
  EXPECT_EQ(line_of("1 0 0 0\n2 1 0 0\n#\n1\n"), 4u);            // short bone line
  EXPECT_EQ(line_of("1 0 0 0\n2 1 0 0\n"), 0u);                  // no '#'
  EXPECT_EQ(line_of(""), 0u);                                    // empty
  EXPECT_THROW((void)read_tgf(data("no-such.tgf")), IoError);
  // Bone section without a closing '#' and extra columns are fine.
  const Skeleton s = parse_tgf("1 0 0 0 9 9\n2 1 0 0\n#\n1 2 1 0 0\n", "t.tgf");
  EXPECT_EQ(s.bones.rows(), 1);
}

TEST(SceneSkeleton, DmatErrors) {
  EXPECT_THROW((void)parse_dmat("2 2\n1 2 3\n", "d"), IoError);   // too few
  EXPECT_THROW((void)parse_dmat("1 2\n1 2 3\n", "d"), IoError);   // too many
  EXPECT_THROW((void)parse_dmat("1 2\n1 x\n", "d"), IoError);     // not a number
  EXPECT_THROW((void)parse_dmat("-1 2\n", "d"), IoError);         // negative size
  EXPECT_THROW((void)parse_dmat("", "d"), IoError);               // empty
  EXPECT_THROW((void)parse_dmat("0 0\n1 2\nabc", "d"), IoError);  // truncated binary
  std::string binary = "0 0\n1 2\n";
  const double values[2] = {1.5, -2.0};
  binary.append(reinterpret_cast<const char*>(values), sizeof values);
  const Eigen::MatrixXd m = parse_dmat(binary, "d");
  ASSERT_EQ(m.rows(), 2);
  EXPECT_EQ(m(1, 0), -2.0);
  EXPECT_THROW((void)parse_dmat(binary + "x", "d"), IoError);  // trailing bytes
  try {
    (void)parse_dmat("2 2\n1 2\n3 x\n", "d.dmat");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_EQ(e.line(), 3u);
  }
}

}  // namespace
}  // namespace xpd::io
