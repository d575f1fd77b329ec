// VTK XML UnstructuredGrid (.vtu) reader.
//
// Outline: a small XML tag scanner walks VTKFile > UnstructuredGrid > Piece and records the
// DataArrays of Points and Cells (connectivity, offsets, types); it stops at <AppendedData>,
// whose content is raw bytes. Each array is then decoded by its format:
//   ascii     whitespace-separated numbers;
//   binary    base64 inline: [header][data] (header and data may be separate base64 runs);
//   appended  at offset from the '_' marker, raw or base64 per AppendedData's encoding.
// The header is one UInt32/UInt64 byte count, or with vtkZLibDataCompressor
// [#blocks, block size, last block size, compressed sizes...] followed by zlib blocks.
// Every size is checked against what the Piece's counts imply before anything is allocated.
#include <zlib.h>

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/tet_formats.hpp>

#include "io/text_cursor.hpp"

namespace xpd::io {
namespace {

using detail::TextCursor;

struct XmlTag {
  std::string name;
  bool closing = false;
  bool self_closing = false;
  std::size_t line = 0;
  std::vector<std::pair<std::string, std::string>> attributes;

  const std::string* attribute(std::string_view key) const {
    for (const auto& [k, v] : attributes)
      if (k == key) return &v;
    return nullptr;
  }
};

bool is_name_char(char ch) { return ch != '\0' && !TextCursor::is_space(ch) && ch != '/' && ch != '>' && ch != '='; }

/// Reads the next element tag (skipping text, comments, <?...?> and <!...>); false at the end.
bool next_tag(TextCursor& c, XmlTag& tag) {
  while (true) {
    if (!c.skip_to('<')) return false;
    if (c.starts_with("<!--"))
      c.skip_past("-->", "end of XML comment '-->'");
    else if (c.starts_with("<?"))
      c.skip_past("?>", "end of XML declaration '?>'");
    else if (c.starts_with("<!"))
      c.skip_past(">", "'>'");
    else
      break;
  }
  c.get();
  tag = XmlTag{};
  tag.line = c.line();
  if (c.peek() == '/') {
    c.get();
    tag.closing = true;
  }
  while (is_name_char(c.peek())) tag.name += c.get();
  if (tag.name.empty()) c.fail("malformed XML tag");
  while (true) {
    c.skip_whitespace();
    const char ch = c.get("'>' closing the XML tag");
    if (ch == '>') return true;
    if (ch == '/') {
      if (c.get("'>'") != '>') c.fail("malformed XML tag <" + tag.name + ">");
      tag.self_closing = true;
      return true;
    }
    std::string key(1, ch);
    while (is_name_char(c.peek())) key += c.get();
    c.skip_whitespace();
    if (c.get("'='") != '=') c.fail("malformed attribute '" + TextCursor::printable(key) + "' in <" + tag.name + ">");
    c.skip_whitespace();
    const char quote = c.get("a quoted attribute value");
    if (quote != '"' && quote != '\'')
      c.fail("unquoted attribute '" + TextCursor::printable(key) + "' in <" + tag.name + ">");
    std::string value;
    for (char v = c.get("closing quote"); v != quote; v = c.get("closing quote")) value += v;
    tag.attributes.emplace_back(std::move(key), std::move(value));
  }
}

enum class Scalar { Int8, UInt8, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float32, Float64 };

std::optional<Scalar> scalar_of(std::string_view name) {
  static constexpr std::array<std::pair<const char*, Scalar>, 10> kNames = {{{"Int8", Scalar::Int8},
                                                                             {"UInt8", Scalar::UInt8},
                                                                             {"Int16", Scalar::Int16},
                                                                             {"UInt16", Scalar::UInt16},
                                                                             {"Int32", Scalar::Int32},
                                                                             {"UInt32", Scalar::UInt32},
                                                                             {"Int64", Scalar::Int64},
                                                                             {"UInt64", Scalar::UInt64},
                                                                             {"Float32", Scalar::Float32},
                                                                             {"Float64", Scalar::Float64}}};
  for (const auto& [n, s] : kNames)
    if (name == n) return s;
  return std::nullopt;
}
std::size_t scalar_size(Scalar s) {
  switch (s) {
    case Scalar::Int8:
    case Scalar::UInt8:
      return 1;
    case Scalar::Int16:
    case Scalar::UInt16:
      return 2;
    case Scalar::Int32:
    case Scalar::UInt32:
    case Scalar::Float32:
      return 4;
    default:
      return 8;
  }
}
bool is_float(Scalar s) { return s == Scalar::Float32 || s == Scalar::Float64; }

template <class T>
T load(const char* p, bool swap) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return swap ? TextCursor::byteswap_value(v) : v;
}

/// Value `i` of a binary array as double (integers converted exactly up to 2^53).
double value_as_double(const char* p, Scalar s, bool swap) {
  switch (s) {
    case Scalar::Int8:
      return load<std::int8_t>(p, false);
    case Scalar::UInt8:
      return load<std::uint8_t>(p, false);
    case Scalar::Int16:
      return load<std::int16_t>(p, swap);
    case Scalar::UInt16:
      return load<std::uint16_t>(p, swap);
    case Scalar::Int32:
      return load<std::int32_t>(p, swap);
    case Scalar::UInt32:
      return load<std::uint32_t>(p, swap);
    case Scalar::Int64:
      return static_cast<double>(load<std::int64_t>(p, swap));
    case Scalar::UInt64:
      return static_cast<double>(load<std::uint64_t>(p, swap));
    case Scalar::Float32:
      return load<float>(p, swap);
    case Scalar::Float64:
      return load<double>(p, swap);
  }
  return 0;
}
/// Value of an integer array; UInt64 above INT64_MAX saturates (and is later out of range).
std::int64_t value_as_int(const char* p, Scalar s, bool swap) {
  switch (s) {
    case Scalar::Int8:
      return load<std::int8_t>(p, false);
    case Scalar::UInt8:
      return load<std::uint8_t>(p, false);
    case Scalar::Int16:
      return load<std::int16_t>(p, swap);
    case Scalar::UInt16:
      return load<std::uint16_t>(p, swap);
    case Scalar::Int32:
      return load<std::int32_t>(p, swap);
    case Scalar::UInt32:
      return load<std::uint32_t>(p, swap);
    case Scalar::Int64:
      return load<std::int64_t>(p, swap);
    case Scalar::UInt64: {
      const auto v = load<std::uint64_t>(p, swap);
      return v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                 ? std::numeric_limits<std::int64_t>::max()
                 : static_cast<std::int64_t>(v);
    }
    default:
      return 0;
  }
}

/// Incremental base64 decoder over a text run; whitespace is skipped and '=' padding may end
/// one run and start another (VTK writes header and data as separate runs).
class Base64Stream {
 public:
  explicit Base64Stream(std::string_view text) : text_(text) {}
  /// Appends exactly `n` decoded bytes to `out`; false if the text runs out first.
  bool take(std::size_t n, std::string& out) {
    while (n > 0) {
      if (have_ == 0 && !decode_quartet()) return false;
      const std::size_t k = std::min<std::size_t>(n, have_);
      out.append(buf_ + used_, k);
      used_ += k;
      have_ -= k;
      n -= k;
    }
    return true;
  }
  /// Upper bound of the bytes still decodable (for count checks before allocating).
  std::size_t max_remaining() const { return (text_.size() - pos_) / 4 * 3 + 3 + have_; }
  bool bad_char() const { return bad_; }

 private:
  static int value(char ch) {
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9') return ch - '0' + 52;
    if (ch == '+') return 62;
    if (ch == '/') return 63;
    return -1;
  }
  bool decode_quartet() {
    int v[4];
    int got = 0, pad = 0;
    while (got < 4) {
      if (pos_ >= text_.size()) return false;
      const char ch = text_[pos_++];
      if (TextCursor::is_space(ch)) continue;
      if (ch == '=') {
        if (got < 2) return bad_ = true, false;
        v[got++] = 0;
        ++pad;
        continue;
      }
      const int x = value(ch);
      if (x < 0 || pad > 0) return bad_ = true, false;
      v[got++] = x;
    }
    const std::uint32_t word = (static_cast<std::uint32_t>(v[0]) << 18) | (static_cast<std::uint32_t>(v[1]) << 12) |
                               (static_cast<std::uint32_t>(v[2]) << 6) | static_cast<std::uint32_t>(v[3]);
    buf_[0] = static_cast<char>(word >> 16);
    buf_[1] = static_cast<char>(word >> 8);
    buf_[2] = static_cast<char>(word);
    used_ = 0;
    have_ = 3 - static_cast<std::size_t>(pad);
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  char buf_[3] = {};
  std::size_t used_ = 0, have_ = 0;
  bool bad_ = false;
};

/// A byte source: raw bytes (appended raw) or a base64 run (inline binary, appended base64).
class ByteSource {
 public:
  ByteSource(std::string_view data, bool base64) : raw_(data), b64_(data), base64_(base64) {}
  bool take(std::size_t n, std::string& out) {
    if (base64_) return b64_.take(n, out);
    if (raw_.size() - pos_ < n) return false;
    out.append(raw_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::size_t max_remaining() const { return base64_ ? b64_.max_remaining() : raw_.size() - pos_; }

 private:
  std::string_view raw_;
  std::size_t pos_ = 0;
  Base64Stream b64_;
  bool base64_;
};

enum class Role { Points, Connectivity, Offsets, Types };

struct ArrayDesc {
  bool present = false;
  Scalar type = Scalar::Float32;
  std::string format;  // ascii | binary | appended
  std::size_t components = 1;
  std::size_t offset = 0;         // appended: offset from the '_' marker
  std::size_t content_begin = 0;  // inline: byte range of the element's text
  std::size_t content_end = 0;
  std::size_t content_line = 0;
  std::size_t line = 0;
  const char* name = "";
};

class VtuReader {
 public:
  VtuReader(std::string_view data, const std::string& name) : data_(data), name_(name), c_(data, name) {}

  TetMesh read() {
    scan();
    const std::size_t np = num_points_, nc = num_cells_;
    const std::vector<double> xyz = decode_doubles(arrays_[0], 3 * np);
    const std::vector<std::int64_t> offsets = decode_ints(arrays_[2], nc);
    const std::vector<std::int64_t> types = decode_ints(arrays_[3], nc);
    const std::int64_t conn_size = nc == 0 ? 0 : offsets.back();
    if (conn_size < 0 || conn_size > std::numeric_limits<int>::max())
      fail(arrays_[2].line, "last cell offset " + std::to_string(conn_size) + " is out of range");
    const std::vector<std::int64_t> conn = decode_ints(arrays_[1], static_cast<std::size_t>(conn_size));

    TetMesh m;
    m.nodes = Eigen::Map<const Points>(xyz.data(), static_cast<Eigen::Index>(np), 3);
    std::vector<int> tets, tris;
    tets.reserve(4 * nc);
    std::int64_t prev = 0;
    for (std::size_t i = 0; i < nc; ++i) {
      const std::int64_t end = offsets[i];
      if (end < prev || end > conn_size)
        fail(arrays_[2].line, "cell " + std::to_string(i) + " has offset " + std::to_string(end) +
                                  " (offsets must be non-decreasing and at most " + std::to_string(conn_size) + ")");
      const std::int64_t n = end - prev;
      const std::int64_t type = types[i];
      std::vector<int>* out = nullptr;
      if (type == 10 && n == 4)
        out = &tets;
      else if (type == 5 && n == 3)
        out = &tris;
      else if (type == 10 || type == 5)
        fail(arrays_[2].line,
             "cell " + std::to_string(i) + " of type " + cell_type_name(type) + " has " + std::to_string(n) + " nodes");
      else
        fail(arrays_[3].line, "cell " + std::to_string(i) + " has unsupported VTK cell type " + cell_type_name(type) +
                                  "; only tetra (10) cells are read (and triangle (5) cells as boundary)");
      for (std::int64_t k = prev; k < end; ++k) {
        const std::int64_t v = conn[static_cast<std::size_t>(k)];
        if (v < 0 || v >= static_cast<std::int64_t>(np))
          fail(arrays_[1].line, "cell " + std::to_string(i) + " references point " + std::to_string(v) +
                                    ", out of range (" + std::to_string(np) + " points, 0-based)");
        out->push_back(static_cast<int>(v));
      }
      prev = end;
    }
    m.tets = Eigen::Map<const Tets>(tets.data(), static_cast<Eigen::Index>(tets.size() / 4), 4);
    m.boundary = Eigen::Map<const Triangles>(tris.data(), static_cast<Eigen::Index>(tris.size() / 3), 3);
    return m;
  }

 private:
  [[noreturn]] void fail(std::size_t line, const std::string& message) const { throw IoError(name_, line, message); }

  static std::string cell_type_name(std::int64_t type) {
    static const std::pair<int, const char*> kNames[] = {{1, "vertex"},
                                                         {2, "poly-vertex"},
                                                         {3, "line"},
                                                         {4, "poly-line"},
                                                         {5, "triangle"},
                                                         {6, "triangle-strip"},
                                                         {7, "polygon"},
                                                         {8, "pixel"},
                                                         {9, "quad"},
                                                         {10, "tetra"},
                                                         {11, "voxel"},
                                                         {12, "hexahedron"},
                                                         {13, "wedge"},
                                                         {14, "pyramid"},
                                                         {24, "quadratic-tetra"},
                                                         {25, "quadratic-hexahedron"},
                                                         {42, "polyhedron"}};
    for (const auto& [t, n] : kNames)
      if (t == type) return std::to_string(type) + " (" + n + ")";
    return std::to_string(type) + " (unknown)";
  }

  std::size_t count_attribute(const XmlTag& tag, const char* key) {
    const std::string* v = tag.attribute(key);
    if (!v) fail(tag.line, std::string("<Piece> has no ") + key + " attribute");
    std::int64_t n = -1;
    const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size())
      fail(tag.line, std::string("bad ") + key + " '" + TextCursor::printable(*v) + "'");
    if (n < 0 || n > std::numeric_limits<int>::max())
      fail(tag.line, std::string("absurd ") + key + " " + std::to_string(n));
    return static_cast<std::size_t>(n);
  }

  void read_file_tag(const XmlTag& tag) {
    const std::string* type = tag.attribute("type");
    if (!type || *type != "UnstructuredGrid")
      fail(tag.line, "VTK file type '" + (type ? TextCursor::printable(*type) : std::string("(none)")) +
                         "' is not supported (only UnstructuredGrid)");
    if (const std::string* version = tag.attribute("version")) {
      const std::string& v = *version;
      if (!(v == "0.1" || v == "1.0" || v == "2.0" || v == "2.1" || v == "2.2"))
        fail(tag.line, "unsupported VTK XML version '" + TextCursor::printable(v) + "' (supported: 0.1, 1.0, 2.x)");
    }
    if (const std::string* order = tag.attribute("byte_order")) {
      if (*order != "LittleEndian" && *order != "BigEndian")
        fail(tag.line, "unknown byte_order '" + TextCursor::printable(*order) + "'");
      swap_ = (*order == "BigEndian") != (std::endian::native == std::endian::big);
    }
    if (const std::string* header = tag.attribute("header_type")) {
      if (*header == "UInt32")
        header_size_ = 4;
      else if (*header == "UInt64")
        header_size_ = 8;
      else
        fail(tag.line, "unsupported header_type '" + TextCursor::printable(*header) + "' (UInt32 or UInt64)");
    }
    if (const std::string* comp = tag.attribute("compressor")) {
      if (*comp == "vtkZLibDataCompressor")
        compressed_ = true;
      else if (!comp->empty())
        fail(tag.line, "unsupported compressor '" + TextCursor::printable(*comp) + "' (only vtkZLibDataCompressor)");
    }
  }

  /// Walks the XML up to <AppendedData> (or the end), recording the arrays of interest.
  void scan() {
    std::vector<std::string> stack;
    XmlTag tag;
    bool saw_file = false;
    int pieces = 0;
    while (next_tag(c_, tag)) {
      if (tag.closing) {
        if (!stack.empty() && stack.back() == tag.name) stack.pop_back();
        continue;
      }
      if (!saw_file) {
        if (tag.name != "VTKFile")
          fail(tag.line, "not a VTK XML file: first element is <" + tag.name + ">, expected <VTKFile>");
        read_file_tag(tag);
        saw_file = true;
      } else if (tag.name == "Piece") {
        if (++pieces > 1) fail(tag.line, "more than one <Piece> (multi-piece files are not supported)");
        num_points_ = count_attribute(tag, "NumberOfPoints");
        num_cells_ = count_attribute(tag, "NumberOfCells");
      } else if (tag.name == "DataArray") {
        record_array(tag, stack.empty() ? std::string() : stack.back());
        continue;  // its content and closing tag were consumed
      } else if (tag.name == "AppendedData") {
        const std::string* enc = tag.attribute("encoding");
        if (!enc || (*enc != "raw" && *enc != "base64"))
          fail(tag.line, "<AppendedData> encoding '" + (enc ? TextCursor::printable(*enc) : std::string("(none)")) +
                             "' is not supported (raw or base64)");
        appended_base64_ = *enc == "base64";
        c_.skip_whitespace();
        if (c_.get("'_' starting the appended data") != '_') c_.fail("appended data does not start with '_'");
        appended_begin_ = c_.offset();
        have_appended_ = true;
        break;  // raw bytes follow: no more XML to scan
      }
      if (!tag.self_closing) stack.push_back(tag.name);
    }
    if (!saw_file) c_.fail("not a VTK XML file (no <VTKFile> element)");
    if (pieces == 0) c_.fail("no <Piece> element in the UnstructuredGrid");
    const char* names[] = {"Points", "connectivity", "offsets", "types"};
    for (int r = 0; r < 4; ++r)
      if (!arrays_[r].present) c_.fail(std::string("missing DataArray '") + names[r] + "'");
  }

  void record_array(const XmlTag& tag, const std::string& parent) {
    std::optional<Role> role;
    const std::string* array_name = tag.attribute("Name");
    if (parent == "Points")
      role = Role::Points;
    else if (parent == "Cells" && array_name) {
      if (*array_name == "connectivity")
        role = Role::Connectivity;
      else if (*array_name == "offsets")
        role = Role::Offsets;
      else if (*array_name == "types")
        role = Role::Types;
    }
    ArrayDesc d;
    d.line = tag.line;
    if (!tag.self_closing) {
      d.content_begin = c_.offset();
      d.content_line = c_.line();
      const std::size_t end = c_.find("</DataArray");
      if (end == std::string_view::npos)
        c_.fail("unexpected end of file: <DataArray> (line " + std::to_string(tag.line) + ") is not closed");
      d.content_end = end;
      c_.advance(end - c_.offset());
      c_.skip_past(">", "'>'");
    }
    if (!role) return;
    static const char* kRoleNames[] = {"Points", "connectivity", "offsets", "types"};
    d.name = kRoleNames[static_cast<int>(*role)];
    ArrayDesc& slot = arrays_[static_cast<int>(*role)];
    if (slot.present) fail(tag.line, std::string("second DataArray '") + d.name + "'");
    const std::string* type = tag.attribute("type");
    const auto scalar = type ? scalar_of(*type) : std::nullopt;
    if (!scalar)
      fail(tag.line, std::string("DataArray '") + d.name + "' has unsupported type '" +
                         (type ? TextCursor::printable(*type) : std::string("(none)")) + "'");
    d.type = *scalar;
    if (*role == Role::Points && !is_float(d.type))
      fail(tag.line, "Points must be Float32 or Float64, found '" + *type + "'");
    if (*role != Role::Points && is_float(d.type))
      fail(tag.line, std::string("DataArray '") + d.name + "' must have an integer type, found '" + *type + "'");
    if (const std::string* comps = tag.attribute("NumberOfComponents")) {
      if (*comps != "1" && !(*role == Role::Points && *comps == "3"))
        fail(tag.line,
             std::string("DataArray '") + d.name + "' has NumberOfComponents=" + TextCursor::printable(*comps));
      d.components = *comps == "3" ? 3 : 1;
    }
    if (*role == Role::Points && d.components != 3) fail(tag.line, "Points must have NumberOfComponents=\"3\"");
    const std::string* format = tag.attribute("format");
    d.format = format ? *format : "ascii";
    if (d.format == "appended") {
      const std::string* off = tag.attribute("offset");
      if (!off) fail(tag.line, std::string("appended DataArray '") + d.name + "' has no offset");
      const auto [p, ec] = std::from_chars(off->data(), off->data() + off->size(), d.offset);
      if (ec != std::errc() || p != off->data() + off->size())
        fail(tag.line, "bad offset '" + TextCursor::printable(*off) + "'");
    } else if (d.format != "ascii" && d.format != "binary") {
      fail(tag.line, "unknown DataArray format '" + TextCursor::printable(d.format) + "' (ascii, binary or appended)");
    } else if (tag.self_closing) {
      fail(tag.line, std::string("DataArray '") + d.name + "' has no data");
    }
    d.present = true;
    slot = d;
  }

  /// The payload bytes of a binary/appended array holding `count` values.
  std::string payload(const ArrayDesc& d, std::size_t count) {
    const std::size_t bytes = count * scalar_size(d.type);
    std::string_view src;
    bool base64 = true;
    std::size_t line = d.line;
    if (d.format == "appended") {
      if (!have_appended_)
        fail(d.line, std::string("DataArray '") + d.name + "' is appended but there is no <AppendedData>");
      if (d.offset > data_.size() - appended_begin_)
        fail(d.line, std::string("appended offset ") + std::to_string(d.offset) + " of '" + d.name +
                         "' is past the end of the file");
      src = data_.substr(appended_begin_ + d.offset);
      base64 = appended_base64_;
      line = 0;
    } else {
      src = data_.substr(d.content_begin, d.content_end - d.content_begin);
    }
    const std::size_t at = d.format == "appended" ? appended_begin_ + d.offset : d.content_begin;
    const auto where = [&](const std::string& msg) {
      return std::string("DataArray '") + d.name + "': " + msg + " (data at byte offset " + std::to_string(at) + ")";
    };
    ByteSource in(src, base64);
    std::string scratch;
    const auto header = [&](const char* what) -> std::uint64_t {
      scratch.clear();
      if (!in.take(header_size_, scratch)) fail(line, where(std::string("truncated ") + what));
      return header_size_ == 4 ? load<std::uint32_t>(scratch.data(), swap_)
                               : load<std::uint64_t>(scratch.data(), swap_);
    };
    std::string out;
    if (!compressed_) {
      const std::uint64_t n = header("byte count header");
      if (n != bytes)
        fail(line, where("holds " + std::to_string(n) + " bytes but " + std::to_string(count) + " values need " +
                         std::to_string(bytes) + " (counts disagree with the data)"));
      if (bytes > in.max_remaining()) fail(line, where("truncated: " + std::to_string(bytes) + " bytes announced"));
      out.reserve(bytes);
      if (!in.take(bytes, out)) fail(line, where("truncated data or invalid base64"));
      return out;
    }
    const std::uint64_t blocks = header("compression header");
    const std::uint64_t block_size = header("compression header");
    const std::uint64_t last_size = header("compression header");
    if (blocks > in.max_remaining() / header_size_) fail(line, where("absurd block count " + std::to_string(blocks)));
    if (block_size > (std::uint64_t{1} << 32) || last_size > block_size)
      fail(line, where("bad compression block sizes " + std::to_string(block_size) + "/" + std::to_string(last_size)));
    const std::uint64_t total = blocks == 0 ? 0 : (blocks - 1) * block_size + (last_size == 0 ? block_size : last_size);
    if (total != bytes)
      fail(line, where("uncompressed size " + std::to_string(total) + " but " + std::to_string(count) +
                       " values need " + std::to_string(bytes) + " (counts disagree with the data)"));
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(blocks));
    for (auto& s : sizes) s = header("compressed block size");
    out.reserve(bytes);
    std::string block;
    for (std::size_t b = 0; b < sizes.size(); ++b) {
      const std::uint64_t usize = b + 1 == sizes.size() && last_size != 0 ? last_size : block_size;
      // zlib expands at most ~1032:1; a larger claim is corrupt (and would be a bomb).
      if (sizes[b] > in.max_remaining() || usize > 1032 * sizes[b] + 64)
        fail(line,
             where("compressed block " + std::to_string(b) + " size " + std::to_string(sizes[b]) + " is inconsistent"));
      block.clear();
      if (!in.take(static_cast<std::size_t>(sizes[b]), block)) fail(line, where("truncated compressed block"));
      const std::size_t start = out.size();
      out.resize(start + static_cast<std::size_t>(usize));
      uLongf got = static_cast<uLongf>(usize);
      const int rc = uncompress(reinterpret_cast<Bytef*>(out.data() + start), &got,
                                reinterpret_cast<const Bytef*>(block.data()), static_cast<uLong>(block.size()));
      if (rc != Z_OK || got != usize)
        fail(line, where("corrupt zlib block " + std::to_string(b) + " (zlib error " + std::to_string(rc) + ")"));
    }
    return out;
  }

  /// ASCII values of an inline array; count must match exactly.
  template <class T, class Next>
  std::vector<T> ascii_values(const ArrayDesc& d, std::size_t count, Next next) {
    TextCursor c(data_.substr(d.content_begin, d.content_end - d.content_begin), name_, d.content_line);
    c.check_count(static_cast<std::int64_t>(count), 2, (std::string("values of DataArray '") + d.name + "'").c_str());
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (c.at_end())
        c.fail(std::string("DataArray '") + d.name + "' has " + std::to_string(i) + " values, expected " +
               std::to_string(count));
      v[i] = next(c);
    }
    if (!c.at_end())
      c.fail(std::string("DataArray '") + d.name + "' has more than the " + std::to_string(count) + " values expected");
    return v;
  }

  std::vector<double> decode_doubles(const ArrayDesc& d, std::size_t count) {
    if (d.format == "ascii")
      return ascii_values<double>(d, count, [](TextCursor& c) { return c.next_double("a coordinate"); });
    const std::string bytes = payload(d, count);
    std::vector<double> v(count);
    const std::size_t s = scalar_size(d.type);
    for (std::size_t i = 0; i < count; ++i) v[i] = value_as_double(bytes.data() + i * s, d.type, swap_);
    return v;
  }
  std::vector<std::int64_t> decode_ints(const ArrayDesc& d, std::size_t count) {
    if (d.format == "ascii")
      return ascii_values<std::int64_t>(d, count, [](TextCursor& c) { return c.next_int("an integer"); });
    const std::string bytes = payload(d, count);
    std::vector<std::int64_t> v(count);
    const std::size_t s = scalar_size(d.type);
    for (std::size_t i = 0; i < count; ++i) v[i] = value_as_int(bytes.data() + i * s, d.type, swap_);
    return v;
  }

  std::string_view data_;
  std::string name_;
  TextCursor c_;
  bool swap_ = false;
  bool compressed_ = false;
  std::size_t header_size_ = 4;
  bool have_appended_ = false;
  bool appended_base64_ = false;
  std::size_t appended_begin_ = 0;
  std::size_t num_points_ = 0, num_cells_ = 0;
  std::array<ArrayDesc, 4> arrays_;
};

}  // namespace

TetMesh parse_vtu(std::string_view data, const std::string& name) { return VtuReader(data, name).read(); }

}  // namespace xpd::io
