// Broad + narrow phase CCD of a surface (surface_ccd.hpp).
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <tuple>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/surface_ccd.hpp>

namespace xpd {

namespace {

struct Best {
  double toi = std::numeric_limits<double>::infinity();
  int kind = 2;  // 0 vertex–face, 1 edge–edge
  std::size_t index = 0;
  std::int64_t checks = 0, capped = 0;
  bool better_than(const Best& o) const { return std::tie(toi, kind, index) < std::tie(o.toi, o.kind, o.index); }
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The broad phase `broad()` (the sweep or a cache's query), then the narrow phase on its pairs.
template <typename Broad>
SurfaceCcdResult surface_ccd_with(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                                  const CcdOptions& options, Broad broad) {
  SurfaceCcdResult r;
  auto t0 = std::chrono::steady_clock::now();
  const SurfaceCandidates c = broad();
  r.broad_phase_ms = ms_since(t0);
  r.vertex_face_candidates = c.vertex_face.size();
  r.edge_edge_candidates = c.edge_edge.size();

  t0 = std::chrono::steady_clock::now();
  std::atomic<double> earliest{options.max_time};
  tbb::enumerable_thread_specific<Best> local;
  auto lower_earliest = [&earliest](double toi) {
    double cur = earliest.load(std::memory_order_relaxed);
    while (toi < cur && !earliest.compare_exchange_weak(cur, toi, std::memory_order_relaxed)) {
    }
  };
  auto row = [](const Points& x, int i) -> Vec3 { return x.row(i).transpose(); };
  const std::size_t nvf = c.vertex_face.size(), total = nvf + c.edge_edge.size();
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, total, 64), [&](const tbb::blocked_range<std::size_t>& range) {
    Best& best = local.local();
    CcdOptions o = options;
    for (std::size_t q = range.begin(); q < range.end(); ++q) {
      o.max_time = earliest.load(std::memory_order_relaxed);
      CcdResult res;
      if (q < nvf) {
        const auto [v, f] = c.vertex_face[q];
        res = vertex_face_ccd(row(x0, v), row(x0, faces(f, 0)), row(x0, faces(f, 1)), row(x0, faces(f, 2)), row(x1, v),
                              row(x1, faces(f, 0)), row(x1, faces(f, 1)), row(x1, faces(f, 2)), o);
      } else {
        const auto [a, b] = c.edge_edge[q - nvf];
        res = edge_edge_ccd(row(x0, edges(a, 0)), row(x0, edges(a, 1)), row(x0, edges(b, 0)), row(x0, edges(b, 1)),
                            row(x1, edges(a, 0)), row(x1, edges(a, 1)), row(x1, edges(b, 0)), row(x1, edges(b, 1)), o);
      }
      best.checks += res.checks;
      best.capped += res.capped;
      if (!res.hit) continue;
      const Best candidate{res.toi, q < nvf ? 0 : 1, q < nvf ? q : q - nvf, 0, 0};
      if (candidate.better_than(best)) {
        best.toi = candidate.toi;
        best.kind = candidate.kind;
        best.index = candidate.index;
      }
      lower_earliest(res.toi);
    }
  });
  Best best;
  for (const Best& b : local) {
    r.checks += b.checks;
    r.capped += b.capped;
    if (b.better_than(best)) {
      best.toi = b.toi;
      best.kind = b.kind;
      best.index = b.index;
    }
  }
  r.narrow_phase_ms = ms_since(t0);
  if (best.kind < 2) {
    r.hit = true;
    r.toi = best.toi;
    r.edge_edge = best.kind == 1;
    r.pair = r.edge_edge ? c.edge_edge[best.index] : c.vertex_face[best.index];
  }
  return r;
}

}  // namespace

SurfaceCcdResult surface_ccd(const Points& x0, const Points& x1, const Triangles& faces, const Edges& edges,
                             const CcdOptions& options, int kinematic_from, bool mixed_only) {
  return surface_ccd_with(x0, x1, faces, edges, options, [&] {
    return swept_candidates(x0, x1, faces, edges, options.minimum_separation, kinematic_from, mixed_only);
  });
}

SurfaceCcdResult surface_ccd(const Points& x0, const Points& x1, CandidateCache& cache, const CcdOptions& options,
                             bool mixed_only) {
  return surface_ccd_with(x0, x1, cache.faces(), cache.edges(), options,
                          [&] { return cache.query(x0, x1, options.minimum_separation, mixed_only); });
}

}  // namespace xpd
