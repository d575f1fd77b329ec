// TetGen .node/.ele reader.
//
// .node: "#points 3 #attributes #markers(0|1)", then "index x y z [attributes] [marker]".
// .ele:  "#tets 4|10 #attributes", then "index n0 n1 n2 n3 [n4..n9] [attributes]".
// '#' starts a comment anywhere. Indices are consecutive from the first .node index (0 or 1);
// the first .ele attribute (if any) becomes the region tag; 10-node tets keep their corners.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/tet_formats.hpp>

#include "io/text_cursor.hpp"

namespace xpd::io {

using detail::TextCursor;

TetMesh parse_tetgen(std::string_view node, std::string_view ele, const std::string& node_name,
                     const std::string& ele_name) {
  TetMesh m;
  std::int64_t base = 0;
  {
    TextCursor c(node, node_name);
    c.set_comment('#');
    const std::int64_t count = c.next_int("the node count");
    const std::int64_t dim = c.next_int("the dimension");
    if (dim != 3) c.fail("unsupported dimension " + std::to_string(dim) + " (only 3D .node files)");
    const auto attrs = static_cast<int>(c.next_int_in(0, 1000, "attribute count"));
    const auto markers = static_cast<int>(c.next_int_in(0, 1, "boundary marker count"));
    const std::size_t n = c.check_count(count, 8, "nodes");
    m.nodes.resize(static_cast<Eigen::Index>(n), 3);
    for (std::size_t i = 0; i < n; ++i) {
      if (c.at_end())
        c.fail("file holds " + std::to_string(i) + " nodes but its header count says " + std::to_string(n) +
               " (unexpected end of file)");
      const std::int64_t index = c.next_int("a node index");
      if (i == 0) {
        if (index != 0 && index != 1) c.fail("first node index is " + std::to_string(index) + " (must be 0 or 1)");
        base = index;
      } else if (index != base + static_cast<std::int64_t>(i)) {
        c.fail("node index " + std::to_string(index) + " out of sequence (expected " +
               std::to_string(base + static_cast<std::int64_t>(i)) + ")");
      }
      for (int k = 0; k < 3; ++k) m.nodes(static_cast<Eigen::Index>(i), k) = c.next_double("a coordinate");
      for (int a = 0; a < attrs; ++a) c.next_double("a node attribute");
      for (int b = 0; b < markers; ++b) c.next_int("a boundary marker");
    }
    if (!c.at_end()) c.fail("unexpected data after the " + std::to_string(n) + " nodes announced in the header");
  }
  {
    TextCursor c(ele, ele_name);
    c.set_comment('#');
    const std::int64_t count = c.next_int("the tet count");
    const std::int64_t per = c.next_int("nodes per tet");
    if (per != 4 && per != 10) c.fail("unsupported nodes per tet " + std::to_string(per) + " (4 or 10)");
    const auto attrs = static_cast<int>(c.next_int_in(0, 1000, "attribute count"));
    const std::size_t n = c.check_count(count, 2 * (1 + static_cast<std::size_t>(per)), "tets");
    m.tets.resize(static_cast<Eigen::Index>(n), 4);
    if (attrs > 0) m.region.resize(n);
    const std::int64_t nv = m.nodes.rows();
    for (std::size_t e = 0; e < n; ++e) {
      if (c.at_end())
        c.fail("file holds " + std::to_string(e) + " tets but its header count says " + std::to_string(n) +
               " (unexpected end of file)");
      const std::int64_t index = c.next_int("a tet index");
      for (int k = 0; k < per; ++k) {
        const std::int64_t v = c.next_int("a node index");
        if (v < base || v >= base + nv)
          c.fail("tet " + std::to_string(index) + " references node " + std::to_string(v) + ", out of range (" +
                 std::to_string(nv) + " nodes numbered from " + std::to_string(base) + " in " + node_name + ")");
        if (k < 4) m.tets(static_cast<Eigen::Index>(e), k) = static_cast<int>(v - base);
      }
      for (int a = 0; a < attrs; ++a) {
        const double r = c.next_double("a tet attribute");
        if (a == 0) m.region[e] = std::isfinite(r) && std::abs(r) < 2e9 ? static_cast<int>(std::lround(r)) : 0;
      }
    }
    if (!c.at_end()) c.fail("unexpected data after the " + std::to_string(n) + " tets announced in the header");
  }
  return m;
}

}  // namespace xpd::io
