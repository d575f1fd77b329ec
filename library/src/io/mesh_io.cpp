// read_tet_mesh: dispatch on the extension, parse, validate.
#include <filesystem>
#include <string>
#include <xpd/core/error.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/io/tet_formats.hpp>

namespace xpd::io {
namespace {

/// `stem` + ext or `stem` + ext + ".gz", whichever exists (empty if neither).
std::string find_sibling(const std::string& stem, const std::string& ext) {
  std::error_code ec;
  for (const std::string& candidate : {stem + ext, stem + ext + ".gz", stem + ext + ".GZ"})
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  return {};
}

/// Path without ".gz" and without the TetGen extension: "dir/a.ele.gz" -> "dir/a".
std::string tetgen_stem(const std::string& path) {
  std::string stem = path;
  if (stem.size() > 3) {
    std::string tail = stem.substr(stem.size() - 3);
    for (auto& ch : tail) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (tail == ".gz") stem.resize(stem.size() - 3);
  }
  const auto dot = stem.rfind('.');
  if (dot != std::string::npos && stem.find('/', dot) == std::string::npos) stem.resize(dot);
  return stem;
}

TetMesh read_tetgen(const std::string& path, const ReadOptions& options) {
  const std::string stem = tetgen_stem(path);
  const std::string node = format_extension(path) == "node" ? path : find_sibling(stem, ".node");
  const std::string ele = format_extension(path) == "ele" ? path : find_sibling(stem, ".ele");
  if (node.empty()) throw IoError(path, 0, "TetGen node file " + stem + ".node (or .node.gz) not found next to it");
  if (ele.empty()) throw IoError(path, 0, "TetGen element file " + stem + ".ele (or .ele.gz) not found next to it");
  const std::string node_data = read_file_bytes(node, options.max_bytes);
  const std::string ele_data = read_file_bytes(ele, options.max_bytes);
  return parse_tetgen(node_data, ele_data, node, ele);
}

}  // namespace

TetMesh read_tet_mesh(const std::string& path, const ReadOptions& options) {
  const std::string ext = format_extension(path);
  TetMesh mesh;
  if (ext == "msh") {
    mesh = parse_msh(read_file_bytes(path, options.max_bytes), path);
  } else if (ext == "mesh") {
    mesh = parse_medit(read_file_bytes(path, options.max_bytes), path);
  } else if (ext == "node" || ext == "ele") {
    mesh = read_tetgen(path, options);
  } else if (ext == "vtu") {
    mesh = parse_vtu(read_file_bytes(path, options.max_bytes), path);
  } else {
    throw IoError(path, 0,
                  "unknown tet mesh format '" + (ext.empty() ? std::string("(no extension)") : "." + ext) +
                      "' (supported: .msh (Gmsh 1, 2.2, 4.1), .mesh (Medit), .node/.ele (TetGen), .vtu (VTK XML); "
                      "each optionally gzipped as NAME.gz)");
  }
  if (options.validate) validate_tet_mesh(mesh, options.validation, path);
  return mesh;
}

}  // namespace xpd::io
