// Surface readers on small in-memory files (every syntax variant each format allows), writers and
// round trips through write_obj / write_ply / write_surface.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/surface_formats.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

// Unit cube as 6 quads (8 vertices): fan triangulation gives 12 triangles.
const char* kCubeObj =
    "# cube\nmtllib cube.mtl\no cube\ng side\n"
    "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
    "vt 0 0\nvt 1 0\nvn 0 0 1\nusemtl red\ns 1\n"
    "f 1/1/1 4/2/1 3/1/1 2/2/1\nf 5//1 6//1 7//1 8//1\nf 1/1 2/2 6/1 5/2\n"
    "f 2 3 7 6\nf 3 4 8 7\nf -8 -4 -1 -5\n";

Triangles expected_cube_triangles() {
  Triangles t(12, 3);
  t << 0, 3, 2, 0, 2, 1, 4, 5, 6, 4, 6, 7, 0, 1, 5, 0, 5, 4, 1, 2, 6, 1, 6, 5, 2, 3, 7, 2, 7, 6, 0, 4, 7, 0, 7, 3;
  return t;
}

// Octahedron: 6 vertices, 8 triangles.
SurfaceMesh octahedron() {
  SurfaceMesh s;
  s.nodes.resize(6, 3);
  s.nodes << 1, 0, 0, -1, 0, 0, 0, 1, 0, 0, -1, 0, 0, 0, 1, 0, 0, -1;
  s.triangles.resize(8, 3);
  s.triangles << 0, 2, 4, 2, 1, 4, 1, 3, 4, 3, 0, 4, 2, 0, 5, 1, 2, 5, 3, 1, 5, 0, 3, 5;
  return s;
}

TEST(IoSurfaceObj, PolygonsSlashFormsNegativeIndicesAndIgnoredStatements) {
  const SurfaceMesh s = io::parse_obj(kCubeObj, "cube.obj");
  ASSERT_EQ(s.nodes.rows(), 8);
  EXPECT_EQ(s.nodes.row(6), Vec3(1, 1, 1).transpose());
  ASSERT_EQ(s.triangles.rows(), 12);
  EXPECT_EQ(s.triangles, expected_cube_triangles());
  EXPECT_NO_THROW(validate_surface(s, "cube.obj"));
}

TEST(IoSurfaceObj, CrlfTabsExtraComponentsAndNoFinalNewline) {
  const SurfaceMesh s =
      io::parse_obj("v\t0 0 0 1\r\nv 1 0 0 0.5 0.2 0.1\r\n  v +1e0 1 0\r\n\r\nf 1 2 3 # tri", "t.obj");
  ASSERT_EQ(s.nodes.rows(), 3);
  EXPECT_EQ(s.nodes(2, 0), 1.0);
  ASSERT_EQ(s.triangles.rows(), 1);
  EXPECT_EQ(s.triangles.row(0), Eigen::RowVector3i(0, 1, 2));
}

TEST(IoSurfaceOff, PolygonsCommentsAndCountsOnTheHeaderLine) {
  const SurfaceMesh s = io::parse_off(
      "# comment\nOFF 8 6 12\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n# mid comment\n0 0 1\n1 0 1\n1 1 1\n0 1 1\n"
      "4 0 3 2 1\n4 4 5 6 7\n4 0 1 5 4\n4 1 2 6 5\n4 2 3 7 6\n4 0 4 7 3 255 0 0\n",
      "cube.off");
  ASSERT_EQ(s.nodes.rows(), 8);
  ASSERT_EQ(s.triangles.rows(), 12);
  EXPECT_EQ(s.triangles.row(11), Eigen::RowVector3i(0, 7, 3));
}

TEST(IoSurfaceOff, ColourAndNormalVariants) {
  const SurfaceMesh c =
      io::parse_off("COFF\n3 1 0\n0 0 0 255 0 0 255\n1 0 0 0 255 0 255\n0 1 0 0 0 255 255\n3 0 1 2\n", "c.off");
  EXPECT_EQ(c.nodes.rows(), 3);
  EXPECT_EQ(c.nodes(1, 0), 1.0);
  const SurfaceMesh n = io::parse_off("NOFF\n3 1 0\n0 0 0 0 0 1\n1 0 0 0 0 1\n0 1 0 0 0 1\n3 0 1 2\n", "n.off");
  EXPECT_EQ(n.triangles.rows(), 1);
  EXPECT_EQ(n.nodes(2, 1), 1.0);
}

// Builds a PLY of the octahedron: vertex x,y,z of `coord` type plus extra properties, faces with
// the given list types; `format` is ascii / binary_little_endian / binary_big_endian.
template <class Coord, class Count, class Index>
std::string octahedron_ply(const std::string& format, const char* coord, const char* count, const char* index,
                           const char* list_name = "vertex_indices") {
  const SurfaceMesh o = octahedron();
  std::ostringstream h;
  h << "ply\r\nformat " << format << " 1.0\r\ncomment test\r\nobj_info none\r\n"
    << "element material 2\r\nproperty float shine\r\nproperty list uchar short ids\r\n"
    << "element vertex 6\r\nproperty uchar red\r\nproperty " << coord << " x\r\nproperty " << coord << " y\r\n"
    << "property list uchar double extra\r\nproperty " << coord << " z\r\n"
    << "element face 8\r\nproperty int flags\r\nproperty list " << count << ' ' << index << ' ' << list_name << "\r\n"
    << "element edge 0\r\nproperty int a\r\nend_header\r\n";
  std::string out = h.str();
  if (format == "ascii") {
    std::ostringstream b;
    b << "0.5 2 1 2\n1.5 0\n";
    for (int i = 0; i < 6; ++i)
      b << "7 " << static_cast<Coord>(o.nodes(i, 0)) << ' ' << static_cast<Coord>(o.nodes(i, 1)) << " 1 0.25 "
        << static_cast<Coord>(o.nodes(i, 2)) << '\n';
    for (int f = 0; f < 8; ++f)
      b << "9 3 " << o.triangles(f, 0) << ' ' << o.triangles(f, 1) << ' ' << o.triangles(f, 2) << '\n';
    return out + b.str();
  }
  const bool swap = (format == "binary_big_endian") == (std::endian::native == std::endian::little);
  auto put = [&](auto v) {
    char b[sizeof(v)];
    std::memcpy(b, &v, sizeof(v));
    if (swap) std::reverse(b, b + sizeof(v));
    out.append(b, sizeof(v));
  };
  put(0.5f), put(std::uint8_t{2}), put(std::int16_t{1}), put(std::int16_t{2});
  put(1.5f), put(std::uint8_t{0});
  for (int i = 0; i < 6; ++i) {
    put(std::uint8_t{7}), put(static_cast<Coord>(o.nodes(i, 0))), put(static_cast<Coord>(o.nodes(i, 1)));
    put(std::uint8_t{1}), put(0.25);
    put(static_cast<Coord>(o.nodes(i, 2)));
  }
  for (int f = 0; f < 8; ++f) {
    put(std::int32_t{9}), put(static_cast<Count>(3));
    for (int c = 0; c < 3; ++c) put(static_cast<Index>(o.triangles(f, c)));
  }
  return out;
}

TEST(IoSurfacePly, AsciiAndBothEndiannessesWithAnyScalarTypes) {
  const SurfaceMesh o = octahedron();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ascii float", octahedron_ply<float, std::uint8_t, std::int32_t>("ascii", "float", "uchar", "int")},
      {"ascii int", octahedron_ply<int, std::uint8_t, std::int32_t>("ascii", "int", "uint8", "uint", "vertex_index")},
      {"le float", octahedron_ply<float, std::uint8_t, std::int32_t>("binary_little_endian", "float", "uchar", "int")},
      {"le double",
       octahedron_ply<double, std::uint16_t, std::uint32_t>("binary_little_endian", "double", "ushort", "uint")},
      {"le int16", octahedron_ply<std::int16_t, std::int32_t, std::uint16_t>("binary_little_endian", "int16", "int",
                                                                             "ushort", "vertex_index")},
      {"le int8",
       octahedron_ply<std::int8_t, std::uint8_t, std::uint8_t>("binary_little_endian", "char", "uchar", "uchar")},
      {"be float", octahedron_ply<float, std::uint8_t, std::int32_t>("binary_big_endian", "float32", "uint8", "int32")},
      {"be double", octahedron_ply<double, std::int8_t, std::int16_t>("binary_big_endian", "float64", "int8", "short")},
      {"be int32",
       octahedron_ply<std::int32_t, std::uint32_t, std::int32_t>("binary_big_endian", "int", "uint", "int")},
      {"be float index", octahedron_ply<float, std::uint8_t, float>("binary_big_endian", "float", "uchar", "float")},
  };
  for (const auto& [label, data] : cases) {
    SCOPED_TRACE(label);
    const SurfaceMesh s = io::parse_ply(data, label);
    EXPECT_EQ(s.nodes, o.nodes);
    EXPECT_EQ(s.triangles, o.triangles);
  }
}

TEST(IoSurfacePly, PolygonsAreFanTriangulated) {
  const SurfaceMesh s = io::parse_ply(
      "ply\nformat ascii 1.0\nelement vertex 5\nproperty float x\nproperty float y\nproperty float z\n"
      "element face 1\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n2 1 0\n1 2 0\n0 1 0\n5 0 1 2 "
      "3 4\n",
      "pentagon.ply");
  ASSERT_EQ(s.triangles.rows(), 3);
  EXPECT_EQ(s.triangles.row(2), Eigen::RowVector3i(0, 3, 4));
}

std::string binary_stl(const SurfaceMesh& s, const std::string& header) {
  std::string out = header;
  out.resize(80, ' ');
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(static_cast<std::uint32_t>(s.triangles.rows()));
  for (Eigen::Index f = 0; f < s.triangles.rows(); ++f) {
    for (int c = 0; c < 3; ++c) put(0.0f);
    for (int k = 0; k < 3; ++k)
      for (int c = 0; c < 3; ++c) put(static_cast<float>(s.nodes(s.triangles(f, k), c)));
    put(std::uint16_t{0});
  }
  return out;
}

std::string ascii_stl(const SurfaceMesh& s) {
  std::ostringstream out;
  out << "solid octa\n";
  for (Eigen::Index f = 0; f < s.triangles.rows(); ++f) {
    out << " facet normal 0 0 0\n  outer loop\n";
    for (int k = 0; k < 3; ++k)
      out << "   vertex " << s.nodes(s.triangles(f, k), 0) << ' ' << s.nodes(s.triangles(f, k), 1) << ' '
          << s.nodes(s.triangles(f, k), 2) << '\n';
    out << "  endloop\n endfacet\n";
  }
  out << "endsolid octa\n";
  return out.str();
}

TEST(IoSurfaceStl, BinaryAndAsciiMergeIdenticalCorners) {
  const SurfaceMesh o = octahedron();
  for (const std::string& data :
       {binary_stl(o, "binary"), binary_stl(o, "solid header written by a CAD tool"), ascii_stl(o)}) {
    const SurfaceMesh s = io::parse_stl(data, "octa.stl");
    ASSERT_EQ(s.nodes.rows(), 6);
    ASSERT_EQ(s.triangles.rows(), 8);
    // Same triangles up to vertex numbering: compare corner coordinates.
    for (Eigen::Index f = 0; f < 8; ++f)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(s.nodes.row(s.triangles(f, k)), o.nodes.row(o.triangles(f, k)));
  }
}

TEST(IoSurfaceStl, SignedZerosMergeAndSeveralSolids) {
  const std::string facet =
      " facet normal 0 0 1\n  outer loop\n   vertex -0 0 0\n   vertex 1 0 0\n   vertex 0 1 0\n  endloop\n endfacet\n";
  const std::string facet2 =
      " facet normal 0 0 1\n  outer loop\n   vertex 0 0 0\n   vertex 0 1 0\n   vertex 0 0 1\n  endloop\n endfacet\n";
  const SurfaceMesh s =
      io::parse_stl("solid a\n" + facet + "endsolid a\nsolid b\n" + facet2 + "endsolid b\n", "two.stl");
  EXPECT_EQ(s.nodes.rows(), 4);
  EXPECT_EQ(s.triangles.rows(), 2);
}

TEST(IoSurfaceRoundTrip, ObjAndPlyReadBackIdentical) {
  // Coordinates that need all 17 significant digits, and a non-trivial connectivity.
  SurfaceMesh s = octahedron();
  s.nodes(0, 0) = 0.1 + 0.2;
  s.nodes(1, 1) = -1.0 / 3.0;
  s.nodes(2, 2) = 6.02214076e23;
  s.nodes(3, 0) = 5e-324;  // subnormal
  {
    std::ostringstream out;
    io::write_obj(out, s);
    const SurfaceMesh r = io::parse_obj(out.str(), "rt.obj");
    EXPECT_EQ(r.nodes, s.nodes);
    EXPECT_EQ(r.triangles, s.triangles);
  }
  {
    std::ostringstream out;
    io::write_ply(out, s);
    EXPECT_EQ(out.str().rfind("ply\nformat binary_little_endian 1.0\n", 0), 0u);
    const SurfaceMesh r = io::parse_ply(out.str(), "rt.ply");
    EXPECT_EQ(r.nodes, s.nodes);
    EXPECT_EQ(r.triangles, s.triangles);
  }
}

TEST(IoSurfaceRoundTrip, WriteSurfaceByExtensionOnRealMesh) {
  const std::string src = test::data_path("libigl-tutorial-data/decimated-knight.off");
  if (!std::filesystem::exists(src)) GTEST_SKIP() << "shared data missing";
  const SurfaceMesh knight = io::read_surface(src);
  const auto dir = test::scratch_dir("surface_rt");
  for (const char* name : {"knight.obj", "knight.PLY"}) {
    const std::string path = (dir / name).string();
    io::write_surface(path, knight);
    const SurfaceMesh r = io::read_surface(path);
    EXPECT_EQ(r.nodes, knight.nodes) << name;
    EXPECT_EQ(r.triangles, knight.triangles) << name;
  }
  // Writing again replaces the file atomically; no temporaries are left behind.
  io::write_surface((dir / "knight.obj").string(), knight);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 2);
  std::filesystem::remove_all(dir);
}

TEST(IoSurfaceRoundTrip, UnsupportedWriteFormatsFailWithoutTouchingTheFile) {
  const auto dir = test::scratch_dir("surface_bad_write");
  const SurfaceMesh o = octahedron();
  EXPECT_THROW(io::write_surface((dir / "o.stl").string(), o), IoError);
  EXPECT_THROW(io::write_surface((dir / "o.obj.gz").string(), o), IoError);
  EXPECT_THROW(io::write_surface((dir / "missing_dir" / "o.obj").string(), o), IoError);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(IoSurfaceRoundTrip, GzippedInputIsReadWhateverTheName) {
  // shared data: ply.gz binary big endian; same surface as read through parse_ply directly.
  const std::string path = test::data_path("scalable-ccd-sample/cloth-ball/frames/cloth_ball92.ply.gz");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "shared data missing";
  const SurfaceMesh a = io::read_surface(path);
  const SurfaceMesh b = io::parse_ply(io::read_file_bytes(path), path);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.triangles, b.triangles);
  EXPECT_TRUE(a.nodes.allFinite());
}

}  // namespace
}  // namespace xpd
