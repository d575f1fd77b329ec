// libFuzzer harness: io::parse_msh on arbitrary bytes, then validation. Only xpd::Error may escape;
// crashes, sanitizer reports, leaks and other exceptions are findings.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <xpd/core/error.hpp>
#include <xpd/io/tet_formats.hpp>
#include <xpd/mesh/validate.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    xpd::TetMesh mesh = xpd::io::parse_msh(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.msh");
    xpd::validate_tet_mesh(mesh, {}, "fuzz.msh");
  } catch (const xpd::Error&) {
  }
  return 0;
}
