#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tetrahedralize.hpp>
#include <xpd/mesh/validate.hpp>

#include <cmath>
#include <fmt/format.h>
#include <tetgen.h>
#include <vector>

namespace xpd {
namespace {

std::string tetgen_code_message(int code) {
  switch (code) {
    case 1: return "out of memory";
    case 2: return "internal error";
    case 3: return "the input surface self-intersects";
    case 4: return "a very small input feature (edge or face) relative to the model size";
    case 5: return "two very close input facets";
    case 10: return "invalid input";
    default: return "unknown error";
  }
}

}  // namespace

std::string tetgen_switches(const TetrahedralizeOptions& options) {
  std::string s = "pzQ";
  if (options.max_radius_edge_ratio > 0) {
    s += fmt::format("q{}", options.max_radius_edge_ratio);
    if (options.min_dihedral_deg > 0) s += fmt::format("/{}", options.min_dihedral_deg);
  }
  if (options.max_volume > 0) s += fmt::format("a{}", options.max_volume);
  if (options.preserve_surface) s += "Y";
  s += options.extra_switches;
  return s;
}

TetMesh tetrahedralize(const SurfaceMesh& closed, const TetrahedralizeOptions& options) {
  // Input checks: TetGen's own diagnostics on bad input are terse or fatal.
  validate_surface(closed, "tetrahedralize");
  if (!is_closed_manifold(closed.triangles))
    throw MeshError("tetrahedralize: the surface is not a closed, consistently oriented 2-manifold "
                    "(every edge must be shared by exactly two triangles with opposite orientations)");
  const double volume = enclosed_volume(closed.nodes, closed.triangles);
  if (!(std::abs(volume) > 0)) throw MeshError("tetrahedralize: the surface encloses zero volume");
  if (!std::isfinite(options.max_radius_edge_ratio) || !std::isfinite(options.max_volume) ||
      !std::isfinite(options.min_dihedral_deg))
    throw MeshError("tetrahedralize: non-finite option value");

  // Input PLC: points and one single-triangle facet per surface triangle. tetgenio frees its
  // arrays with delete[] in its destructor, so they are allocated with new[].
  tetgenio in, out;
  in.firstnumber = 0;
  in.numberofpoints = int(closed.nodes.rows());
  in.pointlist = new REAL[std::size_t(3 * in.numberofpoints)];
  for (int v = 0; v < in.numberofpoints; ++v)
    for (int k = 0; k < 3; ++k) in.pointlist[3 * v + k] = closed.nodes(v, k);
  in.numberoffacets = int(closed.triangles.rows());
  in.facetlist = new tetgenio::facet[std::size_t(in.numberoffacets)];
  in.facetmarkerlist = nullptr;
  for (int f = 0; f < in.numberoffacets; ++f) {
    tetgenio::facet& facet = in.facetlist[f];
    tetgenio::init(&facet);
    facet.numberofpolygons = 1;
    facet.polygonlist = new tetgenio::polygon[1];
    tetgenio::init(&facet.polygonlist[0]);
    facet.polygonlist[0].numberofvertices = 3;
    facet.polygonlist[0].vertexlist = new int[3];
    for (int k = 0; k < 3; ++k) facet.polygonlist[0].vertexlist[k] = closed.triangles(f, k);
  }

  std::string switches = tetgen_switches(options);
  try {
    ::tetrahedralize(switches.data(), &in, &out);
  } catch (int code) {
    throw MeshError(fmt::format("tetrahedralize: TetGen failed with code {} ({}); switches '{}'", code,
                                tetgen_code_message(code), switches));
  } catch (const std::exception& e) {
    throw MeshError(fmt::format("tetrahedralize: TetGen failed: {}; switches '{}'", e.what(), switches));
  } catch (...) {
    throw MeshError(fmt::format("tetrahedralize: TetGen failed with an unknown exception; switches '{}'", switches));
  }
  if (out.numberoftetrahedra <= 0 || out.numberofcorners < 4 || out.tetrahedronlist == nullptr)
    throw MeshError(fmt::format("tetrahedralize: TetGen produced no tets; switches '{}'", switches));

  // Copy out, reorienting tets to positive volume (TetGen's own convention is the opposite).
  TetMesh mesh;
  const int base = out.firstnumber;
  mesh.nodes.resize(out.numberofpoints, 3);
  for (int v = 0; v < out.numberofpoints; ++v)
    for (int k = 0; k < 3; ++k) mesh.nodes(v, k) = out.pointlist[3 * v + k];
  mesh.tets.resize(out.numberoftetrahedra, 4);
  for (int t = 0; t < out.numberoftetrahedra; ++t) {
    for (int k = 0; k < 4; ++k) mesh.tets(t, k) = out.tetrahedronlist[t * out.numberofcorners + k] - base;
    const double v = signed_volume(mesh.nodes.row(mesh.tets(t, 0)), mesh.nodes.row(mesh.tets(t, 1)),
                                   mesh.nodes.row(mesh.tets(t, 2)), mesh.nodes.row(mesh.tets(t, 3)));
    if (v < 0) std::swap(mesh.tets(t, 2), mesh.tets(t, 3));
    if (v == 0) throw MeshError(fmt::format("tetrahedralize: TetGen produced the flat tet {}", t));
  }
  mesh.boundary = boundary_faces(mesh.tets);
  return mesh;
}

}  // namespace xpd
