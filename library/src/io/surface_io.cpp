// read_surface / write_surface: format by extension, then parse (and validate) or write atomically.
#include <cctype>
#include <ostream>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/surface_formats.hpp>

namespace xpd::io {

namespace {

constexpr const char* kSupportedSurfaceFormats = ".obj, .off, .ply, .stl (each optionally .gz)";

}  // namespace

SurfaceMesh read_surface(const std::string& path, const ReadOptions& options) {
  const std::string ext = format_extension(path);
  SurfaceMesh (*parse)(std::string_view, const std::string&) = nullptr;
  if (ext == "obj")
    parse = parse_obj;
  else if (ext == "off")
    parse = parse_off;
  else if (ext == "ply")
    parse = parse_ply;
  else if (ext == "stl")
    parse = parse_stl;
  else
    throw IoError(path, 0,
                  "unknown surface format '" + (ext.empty() ? std::string("(no extension)") : "." + ext) +
                      "' (supported: " + kSupportedSurfaceFormats + ")");
  const std::string data = read_file_bytes(path, options.max_bytes);
  SurfaceMesh surface = parse(data, path);
  if (options.validate) validate_surface(surface, path);
  return surface;
}

void write_surface(const std::string& path, const SurfaceMesh& surface) {
  std::string lower = path;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.ends_with(".gz"))
    throw IoError(path, 0, "writing gzip-compressed surfaces is not supported (write .obj or .ply)");
  const std::string ext = format_extension(path);
  if (ext == "obj")
    write_file_atomic(path, [&](std::ostream& out) { write_obj(out, surface); });
  else if (ext == "ply")
    write_file_atomic(path, [&](std::ostream& out) { write_ply(out, surface); });
  else
    throw IoError(path, 0,
                  "cannot write surface format '" + (ext.empty() ? std::string("(no extension)") : "." + ext) +
                      "' (supported for writing: .obj, .ply)");
}

}  // namespace xpd::io
