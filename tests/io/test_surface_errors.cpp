// Hand-broken surface files (tests/data/bad/<format>/): each fails with an IoError naming the file,
// the line (or 0 plus a byte offset for binary data) and the cause, or, for geometry that parses
// but is invalid (index out of range, NaN), with a MeshError from validate_surface naming the face
// or node.
#include <gtest/gtest.h>

#include <cctype>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

struct BadFile {
  const char* path;      // under tests/data/bad/
  bool mesh_error;       // MeshError (validation) instead of IoError (parsing)
  std::size_t line;      // IoError line (0: binary / whole file)
  const char* contains;  // part of the message
};

std::ostream& operator<<(std::ostream& os, const BadFile& f) { return os << f.path; }

const BadFile kBadFiles[] = {
    // OBJ
    {"obj/bad_coordinate.obj", false, 3, "bad vertex coordinate '1x'"},
    {"obj/short_vertex.obj", false, 2, "fewer than 3 coordinates"},
    {"obj/bad_index.obj", false, 4, "bad vertex index 'two'"},
    {"obj/zero_index.obj", false, 5, "vertex index 0"},
    {"obj/two_vertex_face.obj", false, 4, "face with 2 vertices"},
    {"obj/huge_index.obj", false, 4, "out of range"},
    {"obj/index_out_of_range.obj", true, 0, "face 1"},
    {"obj/relative_index_out_of_range.obj", true, 0, "face 0"},
    {"obj/nan_coordinate.obj", true, 0, "node 1"},
    {"obj/no_faces.obj", true, 0, "no faces"},
    {"obj/repeated_index.obj", true, 0, "face 0"},
    // OFF
    {"off/bad_header.off", false, 1, "not an OFF file"},
    {"off/truncated_vertices.off", false, 2, "header claims 8 vertices"},
    {"off/truncated_faces.off", false, 13, "header claims 6 faces, found 2"},
    {"off/absurd_count.off", false, 2, "2000000000 vertices"},
    {"off/huge_count.off", false, 2, "absurd vertices count"},
    {"off/negative_count.off", false, 2, "negative vertices count"},
    {"off/bad_coordinate.off", false, 4, "bad coordinate 'zero' of vertex 1"},
    {"off/bad_count_token.off", false, 2, "expected the vertex count, found 'three'"},
    {"off/short_face.off", false, 7, "fewer vertices than its count 4"},
    {"off/two_vertex_face.off", false, 6, "face 0 has 2 vertices"},
    {"off/short_vertex.off", false, 4, "vertex 1 has fewer than 3 coordinates"},
    {"off/index_out_of_range.off", true, 0, "face 0"},
    {"off/empty.off", false, 1, "unexpected end of file"},
    // PLY
    {"ply/not_ply.ply", false, 1, "not a PLY file"},
    {"ply/unknown_format.ply", false, 2, "unknown PLY format 'binary_middle_endian'"},
    {"ply/unknown_type.ply", false, 5, "unknown PLY type 'quad'"},
    {"ply/no_end_header.ply", false, 9, "no end_header"},
    {"ply/no_format.ply", false, 8, "no format line"},
    {"ply/property_before_element.ply", false, 3, "property before any element"},
    {"ply/missing_z.ply", false, 3, "no scalar property 'z'"},
    {"ply/no_face_list.ply", false, 7, "no list property 'vertex_indices'"},
    {"ply/ascii_truncated.ply", false, 14, "unexpected end of file (expected a vertex index)"},
    {"ply/ascii_bad_token.ply", false, 11, "found 'abc'"},
    {"ply/ascii_absurd_count.ply", false, 10, "2000000000 'vertex' elements"},
    {"ply/ascii_two_vertex_face.ply", false, 13, "face 0 has 2 vertices"},
    {"ply/ascii_index_out_of_range.ply", true, 0, "face 0"},
    {"ply/binary_truncated.ply", false, 0, "byte offset"},
    {"ply/binary_absurd_count.ply", false, 3, "2147483647 'vertex' elements"},
    {"ply/binary_absurd_list.ply", false, 0, "face 0 claims 255 vertices"},
    {"ply/binary_big_endian_truncated.ply", false, 3, "header claims 3 'vertex' elements (at least 12 bytes each)"},
    {"ply/binary_negative_index.ply", true, 0, "face 0"},
    // STL
    {"stl/ascii_no_endsolid.stl", false, 9, "expected 'endsolid'"},
    {"stl/ascii_bad_number.stl", false, 5, "found 'O'"},
    {"stl/ascii_missing_loop.stl", false, 3, "expected 'outer', found 'vertex'"},
    {"stl/ascii_two_vertex_facet.stl", false, 6, "facet with 2 vertices"},
    {"stl/ascii_truncated.stl", false, 5, "unexpected end of file"},
    {"stl/binary_count_mismatch.stl", false, 0, "claims 100 triangles"},
    {"stl/binary_solid_header_truncated.stl", false, 0, "claims 2 triangles"},
    {"stl/too_short.stl", false, 0, "not an STL file"},
    {"stl/binary_nan.stl", true, 0, "node"},
};

class IoSurfaceBadFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(IoSurfaceBadFile, FailsWithLocatedCause) {
  const BadFile& f = GetParam();
  const std::string path = test::fixture_path(std::string("bad/") + f.path);
  try {
    (void)io::read_surface(path);
    FAIL() << "no error for " << path;
  } catch (const IoError& e) {
    ASSERT_FALSE(f.mesh_error) << "expected a MeshError, got IoError: " << e.what();
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), f.line) << e.what();
    EXPECT_NE(std::string(e.what()).find(f.contains), std::string::npos) << e.what();
  } catch (const MeshError& e) {
    ASSERT_TRUE(f.mesh_error) << "expected an IoError, got MeshError: " << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(f.contains), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(IoSurfaceFixtures, IoSurfaceBadFile, ::testing::ValuesIn(kBadFiles),
                         [](const ::testing::TestParamInfo<BadFile>& info) {
                           std::string n = info.param.path;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(IoSurfaceErrors, UnknownExtensionListsSupportedFormats) {
  try {
    (void)io::read_surface(test::fixture_path("bad/obj/no_faces.obj.txt"));
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown surface format '.txt'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".obj, .off, .ply, .stl"), std::string::npos) << e.what();
  }
}

TEST(IoSurfaceErrors, MissingFileIsIoError) {
  EXPECT_THROW((void)io::read_surface(test::fixture_path("bad/does_not_exist.obj")), IoError);
}

TEST(IoSurfaceErrors, ValidationCanBeSkipped) {
  io::ReadOptions options;
  options.validate = false;
  const SurfaceMesh s = io::read_surface(test::fixture_path("bad/obj/index_out_of_range.obj"), options);
  EXPECT_EQ(s.triangles.rows(), 2);
  EXPECT_EQ(s.triangles(1, 2), 3);
}

}  // namespace
}  // namespace xpd
