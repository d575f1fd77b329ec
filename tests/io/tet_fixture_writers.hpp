#pragma once
// Test-only serializers of a TetMesh into every tet format the readers accept, including the
// variants without shared data files (Gmsh 2.2 ASCII/binary, 4.1 binary, VTU binary/appended/
// compressed, foreign byte order). They exist to make fixtures and round trips, not as product
// writers: they favour covering format features (sparse node tags, skipped element types and
// sections, separate base64 runs) over compactness.
#include <fmt/format.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>
#include <xpd/mesh/tet_mesh.hpp>

namespace xpd::test {

/// Sparse, non-contiguous Gmsh node tag of row i.
inline std::int64_t sparse_tag(Eigen::Index i) { return 10 * i + 7; }

template <class T>
void put(std::string& out, T v, bool swap = false) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if (swap)
    for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
  out.append(b, sizeof(T));
}

inline std::string num(double v) { return fmt::format("{:.17g}", v); }

/// Gmsh 2.2, ASCII or binary (binary optionally in the foreign byte order). Adds a point and a
/// line element that the reader must skip; triangles come from mesh.boundary.
inline std::string write_msh22(const TetMesh& m, bool binary, bool swap = false) {
  std::string s = "$MeshFormat\n2.2 " + std::string(binary ? "1" : "0") + " 8\n";
  if (binary) {
    put<std::int32_t>(s, 1, swap);
    s += "\n";
  }
  s += "$EndMeshFormat\n$PhysicalNames\n1\n3 1 \"body\"\n$EndPhysicalNames\n";
  s += "$Nodes\n" + std::to_string(m.nodes.rows()) + "\n";
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i) {
    if (binary) {
      put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(i)), swap);
      for (int k = 0; k < 3; ++k) put<double>(s, m.nodes(i, k), swap);
    } else {
      s += fmt::format("{} {} {} {}\n", sparse_tag(i), num(m.nodes(i, 0)), num(m.nodes(i, 1)), num(m.nodes(i, 2)));
    }
  }
  if (binary) s += "\n";
  s += "$EndNodes\n";
  const auto nt = m.tets.rows(), nb = m.boundary.rows();
  s += "$Elements\n" + std::to_string(nt + nb + 2) + "\n";
  int tag = 1;
  if (binary) {
    // point (type 15, 1 node, 2 tags), line (type 1, 2 nodes), triangles, tets (3 tags each)
    put<std::int32_t>(s, 15, swap), put<std::int32_t>(s, 1, swap), put<std::int32_t>(s, 2, swap);
    put<std::int32_t>(s, tag++, swap), put<std::int32_t>(s, 9, swap), put<std::int32_t>(s, 9, swap);
    put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(0)), swap);
    put<std::int32_t>(s, 1, swap), put<std::int32_t>(s, 1, swap), put<std::int32_t>(s, 2, swap);
    put<std::int32_t>(s, tag++, swap), put<std::int32_t>(s, 9, swap), put<std::int32_t>(s, 9, swap);
    put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(0)), swap);
    put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(1)), swap);
    if (nb > 0) {
      put<std::int32_t>(s, 2, swap), put<std::int32_t>(s, static_cast<std::int32_t>(nb), swap),
          put<std::int32_t>(s, 2, swap);
      for (Eigen::Index e = 0; e < nb; ++e) {
        put<std::int32_t>(s, tag++, swap), put<std::int32_t>(s, 5, swap), put<std::int32_t>(s, 5, swap);
        for (int k = 0; k < 3; ++k) put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(m.boundary(e, k))), swap);
      }
    }
    put<std::int32_t>(s, 4, swap), put<std::int32_t>(s, static_cast<std::int32_t>(nt), swap),
        put<std::int32_t>(s, 3, swap);
    for (Eigen::Index e = 0; e < nt; ++e) {
      put<std::int32_t>(s, tag++, swap), put<std::int32_t>(s, 3, swap), put<std::int32_t>(s, 1, swap);
      put<std::int32_t>(s, 0, swap);
      for (int k = 0; k < 4; ++k) put<std::int32_t>(s, static_cast<std::int32_t>(sparse_tag(m.tets(e, k))), swap);
    }
    s += "\n";
  } else {
    s += fmt::format("{} 15 2 9 9 {}\n", tag++, sparse_tag(0));
    s += fmt::format("{} 1 2 9 9 {} {}\n", tag++, sparse_tag(0), sparse_tag(1));
    for (Eigen::Index e = 0; e < nb; ++e)
      s += fmt::format("{} 2 2 5 5 {} {} {}\n", tag++, sparse_tag(m.boundary(e, 0)), sparse_tag(m.boundary(e, 1)),
                       sparse_tag(m.boundary(e, 2)));
    for (Eigen::Index e = 0; e < nt; ++e)
      s += fmt::format("{} 4 3 3 1 0 {} {} {} {}\n", tag++, sparse_tag(m.tets(e, 0)), sparse_tag(m.tets(e, 1)),
                       sparse_tag(m.tets(e, 2)), sparse_tag(m.tets(e, 3)));
  }
  s += "$EndElements\n";
  return s;
}

/// Gmsh 4.1, ASCII or binary: nodes in two entity blocks (sparse tags), an $Entities section to
/// skip, a line block, a triangle block and a tet block.
inline std::string write_msh41(const TetMesh& m, bool binary, bool swap = false) {
  std::string s = "$MeshFormat\n4.1 " + std::string(binary ? "1" : "0") + " 8\n";
  if (binary) {
    put<std::int32_t>(s, 1, swap);
    s += "\n";
  }
  s += "$EndMeshFormat\n";
  // A (text) $Entities section: one volume; the reader skips it.
  s += "$Entities\n0 0 0 1\n1 0 0 0 1 1 1 0 0\n$EndEntities\n";
  const auto nv = m.nodes.rows(), nt = m.tets.rows(), nb = m.boundary.rows();
  const Eigen::Index split = nv / 2;
  const auto u64 = [&](std::uint64_t v) { put<std::uint64_t>(s, v, swap); };
  const auto i32 = [&](std::int32_t v) { put<std::int32_t>(s, v, swap); };
  s += "$Nodes\n";
  const auto block = [&](Eigen::Index lo, Eigen::Index hi, int dim) {
    if (binary) {
      i32(dim), i32(1), i32(0), u64(static_cast<std::uint64_t>(hi - lo));
      for (Eigen::Index i = lo; i < hi; ++i) u64(static_cast<std::uint64_t>(sparse_tag(i)));
      for (Eigen::Index i = lo; i < hi; ++i)
        for (int k = 0; k < 3; ++k) put<double>(s, m.nodes(i, k), swap);
    } else {
      s += fmt::format("{} 1 0 {}\n", dim, hi - lo);
      for (Eigen::Index i = lo; i < hi; ++i) s += std::to_string(sparse_tag(i)) + "\n";
      for (Eigen::Index i = lo; i < hi; ++i)
        s += num(m.nodes(i, 0)) + " " + num(m.nodes(i, 1)) + " " + num(m.nodes(i, 2)) + "\n";
    }
  };
  if (binary)
    u64(2), u64(static_cast<std::uint64_t>(nv)), u64(7), u64(static_cast<std::uint64_t>(sparse_tag(nv - 1)));
  else
    s += fmt::format("2 {} 7 {}\n", nv, sparse_tag(nv - 1));
  block(0, split, 2);
  block(split, nv, 3);
  if (binary) s += "\n";
  s += "$EndNodes\n$Elements\n";
  const std::uint64_t total = static_cast<std::uint64_t>(nt + nb + 1);
  std::uint64_t tag = 1;
  if (binary) {
    u64(3), u64(total), u64(1), u64(total);
    i32(1), i32(1), i32(1), u64(1);
    u64(tag++), u64(static_cast<std::uint64_t>(sparse_tag(0))), u64(static_cast<std::uint64_t>(sparse_tag(1)));
    i32(2), i32(1), i32(2), u64(static_cast<std::uint64_t>(nb));
    for (Eigen::Index e = 0; e < nb; ++e) {
      u64(tag++);
      for (int k = 0; k < 3; ++k) u64(static_cast<std::uint64_t>(sparse_tag(m.boundary(e, k))));
    }
    i32(3), i32(1), i32(4), u64(static_cast<std::uint64_t>(nt));
    for (Eigen::Index e = 0; e < nt; ++e) {
      u64(tag++);
      for (int k = 0; k < 4; ++k) u64(static_cast<std::uint64_t>(sparse_tag(m.tets(e, k))));
    }
    s += "\n";
  } else {
    s += fmt::format("3 {} 1 {}\n", total, total);
    s += fmt::format("1 1 1 1\n{} {} {}\n", tag++, sparse_tag(0), sparse_tag(1));
    s += fmt::format("2 1 2 {}\n", nb);
    for (Eigen::Index e = 0; e < nb; ++e)
      s += fmt::format("{} {} {} {}\n", tag++, sparse_tag(m.boundary(e, 0)), sparse_tag(m.boundary(e, 1)),
                       sparse_tag(m.boundary(e, 2)));
    s += fmt::format("3 1 4 {}\n", nt);
    for (Eigen::Index e = 0; e < nt; ++e)
      s += fmt::format("{} {} {} {} {}\n", tag++, sparse_tag(m.tets(e, 0)), sparse_tag(m.tets(e, 1)),
                       sparse_tag(m.tets(e, 2)), sparse_tag(m.tets(e, 3)));
  }
  s += "$EndElements\n";
  return s;
}

/// Gmsh v1 ($NOD/$ELM) with sparse node numbers and a line element.
inline std::string write_msh1(const TetMesh& m) {
  std::string s = "$NOD\n" + std::to_string(m.nodes.rows()) + "\n";
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
    s += fmt::format("{} {} {} {}\n", sparse_tag(i), num(m.nodes(i, 0)), num(m.nodes(i, 1)), num(m.nodes(i, 2)));
  s += "$ENDNOD\n$ELM\n" + std::to_string(m.tets.rows() + m.boundary.rows() + 1) + "\n";
  int tag = 1;
  s += fmt::format("{} 1 1 1 2 {} {}\n", tag++, sparse_tag(0), sparse_tag(1));
  for (Eigen::Index e = 0; e < m.boundary.rows(); ++e)
    s += fmt::format("{} 2 2 2 3 {} {} {}\n", tag++, sparse_tag(m.boundary(e, 0)), sparse_tag(m.boundary(e, 1)),
                     sparse_tag(m.boundary(e, 2)));
  for (Eigen::Index e = 0; e < m.tets.rows(); ++e)
    s += fmt::format("{} 4 3 3 4 {} {} {} {}\n", tag++, sparse_tag(m.tets(e, 0)), sparse_tag(m.tets(e, 1)),
                     sparse_tag(m.tets(e, 2)), sparse_tag(m.tets(e, 3)));
  return s + "$ENDELM\n";
}

/// Medit with mixed-case keywords, comments and sections the reader must skip.
inline std::string write_medit(const TetMesh& m) {
  std::string s =
      "MeshVersionFormatted 1\n# a comment line\nDimension\n3\nvertices\n" + std::to_string(m.nodes.rows()) + "\n";
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
    s += num(m.nodes(i, 0)) + " " + num(m.nodes(i, 1)) + " " + num(m.nodes(i, 2)) + " 0\n";
  s += "Corners\n2\n1 2\nRequiredVertices\n1\n1\nEdges\n1\n1 2 0\n";
  s += "Triangles\n" + std::to_string(m.boundary.rows()) + "\n";
  for (Eigen::Index e = 0; e < m.boundary.rows(); ++e)
    s += fmt::format("{} {} {} 1\n", m.boundary(e, 0) + 1, m.boundary(e, 1) + 1, m.boundary(e, 2) + 1);
  s += "TETRAHEDRA\n" + std::to_string(m.tets.rows()) + "\n";
  for (Eigen::Index e = 0; e < m.tets.rows(); ++e)
    s += fmt::format("{} {} {} {} {}\n", m.tets(e, 0) + 1, m.tets(e, 1) + 1, m.tets(e, 2) + 1, m.tets(e, 3) + 1,
                     m.region.empty() ? 0 : m.region[static_cast<std::size_t>(e)]);
  return s + "Ridges\n0\nEnd\n";
}

/// TetGen .node (with an attribute and boundary markers) and .ele (with a region attribute).
inline std::pair<std::string, std::string> write_tetgen(const TetMesh& m, int base) {
  std::string node = "# generated\n" + fmt::format("{} 3 1 1\n", m.nodes.rows());
  for (Eigen::Index i = 0; i < m.nodes.rows(); ++i)
    node += fmt::format("{} {} {} {} 0.5 1  # node\n", i + base, num(m.nodes(i, 0)), num(m.nodes(i, 1)),
                        num(m.nodes(i, 2)));
  std::string ele = fmt::format("{} 4 1\n", m.tets.rows());
  for (Eigen::Index e = 0; e < m.tets.rows(); ++e)
    ele += fmt::format("{} {} {} {} {} {}\n", e + base, m.tets(e, 0) + base, m.tets(e, 1) + base, m.tets(e, 2) + base,
                       m.tets(e, 3) + base, m.region.empty() ? 0 : m.region[static_cast<std::size_t>(e)]);
  return {node, ele + "# end\n"};
}

enum class VtuMode { Ascii, Binary, BinaryZlib, AppendedRaw, AppendedBase64, AppendedRawZlib };

inline std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const auto a = static_cast<unsigned char>(in[i]), b = static_cast<unsigned char>(in[i + 1]),
               c = static_cast<unsigned char>(in[i + 2]);
    out += t[a >> 2], out += t[((a & 3) << 4) | (b >> 4)], out += t[((b & 15) << 2) | (c >> 6)], out += t[c & 63];
  }
  if (i + 1 == in.size()) {
    const auto a = static_cast<unsigned char>(in[i]);
    out += t[a >> 2], out += t[(a & 3) << 4], out += "==";
  } else if (i + 2 == in.size()) {
    const auto a = static_cast<unsigned char>(in[i]), b = static_cast<unsigned char>(in[i + 1]);
    out += t[a >> 2], out += t[((a & 3) << 4) | (b >> 4)], out += t[(b & 15) << 2], out += "=";
  }
  return out;
}

/// VTU in any encoding. Points Float64 (or Float32), connectivity/offsets Int64 (or Int32),
/// types UInt8; boundary triangles are written as triangle cells. `header64`: UInt64 headers.
inline std::string write_vtu(const TetMesh& m, VtuMode mode, bool header64 = false, bool big_endian = false,
                             bool float32 = false) {
  const bool swap = big_endian;  // tests run on little-endian hosts
  const auto nv = m.nodes.rows(), nt = m.tets.rows(), nb = m.boundary.rows();
  std::string pts, conn, offs, types;
  for (Eigen::Index i = 0; i < nv; ++i)
    for (int k = 0; k < 3; ++k)
      float32 ? put<float>(pts, static_cast<float>(m.nodes(i, k)), swap) : put<double>(pts, m.nodes(i, k), swap);
  std::int64_t off = 0;
  for (Eigen::Index e = 0; e < nt; ++e) {
    for (int k = 0; k < 4; ++k)
      float32 ? put<std::int32_t>(conn, m.tets(e, k), swap) : put<std::int64_t>(conn, m.tets(e, k), swap);
    off += 4;
    float32 ? put<std::int32_t>(offs, static_cast<std::int32_t>(off), swap) : put<std::int64_t>(offs, off, swap);
    types += static_cast<char>(10);
  }
  for (Eigen::Index e = 0; e < nb; ++e) {
    for (int k = 0; k < 3; ++k)
      float32 ? put<std::int32_t>(conn, m.boundary(e, k), swap) : put<std::int64_t>(conn, m.boundary(e, k), swap);
    off += 3;
    float32 ? put<std::int32_t>(offs, static_cast<std::int32_t>(off), swap) : put<std::int64_t>(offs, off, swap);
    types += static_cast<char>(5);
  }
  const bool zlib = mode == VtuMode::BinaryZlib || mode == VtuMode::AppendedRawZlib;
  const auto header = [&](std::string& h, std::uint64_t v) {
    header64 ? put<std::uint64_t>(h, v, swap) : put<std::uint32_t>(h, static_cast<std::uint32_t>(v), swap);
  };
  // Encoded (header, body) of one array, before base64.
  const auto encode = [&](const std::string& raw) -> std::pair<std::string, std::string> {
    std::string h, body;
    if (!zlib) {
      header(h, raw.size());
      return {h, raw};
    }
    const std::size_t block = 64;  // small blocks: exercise multi-block decoding
    const std::size_t nblocks = raw.empty() ? 0 : (raw.size() + block - 1) / block;
    std::vector<std::uint64_t> sizes;
    for (std::size_t b = 0; b < nblocks; ++b) {
      const std::string chunk = raw.substr(b * block, block);
      uLongf len = compressBound(static_cast<uLong>(chunk.size()));
      std::string out(len, '\0');
      compress(reinterpret_cast<Bytef*>(out.data()), &len, reinterpret_cast<const Bytef*>(chunk.data()),
               static_cast<uLong>(chunk.size()));
      out.resize(len);
      sizes.push_back(len);
      body += out;
    }
    header(h, nblocks), header(h, block), header(h, raw.size() % block);
    for (auto sz : sizes) header(h, sz);
    return {h, body};
  };
  std::string appended;
  const auto array = [&](const char* type, const char* name, int comps, const std::string& raw,
                         const std::string& ascii) {
    std::string s =
        fmt::format("<DataArray type=\"{}\" {}{}format=\"", type, name[0] ? fmt::format("Name=\"{}\" ", name) : "",
                    comps > 1 ? fmt::format("NumberOfComponents=\"{}\" ", comps) : "");
    if (mode == VtuMode::Ascii) return s + "ascii\">\n" + ascii + "\n</DataArray>\n";
    const auto [h, body] = encode(raw);
    if (mode == VtuMode::Binary || mode == VtuMode::BinaryZlib)
      return s + "binary\">\n" + base64(h) + base64(body) + "\n</DataArray>\n";
    s += fmt::format("appended\" offset=\"{}\"/>\n", appended.size());
    appended += mode == VtuMode::AppendedBase64 ? base64(h) + base64(body) : h + body;
    return s;
  };
  std::string ap, ac, ao, at;
  for (Eigen::Index i = 0; i < nv; ++i)
    ap += num(m.nodes(i, 0)) + " " + num(m.nodes(i, 1)) + " " + num(m.nodes(i, 2)) + "\n";
  off = 0;
  for (Eigen::Index e = 0; e < nt; ++e) {
    ac += fmt::format("{} {} {} {}\n", m.tets(e, 0), m.tets(e, 1), m.tets(e, 2), m.tets(e, 3));
    ao += std::to_string(off += 4) + " ";
    at += "10 ";
  }
  for (Eigen::Index e = 0; e < nb; ++e) {
    ac += fmt::format("{} {} {}\n", m.boundary(e, 0), m.boundary(e, 1), m.boundary(e, 2));
    ao += std::to_string(off += 3) + " ";
    at += "5 ";
  }
  const char* it = float32 ? "Int32" : "Int64";
  std::string s = "<?xml version=\"1.0\"?>\n<!-- test fixture -->\n";
  s += fmt::format("<VTKFile type=\"UnstructuredGrid\" version=\"1.0\" byte_order=\"{}\" header_type=\"{}\"{}>\n",
                   big_endian ? "BigEndian" : "LittleEndian", header64 ? "UInt64" : "UInt32",
                   zlib ? " compressor=\"vtkZLibDataCompressor\"" : "");
  s += fmt::format("<UnstructuredGrid>\n<Piece NumberOfPoints=\"{}\" NumberOfCells=\"{}\">\n", nv, nt + nb);
  s += "<PointData Scalars=\"t\">\n<DataArray type=\"Float64\" Name=\"t\" format=\"ascii\">0 1 "
       "2</DataArray>\n</PointData>\n";
  s += "<Points>\n" + array(float32 ? "Float32" : "Float64", "", 3, pts, ap) + "</Points>\n";
  s += "<Cells>\n" + array(it, "connectivity", 1, conn, ac) + array(it, "offsets", 1, offs, ao) +
       array("UInt8", "types", 1, types, at) + "</Cells>\n</Piece>\n</UnstructuredGrid>\n";
  if (!appended.empty() || mode == VtuMode::AppendedRaw || mode == VtuMode::AppendedBase64 ||
      mode == VtuMode::AppendedRawZlib)
    s += std::string("<AppendedData encoding=\"") + (mode == VtuMode::AppendedBase64 ? "base64" : "raw") + "\">\n_" +
         appended + "\n</AppendedData>\n";
  return s + "</VTKFile>\n";
}

}  // namespace xpd::test
