// Wavefront OBJ reader and writer (geometry only: `v` and `f`).
#include <array>
#include <charconv>
#include <ostream>
#include <xpd/io/surface_formats.hpp>

#include "io/surface_detail.hpp"
#include "io/text_cursor.hpp"

namespace xpd::io {

namespace {

using detail::TextCursor;

// Vertex index of one face corner: "7", "7/2", "7/2/5", "7//5", "-1". Returns the 0-based index
// (relative indices resolved against the `vertex_count` vertices read so far).
int face_corner(TextCursor& in, std::string_view token, std::int64_t vertex_count) {
  const std::string_view head = token.substr(0, token.find('/'));
  const auto v = detail::to_int(head);
  if (!v) in.fail("bad vertex index '" + TextCursor::printable(token) + "' in face");
  if (*v == 0) in.fail("vertex index 0 in face (OBJ indices start at 1)");
  // Positive indices are 1-based; negative ones count back from the last vertex read (-1 = last).
  const std::int64_t index = *v > 0 ? *v - 1 : vertex_count + *v;
  if (!detail::fits_int(index) || (*v > 0 && *v > std::numeric_limits<int>::max()))
    in.fail("vertex index '" + TextCursor::printable(token) + "' out of range");
  return static_cast<int>(index);
}

// Next token of the statement; empty at the end of the line or at a trailing '#' comment.
std::string_view next_field(TextCursor& in) {
  const std::string_view t = in.next_token_on_line();
  return !t.empty() && t.front() == '#' ? std::string_view() : t;
}

}  // namespace

SurfaceMesh parse_obj(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  std::vector<double> xyz;
  std::vector<int> tris;
  std::vector<int> poly;
  // One statement per line; unknown statements (vn, vt, usemtl, g, o, s, mtllib, l, ...) are skipped.
  while (!in.at_end()) {
    const std::string_view key = in.next_token_on_line();
    if (key == "v") {
      for (int c = 0; c < 3; ++c) {
        const std::string_view t = next_field(in);
        if (t.empty()) in.fail("vertex has fewer than 3 coordinates");
        const auto x = detail::to_double(t);
        if (!x) in.fail("bad vertex coordinate '" + TextCursor::printable(t) + "'");
        xyz.push_back(*x);
      }
    } else if (key == "f") {
      poly.clear();
      const auto vertex_count = static_cast<std::int64_t>(xyz.size() / 3);
      for (std::string_view t = next_field(in); !t.empty(); t = next_field(in))
        poly.push_back(face_corner(in, t, vertex_count));
      if (poly.size() < 3) in.fail("face with " + std::to_string(poly.size()) + " vertices (need at least 3)");
      detail::append_fan(tris, poly.data(), poly.size());
    }
    in.skip_line();  // rest of the statement: texture/normal data, comments, vertex colours, w
  }
  return detail::make_surface(xyz, tris);
}

namespace {

// Shortest representation that reads back to the same double.
void put_double(std::ostream& out, double v) {
  std::array<char, 32> buf;
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.write(buf.data(), r.ptr - buf.data());
}

}  // namespace

void write_obj(std::ostream& out, const SurfaceMesh& surface) {
  out << "# written by xpd\n";
  for (Eigen::Index i = 0; i < surface.nodes.rows(); ++i) {
    out << "v";
    for (int c = 0; c < 3; ++c) {
      out << ' ';
      put_double(out, surface.nodes(i, c));
    }
    out << '\n';
  }
  for (Eigen::Index f = 0; f < surface.triangles.rows(); ++f)
    out << "f " << surface.triangles(f, 0) + 1 << ' ' << surface.triangles(f, 1) + 1 << ' '
        << surface.triangles(f, 2) + 1 << '\n';
}

}  // namespace xpd::io
