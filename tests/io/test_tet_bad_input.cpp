// Hand-broken files (tests/data/bad/<format>/, one defect each, made from tests/data/tet/two_tets.*
// by tests/data/bad/generate.py): each must fail with the right error type, a message naming the
// file and the cause, and for parse errors the line where the defect is.
#include <gtest/gtest.h>

#include <filesystem>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/tet_formats.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

enum class Kind { Io, Mesh };

struct BadFile {
  const char* path;             // under tests/data/bad/
  Kind kind;                    // IoError (parse) or MeshError (validation)
  const char* cause;            // substring of the message
  std::size_t line;             // IoError line (0: no line, the position is a byte offset or the whole file)
  const char* named = nullptr;  // file name the message must contain (default: basename of path)
};

const BadFile kBadFiles[] = {
    // ---- Gmsh ----
    {"msh/truncated.msh", Kind::Io, "header claims 2 elements but only 14 bytes remain (truncated file", 13},
    {"msh/count_mismatch.msh", Kind::Io, "holds 5 nodes but its header count says 6", 11},
    {"msh/absurd_count.msh", Kind::Io, "header claims 2000000000 nodes", 5},
    {"msh/huge_count.msh", Kind::Io, "absurd elements count 99999999999", 13},
    {"msh/bad_token.msh", Kind::Io, "expected a coordinate, found '1x'", 8},
    {"msh/unknown_version.msh", Kind::Io, "unsupported Gmsh format version '3.0'", 2},
    {"msh/index_out_of_range.msh", Kind::Io, "references node tag 9, which is not defined", 15},
    {"msh/unknown_element_type.msh", Kind::Io, "unknown element type 99", 15},
    {"msh/count_mismatch_v41.msh", Kind::Io, "header says 6, blocks hold 5", 16},
    {"msh/truncated_binary.msh", Kind::Io, "header claims 5 nodes but only 102 bytes remain (truncated file", 6},
    {"msh/bad_endianness_marker.msh", Kind::Io, "bad endianness marker 7", 3},
    {"msh/nan_coordinate.msh", Kind::Mesh, "node 4 has a non-finite coordinate", 0},
    {"msh/inverted_tet.msh", Kind::Mesh, "tet 1 (nodes 1 3 2 4) is inverted", 0},
    {"msh/zero_volume_tet.msh", Kind::Mesh, "tet 1 (nodes 0 1 4 2) is degenerate", 0},
    {"msh/duplicate_vertex.msh", Kind::Mesh, "nodes 1 and 4 are duplicates", 0},
    // ---- Medit ----
    {"medit/truncated.mesh", Kind::Io, "header claims 2 tetrahedra but only 14 bytes remain (truncated file", 11},
    {"medit/count_mismatch.mesh", Kind::Io, "Vertices holds 5 entries but its header count says 6", 10},
    {"medit/absurd_count.mesh", Kind::Io, "header claims 2000000000 tetrahedra", 11},
    {"medit/bad_token.mesh", Kind::Io, "expected a coordinate, found 'zero'", 7},
    {"medit/unknown_version.mesh", Kind::Io, "MeshVersionFormatted 7 out of range", 1},
    {"medit/unsupported_dimension.mesh", Kind::Io, "unsupported Dimension 2", 2},
    {"medit/unknown_keyword.mesh", Kind::Io, "unknown Medit keyword 'Foo'", 10},
    {"medit/index_out_of_range.mesh", Kind::Io, "tetrahedron 2 references vertex 6, out of range", 13},
    {"medit/nan_coordinate.mesh", Kind::Mesh, "node 4 has a non-finite coordinate", 0},
    {"medit/inverted_tet.mesh", Kind::Mesh, "tet 1 (nodes 1 3 2 4) is inverted", 0},
    {"medit/zero_volume_tet.mesh", Kind::Mesh, "tet 1 (nodes 0 1 4 2) is degenerate", 0},
    {"medit/duplicate_vertex.mesh", Kind::Mesh, "nodes 1 and 4 are duplicates", 0},
    // ---- TetGen (opened through the .node; the defect is in the file named) ----
    {"tetgen/truncated.node", Kind::Io, "header claims 2 tets but only 16 bytes remain (truncated file", 1,
     "truncated.ele"},
    {"tetgen/count_mismatch.node", Kind::Io, "header claims 6 nodes but only 41 bytes remain", 2},
    {"tetgen/count_mismatch_long.node", Kind::Io, "holds 5 nodes but its header count says 6", 8},
    {"tetgen/count_mismatch_ele.ele", Kind::Io, "unexpected data after the 1 tets", 3},
    {"tetgen/absurd_count.node", Kind::Io, "header claims 2000000000 nodes", 2},
    {"tetgen/bad_token.node", Kind::Io, "expected a coordinate, found 'O'", 5},
    {"tetgen/unknown_version.node", Kind::Io, "unsupported dimension 2", 2},
    {"tetgen/unsupported_nodes_per_tet.ele", Kind::Io, "unsupported nodes per tet 6", 1},
    {"tetgen/bad_first_index.node", Kind::Io, "first node index is 2", 3},
    {"tetgen/index_out_of_range.node", Kind::Io, "tet 2 references node 6, out of range", 3, "index_out_of_range.ele"},
    {"tetgen/nan_coordinate.node", Kind::Mesh, "node 4 has a non-finite coordinate", 0},
    {"tetgen/inverted_tet.ele", Kind::Mesh, "tet 1 (nodes 1 3 2 4) is inverted", 0},
    {"tetgen/zero_volume_tet.node", Kind::Mesh, "tet 1 (nodes 0 1 4 2) is degenerate", 0},
    {"tetgen/duplicate_vertex.node", Kind::Mesh, "nodes 1 and 4 are duplicates", 0},
    // ---- VTU ----
    {"vtu/truncated.vtu", Kind::Io, "unexpected end of file: <DataArray> (line 6) is not closed", 6},
    {"vtu/count_mismatch.vtu", Kind::Io, "DataArray 'Points' has 15 values, expected 18", 12},
    {"vtu/absurd_count.vtu", Kind::Io, "header claims 2000000000 values of DataArray 'offsets'", 19},
    {"vtu/huge_count.vtu", Kind::Io, "absurd NumberOfPoints 99999999999", 4},
    {"vtu/bad_token.vtu", Kind::Io, "expected a coordinate, found 'O'", 9},
    {"vtu/unknown_version.vtu", Kind::Io, "unsupported VTK XML version '9.9'", 2},
    {"vtu/not_unstructured.vtu", Kind::Io, "VTK file type 'PolyData' is not supported", 2},
    {"vtu/index_out_of_range.vtu", Kind::Io, "cell 1 references point 7, out of range", 15},
    {"vtu/unsupported_cell_type.vtu", Kind::Io, "unsupported VTK cell type 12 (hexahedron)", 22},
    {"vtu/missing_offsets.vtu", Kind::Io, "missing DataArray 'offsets'", 29},
    {"vtu/binary_count_mismatch.vtu", Kind::Io, "holds 100 bytes but 15 values need 120", 6},
    {"vtu/zlib_bad_block.vtu", Kind::Io, "corrupt zlib block 0", 6},
    {"vtu/nan_coordinate.vtu", Kind::Mesh, "node 4 has a non-finite coordinate", 0},
    {"vtu/inverted_tet.vtu", Kind::Mesh, "tet 1 (nodes 1 3 2 4) is inverted", 0},
    {"vtu/zero_volume_tet.vtu", Kind::Mesh, "tet 1 (nodes 0 1 4 2) is degenerate", 0},
    {"vtu/duplicate_vertex.vtu", Kind::Mesh, "nodes 1 and 4 are duplicates", 0},
};

void PrintTo(const BadFile& f, std::ostream* os) { *os << f.path; }

class IoBadTetFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(IoBadTetFile, FailsNamingFileLineAndCause) {
  const BadFile& b = GetParam();
  const std::string path = test::fixture_path(std::string("bad/") + b.path);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  const std::string named = b.named ? b.named : std::filesystem::path(path).filename().string();
  try {
    io::read_tet_mesh(path);
    FAIL() << path << " was accepted";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_EQ(b.kind, Kind::Io) << "unexpected IoError: " << what;
    EXPECT_NE(what.find(named), std::string::npos) << what;
    EXPECT_NE(what.find(b.cause), std::string::npos) << "cause '" << b.cause << "' not in: " << what;
    EXPECT_EQ(e.line(), b.line) << what;
  } catch (const MeshError& e) {
    const std::string what = e.what();
    EXPECT_EQ(b.kind, Kind::Mesh) << "unexpected MeshError: " << what;
    EXPECT_NE(what.find(named), std::string::npos) << what;
    EXPECT_NE(what.find(b.cause), std::string::npos) << "cause '" << b.cause << "' not in: " << what;
  } catch (const std::exception& e) {
    FAIL() << path << ": not an xpd error: " << e.what();
  }
}

std::string bad_test_name(const ::testing::TestParamInfo<BadFile>& info) {
  std::string s = info.param.path;
  for (auto& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(IoBadInput, IoBadTetFile, ::testing::ValuesIn(kBadFiles), bad_test_name);

TEST(IoBadTetInput, ValidFixturesLoad) {
  for (const char* f : {"two_tets.msh", "two_tets.mesh", "two_tets.node", "two_tets.ele", "two_tets.vtu"}) {
    const TetMesh m = io::read_tet_mesh(test::fixture_path(std::string("tet/") + f));
    EXPECT_EQ(m.nodes.rows(), 5) << f;
    EXPECT_EQ(m.tets.rows(), 2) << f;
  }
}

TEST(IoBadTetInput, EveryFormatHasEveryDocumentedCase) {
  // One hand-broken file per format for each documented error case.
  for (const char* fmt : {"msh", "medit", "tetgen", "vtu"}) {
    for (const char* c : {"truncated", "count_mismatch", "absurd_count", "bad_token", "index_out_of_range",
                          "nan_coordinate", "inverted_tet", "zero_volume_tet", "duplicate_vertex"}) {
      bool found = false;
      for (const auto& b : kBadFiles) found |= std::string(b.path).starts_with(std::string(fmt) + "/" + c + ".");
      EXPECT_TRUE(found) << fmt << " lacks case " << c;
    }
  }
}

TEST(IoBadTetInput, MissingFileAndEmptyData) {
  EXPECT_THROW(io::read_tet_mesh("/nonexistent/dir/a.msh"), IoError);
  for (auto parse : {&io::parse_msh, &io::parse_medit, &io::parse_vtu}) {
    EXPECT_THROW(parse("", "empty"), IoError);
    EXPECT_THROW(parse("   \n\n", "blank"), IoError);
  }
  EXPECT_THROW(io::parse_tetgen("", "", "a.node", "a.ele"), IoError);
}

}  // namespace
}  // namespace xpd
