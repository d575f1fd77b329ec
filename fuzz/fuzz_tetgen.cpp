// libFuzzer harness: io::parse_tetgen on arbitrary bytes, then validation. The input holds the
// .node text, a NUL byte, then the .ele text (no NUL: all of it is the .node, the .ele is empty).
// Only xpd::Error may escape.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <xpd/core/error.hpp>
#include <xpd/io/tet_formats.hpp>
#include <xpd/mesh/validate.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t split = all.find('\0');
  const std::string_view node = all.substr(0, split);
  const std::string_view ele = split == std::string_view::npos ? std::string_view() : all.substr(split + 1);
  try {
    xpd::TetMesh mesh = xpd::io::parse_tetgen(node, ele, "fuzz.node", "fuzz.ele");
    xpd::validate_tet_mesh(mesh, {}, "fuzz.node");
  } catch (const xpd::Error&) {
  }
  return 0;
}
