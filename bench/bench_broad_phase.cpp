// The surface broad phase (collision/broad_phase.hpp) that IPC runs twice per PD iteration (barrier
// pairs within d̂, and the CCD of the line search): on the ICT face of scenes/face_ipc.json at rest
// (static boxes inflated by d̂ = 0.2 mm) and on a scalable-CCD frame pair (swept boxes); and the
// candidate cache's query on the face when the surface has moved less than its margin (the case of
// most solver iterations), against the sweep of the same query.
#include <benchmark/benchmark.h>

#include <string>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/surface.hpp>

using namespace xpd;

namespace {
struct Surface {
  Points x0, x1;
  Triangles faces;
  Edges edges;
};

const Surface& face() {
  static const Surface s = [] {
    const SurfaceMesh m = io::read_surface(std::string(XPD_SOURCE_DIR) + "/scenes/data/ict-face-jawopen.obj.gz");
    return Surface{m.nodes, m.nodes, m.triangles, unique_edges(m.triangles)};
  }();
  return s;
}

const Surface& funnel() {
  static const Surface s = [] {
    const std::string dir = std::string(XPD_DEFAULT_DATA_DIR) + "/scalable-ccd-sample/cloth-funnel/frames/";
    const SurfaceMesh a = io::read_surface(dir + "227.ply"), b = io::read_surface(dir + "228.ply");
    return Surface{a.nodes, b.nodes, a.triangles, unique_edges(a.triangles)};
  }();
  return s;
}

void run(benchmark::State& state, const Surface& s, double inflation) {
  std::size_t pairs = 0;
  for (auto _ : state) {
    const SurfaceCandidates c = swept_candidates(s.x0, s.x1, s.faces, s.edges, inflation);
    pairs = c.vertex_face.size() + c.edge_edge.size();
    benchmark::DoNotOptimize(pairs);
  }
  state.counters["triangles"] = static_cast<double>(s.faces.rows());
  state.counters["candidates"] = static_cast<double>(pairs);
}
}  // namespace

static void BM_SweptCandidatesFace(benchmark::State& state) { run(state, face(), 2e-4); }
BENCHMARK(BM_SweptCandidatesFace)->Unit(benchmark::kMillisecond)->UseRealTime();

static void BM_SweptCandidatesFunnel(benchmark::State& state) { run(state, funnel(), 0.0); }
BENCHMARK(BM_SweptCandidatesFunnel)->Unit(benchmark::kMillisecond)->UseRealTime();

// The face after a small motion (1e-5 m per vertex): the cache built once, then each query filters
// the cached pairs.
static void BM_CandidateCacheFace(benchmark::State& state) {
  const Surface& s = face();
  CandidateCache cache(s.faces, s.edges, 4e-4, 2e-4);
  Points moved = s.x0;
  moved.col(2).array() += 1e-5;
  std::size_t pairs = cache.query(s.x0, s.x0, 2e-4).vertex_face.size();
  for (auto _ : state) {
    const SurfaceCandidates c = cache.query(moved, moved, 2e-4);
    pairs = c.vertex_face.size() + c.edge_edge.size();
    benchmark::DoNotOptimize(pairs);
  }
  state.counters["candidates"] = static_cast<double>(pairs);
  state.counters["rebuilds"] = static_cast<double>(cache.rebuilds());
}
BENCHMARK(BM_CandidateCacheFace)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
