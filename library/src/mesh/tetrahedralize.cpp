#include <fmt/format.h>
#include <sys/wait.h>
#include <tetgen.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <vector>
#include <xpd/core/error.hpp>
#include <xpd/mesh/surface.hpp>
#include <xpd/mesh/tetrahedralize.hpp>
#include <xpd/mesh/validate.hpp>

namespace xpd {
namespace {

std::string tetgen_code_message(int code) {
  switch (code) {
    case 1:
      return "out of memory";
    case 2:
      return "internal error";
    case 3:
      return "the input surface self-intersects";
    case 4:
      return "a very small input feature (edge or face) relative to the model size";
    case 5:
      return "two very close input facets";
    case 10:
      return "invalid input";
    default:
      return "unknown error";
  }
}

// What a TetGen run produced, as plain arrays (so that it can cross a pipe).
struct TetgenResult {
  int code = 0;                    // 0 = success, else TetGen's error code, −signal if it crashed
  std::vector<double> points;      // #V × 3
  std::vector<int> tets;           // #T × 4, zero-based
  int num_intersecting_faces = 0;  // with switch 'd': triangles reported as intersecting
};

TetgenResult run_tetgen_here(tetgenio& in, const std::string& switches) {
  TetgenResult r;
  tetgenio out;
  std::string sw = switches;
  try {
    ::tetrahedralize(sw.data(), &in, &out);
  } catch (int code) {
    r.code = code == 0 ? 2 : code;
    return r;
  } catch (...) {
    r.code = 2;
    return r;
  }
  r.points.assign(out.pointlist, out.pointlist + 3 * std::size_t(std::max(out.numberofpoints, 0)));
  if (out.numberofcorners >= 4 && out.tetrahedronlist)
    for (int t = 0; t < out.numberoftetrahedra; ++t)
      for (int k = 0; k < 4; ++k) r.tets.push_back(out.tetrahedronlist[t * out.numberofcorners + k] - out.firstnumber);
  r.num_intersecting_faces = sw.find('d') != std::string::npos ? out.numberoftrifaces : 0;
  return r;
}

bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= std::size_t(w);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= std::size_t(r);
  }
  return true;
}

// TetGen 1.5 frees its memory pools twice on some error paths (terminatetetgen frees, then the
// mesh destructor frees again) and dies with SIGSEGV instead of throwing. Running it in a forked
// child turns any such crash into an error code. The child only runs TetGen (single-threaded,
// no TBB) and leaves with _exit. Forking a multi-threaded parent is safe with glibc's malloc, which
// takes all its arena locks around fork(); it is not under GCC 12's AddressSanitizer, whose
// allocator installs no fork handlers: a lock held by another thread at the fork (seen: a thread
// exiting at start-up) stays held in the child, whose next malloc then waits forever. A CI run hung
// that way for 600 s in MeshTetLocator.UnstructuredTetGenMeshMatchesBruteForce, so sanitized
// builds run TetGen in-process (tetrahedralize_isolates_process() says which).
TetgenResult run_tetgen(tetgenio& in, const std::string& switches, bool isolate) {
  if (!isolate || !tetrahedralize_isolates_process()) return run_tetgen_here(in, switches);
  int fds[2];
  if (::pipe(fds) != 0) throw MeshError("tetrahedralize: cannot create a pipe for the TetGen process");
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]), ::close(fds[1]);
    throw MeshError("tetrahedralize: cannot fork the TetGen process");
  }
  if (pid == 0) {
    ::close(fds[0]);
    const TetgenResult r = run_tetgen_here(in, switches);
    const std::uint64_t sizes[4] = {std::uint64_t(r.code), r.points.size(), r.tets.size(),
                                    std::uint64_t(r.num_intersecting_faces)};
    const bool ok = write_all(fds[1], sizes, sizeof sizes) &&
                    write_all(fds[1], r.points.data(), r.points.size() * sizeof(double)) &&
                    write_all(fds[1], r.tets.data(), r.tets.size() * sizeof(int));
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  TetgenResult r;
  std::uint64_t sizes[4];
  bool ok = read_all(fds[0], sizes, sizeof sizes);
  if (ok) {
    r.code = int(sizes[0]);
    r.points.resize(sizes[1]);
    r.tets.resize(sizes[2]);
    r.num_intersecting_faces = int(sizes[3]);
    ok = read_all(fds[0], r.points.data(), r.points.size() * sizeof(double)) &&
         read_all(fds[0], r.tets.data(), r.tets.size() * sizeof(int));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    throw MeshError(
        fmt::format("tetrahedralize: TetGen crashed (signal {}) on switches '{}'; this happens on "
                    "self-intersecting or nearly degenerate input (try detect_self_intersections)",
                    WTERMSIG(status), switches));
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw MeshError("tetrahedralize: lost the result of the TetGen process");
  return r;
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

bool tetrahedralize_isolates_process() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

TetMesh tetrahedralize(const SurfaceMesh& closed, const TetrahedralizeOptions& options) {
  // Input checks: TetGen's own diagnostics on bad input are terse or fatal.
  validate_surface(closed, "tetrahedralize");
  if (!is_closed_manifold(closed.triangles))
    throw MeshError(
        "tetrahedralize: the surface is not a closed, consistently oriented 2-manifold "
        "(every edge must be shared by exactly two triangles with opposite orientations)");
  const double volume = enclosed_volume(closed.nodes, closed.triangles);
  if (!(std::abs(volume) > 0)) throw MeshError("tetrahedralize: the surface encloses zero volume");
  if (!std::isfinite(options.max_radius_edge_ratio) || !std::isfinite(options.max_volume) ||
      !std::isfinite(options.min_dihedral_deg))
    throw MeshError("tetrahedralize: non-finite option value");

  // Input PLC: points and one single-triangle facet per surface triangle. tetgenio frees its
  // arrays with delete[] in its destructor, so they are allocated with new[].
  tetgenio in;
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

  const std::string switches = tetgen_switches(options);
  if (options.detect_self_intersections) {
    const TetgenResult check = run_tetgen(in, "pzQd", options.isolate_process);
    if (check.code != 0)
      throw MeshError(fmt::format("tetrahedralize: TetGen self-intersection check failed with code {} ({})", check.code,
                                  tetgen_code_message(check.code)));
    if (check.num_intersecting_faces > 0)
      throw MeshError(
          fmt::format("tetrahedralize: the input surface self-intersects ({} intersecting triangles "
                      "reported by TetGen)",
                      check.num_intersecting_faces));
  }
  const TetgenResult out = run_tetgen(in, switches, options.isolate_process);
  if (out.code != 0)
    throw MeshError(fmt::format("tetrahedralize: TetGen failed with code {} ({}); switches '{}'", out.code,
                                tetgen_code_message(out.code), switches));
  if (out.tets.empty())
    throw MeshError(fmt::format("tetrahedralize: TetGen produced no tets; switches '{}'", switches));

  // Copy out, reorienting tets to positive volume (TetGen's own convention is the opposite).
  TetMesh mesh;
  mesh.nodes = Eigen::Map<const Points>(out.points.data(), Eigen::Index(out.points.size() / 3), 3);
  mesh.tets = Eigen::Map<const Tets>(out.tets.data(), Eigen::Index(out.tets.size() / 4), 4);
  if (mesh.tets.minCoeff() < 0 || mesh.tets.maxCoeff() >= mesh.nodes.rows())
    throw MeshError("tetrahedralize: TetGen returned a tet index out of range");
  for (Eigen::Index t = 0; t < mesh.tets.rows(); ++t) {
    const double v = signed_volume(mesh.nodes.row(mesh.tets(t, 0)), mesh.nodes.row(mesh.tets(t, 1)),
                                   mesh.nodes.row(mesh.tets(t, 2)), mesh.nodes.row(mesh.tets(t, 3)));
    if (v < 0) std::swap(mesh.tets(t, 2), mesh.tets(t, 3));
    if (v == 0) throw MeshError(fmt::format("tetrahedralize: TetGen produced the flat tet {}", t));
  }
  mesh.boundary = boundary_faces(mesh.tets);
  return mesh;
}

}  // namespace xpd
