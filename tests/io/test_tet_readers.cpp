// Tet mesh readers on every shared data file (counts from shared/data/SOURCES.md, an oracle
// independent of the readers), writer-free round trips through every format variant, and load time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/tet_formats.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/mesh/validate.hpp>

#include "io/tet_fixture_writers.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

struct SharedTetFile {
  const char* path;  // relative to the shared data folder
  int nodes;
  int tets;
  int boundary;  // -1: SOURCES.md lists no triangle count for the file
};

// Every tet mesh in shared/data, with the V / T / F columns of SOURCES.md.
const SharedTetFile kSharedTetFiles[] = {
    // ipc-tetmeshes: Gmsh 4.1 ASCII, tets only (no boundary triangles)
    {"ipc-tetmeshes/tet.msh", 4, 1, 0},
    {"ipc-tetmeshes/bar-6.msh", 8, 6, 0},
    {"ipc-tetmeshes/bar-186.msh", 86, 186, 0},
    {"ipc-tetmeshes/bar-651.msh", 292, 651, 0},
    {"ipc-tetmeshes/bar-2523.msh", 886, 2523, 0},
    {"ipc-tetmeshes/bar-14114.msh", 3842, 14114, 0},
    {"ipc-tetmeshes/torus.msh", 200, 491, 0},
    {"ipc-tetmeshes/rod.msh", 630, 1722, 0},
    {"ipc-tetmeshes/rod300x33.msh.gz", 13333, 50511, 0},
    {"ipc-tetmeshes/mat20x20.msh", 800, 2166, 0},
    {"ipc-tetmeshes/mat40x40.msh", 3200, 9126, 0},
    {"ipc-tetmeshes/mat100x100t40.msh.gz", 20000, 58806, 0},
    {"ipc-tetmeshes/plate1.msh", 3362, 9600, 0},
    {"ipc-tetmeshes/sphere1K.msh", 1760, 6851, 0},
    {"ipc-tetmeshes/sphere5K.msh.gz", 7034, 27792, 0},
    {"ipc-tetmeshes/cow_head.msh", 1328, 5029, 0},
    {"ipc-tetmeshes/bunny.msh", 4670, 19379, 0},
    {"ipc-tetmeshes/hammer.msh", 2705, 9683, 0},
    {"ipc-tetmeshes/32770_octocat.msh", 6133, 21426, 0},
    {"ipc-tetmeshes/dolphin5K.msh.gz", 8111, 36304, 0},
    {"ipc-tetmeshes/alien.msh.gz", 12531, 48643, 0},
    {"ipc-tetmeshes/monkey8K.msh.gz", 12448, 52864, 0},
    {"ipc-tetmeshes/Armadillo13K.msh.gz", 13230, 54985, 0},
    {"ipc-tetmeshes/hollowCat7.5K.msh.gz", 12827, 57636, 0},
    // polyfem-data: Gmsh 2.2 binary
    {"polyfem-data/dinosaur.msh.gz", 13270, 49973, -1},
    // libigl-tutorial-data: Medit
    {"libigl-tutorial-data/hand.mesh.gz", 7234, 29998, 9556},
    {"libigl-tutorial-data/bunny.mesh.gz", 5433, 34055, 6966},
    {"libigl-tutorial-data/octopus-low.mesh", 452, 1140, 898},
    // flip-free-tetwild: Medit (TetWild output)
    {"flip-free-tetwild/armadillo.mesh.gz", 18319, 74040, 21264},
    {"flip-free-tetwild/octopus-vol.mesh.gz", 12273, 45359, 16340},
    {"flip-free-tetwild/stuffedtoy.mesh.gz", 9279, 35808, 11736},
    {"flip-free-tetwild/monkey.mesh.gz", 21010, 86965, 22972},
    {"flip-free-tetwild/cow.mesh", 2304, 8103, 3318},
    {"flip-free-tetwild/fish.mesh", 1890, 6418, 2896},
    // TetGen (DiffPD 1-based, PBD 0-based), each opened by either file of the pair
    {"diffpd-assets/armadillo_10k.node", 14779, 54855, -1},
    {"diffpd-assets/armadillo_10k.ele.gz", 14779, 54855, -1},
    {"pbd-models/armadillo_4k.node", 1180, 3717, -1},
    {"pbd-models/armadillo_4k.ele", 1180, 3717, -1},
    // sofa-meshes: Gmsh v1 and ASCII VTU
    {"sofa-meshes/liver.msh", 181, 596, -1},
    {"sofa-meshes/liver2.msh", 507, 1493, 860},
    {"sofa-meshes/truthcylinder1.msh", 642, 2524, 706},
    {"sofa-meshes/raptorTetra_8418.vtu", 2996, 8418, -1},
    {"sofa-meshes/raptorTetra_12580.vtu", 4104, 12580, -1},
    {"sofa-meshes/raptorTetra_19409.vtu", 5992, 19409, -1},
    {"sofa-meshes/Armadillo_Tetra_4406.vtu", 1446, 4406, -1},
};

void PrintTo(const SharedTetFile& f, std::ostream* os) { *os << f.path; }

class IoSharedTetFile : public ::testing::TestWithParam<SharedTetFile> {};

TEST_P(IoSharedTetFile, LoadsAndValidatesWithSourceCounts) {
  const SharedTetFile& f = GetParam();
  const std::string path = test::data_path(f.path);
  TetMesh m;
  io::ReadOptions parse_only;
  parse_only.validate = false;
  ASSERT_NO_THROW(m = io::read_tet_mesh(path, parse_only)) << path;
  ValidationReport report;
  try {
    report = validate_tet_mesh(m, {}, path);
  } catch (const Error& e) {
    FAIL() << e.what();
  }
  // What validation changed, for the record (whole-file flips are the other orientation convention).
  if (report.flipped_tets > 0 || report.unreferenced_nodes > 0)
    std::printf("[ validate ] %s: %d tets flipped, %d unreferenced nodes\n", f.path, report.flipped_tets,
                report.unreferenced_nodes);
  EXPECT_EQ(m.nodes.rows(), f.nodes) << path;
  EXPECT_EQ(m.tets.rows(), f.tets) << path;
  if (f.boundary >= 0) {
    EXPECT_EQ(m.boundary.rows(), f.boundary) << path;
  }
  // After validation every tet is positively oriented.
  for (Eigen::Index e = 0; e < m.tets.rows(); ++e) {
    const double v = signed_volume(m.nodes.row(m.tets(e, 0)), m.nodes.row(m.tets(e, 1)), m.nodes.row(m.tets(e, 2)),
                                   m.nodes.row(m.tets(e, 3)));
    ASSERT_GT(v, 0) << path << " tet " << e;
  }
}

std::string file_test_name(const ::testing::TestParamInfo<SharedTetFile>& info) {
  std::string s = info.param.path;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(IoSharedData, IoSharedTetFile, ::testing::ValuesIn(kSharedTetFiles), file_test_name);

TEST(IoTetReaders, TetGenZeroAndOneBasedAgreeOnGeometry) {
  // The 1-based DiffPD file: first node is row 0.
  const TetMesh m = io::read_tet_mesh(test::data_path("diffpd-assets/armadillo_10k.node"));
  EXPECT_DOUBLE_EQ(m.nodes(0, 0), -52.191189999999999);
  EXPECT_EQ(m.tets.minCoeff(), 0);
  EXPECT_EQ(m.tets.maxCoeff(), m.nodes.rows() - 1);
  const TetMesh p = io::read_tet_mesh(test::data_path("pbd-models/armadillo_4k.ele"));
  EXPECT_DOUBLE_EQ(p.nodes(0, 0), -1.0329299999999999);
}

TEST(IoTetReaders, GmshV1KeepsPhysicalRegions) {
  const TetMesh m = io::read_tet_mesh(test::data_path("sofa-meshes/liver2.msh"));
  ASSERT_EQ(m.region.size(), static_cast<std::size_t>(m.tets.rows()));
}

// ---- round trips through the test serializers -----------------------------------------------------

TetMesh sample_mesh() {
  TetMesh m = make_box(3, 2, 2, Vec3(0.1, -0.2, 0.3), Vec3(1.7, 0.9, 1.1));
  // Some boundary triangles (any triangles serve the round trip) and region tags.
  m.boundary.resize(5, 3);
  for (int e = 0; e < 5; ++e) m.boundary.row(e) = m.tets.row(e).head<3>();
  m.region.resize(static_cast<std::size_t>(m.tets.rows()));
  for (std::size_t e = 0; e < m.region.size(); ++e) m.region[e] = static_cast<int>(e % 3);
  return m;
}

void expect_same(const TetMesh& a, const TetMesh& b, bool with_boundary, double tol = 0) {
  ASSERT_EQ(a.nodes.rows(), b.nodes.rows());
  ASSERT_EQ(a.tets.rows(), b.tets.rows());
  EXPECT_LE((a.nodes - b.nodes).cwiseAbs().maxCoeff(), tol);
  EXPECT_TRUE(a.tets == b.tets);
  if (with_boundary) {
    ASSERT_EQ(a.boundary.rows(), b.boundary.rows());
    EXPECT_TRUE(a.boundary == b.boundary);
  }
}

TEST(IoTetRoundTrip, GmshAllVersionsAndEncodings) {
  const TetMesh m = sample_mesh();
  expect_same(m, io::parse_msh(test::write_msh1(m), "v1.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh22(m, false), "v22a.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh22(m, true), "v22b.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh22(m, true, true), "v22b_swapped.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh41(m, false), "v41a.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh41(m, true), "v41b.msh"), true);
  expect_same(m, io::parse_msh(test::write_msh41(m, true, true), "v41b_swapped.msh"), true);
  // Gmsh 2.2 keeps the physical tag (first tag) as region; 4.1 the entity tag.
  const TetMesh r = io::parse_msh(test::write_msh22(m, false), "v22a.msh");
  EXPECT_EQ(r.region, std::vector<int>(static_cast<std::size_t>(m.tets.rows()), 3));
}

TEST(IoTetRoundTrip, MeditAndTetGen) {
  const TetMesh m = sample_mesh();
  const TetMesh a = io::parse_medit(test::write_medit(m), "a.mesh");
  expect_same(m, a, true);
  EXPECT_EQ(a.region, m.region);
  for (int base : {0, 1}) {
    const auto [node, ele] = test::write_tetgen(m, base);
    const TetMesh t = io::parse_tetgen(node, ele, "a.node", "a.ele");
    expect_same(m, t, false);
    EXPECT_EQ(t.region, m.region);
  }
}

TEST(IoTetRoundTrip, VtuAllEncodings) {
  const TetMesh m = sample_mesh();
  using test::VtuMode;
  for (VtuMode mode : {VtuMode::Ascii, VtuMode::Binary, VtuMode::BinaryZlib, VtuMode::AppendedRaw,
                       VtuMode::AppendedBase64, VtuMode::AppendedRawZlib})
    for (bool header64 : {false, true})
      for (bool big : {false, true})
        for (bool f32 : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "mode " << static_cast<int>(mode) << " header64 " << header64 << " big "
                                            << big << " float32 " << f32);
          const TetMesh r = io::parse_vtu(test::write_vtu(m, mode, header64, big, f32), "a.vtu");
          expect_same(m, r, true, f32 ? 1e-6 : 0);
        }
}

TEST(IoTetRoundTrip, ReadTetMeshFindsGzippedTetGenSibling) {
  const auto dir = test::scratch_dir("tetgen_sibling");
  const TetMesh m = sample_mesh();
  const auto [node, ele] = test::write_tetgen(m, 1);
  { std::ofstream(dir / "box.node") << node; }
  {
    // gzip the .ele with zlib's gz API.
    gzFile gz = gzopen((dir / "box.ele.gz").c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    gzwrite(gz, ele.data(), static_cast<unsigned>(ele.size()));
    gzclose(gz);
  }
  expect_same(m, io::read_tet_mesh((dir / "box.node").string()), false);
  expect_same(m, io::read_tet_mesh((dir / "box.ele.gz").string()), false);
  std::filesystem::remove(dir / "box.ele.gz");
  try {
    io::read_tet_mesh((dir / "box.node").string());
    FAIL() << "missing .ele accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("box.ele"), std::string::npos) << e.what();
  }
}

TEST(IoTetReaders, UnknownExtensionListsFormats) {
  try {
    io::read_tet_mesh("/nonexistent/model.stl");
    FAIL();
  } catch (const IoError& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("model.stl"), std::string::npos);
    for (const char* ext : {".msh", ".mesh", ".node", ".ele", ".vtu"}) EXPECT_NE(w.find(ext), std::string::npos) << w;
  }
}

// ---- speed --------------------------------------------------------------------------------------

TEST(IoTetReaders, LargestMeshLoadsWellUnderOneSecond) {
  const std::string path = test::data_path("flip-free-tetwild/monkey.mesh.gz");
  io::read_tet_mesh(path);  // warm the page cache
  const auto t0 = std::chrono::steady_clock::now();
  const TetMesh m = io::read_tet_mesh(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] monkey.mesh.gz (%d tets): read + validate %.3f s\n", static_cast<int>(m.tets.rows()),
              seconds);
  EXPECT_EQ(m.tets.rows(), 86965);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  EXPECT_LT(seconds, 1.0);
#endif
}

}  // namespace
}  // namespace xpd
