// Every surface file of the shared data folder loads with the counts listed in SOURCES.md.
// Quads and other polygons are fan-triangulated: a polygon with k sides gives k - 2 triangles.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <set>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

struct SurfaceFile {
  const char* path;  // relative to the shared data folder
  int vertices;
  int triangles;  // after fan triangulation
};

std::ostream& operator<<(std::ostream& os, const SurfaceFile& f) { return os << f.path; }

// Counts from shared/data/SOURCES.md. Polygon meshes: raptor_8kp (8,816 quads -> 17,632),
// man.obj (3,235 polygons of which 2,313 quads -> 5,548), ICT neutral face (26,384 polygons ->
// 52,220 triangles, as SOURCES.md states).
const SurfaceFile kSurfaceFiles[] = {
    {"diffpd-assets/armadillo_high_res.obj", 7502, 15000},
    {"diffpd-assets/armadillo_low_res.obj", 2013, 4022},
    {"diffpd-assets/bob.obj", 3087, 6174},
    {"diffpd-assets/bunny_watertight.obj.gz", 34834, 69664},
    {"diffpd-assets/bunny_watertight_simplified.obj", 1568, 3132},
    {"diffpd-assets/spot.obj", 816, 1188},
    {"fast-projective-skinning/armadillo/armadillo_LR3.off", 5189, 10374},
    {"fast-projective-skinning/cylinder/cylinder.off", 800, 1596},
    {"fast-projective-skinning/male/male.off.gz", 23259, 46514},
    {"fast-projective-skinning/male/male_LR20.off", 4651, 9298},
    {"fast-projective-skinning/tbone/tbone.off", 2461, 4918},
    {"ict-facekit/generic_neutral_mesh.obj.gz", 26719, 52220},
    {"libigl-tutorial-data/arm.obj", 8311, 16618},
    {"libigl-tutorial-data/armadillo.obj.gz", 43243, 86482},
    {"libigl-tutorial-data/bunny.off", 3485, 6966},
    {"libigl-tutorial-data/camelhead.off", 11381, 22704},
    {"libigl-tutorial-data/cheburashka.off", 6669, 13334},
    {"libigl-tutorial-data/decimated-knight.off", 502, 1000},
    {"libigl-tutorial-data/decimated-max.obj", 5272, 10540},
    {"libigl-tutorial-data/elephant.obj", 6034, 12064},
    {"libigl-tutorial-data/face.obj.gz", 25905, 51712},
    {"pbd-models/bunny_10k.obj.gz", 5002, 10000},
    {"scalable-ccd-sample/armadillo-rollers/frames/326.ply", 12135, 24242},
    {"scalable-ccd-sample/armadillo-rollers/frames/327.ply", 12135, 24242},
    {"scalable-ccd-sample/cloth-ball/frames/cloth_ball92.ply.gz", 46598, 92230},
    {"scalable-ccd-sample/cloth-ball/frames/cloth_ball93.ply.gz", 46598, 92230},
    {"scalable-ccd-sample/cloth-funnel/frames/227.ply", 9450, 18484},
    {"scalable-ccd-sample/cloth-funnel/frames/228.ply", 9450, 18484},
    {"scalable-ccd-sample/n-body-simulation/frames/balls16_18.ply.gz", 73960, 146480},
    {"scalable-ccd-sample/n-body-simulation/frames/balls16_19.ply.gz", 73960, 146480},
    {"scalable-ccd-sample/rod-twist/frames/3036.ply.gz", 39940, 79864},
    {"scalable-ccd-sample/rod-twist/frames/3037.ply.gz", 39940, 79864},
    {"sofa-meshes/cylinder_Surface.obj", 1528, 3052},
    {"sofa-meshes/liver-smooth.obj", 2194, 4384},
    {"sofa-meshes/liver2.obj", 1170, 2336},
    {"sofa-meshes/man.obj", 3115, 5548},
    {"sofa-meshes/raptor_8kp.obj.gz", 8818, 17632},
    {"sofa-meshes/truthCylinder-Deformed.obj", 1839, 3440},
    {"sofa-meshes/truthcylinder1-bent.obj", 13567, 27046},
    {"sofa-meshes/truthcylinder1.obj", 830, 1656},
    {"sumner-face-poses/face-poses.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/1.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/2.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/3.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/4.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/5.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/6.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/7.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/8.obj.gz", 29299, 57836},
    {"sumner-face-poses/face-poses/9.obj.gz", 29299, 57836},
};

class IoSurfaceData : public ::testing::TestWithParam<SurfaceFile> {};

TEST_P(IoSurfaceData, LoadsWithListedCounts) {
  const SurfaceFile& f = GetParam();
  const std::string path = test::data_path(f.path);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data missing: " << path;
  SurfaceMesh s;
  try {
    s = io::read_surface(path);  // validates: finite coordinates, indices in range, no repeats
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  EXPECT_EQ(s.nodes.rows(), f.vertices);
  EXPECT_EQ(s.triangles.rows(), f.triangles);
}

INSTANTIATE_TEST_SUITE_P(IoSurfaceShared, IoSurfaceData, ::testing::ValuesIn(kSurfaceFiles),
                         [](const ::testing::TestParamInfo<SurfaceFile>& info) {
                           std::string n = info.param.path;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Every .obj/.off/.ply/.stl under the data folder is in the table above (nothing new slips by).
TEST(IoSurfaceDataTable, CoversEverySurfaceFile) {
  namespace fs = std::filesystem;
  if (!fs::exists(test::data_dir())) GTEST_SKIP() << "shared data missing";
  std::set<std::string> listed;
  for (const SurfaceFile& f : kSurfaceFiles) listed.insert(f.path);
  for (const auto& entry : fs::recursive_directory_iterator(test::data_dir())) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = io::format_extension(entry.path().string());
    if (ext != "obj" && ext != "off" && ext != "ply" && ext != "stl") continue;
    const std::string rel = fs::relative(entry.path(), test::data_dir()).generic_string();
    EXPECT_TRUE(listed.count(rel)) << "surface file not covered by the count table: " << rel;
  }
}

}  // namespace
}  // namespace xpd
