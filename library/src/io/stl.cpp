// STL reader, ASCII and binary. STL stores every triangle with its own three corners; corners with
// bitwise identical coordinates are merged into one vertex so that the surface is connected.
#include <algorithm>
#include <bit>
#include <cstring>
#include <unordered_map>
#include <xpd/io/surface_formats.hpp>

#include "io/surface_detail.hpp"
#include "io/text_cursor.hpp"

namespace xpd::io {

namespace {

using detail::TextCursor;

constexpr std::size_t kBinaryHeaderBytes = 84;    // 80-byte header + uint32 triangle count
constexpr std::size_t kBinaryTriangleBytes = 50;  // normal, 3 corners (12 floats) + uint16 attribute

// Merges corners by exact coordinates (-0 and +0 count as equal).
class VertexMerger {
 public:
  explicit VertexMerger(std::size_t expected) { index_.reserve(expected); }

  int add(double x, double y, double z) {
    const Key key{bits(x), bits(y), bits(z)};
    const auto [it, inserted] = index_.try_emplace(key, static_cast<int>(xyz_.size() / 3));
    if (inserted) {
      xyz_.push_back(x);
      xyz_.push_back(y);
      xyz_.push_back(z);
    }
    return it->second;
  }
  const std::vector<double>& xyz() const { return xyz_; }

 private:
  struct Key {
    std::uint64_t a, b, c;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = k.a * 0x9E3779B97F4A7C15ull;
      h ^= k.b + 0x7F4A7C159E3779B9ull + (h << 6) + (h >> 2);
      h ^= k.c + 0x94D049BB133111EBull + (h << 6) + (h >> 2);
      return static_cast<std::size_t>(h ^ (h >> 31));
    }
  };
  static std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v == 0.0 ? 0.0 : v); }

  std::unordered_map<Key, int, Hash> index_;
  std::vector<double> xyz_;
};

std::uint32_t binary_triangle_count(std::string_view data) {
  std::uint32_t n = 0;
  std::memcpy(&n, data.data() + 80, 4);
  if constexpr (std::endian::native == std::endian::big) n = TextCursor::byteswap_value(n);
  return n;
}

SurfaceMesh parse_binary_stl(std::string_view data, const std::string& name) {
  const std::uint32_t n = binary_triangle_count(data);
  // The caller checked data.size() == 84 + 50 n, so the count is consistent with the bytes.
  VertexMerger merger(std::size_t{n} * 3 / 2);
  std::vector<int> tris;
  tris.reserve(std::size_t{n} * 3);
  for (std::size_t t = 0; t < n; ++t) {
    const char* rec = data.data() + kBinaryHeaderBytes + t * kBinaryTriangleBytes;
    for (int corner = 0; corner < 3; ++corner) {
      float p[3];
      std::memcpy(p, rec + 12 + 12 * corner, 12);
      if constexpr (std::endian::native == std::endian::big)
        for (float& v : p) v = TextCursor::byteswap_value(v);
      tris.push_back(merger.add(p[0], p[1], p[2]));
    }
  }
  (void)name;
  return detail::make_surface(merger.xyz(), tris);
}

SurfaceMesh parse_ascii_stl(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  // solid NAME / facet normal nx ny nz / outer loop / vertex x y z (3 or more) / endloop /
  // endfacet / ... / endsolid NAME; several solids may follow each other.
  VertexMerger merger(data.size() / 200);
  std::vector<int> tris;
  std::vector<int> poly;
  in.expect("solid");
  in.skip_line();
  bool in_solid = true;
  while (!in.at_end()) {
    const std::string_view t = in.next_token("'facet' or 'endsolid'");
    if (t == "facet" && in_solid) {
      in.expect("normal");
      for (int c = 0; c < 3; ++c) (void)in.next_double("a normal component");
      in.expect("outer");
      in.expect("loop");
      poly.clear();
      while (true) {
        const std::string_view v = in.next_token("'vertex' or 'endloop'");
        if (v == "endloop") break;
        if (v != "vertex") in.fail("expected 'vertex' or 'endloop', found '" + TextCursor::printable(v) + "'");
        const double x = in.next_double("a vertex coordinate");
        const double y = in.next_double("a vertex coordinate");
        const double z = in.next_double("a vertex coordinate");
        poly.push_back(merger.add(x, y, z));
      }
      if (poly.size() < 3) in.fail("facet with " + std::to_string(poly.size()) + " vertices (need at least 3)");
      in.expect("endfacet");
      detail::append_fan(tris, poly.data(), poly.size());
    } else if (t == "endsolid" && in_solid) {
      in.skip_line();
      in_solid = false;
    } else if (t == "solid" && !in_solid) {
      in.skip_line();
      in_solid = true;
    } else {
      in.fail(std::string("expected ") + (in_solid ? "'facet' or 'endsolid'" : "'solid' or end of file") + ", found '" +
              TextCursor::printable(t) + "'");
    }
  }
  if (in_solid) in.fail("unexpected end of file (expected 'endsolid')");
  return detail::make_surface(merger.xyz(), tris);
}

}  // namespace

SurfaceMesh parse_stl(std::string_view data, const std::string& name) {
  // A binary STL is exactly 84 + 50 n bytes. That test comes first because many binary files
  // start their 80-byte header with "solid" too.
  if (data.size() >= kBinaryHeaderBytes) {
    const std::uint64_t n = binary_triangle_count(data);
    if (data.size() == kBinaryHeaderBytes + n * kBinaryTriangleBytes) return parse_binary_stl(data, name);
  }
  std::size_t start = 0;
  while (start < data.size() && TextCursor::is_space(data[start])) ++start;
  // ASCII STL is plain text; a "solid" header followed by control bytes is a binary file whose
  // size disagrees with its triangle count (reported below).
  const std::string_view head = data.substr(0, 512);
  const bool text = std::all_of(head.begin(), head.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 32 || TextCursor::is_space(c);
  });
  if (data.substr(start).starts_with("solid") && (text || data.size() < kBinaryHeaderBytes))
    return parse_ascii_stl(data, name);
  if (data.size() < kBinaryHeaderBytes)
    throw IoError(name, 0,
                  "not an STL file: " + std::to_string(data.size()) +
                      " bytes, too short for a binary STL and no 'solid' keyword");
  const std::uint64_t n = binary_triangle_count(data);
  throw IoError(name, 0,
                "binary STL header claims " + std::to_string(n) + " triangles (" +
                    std::to_string(kBinaryHeaderBytes + n * kBinaryTriangleBytes) + " bytes) but the file has " +
                    std::to_string(data.size()) + " bytes (truncated file or corrupt count)");
}

}  // namespace xpd::io
