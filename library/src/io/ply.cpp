// Stanford PLY reader (ascii, binary_little_endian, binary_big_endian) and binary writer.
// The reader takes x, y, z of the `vertex` element (any scalar type) and the `vertex_indices` /
// `vertex_index` list of the `face` element (any count and index types); every other property
// and element is skipped by its size.
#include <bit>
#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>
#include <xpd/io/surface_formats.hpp>

#include "io/surface_detail.hpp"
#include "io/text_cursor.hpp"

namespace xpd::io {

namespace {

using detail::split_tokens;
using detail::TextCursor;

enum class Scalar { I8, U8, I16, U16, I32, U32, F32, F64 };

bool parse_scalar(std::string_view t, Scalar& s) {
  if (t == "char" || t == "int8")
    s = Scalar::I8;
  else if (t == "uchar" || t == "uint8")
    s = Scalar::U8;
  else if (t == "short" || t == "int16")
    s = Scalar::I16;
  else if (t == "ushort" || t == "uint16")
    s = Scalar::U16;
  else if (t == "int" || t == "int32")
    s = Scalar::I32;
  else if (t == "uint" || t == "uint32")
    s = Scalar::U32;
  else if (t == "float" || t == "float32")
    s = Scalar::F32;
  else if (t == "double" || t == "float64")
    s = Scalar::F64;
  else
    return false;
  return true;
}

std::size_t scalar_size(Scalar s) {
  switch (s) {
    case Scalar::I8:
    case Scalar::U8:
      return 1;
    case Scalar::I16:
    case Scalar::U16:
      return 2;
    case Scalar::I32:
    case Scalar::U32:
    case Scalar::F32:
      return 4;
    case Scalar::F64:
      return 8;
  }
  return 1;
}

bool is_integral(Scalar s) { return s != Scalar::F32 && s != Scalar::F64; }

struct Property {
  std::string name;
  Scalar type = Scalar::F32;  // value type (item type of a list)
  bool is_list = false;
  Scalar count_type = Scalar::U8;
};

struct Element {
  std::string name;
  std::int64_t count = 0;
  std::size_t line = 0;  // header line declaring it
  std::vector<Property> properties;
};

enum class Format { Ascii, BinaryLittle, BinaryBig };

// Reads values of the body, ascii or binary, behind one interface. Errors name the line (ascii)
// or the byte offset (binary).
class BodyReader {
 public:
  BodyReader(TextCursor& text, Format format, const std::string& name) : text_(text), format_(format), name_(name) {
    swap_ = (format == Format::BinaryLittle && std::endian::native == std::endian::big) ||
            (format == Format::BinaryBig && std::endian::native == std::endian::little);
  }

  [[noreturn]] void fail(const std::string& message) const {
    if (format_ == Format::Ascii) text_.fail(message);
    throw IoError(name_, 0, "at byte offset " + std::to_string(text_.offset()) + ": " + message);
  }

  /// One value of type `s`, as a double (exact for every PLY integer type).
  double value(Scalar s, const char* what) {
    if (format_ == Format::Ascii) {
      const std::string_view t = text_.next_token(what);
      if (is_integral(s)) {
        const auto v = detail::to_int(t);
        if (!v)
          text_.fail(std::string("expected an integer for ") + what + ", found '" + TextCursor::printable(t) + "'");
        if (*v < -(std::int64_t{1} << 32) || *v > (std::int64_t{1} << 32))
          text_.fail(std::string("integer out of range for ") + what + ": '" + TextCursor::printable(t) + "'");
        return static_cast<double>(*v);
      }
      const auto v = detail::to_double(t);
      if (!v) text_.fail(std::string("expected a number for ") + what + ", found '" + TextCursor::printable(t) + "'");
      return *v;
    }
    if (text_.remaining() < scalar_size(s)) fail(std::string("unexpected end of file in ") + what);
    switch (s) {
      case Scalar::I8:
        return raw<std::int8_t>();
      case Scalar::U8:
        return raw<std::uint8_t>();
      case Scalar::I16:
        return raw<std::int16_t>();
      case Scalar::U16:
        return raw<std::uint16_t>();
      case Scalar::I32:
        return raw<std::int32_t>();
      case Scalar::U32:
        return raw<std::uint32_t>();
      case Scalar::F32:
        return raw<float>();
      case Scalar::F64:
        return raw<double>();
    }
    return 0;
  }

  /// A list length or vertex index: must be integral.
  std::int64_t integer(Scalar s, const char* what) {
    const double v = value(s, what);
    if (!(std::floor(v) == v) || std::fabs(v) > 9.0e15)
      fail(std::string("non-integer ") + what + " " + std::to_string(v));
    return static_cast<std::int64_t>(v);
  }

  /// Skips one property value (scalar or whole list).
  void skip(const Property& p) {
    if (!p.is_list) {
      if (format_ == Format::Ascii)
        (void)text_.next_token("a property value");
      else
        skip_bytes(scalar_size(p.type), "a property value");
      return;
    }
    const std::int64_t n = integer(p.count_type, "a list length");
    if (n < 0) fail("negative list length " + std::to_string(n) + " of property '" + p.name + "'");
    if (format_ == Format::Ascii) {
      (void)text_.check_count(n, 2, "list items");
      for (std::int64_t k = 0; k < n; ++k) (void)text_.next_token("a list item");
    } else {
      const std::size_t sz = scalar_size(p.type);
      if (static_cast<std::uint64_t>(n) > text_.remaining() / sz)
        fail("unexpected end of file in list '" + p.name + "'");
      skip_bytes(static_cast<std::size_t>(n) * sz, "a list");
    }
  }

 private:
  template <class T>
  double raw() {
    T v;
    const std::string_view bytes = text_.read_bytes(sizeof(T));
    std::memcpy(&v, bytes.data(), sizeof(T));
    if (swap_) v = TextCursor::byteswap_value(v);
    return static_cast<double>(v);
  }
  void skip_bytes(std::size_t n, const char* what) {
    if (text_.remaining() < n) fail(std::string("unexpected end of file in ") + what);
    (void)text_.read_bytes(n);
  }

  TextCursor& text_;
  Format format_;
  const std::string& name_;
  bool swap_ = false;
};

}  // namespace

SurfaceMesh parse_ply(std::string_view data, const std::string& name) {
  TextCursor in(data, name);
  auto header_line = [&](std::size_t& line_no) {
    if (in.remaining() == 0) in.fail("unexpected end of file in the PLY header (no end_header)");
    line_no = in.line();
    return in.rest_of_line();
  };
  auto fail_at = [&](std::size_t line_no, const std::string& message) -> void {
    throw IoError(name, line_no, message);
  };

  // --- Header ---
  std::size_t line_no = 0;
  if (header_line(line_no) != "ply") fail_at(1, "not a PLY file (first line must be 'ply')");
  bool have_format = false;
  Format format = Format::Ascii;
  std::vector<Element> elements;
  while (true) {
    const std::vector<std::string_view> tok = split_tokens(header_line(line_no));
    if (tok.empty()) continue;
    if (tok[0] == "end_header") break;
    if (tok[0] == "comment" || tok[0] == "obj_info") continue;
    if (tok[0] == "format") {
      if (tok.size() < 2) fail_at(line_no, "format line without a format");
      if (tok[1] == "ascii")
        format = Format::Ascii;
      else if (tok[1] == "binary_little_endian")
        format = Format::BinaryLittle;
      else if (tok[1] == "binary_big_endian")
        format = Format::BinaryBig;
      else
        fail_at(line_no, "unknown PLY format '" + TextCursor::printable(tok[1]) + "'");
      have_format = true;
    } else if (tok[0] == "element") {
      if (tok.size() < 3) fail_at(line_no, "element line needs a name and a count");
      const auto count = detail::to_int(tok[2]);
      if (!count)
        fail_at(line_no,
                "bad count '" + TextCursor::printable(tok[2]) + "' of element '" + TextCursor::printable(tok[1]) + "'");
      if (*count < 0) fail_at(line_no, "negative count of element '" + TextCursor::printable(tok[1]) + "'");
      elements.push_back({std::string(tok[1]), *count, line_no, {}});
    } else if (tok[0] == "property") {
      if (elements.empty()) fail_at(line_no, "property before any element");
      Property p;
      if (tok.size() >= 2 && tok[1] == "list") {
        if (tok.size() < 5) fail_at(line_no, "list property needs a count type, an item type and a name");
        if (!parse_scalar(tok[2], p.count_type))
          fail_at(line_no, "unknown PLY type '" + TextCursor::printable(tok[2]) + "'");
        if (!is_integral(p.count_type)) fail_at(line_no, "list count type must be an integer type");
        if (!parse_scalar(tok[3], p.type)) fail_at(line_no, "unknown PLY type '" + TextCursor::printable(tok[3]) + "'");
        p.is_list = true;
        p.name = std::string(tok[4]);
      } else {
        if (tok.size() < 3) fail_at(line_no, "property needs a type and a name");
        if (!parse_scalar(tok[1], p.type)) fail_at(line_no, "unknown PLY type '" + TextCursor::printable(tok[1]) + "'");
        p.name = std::string(tok[2]);
      }
      elements.back().properties.push_back(std::move(p));
    } else {
      fail_at(line_no, "unknown PLY header keyword '" + TextCursor::printable(tok[0]) + "'");
    }
  }
  if (!have_format) fail_at(line_no, "PLY header has no format line");

  // --- Body ---
  BodyReader body(in, format, name);
  std::vector<double> xyz;
  std::vector<int> tris;
  std::vector<int> poly;
  bool seen_vertex = false, seen_face = false;
  for (const Element& e : elements) {
    if (e.properties.empty()) continue;  // nothing stored per item
    // Smallest possible size of one item: refuse counts the remaining bytes cannot hold.
    std::size_t min_bytes = 0;
    for (const Property& p : e.properties)
      min_bytes += format == Format::Ascii ? 2 : scalar_size(p.is_list ? p.count_type : p.type);
    const std::string what = "'" + e.name + "' elements";
    if (format == Format::Ascii)
      (void)in.check_count(e.count, min_bytes, what.c_str());
    else if (static_cast<std::uint64_t>(e.count) > in.remaining() / min_bytes)
      throw IoError(name, e.line,
                    "header claims " + std::to_string(e.count) + " " + what + " (at least " +
                        std::to_string(min_bytes) + " bytes each) but only " + std::to_string(in.remaining()) +
                        " bytes remain (truncated file or corrupt count)");
    const auto count = static_cast<std::size_t>(e.count);

    if (e.name == "vertex") {
      if (seen_vertex) throw IoError(name, e.line, "second 'vertex' element");
      seen_vertex = true;
      int axis[3] = {-1, -1, -1};
      for (std::size_t k = 0; k < e.properties.size(); ++k) {
        const Property& p = e.properties[k];
        const int c = p.name == "x" ? 0 : p.name == "y" ? 1 : p.name == "z" ? 2 : -1;
        if (c >= 0 && !p.is_list) axis[c] = static_cast<int>(k);
      }
      for (int c = 0; c < 3; ++c)
        if (axis[c] < 0)
          throw IoError(name, e.line, std::string("vertex element has no scalar property '") + "xyz"[c] + "'");
      xyz.assign(count * 3, 0.0);
      for (std::size_t i = 0; i < count; ++i)
        for (std::size_t k = 0; k < e.properties.size(); ++k) {
          const Property& p = e.properties[k];
          const int c = static_cast<int>(k) == axis[0]   ? 0
                        : static_cast<int>(k) == axis[1] ? 1
                        : static_cast<int>(k) == axis[2] ? 2
                                                         : -1;
          if (c >= 0)
            xyz[3 * i + c] = body.value(p.type, "a vertex coordinate");
          else
            body.skip(p);
        }
    } else if (e.name == "face") {
      if (seen_face) throw IoError(name, e.line, "second 'face' element");
      seen_face = true;
      int list = -1;
      for (std::size_t k = 0; k < e.properties.size(); ++k) {
        const Property& p = e.properties[k];
        if (p.is_list && (p.name == "vertex_indices" || p.name == "vertex_index")) list = static_cast<int>(k);
      }
      if (list < 0) throw IoError(name, e.line, "face element has no list property 'vertex_indices' or 'vertex_index'");
      tris.reserve(count * 3);
      for (std::size_t i = 0; i < count; ++i)
        for (std::size_t k = 0; k < e.properties.size(); ++k) {
          const Property& p = e.properties[k];
          if (static_cast<int>(k) != list) {
            body.skip(p);
            continue;
          }
          const std::int64_t n = body.integer(p.count_type, "a face vertex count");
          if (n < 3)
            body.fail("face " + std::to_string(i) + " has " + std::to_string(n) + " vertices (need at least 3)");
          // Refuse list lengths the remaining bytes cannot hold (ascii: >= 2 bytes per index, the
          // last one possibly without a separator).
          if (format == Format::Ascii ? static_cast<std::uint64_t>(n) > (in.remaining() + 1) / 2
                                      : static_cast<std::uint64_t>(n) > in.remaining() / scalar_size(p.type))
            body.fail("face " + std::to_string(i) + " claims " + std::to_string(n) +
                      " vertices, more than the remaining bytes hold");
          poly.clear();
          for (std::int64_t v = 0; v < n; ++v) {
            const std::int64_t index = body.integer(p.type, "a vertex index");
            if (!detail::fits_int(index))
              body.fail("vertex index " + std::to_string(index) + " out of range in face " + std::to_string(i));
            poly.push_back(static_cast<int>(index));
          }
          detail::append_fan(tris, poly.data(), poly.size());
        }
    } else {
      for (std::size_t i = 0; i < count; ++i)
        for (const Property& p : e.properties) body.skip(p);
    }
  }
  return detail::make_surface(xyz, tris);
}

void write_ply(std::ostream& out, const SurfaceMesh& surface) {
  out << "ply\nformat binary_little_endian 1.0\ncomment written by xpd\n"
      << "element vertex " << surface.nodes.rows() << "\nproperty double x\nproperty double y\nproperty double z\n"
      << "element face " << surface.triangles.rows() << "\nproperty list uchar int vertex_indices\nend_header\n";
  const bool swap = std::endian::native == std::endian::big;
  auto put = [&](auto v) {
    if (swap) v = TextCursor::byteswap_value(v);
    out.write(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  for (Eigen::Index i = 0; i < surface.nodes.rows(); ++i)
    for (int c = 0; c < 3; ++c) put(surface.nodes(i, c));
  for (Eigen::Index f = 0; f < surface.triangles.rows(); ++f) {
    put(std::uint8_t{3});
    for (int c = 0; c < 3; ++c) put(static_cast<std::int32_t>(surface.triangles(f, c)));
  }
}

}  // namespace xpd::io
