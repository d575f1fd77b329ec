// Medit/INRIA .mesh reader (ASCII).
//
// Outline: a sequence of keywords (case-insensitive) each followed by a count and that many
// entries. Vertices, Triangles and Tetrahedra are kept (1-based indices, last column = reference);
// sections of known width (Edges, Corners, Ridges, Required*, ...) are skipped entry by entry;
// an unknown keyword is an error because its width is unknown.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/io/tet_formats.hpp>

#include "io/text_cursor.hpp"

namespace xpd::io {
namespace {

using detail::TextCursor;

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& ch : r) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return r;
}

/// Tokens per entry of the sections that are read and dropped (0: not a skippable section).
int skipped_section_width(const std::string& kw) {
  struct Entry {
    const char* name;
    int width;
  };
  static constexpr Entry kSections[] = {
      {"edges", 3},
      {"corners", 1},
      {"ridges", 1},
      {"requiredvertices", 1},
      {"requirededges", 1},
      {"requiredtriangles", 1},
      {"requiredquadrilaterals", 1},
      {"requiredtetrahedra", 1},
      {"quadrilaterals", 5},
      {"hexahedra", 9},
      {"prisms", 7},
      {"pyramids", 6},
      {"normals", 3},
      {"tangents", 3},
      {"normalatvertices", 2},
      {"normalattrianglevertices", 3},
      {"normalatquadrilateralvertices", 3},
      {"tangentatedges", 2},
      {"tangentatvertices", 2},
      {"crack", 2},
      {"equivalences", 2},
  };
  for (const auto& e : kSections)
    if (kw == e.name) return e.width;
  return 0;
}

class MeditReader {
 public:
  MeditReader(std::string_view data, const std::string& name) : c_(data, name) { c_.set_comment('#'); }

  TetMesh read() {
    bool any = false;
    while (!c_.at_end()) {
      const std::string_view token = c_.next_token("a keyword");
      const std::string kw = lower(token);
      if (kw == "end") {
        any = true;
        break;
      }
      if (kw == "meshversionformatted") {
        c_.next_int_in(1, 4, "MeshVersionFormatted");
      } else if (kw == "dimension") {
        const std::int64_t d = c_.next_int("the dimension");
        if (d != 3) c_.fail("unsupported Dimension " + std::to_string(d) + " (only 3D meshes)");
      } else if (kw == "vertices") {
        read_vertices();
      } else if (kw == "triangles") {
        read_cells(3, tris_, nullptr, "triangle");
      } else if (kw == "tetrahedra") {
        read_cells(4, tets_, &region_, "tetrahedron");
      } else if (const int width = skipped_section_width(kw); width > 0) {
        const std::size_t n = c_.check_count(c_.next_int("an entry count"), 2 * static_cast<std::size_t>(width),
                                             std::string(token).c_str());
        for (std::size_t i = 0; i < n * static_cast<std::size_t>(width); ++i) c_.next_token("an entry value");
      } else if (kw == "identifier" || kw == "geometry") {
        c_.skip_line();
      } else {
        c_.fail("unknown Medit keyword '" + TextCursor::printable(token) + "'");
      }
      any = true;
    }
    if (!any) c_.fail("empty file (expected MeshVersionFormatted, Vertices, Tetrahedra)");
    if (!have_vertices_) c_.fail("no Vertices section");
    TetMesh m;
    m.nodes = Eigen::Map<const Points>(xyz_.data(), static_cast<Eigen::Index>(xyz_.size() / 3), 3);
    m.tets = Eigen::Map<const Tets>(tets_.data(), static_cast<Eigen::Index>(tets_.size() / 4), 4);
    m.boundary = Eigen::Map<const Triangles>(tris_.data(), static_cast<Eigen::Index>(tris_.size() / 3), 3);
    m.region = std::move(region_);
    return m;
  }

 private:
  /// Fails when a keyword (or the end) comes before the `n` entries a section announced.
  void check_entry(std::size_t i, std::size_t n, const char* section) {
    const std::string_view t = c_.peek_token();
    if (!t.empty() && !std::isalpha(static_cast<unsigned char>(t[0]))) return;
    const std::string kw = lower(t);
    if (t.empty() || kw == "end" || kw == "vertices" || kw == "triangles" || kw == "tetrahedra" ||
        skipped_section_width(kw) > 0)
      c_.fail(std::string(section) + " holds " + std::to_string(i) + " entries but its header count says " +
              std::to_string(n) + (t.empty() ? " (unexpected end of file)" : " (count disagrees with the data)"));
  }

  void read_vertices() {
    if (have_vertices_) c_.fail("second Vertices section");
    const std::size_t n = c_.check_count(c_.next_int("the vertex count"), 8, "vertices");
    xyz_.resize(3 * n);
    for (std::size_t i = 0; i < n; ++i) {
      check_entry(i, n, "Vertices");
      for (int k = 0; k < 3; ++k) xyz_[3 * i + k] = c_.next_double("a coordinate");
      c_.next_int("a vertex reference");
    }
    have_vertices_ = true;
  }

  void read_cells(int arity, std::vector<int>& out, std::vector<int>* refs, const char* kind) {
    const std::size_t n = c_.check_count(c_.next_int("an element count"), 2 * static_cast<std::size_t>(arity + 1),
                                         kind == std::string("triangle") ? "triangles" : "tetrahedra");
    const std::size_t base = out.size();
    out.resize(base + n * static_cast<std::size_t>(arity));
    if (refs) refs->reserve(refs->size() + n);
    // Before Vertices the range is unknown: indices are then checked by validation.
    const std::int64_t nv =
        have_vertices_ ? static_cast<std::int64_t>(xyz_.size() / 3) : std::numeric_limits<int>::max();
    for (std::size_t e = 0; e < n; ++e) {
      check_entry(e, n, arity == 3 ? "Triangles" : "Tetrahedra");
      for (int k = 0; k < arity; ++k) {
        const std::int64_t v = c_.next_int("a vertex index");
        if (v < 1 || v > nv)
          c_.fail(std::string(kind) + " " + std::to_string(e + 1) + " references vertex " + std::to_string(v) +
                  ", out of range (the file has " + std::to_string(nv) + " vertices, 1-based)");
        out[base + e * static_cast<std::size_t>(arity) + static_cast<std::size_t>(k)] = static_cast<int>(v - 1);
      }
      const std::int64_t ref = c_.next_int("an element reference");
      if (refs)
        refs->push_back(static_cast<int>(
            std::clamp<std::int64_t>(ref, std::numeric_limits<int>::min(), std::numeric_limits<int>::max())));
    }
  }

  TextCursor c_;
  bool have_vertices_ = false;
  std::vector<double> xyz_;
  std::vector<int> tets_, tris_, region_;
};

}  // namespace

TetMesh parse_medit(std::string_view data, const std::string& name) { return MeditReader(data, name).read(); }

}  // namespace xpd::io
