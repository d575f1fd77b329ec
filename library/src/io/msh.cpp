// Gmsh .msh reader: v1 ($NOD/$ELM), v2.x ASCII/binary, v4.1 ASCII/binary.
//
// Outline: scan sections ($Name ... $EndName); $MeshFormat fixes version, ASCII/binary and, for
// binary files, the byte order (from the int 1 written after the header). $Nodes fills the node
// table and the tag -> row map (tags may be sparse); $Elements keeps tets (type 4) and
// triangles (type 2), skipping every other type by its node count. Unknown sections are skipped.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/tet_formats.hpp>

#include "io/text_cursor.hpp"

namespace xpd::io {
namespace {

using detail::TextCursor;

/// Number of nodes of a Gmsh element type (0 for unknown types).
int gmsh_nodes_per_element(std::int64_t type) {
  static constexpr std::array<int, 32> kNodes = {0, 2,  3,  4,  4, 8,  6,  5,  3,  6,  9, 10, 27, 18, 14, 1,
                                                 8, 20, 15, 13, 9, 10, 12, 15, 15, 21, 4, 5,  6,  20, 35, 56};
  if (type >= 1 && type < static_cast<std::int64_t>(kNodes.size())) return kNodes[static_cast<std::size_t>(type)];
  if (type == 92) return 64;   // third-order hexahedron
  if (type == 93) return 125;  // fourth-order hexahedron
  return 0;
}

constexpr int kTet = 4;
constexpr int kTriangle = 2;
constexpr std::int64_t kMaxTag = std::numeric_limits<std::int64_t>::max() / 2;

/// Maps (possibly sparse) node tags to 0-based rows. Dense table when the tag range is
/// comparable to the node count, hash map otherwise (so a tag of 10^12 costs no memory).
class TagMap {
 public:
  void build(const std::vector<std::int64_t>& tags, const TextCursor& c) {
    if (tags.empty()) return;
    min_ = max_ = tags[0];
    for (auto t : tags) {
      min_ = std::min(min_, t);
      max_ = std::max(max_, t);
    }
    const auto span = static_cast<std::uint64_t>(max_) - static_cast<std::uint64_t>(min_);
    dense_ = span < 4 * static_cast<std::uint64_t>(tags.size()) + 1024;
    if (dense_)
      table_.assign(span + 1, -1);
    else
      hash_.reserve(tags.size());
    for (std::size_t i = 0; i < tags.size(); ++i) {
      int& slot =
          dense_ ? table_[static_cast<std::size_t>(tags[i] - min_)] : hash_.try_emplace(tags[i], -1).first->second;
      if (slot != -1) c.fail("node tag " + std::to_string(tags[i]) + " is defined twice");
      slot = static_cast<int>(i);
    }
  }
  /// Row of `tag`, or -1.
  int find(std::int64_t tag) const {
    if (dense_) return tag < min_ || tag > max_ ? -1 : table_[static_cast<std::size_t>(tag - min_)];
    const auto it = hash_.find(tag);
    return it == hash_.end() ? -1 : it->second;
  }

 private:
  bool dense_ = true;
  std::int64_t min_ = 0, max_ = -1;
  std::vector<int> table_;
  std::unordered_map<std::int64_t, int> hash_;
};

class MshReader {
 public:
  MshReader(std::string_view data, const std::string& name) : c_(data, name) {}

  TetMesh read() {
    while (!c_.at_end()) {
      const std::string_view section = c_.next_token("a section");
      if (section == "$MeshFormat")
        read_format();
      else if (section == "$NOD" || section == "$NOE") {
        version_ = 1;
        read_nodes_v1();
      } else if (section == "$ELM") {
        if (version_ != 1) c_.fail("$ELM section in a Gmsh " + version_name() + " file");
        read_elements_v1();
      } else if (section == "$Nodes") {
        require_format("$Nodes");
        if (version_ == 2)
          read_nodes_v2();
        else
          read_nodes_v4();
      } else if (section == "$Elements") {
        require_format("$Elements");
        if (!have_nodes_) c_.fail("$Elements section before $Nodes");
        if (version_ == 2)
          read_elements_v2();
        else
          read_elements_v4();
      } else if (section.size() > 1 && section[0] == '$') {
        skip_section(section);
      } else {
        c_.fail("expected a section header such as $MeshFormat or $Nodes, found '" + TextCursor::printable(section) +
                "'");
      }
    }
    if (version_ == 0) c_.fail("not a Gmsh file: no $MeshFormat or $NOD section");
    if (!have_nodes_) c_.fail("no $Nodes section");
    return finish();
  }

 private:
  std::string version_name() const { return version_ == 0 ? "unknown version" : "v" + std::to_string(version_); }

  void require_format(const char* section) {
    if (version_ == 0) c_.fail(std::string(section) + " section before $MeshFormat");
    if (version_ == 1) c_.fail(std::string(section) + " section in a Gmsh v1 ($NOD) file");
  }

  void skip_section(std::string_view section) {
    const std::string name(section.substr(1));
    const std::string end = "$End" + name;
    if (c_.find(end) != std::string_view::npos) {
      c_.skip_past(end, end);
      return;
    }
    std::string upper = "$END" + name;  // v1 style: $ENDNOD
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    c_.skip_past(upper, end + " (section " + std::string(section) + " is not closed)");
  }

  void read_format() {
    if (version_ != 0) c_.fail("second $MeshFormat section");
    const std::string_view v = c_.next_token("the format version");
    if (v == "2" || v == "2.0" || v == "2.1" || v == "2.2")
      version_ = 2;
    else if (v == "4.1")
      version_ = 4;
    else
      c_.fail("unsupported Gmsh format version '" + TextCursor::printable(v) +
              "' (supported: 1 ($NOD), 2.0-2.2 and 4.1, ASCII or binary)");
    const std::int64_t file_type = c_.next_int("the file type (0 ASCII, 1 binary)");
    if (file_type != 0 && file_type != 1)
      c_.fail("unknown file type " + std::to_string(file_type) + " (0 ASCII, 1 binary)");
    binary_ = file_type == 1;
    const std::int64_t data_size = c_.next_int("the data size");
    if (data_size != 8) c_.fail("unsupported data size " + std::to_string(data_size) + " (only 8-byte doubles)");
    if (binary_) {
      c_.skip_line();
      const auto one = c_.read_binary<std::int32_t>(false, "the endianness marker");
      if (one == 1)
        swap_ = false;
      else if (TextCursor::byteswap_value(one) == 1)
        swap_ = true;
      else
        c_.fail_binary("bad endianness marker " + std::to_string(one) + " (expected the int 1)");
    }
    c_.expect("$EndMeshFormat");
  }

  /// Fails when a section ends (next token is "$...") before the `n` items its header announced.
  void check_item(std::size_t i, std::size_t n, const char* what, const char* section) {
    c_.skip_whitespace();
    if (c_.peek() == '$' || c_.remaining() == 0)
      c_.fail(std::string(section) + " holds " + std::to_string(i) + " " + what + " but its header count says " +
              std::to_string(n) +
              (c_.remaining() == 0 ? " (unexpected end of file)" : " (count disagrees with the data)"));
  }

  // ---- nodes ----------------------------------------------------------------------------------
  void reserve_nodes(std::size_t n) {
    xyz_.reserve(3 * n);
    tags_.reserve(n);
  }
  void add_node(std::int64_t tag, double x, double y, double z) {
    if (tag < 0 || tag > kMaxTag) c_.fail("invalid node tag " + std::to_string(tag));
    if (tags_.size() >= static_cast<std::size_t>(std::numeric_limits<int>::max())) c_.fail("too many nodes");
    tags_.push_back(tag);
    xyz_.push_back(x);
    xyz_.push_back(y);
    xyz_.push_back(z);
  }
  void end_nodes(const char* end_marker) {
    if (have_nodes_) c_.fail("second node section");
    c_.expect(end_marker);
    map_.build(tags_, c_);
    have_nodes_ = true;
  }

  void read_nodes_v1() {
    const std::size_t n = c_.check_count(c_.next_int("the node count"), 8, "nodes");
    reserve_nodes(n);
    for (std::size_t i = 0; i < n; ++i) {
      check_item(i, n, "nodes", "$NOD");
      const std::int64_t tag = c_.next_int("a node tag");
      const double x = c_.next_double("a coordinate"), y = c_.next_double("a coordinate"),
                   z = c_.next_double("a coordinate");
      add_node(tag, x, y, z);
    }
    end_nodes("$ENDNOD");
  }

  void read_nodes_v2() {
    const std::size_t n = c_.check_count(c_.next_int("the node count"), binary_ ? 28 : 8, "nodes");
    reserve_nodes(n);
    if (binary_) {
      c_.skip_line();
      for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t tag = c_.read_binary<std::int32_t>(swap_, "node data");
        const double x = c_.read_binary<double>(swap_, "node data");
        const double y = c_.read_binary<double>(swap_, "node data");
        const double z = c_.read_binary<double>(swap_, "node data");
        add_node(tag, x, y, z);
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        check_item(i, n, "nodes", "$Nodes");
        const std::int64_t tag = c_.next_int("a node tag");
        const double x = c_.next_double("a coordinate"), y = c_.next_double("a coordinate"),
                     z = c_.next_double("a coordinate");
        add_node(tag, x, y, z);
      }
    }
    end_nodes("$EndNodes");
  }

  // v4.1: blocks of (entityDim entityTag parametric numNodes), then the tags, then the coordinates.
  std::int64_t header_value(const char* what) {
    if (!binary_) return c_.next_int(what);
    const auto v = c_.read_binary<std::uint64_t>(swap_, what);
    if (v > static_cast<std::uint64_t>(kMaxTag))
      c_.fail_binary(std::string("absurd ") + what + " " + std::to_string(v));
    return static_cast<std::int64_t>(v);
  }
  std::int64_t block_int(const char* what) {
    return binary_ ? c_.read_binary<std::int32_t>(swap_, what) : c_.next_int(what);
  }

  void read_nodes_v4() {
    if (binary_) c_.skip_line();
    const std::size_t min_node = binary_ ? 32 : 8;  // tag + 3 coordinates
    const std::size_t blocks = c_.check_count(header_value("node block count"), binary_ ? 20 : 8, "node blocks");
    const std::size_t total = c_.check_count(header_value("node count"), min_node, "nodes");
    header_value("minimum node tag");
    header_value("maximum node tag");
    reserve_nodes(total);
    std::vector<std::int64_t> block_tags;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::int64_t dim = block_int("entity dimension");
      block_int("entity tag");
      const std::int64_t parametric = block_int("parametric flag");
      if (dim < 0 || dim > 3) c_.fail("invalid entity dimension " + std::to_string(dim));
      if (parametric != 0 && parametric != 1) c_.fail("invalid parametric flag " + std::to_string(parametric));
      const std::size_t n = c_.check_count(header_value("block node count"), min_node, "nodes in block");
      if (n > total - tags_.size())
        c_.fail("node blocks hold more nodes than the header count " + std::to_string(total));
      const int extra = parametric ? static_cast<int>(dim) : 0;
      block_tags.resize(n);
      for (auto& t : block_tags) t = header_value("node tag");
      for (std::size_t i = 0; i < n; ++i) {
        double x[3];
        for (double& v : x)
          v = binary_ ? c_.read_binary<double>(swap_, "node coordinates") : c_.next_double("a coordinate");
        for (int k = 0; k < extra; ++k)
          binary_ ? c_.read_binary<double>(swap_, "node parameters") : c_.next_double("a parameter");
        add_node(block_tags[i], x[0], x[1], x[2]);
      }
    }
    if (tags_.size() != total)
      c_.fail("node count disagrees with the data: header says " + std::to_string(total) + ", blocks hold " +
              std::to_string(tags_.size()));
    end_nodes("$EndNodes");
  }

  // ---- elements -------------------------------------------------------------------------------
  int row_of(std::int64_t tag, std::int64_t element) const {
    const int row = map_.find(tag);
    if (row < 0)
      c_.fail("element " + std::to_string(element) + " references node tag " + std::to_string(tag) +
              ", which is not defined in $Nodes");
    return row;
  }
  /// Keeps tets and triangles; other types have been read and are dropped.
  void add_element(std::int64_t type, std::int64_t element, const std::int64_t* nodes, std::int64_t region) {
    if (type == kTet) {
      for (int k = 0; k < 4; ++k) tets_.push_back(row_of(nodes[k], element));
      region_.push_back(static_cast<int>(
          std::clamp<std::int64_t>(region, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())));
    } else if (type == kTriangle) {
      for (int k = 0; k < 3; ++k) tris_.push_back(row_of(nodes[k], element));
    }
  }

  void read_elements_v1() {
    if (!have_nodes_) c_.fail("$ELM section before $NOD");
    const std::size_t n = c_.check_count(c_.next_int("the element count"), 12, "elements");
    std::vector<std::int64_t> nodes;
    for (std::size_t i = 0; i < n; ++i) {
      check_item(i, n, "elements", "$ELM");
      const std::int64_t tag = c_.next_int("an element number");
      const std::int64_t type = c_.next_int("an element type");
      const std::int64_t region = c_.next_int("a physical region");
      c_.next_int("an elementary region");
      const std::int64_t nn = c_.next_int_in(1, 1000, "node count of element");
      check_node_count(type, nn, tag);
      nodes.resize(static_cast<std::size_t>(nn));
      for (auto& v : nodes) v = c_.next_int("a node number");
      add_element(type, tag, nodes.data(), region);
    }
    c_.expect("$ENDELM");
  }
  void check_node_count(std::int64_t type, std::int64_t nn, std::int64_t element) {
    const int expected = gmsh_nodes_per_element(type);
    if (expected != 0 && nn != expected)
      c_.fail("element " + std::to_string(element) + " of type " + std::to_string(type) + " has " + std::to_string(nn) +
              " nodes, expected " + std::to_string(expected));
  }
  int nodes_of_type(std::int64_t type, std::int64_t element) {
    const int nn = gmsh_nodes_per_element(type);
    if (nn == 0)
      c_.fail("element " + std::to_string(element) + " has unknown element type " + std::to_string(type) +
              " (its node count is unknown, so it cannot be skipped)");
    return nn;
  }

  void read_elements_v2() {
    const std::size_t n = c_.check_count(c_.next_int("the element count"), 8, "elements");
    std::vector<std::int64_t> tags, nodes;
    if (!binary_) {
      for (std::size_t i = 0; i < n; ++i) {
        check_item(i, n, "elements", "$Elements");
        const std::int64_t tag = c_.next_int("an element tag");
        const std::int64_t type = c_.next_int("an element type");
        const std::int64_t ntags = c_.next_int_in(0, 1000, "tag count");
        const int nn = nodes_of_type(type, tag);
        tags.resize(static_cast<std::size_t>(ntags));
        for (auto& t : tags) t = c_.next_int("an element tag value");
        nodes.resize(static_cast<std::size_t>(nn));
        for (auto& v : nodes) v = c_.next_int("a node tag");
        add_element(type, tag, nodes.data(), ntags > 0 ? tags[0] : 0);
      }
    } else {
      c_.skip_line();
      std::size_t done = 0;
      while (done < n) {
        const std::int64_t type = c_.read_binary<std::int32_t>(swap_, "element block header");
        const std::int64_t count = c_.read_binary<std::int32_t>(swap_, "element block header");
        const std::int64_t ntags = c_.read_binary<std::int32_t>(swap_, "element block header");
        if (count <= 0 || static_cast<std::uint64_t>(count) > n - done)
          c_.fail_binary("element block of " + std::to_string(count) + " elements disagrees with the element count " +
                         std::to_string(n) + " (" + std::to_string(done) + " read)");
        if (ntags < 0 || ntags > 1000) c_.fail_binary("invalid tag count " + std::to_string(ntags));
        const int nn = nodes_of_type(type, static_cast<std::int64_t>(done) + 1);
        c_.check_count(count, 4 * (1 + static_cast<std::size_t>(ntags) + static_cast<std::size_t>(nn)),
                       "elements in block");
        tags.resize(static_cast<std::size_t>(ntags));
        nodes.resize(static_cast<std::size_t>(nn));
        for (std::int64_t e = 0; e < count; ++e) {
          const std::int64_t tag = c_.read_binary<std::int32_t>(swap_, "element data");
          for (auto& t : tags) t = c_.read_binary<std::int32_t>(swap_, "element data");
          for (auto& v : nodes) v = c_.read_binary<std::int32_t>(swap_, "element data");
          add_element(type, tag, nodes.data(), ntags > 0 ? tags[0] : 0);
        }
        done += static_cast<std::size_t>(count);
      }
    }
    c_.expect("$EndElements");
  }

  void read_elements_v4() {
    if (binary_) c_.skip_line();
    const std::size_t min_elem = binary_ ? 16 : 4;
    const std::size_t blocks = c_.check_count(header_value("element block count"), binary_ ? 20 : 8, "element blocks");
    const std::size_t total = c_.check_count(header_value("element count"), min_elem, "elements");
    header_value("minimum element tag");
    header_value("maximum element tag");
    std::size_t done = 0;
    std::vector<std::int64_t> nodes;
    for (std::size_t b = 0; b < blocks; ++b) {
      block_int("entity dimension");
      const std::int64_t entity = block_int("entity tag");
      const std::int64_t type = block_int("element type");
      const std::size_t count = c_.check_count(header_value("block element count"), min_elem, "elements in block");
      if (count > total - done)
        c_.fail("element blocks hold more elements than the header count " + std::to_string(total));
      const int nn = nodes_of_type(type, static_cast<std::int64_t>(done) + 1);
      if (binary_)
        c_.check_count(static_cast<std::int64_t>(count), 8 * (1 + static_cast<std::size_t>(nn)), "elements in block");
      nodes.resize(static_cast<std::size_t>(nn));
      for (std::size_t e = 0; e < count; ++e) {
        const std::int64_t tag = header_value("element tag");
        for (auto& v : nodes) v = header_value("node tag");
        add_element(type, tag, nodes.data(), entity);
      }
      done += count;
    }
    if (done != total)
      c_.fail("element count disagrees with the data: header says " + std::to_string(total) + ", blocks hold " +
              std::to_string(done));
    c_.expect("$EndElements");
  }

  TetMesh finish() {
    TetMesh m;
    const auto nv = static_cast<Eigen::Index>(tags_.size());
    m.nodes = Eigen::Map<const Points>(xyz_.data(), nv, 3);
    m.tets = Eigen::Map<const Tets>(tets_.data(), static_cast<Eigen::Index>(tets_.size() / 4), 4);
    m.boundary = Eigen::Map<const Triangles>(tris_.data(), static_cast<Eigen::Index>(tris_.size() / 3), 3);
    m.region = std::move(region_);
    return m;
  }

  TextCursor c_;
  int version_ = 0;  // 1, 2 or 4 (4.1)
  bool binary_ = false;
  bool swap_ = false;
  bool have_nodes_ = false;
  std::vector<double> xyz_;
  std::vector<std::int64_t> tags_;
  TagMap map_;
  std::vector<int> tets_, tris_, region_;
};

}  // namespace

TetMesh parse_msh(std::string_view data, const std::string& name) { return MshReader(data, name).read(); }

}  // namespace xpd::io
