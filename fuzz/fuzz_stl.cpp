// libFuzzer harness: parse_stl on arbitrary bytes, then validate_surface. Parse and validation
// failures must surface as xpd::Error; anything else (crash, sanitizer report, other exception,
// runaway allocation) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <xpd/core/error.hpp>
#include <xpd/io/surface_formats.hpp>
#include <xpd/mesh/validate.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const xpd::SurfaceMesh s =
        xpd::io::parse_stl(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.stl");
    xpd::validate_surface(s, "fuzz.stl");
  } catch (const xpd::Error&) {
  }
  return 0;
}
