// write_vtu: the file is read back with an independent minimal parser of the VTK XML layout
// (header attributes, DataArray offsets into the raw appended block, UInt64 size headers) and
// every array is compared with what was written.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <xpd/core/error.hpp>
#include <xpd/io/vtu.hpp>
#include <xpd/mesh/box.hpp>

#include "test_util.hpp"

namespace xpd {
namespace {

struct ParsedArray {
  std::map<std::string, std::string> attributes;
  std::string section;  // PointData, CellData, Points, Cells
  std::string bytes;    // payload (after its UInt64 size)
};

struct ParsedVtu {
  std::string header;  // XML before the appended data
  std::map<std::string, std::string> file_attributes;
  long long points = -1, cells = -1;
  std::vector<ParsedArray> arrays;
  const ParsedArray& array(const std::string& section, const std::string& name) const {
    for (const auto& a : arrays)
      if (a.section == section && a.attributes.at("Name") == name) return a;
    throw std::runtime_error("no array " + section + "/" + name);
  }
};

// name="value" pairs of one XML tag (no entities decoded: names are compared escaped).
std::map<std::string, std::string> attributes_of(const std::string& tag) {
  std::map<std::string, std::string> out;
  for (std::size_t eq = tag.find("=\""); eq != std::string::npos; eq = tag.find("=\"", eq + 1)) {
    std::size_t start = eq;
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(tag[start - 1])) || tag[start - 1] == '_')) --start;
    const std::size_t close = tag.find('"', eq + 2);
    if (close == std::string::npos) throw std::runtime_error("unterminated attribute in " + tag);
    out[tag.substr(start, eq - start)] = tag.substr(eq + 2, close - eq - 2);
    eq = close;
  }
  return out;
}

ParsedVtu parse_vtu(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ParsedVtu v;
  const auto appended = file.find("<AppendedData encoding=\"raw\">");
  if (appended == std::string::npos) throw std::runtime_error("no raw AppendedData");
  const auto underscore = file.find('_', appended);
  if (underscore == std::string::npos) throw std::runtime_error("no '_' marker");
  v.header = file.substr(0, appended);
  const std::size_t base = underscore + 1;
  // The file must end with the closing tags right after the last array.
  const auto tail = file.rfind("</AppendedData>");
  if (tail == std::string::npos || file.find("</VTKFile>", tail) == std::string::npos)
    throw std::runtime_error("unterminated file");

  const auto vtk_start = v.header.find("<VTKFile");
  v.file_attributes = attributes_of(v.header.substr(vtk_start, v.header.find('>', vtk_start) - vtk_start));
  const auto piece = v.header.find("<Piece");
  const auto piece_attr = attributes_of(v.header.substr(piece, v.header.find('>', piece) - piece));
  v.points = std::stoll(piece_attr.at("NumberOfPoints"));
  v.cells = std::stoll(piece_attr.at("NumberOfCells"));

  std::size_t end_of_data = base;
  for (const char* section : {"PointData", "CellData", "Points", "Cells"}) {
    const auto open = v.header.find(std::string("<") + section + ">");
    const auto close = v.header.find(std::string("</") + section + ">");
    if (open == std::string::npos || close == std::string::npos)
      throw std::runtime_error(std::string("missing ") + section);
    const std::string body = v.header.substr(open, close - open);
    for (std::size_t p = body.find("<DataArray"); p != std::string::npos; p = body.find("<DataArray", p + 1)) {
      ParsedArray a;
      a.section = section;
      a.attributes = attributes_of(body.substr(p, body.find("/>", p) - p));
      if (a.attributes.at("format") != "appended") throw std::runtime_error("not appended");
      const std::size_t at = base + std::stoull(a.attributes.at("offset"));
      std::uint64_t size = 0;
      if (at + 8 > tail) throw std::runtime_error("offset past the data");
      std::memcpy(&size, file.data() + at, 8);
      if (at + 8 + size > tail) throw std::runtime_error("array runs past the data");
      a.bytes = file.substr(at + 8, size);
      end_of_data = std::max<std::size_t>(end_of_data, at + 8 + size);
      v.arrays.push_back(std::move(a));
    }
  }
  // Nothing but whitespace between the last array and </AppendedData>.
  if (file.substr(end_of_data, tail - end_of_data).find_first_not_of(" \n") != std::string::npos)
    throw std::runtime_error("stray bytes after the last array");
  return v;
}

template <class T>
std::vector<T> values(const ParsedArray& a) {
  std::vector<T> out(a.bytes.size() / sizeof(T));
  std::memcpy(out.data(), a.bytes.data(), out.size() * sizeof(T));
  return out;
}

TEST(IoVtuWrite, StructureOffsetsAndArraysReadBack) {
  const TetMesh box = make_box(3, 2, 2, Vec3::Zero(), Vec3(2, 1, 1));
  const auto nv = box.nodes.rows(), nt = box.tets.rows();
  io::VtuField displacement{"displacement", 3, std::vector<double>(static_cast<std::size_t>(nv) * 3)};
  for (std::size_t i = 0; i < displacement.values.size(); ++i) displacement.values[i] = 0.001 * static_cast<double>(i);
  io::VtuField region{"region <id> & \"tag\"", 1, std::vector<double>(static_cast<std::size_t>(nt))};
  for (std::size_t e = 0; e < region.values.size(); ++e) region.values[e] = static_cast<double>(e % 3);

  const auto dir = test::scratch_dir("vtu_write");
  const std::string path = (dir / "box.vtu").string();
  io::write_vtu(path, box.nodes, box.tets, {displacement}, {region});
  const ParsedVtu v = parse_vtu(path);

  EXPECT_EQ(v.header.rfind("<?xml version=\"1.0\"?>\n", 0), 0u);
  EXPECT_EQ(v.file_attributes.at("type"), "UnstructuredGrid");
  EXPECT_EQ(v.file_attributes.at("version"), "1.0");
  EXPECT_EQ(v.file_attributes.at("byte_order"), "LittleEndian");
  EXPECT_EQ(v.file_attributes.at("header_type"), "UInt64");
  EXPECT_EQ(v.points, nv);
  EXPECT_EQ(v.cells, nt);
  ASSERT_EQ(v.arrays.size(), 6u);

  const ParsedArray& pts = v.array("Points", "Points");
  EXPECT_EQ(pts.attributes.at("type"), "Float64");
  EXPECT_EQ(pts.attributes.at("NumberOfComponents"), "3");
  const auto xyz = values<double>(pts);
  ASSERT_EQ(xyz.size(), static_cast<std::size_t>(nv) * 3);
  for (Eigen::Index i = 0; i < nv; ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(xyz[3 * i + c], box.nodes(i, c));

  const ParsedArray& conn = v.array("Cells", "connectivity");
  EXPECT_EQ(conn.attributes.at("type"), "Int64");
  const auto ids = values<std::int64_t>(conn);
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(nt) * 4);
  for (Eigen::Index e = 0; e < nt; ++e)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(ids[4 * e + c], box.tets(e, c));
  const ParsedArray& offs = v.array("Cells", "offsets");
  EXPECT_EQ(offs.attributes.at("type"), "Int64");
  const auto o = values<std::int64_t>(offs);
  ASSERT_EQ(o.size(), static_cast<std::size_t>(nt));
  for (std::size_t e = 0; e < o.size(); ++e) EXPECT_EQ(o[e], static_cast<std::int64_t>(4 * (e + 1)));
  const ParsedArray& types = v.array("Cells", "types");
  EXPECT_EQ(types.attributes.at("type"), "UInt8");
  EXPECT_EQ(types.bytes, std::string(static_cast<std::size_t>(nt), '\x0a'));

  const ParsedArray& disp = v.array("PointData", "displacement");
  EXPECT_EQ(disp.attributes.at("NumberOfComponents"), "3");
  EXPECT_EQ(values<double>(disp), displacement.values);
  const ParsedArray& reg = v.array("CellData", "region &lt;id&gt; &amp; &quot;tag&quot;");  // escaped name
  EXPECT_EQ(reg.attributes.at("NumberOfComponents"), "1");
  EXPECT_EQ(values<double>(reg), region.values);
  std::filesystem::remove_all(dir);
}

TEST(IoVtuWrite, EmptyFieldsAndNoCells) {
  const auto dir = test::scratch_dir("vtu_empty");
  const std::string path = (dir / "points.vtu").string();
  Points p(2, 3);
  p << 0, 0, 0, 1, 2, 3;
  io::write_vtu(path, p, Tets(0, 4));
  const ParsedVtu v = parse_vtu(path);
  EXPECT_EQ(v.points, 2);
  EXPECT_EQ(v.cells, 0);
  EXPECT_EQ(v.array("Cells", "types").bytes.size(), 0u);
  EXPECT_EQ(values<double>(v.array("Points", "Points")), (std::vector<double>{0, 0, 0, 1, 2, 3}));
  std::filesystem::remove_all(dir);
}

TEST(IoVtuWrite, BadInputFailsAndLeavesThePreviousFile) {
  const TetMesh box = make_box(2, 2, 2, Vec3::Zero(), Vec3::Ones());
  const auto dir = test::scratch_dir("vtu_bad");
  const std::string path = (dir / "box.vtu").string();
  io::write_vtu(path, box.nodes, box.tets);
  const auto before = std::filesystem::file_size(path);

  io::VtuField short_field{"f", 1, std::vector<double>(3)};
  try {
    io::write_vtu(path, box.nodes, box.tets, {short_field});
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("point field 'f' has 3 values, expected 8 x 1"), std::string::npos)
        << e.what();
  }
  io::VtuField zero{"z", 0, {}};
  EXPECT_THROW(io::write_vtu(path, box.nodes, box.tets, {}, {zero}), IoError);
  Tets bad = box.tets;
  bad(0, 2) = 99;
  EXPECT_THROW(io::write_vtu(path, box.nodes, bad), IoError);
  EXPECT_EQ(std::filesystem::file_size(path), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  EXPECT_THROW(io::write_vtu((dir / "no" / "such" / "dir.vtu").string(), box.nodes, box.tets), IoError);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace xpd
