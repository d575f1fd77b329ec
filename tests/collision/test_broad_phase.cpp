// Broad phase (collision/broad_phase.hpp) on the scalable-CCD simulation frames of Belgrod et al.
// (../shared/data/scalable-ccd-sample): sort and sweep equals brute force, and every pair that the
// benchmark's exact truth marks as colliding is a candidate.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/surface_ccd.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/ccd_queries.hpp>
#include <xpd/io/file.hpp>
#include <xpd/io/mesh_io.hpp>
#include <xpd/mesh/surface.hpp>

#include "collision/collision_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

using test::verbose;

struct Frames {
  Points x0, x1;
  Triangles faces;
  Edges edges;  // in the benchmark's order (libigl's igl::edges: by larger index, then smaller)
};

Frames load_frames(const std::string& scene, const std::string& f0, const std::string& f1) {
  const std::string dir = test::data_path("scalable-ccd-sample/" + scene + "/frames/");
  Frames fr;
  const SurfaceMesh s0 = io::read_surface(dir + f0), s1 = io::read_surface(dir + f1);
  EXPECT_EQ(s0.triangles, s1.triangles);
  fr.x0 = s0.nodes;
  fr.x1 = s1.nodes;
  fr.faces = s0.triangles;
  Edges e = unique_edges(fr.faces);
  std::vector<std::array<int, 2>> rows(static_cast<std::size_t>(e.rows()));
  for (Eigen::Index i = 0; i < e.rows(); ++i) rows[static_cast<std::size_t>(i)] = {e(i, 1), e(i, 0)};
  std::sort(rows.begin(), rows.end());
  fr.edges.resize(e.rows(), 2);
  for (Eigen::Index i = 0; i < e.rows(); ++i) {
    fr.edges(i, 0) = rows[static_cast<std::size_t>(i)][1];
    fr.edges(i, 1) = rows[static_cast<std::size_t>(i)][0];
  }
  return fr;
}

TEST(BroadPhase, SweepEqualsBruteForceOnASimulationFrame) {
  const Frames fr = load_frames("cloth-funnel", "227.ply", "228.ply");
  ASSERT_EQ(fr.x0.rows(), 9450);
  const double diag = (fr.x0.colwise().maxCoeff() - fr.x0.colwise().minCoeff()).norm();
  for (const double inflation : {0.0, 1e-3 * diag}) {
    SCOPED_TRACE(inflation);
    const SurfaceCandidates sweep = swept_candidates(fr.x0, fr.x1, fr.faces, fr.edges, inflation);
    const SurfaceCandidates brute = brute_force_candidates(fr.x0, fr.x1, fr.faces, fr.edges, inflation);
    EXPECT_GT(sweep.vertex_face.size(), 0u);
    EXPECT_GT(sweep.edge_edge.size(), 0u);
    EXPECT_TRUE(sweep.vertex_face == brute.vertex_face)
        << sweep.vertex_face.size() << " vs " << brute.vertex_face.size();
    EXPECT_TRUE(sweep.edge_edge == brute.edge_edge) << sweep.edge_edge.size() << " vs " << brute.edge_edge.size();
    if (verbose())
      std::printf("  cloth-funnel, inflation %g: %zu VF, %zu EE candidates\n", inflation, sweep.vertex_face.size(),
                  sweep.edge_edge.size());
  }
}

// A random cloud of small triangles (many overlaps, all three axes) against brute force.
TEST(BroadPhase, SweepEqualsBruteForceOnRandomTriangles) {
  test::TriangleSoup soup = test::triangle_soup(400, 0.05, 0.05, 11);
  const Points &x0 = soup.x0, &x1 = soup.x1;
  Triangles& faces = soup.faces;
  const int nf = static_cast<int>(faces.rows());
  // Share some vertices between neighbouring faces so that the shared-vertex rule is exercised.
  for (int f = 1; f < nf; f += 2) faces(f, 0) = faces(f - 1, 1);
  const Edges edges = unique_edges(faces);
  const SurfaceCandidates sweep = swept_candidates(x0, x1, faces, edges, 0.01);
  const SurfaceCandidates brute = brute_force_candidates(x0, x1, faces, edges, 0.01);
  EXPECT_GT(sweep.vertex_face.size(), 1000u);
  EXPECT_TRUE(sweep.vertex_face == brute.vertex_face);
  EXPECT_TRUE(sweep.edge_edge == brute.edge_edge);
  for (const auto& [v, f] : sweep.vertex_face)
    for (int k = 0; k < 3; ++k) ASSERT_NE(faces(f, k), v);
  // Edge–face candidates at x0 against brute force over all pairs.
  std::vector<std::array<int, 2>> ef_brute;
  for (Eigen::Index e = 0; e < edges.rows(); ++e)
    for (Eigen::Index f = 0; f < faces.rows(); ++f) {
      bool shared = false;
      for (int k = 0; k < 3; ++k) shared |= faces(f, k) == edges(e, 0) || faces(f, k) == edges(e, 1);
      if (shared) continue;
      const Eigen::RowVector3d elo = x0.row(edges(e, 0)).cwiseMin(x0.row(edges(e, 1)));
      const Eigen::RowVector3d ehi = x0.row(edges(e, 0)).cwiseMax(x0.row(edges(e, 1)));
      const Eigen::RowVector3d flo = x0.row(faces(f, 0)).cwiseMin(x0.row(faces(f, 1))).cwiseMin(x0.row(faces(f, 2)));
      const Eigen::RowVector3d fhi = x0.row(faces(f, 0)).cwiseMax(x0.row(faces(f, 1))).cwiseMax(x0.row(faces(f, 2)));
      if ((elo.array() <= fhi.array()).all() && (flo.array() <= ehi.array()).all())
        ef_brute.push_back({static_cast<int>(e), static_cast<int>(f)});
    }
  EXPECT_GT(ef_brute.size(), 100u);
  EXPECT_TRUE(edge_face_candidates(x0, faces, edges) == ef_brute);
}

struct Scene {
  const char *name, *f0, *f1, *step;
};

// Box ids of the benchmark: vertices [0, nV), edges [nV, nV + nE) (igl::edges order), then faces.
TEST(BroadPhase, EveryTrulyCollidingBenchmarkPairIsACandidate) {
  XPD_SKIP_IN_SANITIZER_STAGE("77 s under ASan; the sweep runs there in BroadPhase.SweepEqualsBruteForce*");
  const Scene scenes[] = {{"cloth-funnel", "227.ply", "228.ply", "227"},
                          {"rod-twist", "3036.ply.gz", "3037.ply.gz", "3036"},
                          {"armadillo-rollers", "326.ply", "327.ply", "326"},
                          {"n-body-simulation", "balls16_18.ply.gz", "balls16_19.ply.gz", "18"},
                          {"cloth-ball", "cloth_ball92.ply.gz", "cloth_ball93.ply.gz", "92"}};
  for (const Scene& sc : scenes) {
    SCOPED_TRACE(sc.name);
    const Frames fr = load_frames(sc.name, sc.f0, sc.f1);
    const auto t0 = std::chrono::steady_clock::now();
    const SurfaceCandidates c = swept_candidates(fr.x0, fr.x1, fr.faces, fr.edges);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    const long nv = static_cast<long>(fr.x0.rows()), ne = static_cast<long>(fr.edges.rows());
    const std::string base = test::data_path(std::string("scalable-ccd-sample/") + sc.name + "/");
    long truths = 0, found = 0;
    for (const std::string kind : {"vf", "ee"}) {
      std::string boxes_path = base + "boxes/" + sc.step + kind + ".json";
      if (!std::filesystem::exists(boxes_path)) boxes_path += ".gz";
      const nlohmann::json boxes = nlohmann::json::parse(io::read_file_bytes(boxes_path));
      const std::vector<int> truth = io::read_ccd_truth_json(base + "mma_bool/" + sc.step + kind + "_mma_bool.json");
      ASSERT_EQ(boxes.size(), truth.size());
      const auto& list = kind == "vf" ? c.vertex_face : c.edge_edge;
      for (std::size_t i = 0; i < truth.size(); ++i) {
        if (!truth[i]) continue;
        const long a = boxes[i][0].get<long>(), b = boxes[i][1].get<long>();
        std::array<int, 2> pair;
        if (kind == "vf") {
          ASSERT_LT(a, nv);
          pair = {static_cast<int>(a), static_cast<int>(b - nv - ne)};
        } else {
          pair = {static_cast<int>(std::min(a, b) - nv), static_cast<int>(std::max(a, b) - nv)};
        }
        ++truths;
        const bool in = std::binary_search(list.begin(), list.end(), pair);
        found += in;
        EXPECT_TRUE(in) << kind << " pair " << i << " (" << a << ", " << b << ") is not a candidate";
      }
    }
    EXPECT_EQ(found, truths);
    if (std::string(sc.name) == "cloth-ball") {
      // The counts of the upstream scalable-CCD test (sort and sweep, pairs sharing a vertex excluded).
      EXPECT_EQ(c.vertex_face.size(), 1'655'541u);
      EXPECT_EQ(c.edge_edge.size(), 5'197'332u);
    }
    if (verbose())
      std::printf(
          "  %s: %ld V, %ld E, %ld F; %zu VF and %zu EE candidates in %.0f ms; %ld truly colliding pairs, %ld found\n",
          sc.name, nv, ne, static_cast<long>(fr.faces.rows()), c.vertex_face.size(), c.edge_edge.size(), ms, truths,
          found);
  }
}

TEST(BroadPhase, RefusesBadInput) {
  Points x0(3, 3), x1(2, 3);
  x0.setZero();
  x1.setZero();
  Triangles f(1, 3);
  f << 0, 1, 2;
  const Edges e = unique_edges(f);
  EXPECT_THROW((void)swept_candidates(x0, x1, f, e), Error);
  x1 = x0;
  EXPECT_THROW((void)swept_candidates(x0, x1, f, e, -1.0), Error);
  f(0, 2) = 3;
  EXPECT_THROW((void)swept_candidates(x0, x1, f, e), Error);
  f(0, 2) = 2;
  x1(1, 1) = std::numeric_limits<double>::infinity();
  EXPECT_THROW((void)swept_candidates(x0, x1, f, e), Error);
}

// Kinematic vertices (obstacles, from index k on): the candidates equal the plain candidates
// filtered by the vertex indices themselves (not both elements kinematic; with mixed_only, exactly
// one), for the sweep, the brute force and the edge–face list alike.
TEST(BroadPhase, KinematicPairsAreFilteredByVertexIndex) {
  test::TriangleSoup soup = test::triangle_soup(400, 0.05, 0.05, 13);
  Triangles& faces = soup.faces;
  for (Eigen::Index f = 1; f < faces.rows(); f += 2) faces(f, 0) = faces(f - 1, 1);
  const Edges edges = unique_edges(faces);
  const int k = static_cast<int>(soup.x0.rows() / 2);
  auto kinematic = [&](auto&& vertices) {
    for (const int v : vertices)
      if (v < k) return false;
    return true;
  };
  auto face_k = [&](int f) { return kinematic(std::array<int, 3>{faces(f, 0), faces(f, 1), faces(f, 2)}); };
  auto edge_k = [&](int e) { return kinematic(std::array<int, 2>{edges(e, 0), edges(e, 1)}); };
  const SurfaceCandidates all = swept_candidates(soup.x0, soup.x1, faces, edges, 0.01);
  for (const bool mixed : {false, true}) {
    SCOPED_TRACE(mixed);
    auto keep = [&](bool a, bool b) { return mixed ? a != b : !(a && b); };
    SurfaceCandidates want;
    for (const auto& [v, f] : all.vertex_face)
      if (keep(v >= k, face_k(f))) want.vertex_face.push_back({v, f});
    for (const auto& [a, b] : all.edge_edge)
      if (keep(edge_k(a), edge_k(b))) want.edge_edge.push_back({a, b});
    ASSERT_GT(want.vertex_face.size(), 100u);
    ASSERT_LT(want.vertex_face.size(), all.vertex_face.size());
    const SurfaceCandidates got = swept_candidates(soup.x0, soup.x1, faces, edges, 0.01, k, mixed);
    const SurfaceCandidates brute = brute_force_candidates(soup.x0, soup.x1, faces, edges, 0.01, k, mixed);
    EXPECT_TRUE(got.vertex_face == want.vertex_face);
    EXPECT_TRUE(got.edge_edge == want.edge_edge);
    EXPECT_TRUE(brute.vertex_face == want.vertex_face);
    EXPECT_TRUE(brute.edge_edge == want.edge_edge);
  }
  std::vector<std::array<int, 2>> ef_want;
  for (const auto& [e, f] : edge_face_candidates(soup.x0, faces, edges))
    if (!(edge_k(e) && face_k(f))) ef_want.push_back({e, f});
  EXPECT_TRUE(edge_face_candidates(soup.x0, faces, edges, k) == ef_want);
}

}  // namespace
// The candidate cache (a Verlet list) returns exactly what the sweep returns, over a walk of
// queries such as a solver makes: many short steps (served from the cache), long ones (rebuild),
// static queries at several inflations, and kinematic vertices with and without mixed_only.
// A surface that uses a few of the body's nodes (a contact surface over a volume mesh), and edges
// whose vertices no face uses (a rod sliding over a sheet): the cache gives the sweep's pairs.
// Fails when the cache bounds only the faces' vertices (the rod's pairs come out of unset boxes)
// and when its validity test watches only their motion (the sheet barely moves, the rod slides on
// to edges the cached list does not hold).
TEST(BroadPhase, CandidateCacheServesASurfaceOfSomeNodesAndEdgesOffTheFaces) {
  constexpr int n = 12;  // an n × n sheet in z = 0, its vertices after 300 unused nodes
  constexpr int first = 300;
  const int rod = first + n * n;              // a two-vertex rod crossing above the sheet
  Points x0 = Points::Zero(rod + 2 + 50, 3);  // 50 more unused nodes after the rod
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (Eigen::Index i = 0; i < x0.rows(); ++i) x0.row(i) = Eigen::RowVector3d(u(rng), u(rng), u(rng));
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i) x0.row(first + j * n + i) = Eigen::RowVector3d(i * 0.1, j * 0.1, 0.0);
  x0.row(rod) = Eigen::RowVector3d(0.02, 0.31, 4e-4);  // within d̂ of the sheet
  x0.row(rod + 1) = Eigen::RowVector3d(0.07, 0.64, 6e-4);
  Triangles faces((n - 1) * (n - 1) * 2, 3);
  int f = 0;
  for (int j = 0; j + 1 < n; ++j)
    for (int i = 0; i + 1 < n; ++i) {
      const int a = first + j * n + i, b = a + 1, c = a + n, d = c + 1;
      faces.row(f++) << a, b, d;
      faces.row(f++) << a, d, c;
    }
  const Edges sheet = unique_edges(faces);
  Edges edges(sheet.rows() + 1, 2);
  edges << sheet, Eigen::RowVector2i(rod, rod + 1);
  const double dhat = 1e-3;
  CandidateCache cache(faces, edges, 2 * dhat, dhat);
  Points x = x0;
  long rod_pairs = 0;
  for (int step = 0; step < 9; ++step) {
    Points x1 = x;
    for (Eigen::Index i = 0; i < x1.rows(); ++i)
      for (int a = 0; a < 3; ++a) x1(i, a) += 0.2 * dhat * u(rng);
    if (step % 3 == 2) {  // the rod slides one sheet edge along x
      x1(rod, 0) += 0.1;
      x1(rod + 1, 0) += 0.1;
    }
    const double inflation = step % 2 == 0 ? 0.0 : 0.5 * dhat;
    const SurfaceCandidates want = swept_candidates(x, x1, faces, edges, inflation);
    const SurfaceCandidates got = cache.query(x, x1, inflation);
    ASSERT_TRUE(got.vertex_face == want.vertex_face) << "step " << step;
    ASSERT_TRUE(got.edge_edge == want.edge_edge) << "step " << step;
    for (const auto& p : want.edge_edge) rod_pairs += p[0] == edges.rows() - 1 || p[1] == edges.rows() - 1;
    x = x1;
  }
  EXPECT_GT(rod_pairs, 0);                       // the rod's edge met the sheet's edges
  EXPECT_LT(cache.rebuilds(), cache.queries());  // the short steps are served from the cache
}

TEST(BroadPhase, CandidateCacheEqualsTheSweepOverAWalkOfSteps) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "94 s under ASan; the candidate cache runs there in the IPC scene tests (SceneIpc.Lips*)");
  const Frames fr = load_frames("cloth-funnel", "227.ply", "228.ply");
  const double diag = (fr.x0.colwise().maxCoeff() - fr.x0.colwise().minCoeff()).norm();
  const double dhat = 1e-4 * diag;
  const int k = static_cast<int>(fr.x0.rows()) - 500;  // the last 500 vertices kinematic
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (const int kinematic_from : {kNoKinematicVertices, k}) {
    SCOPED_TRACE(kinematic_from);
    CandidateCache cache(fr.faces, fr.edges, 2 * dhat, dhat, kinematic_from);
    Points x = fr.x0;
    long checked = 0;
    for (int step = 0; step < 16; ++step) {
      // The frame's own motion, scaled: a long step every 4th, short ones otherwise.
      const double scale = step % 4 == 3 ? 2.0 : 0.02;
      Points x1 = x + scale * (fr.x1 - fr.x0);
      for (Eigen::Index i = 0; i < x1.rows(); ++i)
        for (int a = 0; a < 3; ++a) x1(i, a) += 0.05 * dhat * u(rng);
      const double inflation = step % 2 == 0 ? 0.0 : 0.5 * dhat;  // a CCD's minimum separation
      const bool mixed = kinematic_from != kNoKinematicVertices && step % 3 == 1;
      const SurfaceCandidates want = swept_candidates(x, x1, fr.faces, fr.edges, inflation, kinematic_from, mixed);
      const SurfaceCandidates got = cache.query(x, x1, inflation, mixed);
      ASSERT_TRUE(got.vertex_face == want.vertex_face) << "step " << step;
      ASSERT_TRUE(got.edge_edge == want.edge_edge) << "step " << step;
      const SurfaceCandidates at_rest = swept_candidates(x1, x1, fr.faces, fr.edges, dhat, kinematic_from);
      const SurfaceCandidates cached_rest = cache.query(x1, x1, dhat);  // the barrier's pairs at x1
      ASSERT_TRUE(cached_rest.vertex_face == at_rest.vertex_face) << "step " << step;
      ASSERT_TRUE(cached_rest.edge_edge == at_rest.edge_edge) << "step " << step;
      checked += static_cast<long>(want.vertex_face.size() + want.edge_edge.size() + at_rest.vertex_face.size() +
                                   at_rest.edge_edge.size());
      x = x1;
    }
    EXPECT_GT(checked, 0);
    EXPECT_EQ(cache.queries(), 32);
    // The first query and each long step rebuild (4), and so does the first query after a long
    // step (the cache would be oversized); the other short ones are served from the cache.
    EXPECT_GE(cache.rebuilds(), 5);
    EXPECT_LE(cache.rebuilds(), 9);
    if (verbose())
      std::printf("[cache] kinematic_from %d: %ld queries, %ld rebuilds, %ld candidates compared\n", kinematic_from,
                  cache.queries(), cache.rebuilds(), checked);
  }
  // The surface CCD over a cache gives the sweep's candidates and so the same earliest contact.
  CandidateCache ccd_cache(fr.faces, fr.edges, dhat);
  const SurfaceCcdResult swept = surface_ccd(fr.x0, fr.x1, fr.faces, fr.edges);
  const SurfaceCcdResult cached = surface_ccd(fr.x0, fr.x1, ccd_cache);
  EXPECT_EQ(cached.vertex_face_candidates, swept.vertex_face_candidates);
  EXPECT_EQ(cached.edge_edge_candidates, swept.edge_edge_candidates);
  EXPECT_EQ(cached.hit, swept.hit);
  EXPECT_EQ(cached.toi, swept.toi);
  EXPECT_EQ(cached.pair, swept.pair);
  EXPECT_THROW(CandidateCache(fr.faces, fr.edges, 0.0), Error);
  EXPECT_THROW(CandidateCache(fr.faces, fr.edges, dhat, -1.0), Error);
}

}  // namespace xpd
