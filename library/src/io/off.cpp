// Object File Format (OFF) reader: "OFF" (also COFF / NOFF / CNOFF / STOFF ... variants whose
// extra per-vertex data is skipped), counts, vertices, polygons.
#include <xpd/io/surface_formats.hpp>

#include "io/surface_detail.hpp"
#include "io/text_cursor.hpp"

namespace xpd::io {

namespace {

using detail::TextCursor;

// OFF headers: optional ST (texture), C (colour), N (normal), 4 (homogeneous), then "OFF".
bool is_off_keyword(std::string_view t) {
  if (!t.ends_with("OFF")) return false;
  for (char c : t.substr(0, t.size() - 3))
    if (c != 'S' && c != 'T' && c != 'C' && c != 'N' && c != '4') return false;
  return true;
}

}  // namespace

SurfaceMesh parse_off(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  in.skip_whitespace_and_comments('#');
  const std::string_view keyword = in.next_token("the OFF header keyword");
  if (!is_off_keyword(keyword))
    in.fail("not an OFF file: expected 'OFF', found '" + TextCursor::printable(keyword) + "'");
  if (keyword.find('4') != std::string_view::npos) in.fail("4OFF (homogeneous 4D coordinates) is not supported");
  in.skip_whitespace_and_comments('#');
  const std::int64_t nv = in.next_int("the vertex count");
  const std::int64_t nf = in.next_int("the face count");
  (void)in.next_int("the edge count");
  // Before allocating, on the header line: every vertex needs >= 6 bytes ("0 0 0\n"), every face
  // >= 2 (its vertex count and a separator; the face loop checks its vertex list the same way).
  const std::size_t vertex_count = in.check_count(nv, 6, "vertices");
  const std::size_t face_count = in.check_count(nf, 2, "faces");
  if (static_cast<std::uint64_t>(vertex_count) * 6 + static_cast<std::uint64_t>(face_count) * 2 > in.remaining() + 1)
    in.fail("header claims " + std::to_string(nv) + " vertices and " + std::to_string(nf) + " faces but only " +
            std::to_string(in.remaining()) + " bytes remain (truncated file or corrupt counts)");
  in.skip_line();

  std::vector<double> xyz;
  xyz.reserve(vertex_count * 3);
  for (std::size_t i = 0; i < vertex_count; ++i) {
    in.skip_whitespace_and_comments('#');
    if (in.at_end())
      in.fail("unexpected end of file: header claims " + std::to_string(nv) + " vertices, found " + std::to_string(i));
    for (int c = 0; c < 3; ++c) {
      const std::string_view t = in.next_token_on_line();
      if (t.empty()) in.fail("vertex " + std::to_string(i) + " has fewer than 3 coordinates");
      const auto x = detail::to_double(t);
      if (!x) in.fail("bad coordinate '" + TextCursor::printable(t) + "' of vertex " + std::to_string(i));
      xyz.push_back(*x);
    }
    in.skip_line();  // colour, normal or texture data of the C/N/ST variants
  }

  std::vector<int> tris;
  tris.reserve(face_count * 3);
  std::vector<int> poly;
  for (std::size_t f = 0; f < face_count; ++f) {
    in.skip_whitespace_and_comments('#');
    if (in.at_end())
      in.fail("unexpected end of file: header claims " + std::to_string(nf) + " faces, found " + std::to_string(f));
    const std::string_view tn = in.next_token_on_line();
    const auto n = detail::to_int(tn);
    if (!n) in.fail("bad vertex count '" + TextCursor::printable(tn) + "' of face " + std::to_string(f));
    if (*n < 3) in.fail("face " + std::to_string(f) + " has " + std::to_string(*n) + " vertices (need at least 3)");
    // Each index takes >= 2 bytes with its separator (the last one may end the file).
    if (static_cast<std::uint64_t>(*n) > (in.remaining() + 1) / 2)
      in.fail("face " + std::to_string(f) + " claims " + std::to_string(*n) + " vertices but only " +
              std::to_string(in.remaining()) + " bytes remain");
    const auto corners = static_cast<std::size_t>(*n);
    poly.clear();
    for (std::size_t k = 0; k < corners; ++k) {
      const std::string_view t = in.next_token_on_line();
      if (t.empty())
        in.fail("face " + std::to_string(f) + " lists fewer vertices than its count " + std::to_string(*n));
      const auto v = detail::to_int(t);
      if (!v) in.fail("bad vertex index '" + TextCursor::printable(t) + "' in face " + std::to_string(f));
      if (!detail::fits_int(*v))
        in.fail("vertex index " + std::to_string(*v) + " out of range in face " + std::to_string(f));
      poly.push_back(static_cast<int>(*v));
    }
    in.skip_line();  // optional face colour
    detail::append_fan(tris, poly.data(), poly.size());
  }
  return detail::make_surface(xyz, tris);
}

}  // namespace xpd::io
