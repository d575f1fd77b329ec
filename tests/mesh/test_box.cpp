#include <gtest/gtest.h>

#include <xpd/core/error.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd {

TEST(Box, CountsAndOrientation) {
  TetMesh m = make_box(3, 4, 5, Vec3::Zero(), Vec3(2, 3, 4));
  EXPECT_EQ(m.nodes.rows(), 60);
  EXPECT_EQ(m.tets.rows(), 6 * 2 * 3 * 4);
  double total = 0;
  for (Eigen::Index e = 0; e < m.tets.rows(); ++e) {
    const double v = signed_volume(m.nodes.row(m.tets(e, 0)), m.nodes.row(m.tets(e, 1)), m.nodes.row(m.tets(e, 2)),
                                   m.nodes.row(m.tets(e, 3)));
    EXPECT_GT(v, 0) << "tet " << e;
    total += v;
  }
  EXPECT_NEAR(total, 24.0, 1e-12);
  const auto report = validate_tet_mesh(m, {}, "box");
  EXPECT_EQ(report.flipped_tets, 0);
}

TEST(Box, SpecMatchesBenchmarkFamily) {
  const TetMesh m = make_box_from_spec("box:8");
  EXPECT_EQ(m.nodes.rows(), 512);
  EXPECT_EQ(m.tets.rows(), 6 * 343);
  EXPECT_DOUBLE_EQ(m.nodes.col(0).maxCoeff(), 1.0);
  const TetMesh r = make_box_from_spec("box:5,3,2");
  EXPECT_EQ(r.nodes.rows(), 30);
  for (const char* bad : {"box:", "box:1", "box:4,4", "box:a", "box:4,,4", "box:2000", "ball:3"})
    EXPECT_THROW(make_box_from_spec(bad), Error) << bad;
}

}  // namespace xpd
