// VTK XML UnstructuredGrid writer: version 1.0, header_type UInt64, little endian, all arrays in one
// raw <AppendedData> block. Each array there is its byte count (UInt64) followed by its bytes; the
// `offset` attribute of a DataArray is where its byte count starts, relative to the byte after '_'.
#include <bit>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/vtu.hpp>

namespace xpd::io {

namespace {

constexpr std::uint8_t kVtkTetra = 10;

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// One array of the appended block: its XML attributes and its payload (little-endian bytes).
struct Array {
  std::string attributes;  // type, Name, NumberOfComponents
  std::string bytes;
};

template <class T>
void append_le(std::string& bytes, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if constexpr (std::endian::native == std::endian::big)
    for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
  bytes.append(b, sizeof(T));
}

Array field_array(const std::string& path, const VtuField& f, Eigen::Index rows, const char* where) {
  if (f.name.empty()) throw IoError(path, 0, std::string(where) + " field without a name");
  if (f.components < 1)
    throw IoError(path, 0,
                  std::string(where) + " field '" + f.name + "' has " + std::to_string(f.components) + " components");
  const auto expected = static_cast<std::size_t>(rows) * static_cast<std::size_t>(f.components);
  if (f.values.size() != expected)
    throw IoError(path, 0,
                  std::string(where) + " field '" + f.name + "' has " + std::to_string(f.values.size()) +
                      " values, expected " + std::to_string(rows) + " x " + std::to_string(f.components));
  Array a;
  a.attributes = "type=\"Float64\" Name=\"" + xml_escape(f.name) + "\" NumberOfComponents=\"" +
                 std::to_string(f.components) + "\"";
  a.bytes.reserve(expected * 8);
  for (double v : f.values) append_le(a.bytes, v);
  return a;
}

}  // namespace

void write_vtu(const std::string& path, const Points& nodes, const Tets& tets,
               const std::vector<VtuField>& point_fields, const std::vector<VtuField>& cell_fields) {
  const Eigen::Index nv = nodes.rows(), nt = tets.rows();
  // Build every payload first so that bad input fails before the file is touched.
  std::vector<Array> point_data, cell_data;
  for (const VtuField& f : point_fields) point_data.push_back(field_array(path, f, nv, "point"));
  for (const VtuField& f : cell_fields) cell_data.push_back(field_array(path, f, nt, "cell"));

  Array points{"type=\"Float64\" Name=\"Points\" NumberOfComponents=\"3\"", {}};
  points.bytes.reserve(static_cast<std::size_t>(nv) * 24);
  for (Eigen::Index i = 0; i < nv; ++i)
    for (int c = 0; c < 3; ++c) append_le(points.bytes, nodes(i, c));
  Array connectivity{"type=\"Int64\" Name=\"connectivity\"", {}};
  Array offsets{"type=\"Int64\" Name=\"offsets\"", {}};
  Array types{"type=\"UInt8\" Name=\"types\"", {}};
  connectivity.bytes.reserve(static_cast<std::size_t>(nt) * 32);
  for (Eigen::Index e = 0; e < nt; ++e) {
    for (int c = 0; c < 4; ++c) {
      const int v = tets(e, c);
      if (v < 0 || v >= nv)
        throw IoError(
            path, 0,
            "tet " + std::to_string(e) + " references node " + std::to_string(v) + " of " + std::to_string(nv));
      append_le(connectivity.bytes, static_cast<std::int64_t>(v));
    }
    append_le(offsets.bytes, static_cast<std::int64_t>(4 * (e + 1)));
    append_le(types.bytes, kVtkTetra);
  }

  // Offsets into the appended block, in the order the arrays are written.
  std::uint64_t offset = 0;
  auto data_array = [&](const Array& a, const char* indent) {
    std::string s = std::string(indent) + "<DataArray " + a.attributes + " format=\"appended\" offset=\"" +
                    std::to_string(offset) + "\"/>\n";
    offset += 8 + a.bytes.size();
    return s;
  };
  std::string xml;
  xml += "<?xml version=\"1.0\"?>\n";
  xml += "<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"LittleEndian\" header_type=\"UInt64\">\n";
  xml += "  <UnstructuredGrid>\n";
  xml += "    <Piece NumberOfPoints=\"" + std::to_string(nv) + "\" NumberOfCells=\"" + std::to_string(nt) + "\">\n";
  xml += "      <PointData>\n";
  for (const Array& a : point_data) xml += data_array(a, "        ");
  xml += "      </PointData>\n      <CellData>\n";
  for (const Array& a : cell_data) xml += data_array(a, "        ");
  xml += "      </CellData>\n      <Points>\n";
  xml += data_array(points, "        ");
  xml += "      </Points>\n      <Cells>\n";
  xml += data_array(connectivity, "        ");
  xml += data_array(offsets, "        ");
  xml += data_array(types, "        ");
  xml += "      </Cells>\n    </Piece>\n  </UnstructuredGrid>\n";
  xml += "  <AppendedData encoding=\"raw\">\n   _";

  write_file_atomic(path, [&](std::ostream& out) {
    out << xml;
    auto put = [&](const Array& a) {
      std::string size;
      append_le(size, static_cast<std::uint64_t>(a.bytes.size()));
      out << size;
      out.write(a.bytes.data(), static_cast<std::streamsize>(a.bytes.size()));
    };
    for (const Array& a : point_data) put(a);
    for (const Array& a : cell_data) put(a);
    put(points);
    put(connectivity);
    put(offsets);
    put(types);
    out << "\n  </AppendedData>\n</VTKFile>\n";
  });
}

}  // namespace xpd::io
