// Conservative CCD (collision/ccd.hpp) and its query files (io/ccd_queries.hpp).
// Oracles: the exact ground truth of the CCD benchmark of Wang et al. 2021 and of the scalable-CCD
// data of Belgrod et al. (../shared/data), and queries built to touch at a known time.
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include <Eigen/Geometry>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <xpd/collision/broad_phase.hpp>
#include <xpd/collision/ccd.hpp>
#include <xpd/collision/surface_ccd.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/ccd_queries.hpp>
#include <xpd/io/mesh_io.hpp>

#include "collision/collision_fixtures.hpp"
#include "test_util.hpp"

namespace xpd {
namespace {

namespace fs = std::filesystem;

using test::verbose;

CcdResult run_query(io::CcdQueryKind kind, const io::CcdQuery& q, const CcdOptions& o = {}) {
  const auto& x = q.points;
  return kind == io::CcdQueryKind::vertex_face ? vertex_face_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o)
                                               : edge_edge_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o);
}

// Every query file of the two benchmark folders with its truth: 5,409 + 19,638 queries.
TEST(Ccd, BenchmarkQueriesHaveNoFalseNegatives) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "45 s under ASan (the benchmark's query sets); the CCD runs there in Ccd.ConstructedContacts* and "
      "Ccd.MinimumSeparation*");
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(test::data_path("ccd-sample-queries")))
    if (e.is_regular_file() && e.path().extension() == ".csv") files.push_back(e.path().string());
  const std::string s = test::data_path("scalable-ccd-sample/");
  for (const char* f : {"cloth-funnel/queries/227ee.csv", "cloth-funnel/queries/227vf.csv",
                        "rod-twist/queries/3036ee.csv.gz", "rod-twist/queries/3036vf.csv",
                        "armadillo-rollers/queries/326vf.csv.gz", "n-body-simulation/queries/18vf.csv.gz"})
    files.push_back(s + f);
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 47u);  // 41 benchmark files + 6 scalable ones

  std::int64_t queries[2] = {0, 0}, colliding[2] = {0, 0}, false_negatives = 0, false_positives[2] = {0, 0};
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    std::vector<io::CcdQuery> q = io::read_ccd_queries(path);
    const bool scalable = path.find("scalable-ccd-sample") != std::string::npos;
    if (scalable) {
      const std::vector<int> truth = io::read_ccd_truth_json(io::ccd_truth_path_for(path));
      ASSERT_EQ(truth.size(), q.size());
      for (std::size_t i = 0; i < q.size(); ++i) q[i].truth = truth[i];
    }
    const io::CcdQueryKind kind = io::ccd_query_kind_from_path(path);
    for (std::size_t i = 0; i < q.size(); ++i) {
      ASSERT_GE(q[i].truth, 0);
      const CcdResult r = run_query(kind, q[i]);
      queries[scalable] += 1;
      colliding[scalable] += q[i].truth;
      if (q[i].truth == 1 && !r.hit) {
        ++false_negatives;
        ADD_FAILURE() << "false negative: query " << i;
      }
      false_positives[scalable] += q[i].truth == 0 && r.hit;
    }
  }
  // The counts the data's SOURCES.md gives, so that no file was silently skipped or misread.
  EXPECT_EQ(queries[0], 5409);
  EXPECT_EQ(colliding[0], 435);
  EXPECT_EQ(queries[1], 19638);
  EXPECT_EQ(false_negatives, 0);
  if (verbose())
    std::printf("  benchmark: %ld false positives of %ld negatives; scalable: %ld of %ld\n",
                static_cast<long>(false_positives[0]), static_cast<long>(queries[0] - colliding[0]),
                static_cast<long>(false_positives[1]), static_cast<long>(queries[1] - colliding[1]));
}

// Largest |component| of F at the returned time, minimized over (u, v) on a fine grid, less the
// grid's resolution: at toi the primitives must be within the tolerance (ccd.hpp: an accepted box
// has |F| ≤ δ + rounding all over it).
double closest_at(bool vertex_face, const std::array<Vec3, 8>& x, double t) {
  std::array<Vec3, 4> q;
  for (int m = 0; m < 4; ++m) q[m] = x[m] + t * (x[m + 4] - x[m]);
  double best = 1e300;
  const int n = 400;
  // A grid point lies within 1/(2n) of the minimizer in u and v: subtract what F can change there.
  const double du = vertex_face
                        ? std::max((q[2] - q[1]).lpNorm<Eigen::Infinity>(), (q[3] - q[1]).lpNorm<Eigen::Infinity>())
                        : (q[1] - q[0]).lpNorm<Eigen::Infinity>() + (q[3] - q[2]).lpNorm<Eigen::Infinity>();
  for (int i = 0; i <= n; ++i) {
    for (int j = 0; j <= n; ++j) {
      const double u = double(i) / n, v = double(j) / n;
      if (vertex_face && u + v > 1) continue;
      const Vec3 f = vertex_face ? Vec3(q[0] - (1 - u - v) * q[1] - u * q[2] - v * q[3])
                                 : Vec3((1 - u) * q[0] + u * q[1] - (1 - v) * q[2] - v * q[3]);
      best = std::min(best, f.lpNorm<Eigen::Infinity>());
    }
  }
  return best - du / n;
}

// Random queries built to touch at a chosen t*: the point (edge point) at t* is placed on the
// triangle (other edge) at t*, with random motions otherwise.
TEST(Ccd, ConstructedContactsAreFoundNoLaterThanTheContact) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> U(-1, 1), T(0.05, 0.95), B(0.05, 0.9);
  CcdOptions o;
  o.tolerance = 1e-6;
  int hits = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const bool vf = trial % 2 == 0;
    const double ts = T(rng);
    std::array<Vec3, 8> x;
    for (auto& p : x) p = Vec3(U(rng), U(rng), U(rng));
    // Position of primitive 0's point at t*, on primitive 1 (or on the other edge) at t*.
    std::array<Vec3, 4> at;
    for (int m = 1; m < 4; ++m) at[m] = x[m] + ts * (x[m + 4] - x[m]);
    Vec3 target;
    if (vf) {
      double u = B(rng), v = B(rng);
      if (u + v > 0.95) {
        const double shrink = 0.95 / (u + v);
        u *= shrink;
        v *= shrink;
      }
      target = (1 - u - v) * at[1] + u * at[2] + v * at[3];
      // p(t*) = target: choose p⁰ random, p¹ = p⁰ + (target − p⁰)/t*.
      x[4] = x[0] + (target - x[0]) / ts;
    } else {
      // a(t*) + s (b(t*) − a(t*)) = c(t*) + w (d(t*) − c(t*)): move a so that this holds.
      const double s = B(rng), w = B(rng);
      at[0] = x[0] + ts * (x[4] - x[0]);
      const Vec3 on_cd = (1 - w) * at[2] + w * at[3];
      const Vec3 on_ab = (1 - s) * at[0] + s * at[1];
      const Vec3 shift = (on_cd - on_ab) / (1 - s);  // moves a(t*) only
      x[4] += shift / ts;
    }
    const CcdResult r = vf ? vertex_face_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o)
                           : edge_edge_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o);
    ASSERT_TRUE(r.hit) << "trial " << trial;
    ASSERT_FALSE(r.capped) << "trial " << trial;
    hits += r.hit;
    EXPECT_LE(r.toi, ts + 1e-12) << "trial " << trial;
    EXPECT_GE(r.toi, 0.0);
    EXPECT_LE(closest_at(vf, x, r.toi), o.tolerance + 1e-12) << "trial " << trial;
  }
  EXPECT_EQ(hits, 200);
}

std::array<Vec3, 8> sliding_point(double gap) {
  // Triangle in z = 0, the point moves across it at height gap.
  return {Vec3(0.2, 0.2, gap), Vec3(0, 0, 0), Vec3(1, 0, 0), Vec3(0, 1, 0),
          Vec3(0.3, 0.1, gap), Vec3(0, 0, 0), Vec3(1, 0, 0), Vec3(0, 1, 0)};
}

CcdResult vf(const std::array<Vec3, 8>& x, const CcdOptions& o) {
  return vertex_face_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o);
}

TEST(Ccd, MinimumSeparationReportsCloseApproach) {
  const auto x = sliding_point(0.01);
  CcdOptions o;
  EXPECT_FALSE(vf(x, o).hit);
  o.minimum_separation = 0.005;
  EXPECT_FALSE(vf(x, o).hit);
  o.minimum_separation = 0.02;
  const CcdResult r = vf(x, o);
  EXPECT_TRUE(r.hit);
  EXPECT_EQ(r.toi, 0.0);  // already within the separation at the start
  // Approach from above, the separation reached at t = 0.5: toi ≤ 0.5. With ms ≫ tolerance the
  // near-contact set is a 0.04 × 0.04 patch of (u, v) at every t ≥ 0.5, which boxes must resolve to
  // the tolerance along t = 0.5 (ccd.hpp): the search reaches its cap and answers conservatively.
  auto y = sliding_point(0.04);
  y[4].z() = 0.0;  // height 0.04 (1 − t): 0.02 at t = 0.5
  o.max_checks = 100'000;
  const CcdResult s = vf(y, o);
  ASSERT_TRUE(s.hit);
  EXPECT_LE(s.toi, 0.5);
  EXPECT_GE(s.toi, 0.49);
  // A separation comparable with the tolerance resolves without the cap and within 1e-4 in t.
  o.minimum_separation = 4e-6;
  y[0].z() = 0.04 + 4e-6;
  y[4].z() = -0.04 + 4e-6;  // height 4e-6 + 0.04 (1 − 2t): the separation reached at t = 0.5
  const CcdResult close = vf(y, o);
  ASSERT_TRUE(close.hit);
  EXPECT_FALSE(close.capped);
  EXPECT_LE(close.toi, 0.5);
  EXPECT_GE(close.toi, 0.5 - 1e-4);
}

// The rounding bound scales with the coordinates: the same configuration scaled by 2^±40 (exact)
// gives the same answers with the tolerance scaled alike.
TEST(Ccd, AnswersAreScaleInvariant) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> U(-1, 1);
  for (int trial = 0; trial < 100; ++trial) {
    std::array<Vec3, 8> x;
    for (auto& p : x) p = Vec3(U(rng), U(rng), U(rng));
    const bool is_vf = trial % 2 == 0;
    const CcdResult ref = is_vf ? vf(x, {}) : edge_edge_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7]);
    for (const double scale : {0x1p-40, 0x1p40}) {
      std::array<Vec3, 8> y;
      for (int i = 0; i < 8; ++i) y[i] = scale * x[i];
      CcdOptions o;
      o.tolerance = scale * 1e-6;
      const CcdResult r = is_vf ? vf(y, o) : edge_edge_ccd(y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7], o);
      EXPECT_EQ(r.hit, ref.hit) << "trial " << trial << " scale " << scale;
      if (r.hit && ref.hit) {
        EXPECT_EQ(r.toi, ref.toi) << "trial " << trial;
      }
    }
  }
}

TEST(Ccd, CapReturnsAConservativeHit) {
  auto y = sliding_point(0.04);
  y[4].z() = -0.04;  // crosses the triangle at t = 0.5
  CcdOptions o;
  o.max_checks = 1;
  const CcdResult r = vf(y, o);
  EXPECT_TRUE(r.hit);
  EXPECT_TRUE(r.capped);
  EXPECT_EQ(r.toi, 0.0);
  o.max_checks = 1'000'000;
  const CcdResult full = vf(y, o);
  EXPECT_TRUE(full.hit);
  EXPECT_FALSE(full.capped);
  EXPECT_LE(full.toi, 0.5);
  EXPECT_GE(full.toi, 0.5 - 1e-4);
}

TEST(Ccd, MaxTimeLimitsTheSearchWithoutChangingEarlierAnswers) {
  auto y = sliding_point(0.04);
  y[4].z() = -0.04;  // crosses the triangle at t = 0.5
  const CcdResult full = vf(y, {});
  ASSERT_TRUE(full.hit);
  CcdOptions o;
  o.max_time = 0.4;
  EXPECT_FALSE(vf(y, o).hit);
  o.max_time = 0.6;
  const CcdResult limited = vf(y, o);
  EXPECT_TRUE(limited.hit);
  EXPECT_EQ(limited.toi, full.toi);
  EXPECT_LE(limited.checks, full.checks);
  o.max_time = 1.5;
  EXPECT_THROW(vf(y, o), Error);
}

TEST(Ccd, RefusesBadInput) {
  auto x = sliding_point(0.01);
  CcdOptions o;
  o.tolerance = 0;
  EXPECT_THROW(vf(x, o), Error);
  o = {};
  o.minimum_separation = -1;
  EXPECT_THROW(vf(x, o), Error);
  o = {};
  o.max_checks = 0;
  EXPECT_THROW(vf(x, o), Error);
  o = {};
  x[3].y() = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(vf(x, o), Error);
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

std::string query_rows(const std::string& row, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += row + "\n";
  return s;
}

TEST(CcdQueries, ParsesWideRationalsExactly) {
  const fs::path dir = test::scratch_dir("ccd_queries");
  // 2^100 + 2^60 over 2^102: needs 101 bits to read, is exactly 0.25 + 2^-42.
  const std::string big = "1267650600229382323001310052352";  // 2^100 + 2^60
  const std::string den = "5070602400912917605986812821504";  // 2^102
  write_text(dir / "q.csv", query_rows(big + "," + den + ",-3,4,0,1,1", 8));
  const auto q = io::read_ccd_queries((dir / "q.csv").string());
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].points[5].x(), 0.25 + 0x1p-42);
  EXPECT_EQ(q[0].points[5].y(), -0.75);
  EXPECT_EQ(q[0].points[5].z(), 0.0);
  EXPECT_EQ(q[0].truth, 1);
  EXPECT_EQ(io::ccd_query_kind_from_path("a/vertex-face/data_0_0.csv"), io::CcdQueryKind::vertex_face);
  EXPECT_EQ(io::ccd_query_kind_from_path("a/edge-edge/data_0_0.csv"), io::CcdQueryKind::edge_edge);
  EXPECT_EQ(io::ccd_query_kind_from_path("x/queries/3036ee.csv.gz"), io::CcdQueryKind::edge_edge);
  EXPECT_EQ(io::ccd_query_kind_from_path("x/queries/18vf.csv"), io::CcdQueryKind::vertex_face);
  EXPECT_THROW(io::ccd_query_kind_from_path("x/data.csv"), Error);
  EXPECT_EQ(io::ccd_truth_path_for("x/queries/18vf.csv.gz"), "x/mma_bool/18vf_mma_bool.json");
  EXPECT_EQ(io::ccd_truth_path_for("x/other/18vf.csv"), "");
}

TEST(CcdQueries, BadFilesNameTheLine) {
  const fs::path dir = test::scratch_dir("ccd_queries_bad");
  struct Case {
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {query_rows("1,3,0,1,0,1", 8), ":1: denominator '3' is not a power of two"},
      {query_rows("1,2,0,1,0,1", 7), "7 rows"},
      {query_rows("1,2,0,1,0", 8), ":1: expected 6 or 7"},
      {query_rows("1,2,0,1,0,1,1", 7) + "1,2,0,1,0,1,0\n", ":8: truth differs"},
      {query_rows("9007199254740993,1,0,1,0,1", 8), ":1: value 9007199254740993/1 is not exactly a double"},
      {query_rows("1,0,0,1,0,1", 8), ":1: denominator '0' is not positive"},
      {query_rows("1x,2,0,1,0,1", 8), ":1: expected an integer"},
      {query_rows("1" + std::string(40, '0') + ",1,0,1,0,1", 8), "needs more than 127 bits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    write_text(dir / "q.csv", c.text);
    try {
      (void)io::read_ccd_queries((dir / "q.csv").string());
      ADD_FAILURE() << "accepted";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  write_text(dir / "t.json", "[true, 1]");
  EXPECT_THROW((void)io::read_ccd_truth_json((dir / "t.json").string()), IoError);
}

// The command: JSON figures for a benchmark file, and exit status 1 when a truth file marks a
// clearly separated query as colliding (a false negative by that truth).
TEST(CcdCli, ReportsFiguresAndFailsOnFalseNegatives) {
  const fs::path dir = test::scratch_dir("ccd_cli");
  const std::string file = test::data_path("ccd-sample-queries/unit-tests/vertex-face/data_0_0.csv");
  const std::string cmd =
      std::string("\"") + XPD_CLI_PATH + "\" ccd --json \"" + file + "\" > \"" + (dir / "out.json").string() + "\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const nlohmann::json j = test::read_json_file(dir / "out.json");
  ASSERT_TRUE(j.contains("total")) << j.dump();
  EXPECT_EQ(j["total"]["queries"], 125);
  EXPECT_EQ(j["total"]["colliding"], 35);
  EXPECT_EQ(j["total"]["false_negatives"], 0);
  EXPECT_EQ(j["files"][0]["kind"], "vertex-face");

  // A point 1 above a triangle, not moving; the truth file claims a collision.
  write_text(dir / "apart.csv",
             "0,1,0,1,1,1\n0,1,0,1,0,1\n1,1,0,1,0,1\n0,1,1,1,0,1\n"
             "0,1,0,1,1,1\n0,1,0,1,0,1\n1,1,0,1,0,1\n0,1,1,1,0,1\n");
  write_text(dir / "truth.json", "[true]");
  const std::string bad = std::string("\"") + XPD_CLI_PATH + "\" ccd --type vf --truth \"" +
                          (dir / "truth.json").string() + "\" \"" + (dir / "apart.csv").string() + "\" > \"" +
                          (dir / "log.txt").string() + "\" 2>&1";
  const int status = std::system(bad.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  std::ifstream log(dir / "log.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("1 false negatives"), std::string::npos) << text;

  // Two frames of a surface: the same earliest contact as the library's surface_ccd.
  const std::string frames = test::data_path("scalable-ccd-sample/cloth-funnel/frames/");
  const std::string f0 = frames + "227.ply", f1 = frames + "228.ply";
  const std::string cmd_frames = std::string("\"") + XPD_CLI_PATH + "\" ccd --json --frames \"" + f0 + "\" \"" + f1 +
                                 "\" > \"" + (dir / "frames.json").string() + "\"";
  ASSERT_EQ(std::system(cmd_frames.c_str()), 0) << cmd_frames;
  const nlohmann::json fj = test::read_json_file(dir / "frames.json");
  const SurfaceMesh a = io::read_surface(f0), b = io::read_surface(f1);
  const SurfaceCcdResult r = surface_ccd(a.nodes, b.nodes, a.triangles, unique_edges(a.triangles));
  ASSERT_TRUE(r.hit);
  EXPECT_EQ(fj["hit"], true);
  EXPECT_EQ(fj["toi"].get<double>(), r.toi);
  EXPECT_EQ(fj["vertex_face_candidates"], r.vertex_face_candidates);
  EXPECT_EQ(fj["edge_edge_candidates"], r.edge_edge_candidates);
}

// The surface-wide CCD equals the minimum over every candidate pair evaluated on its own (no
// max_time), with the same pair, on any thread count.
TEST(SurfaceCcd, EqualsTheEarliestOverAllPairsOnAnyThreadCount) {
  const test::TriangleSoup soup = test::triangle_soup(150, 0.04, 0.12, 5);
  const Points &x0 = soup.x0, &x1 = soup.x1;
  const Triangles& faces = soup.faces;
  const Edges edges = unique_edges(faces);
  const SurfaceCandidates all = brute_force_candidates(x0, x1, faces, edges);
  double earliest = std::numeric_limits<double>::infinity();
  bool ee = false;
  std::array<int, 2> pair = {-1, -1};
  auto row = [](const Points& x, int i) -> Vec3 { return x.row(i).transpose(); };
  int hits = 0;
  for (const auto& [v, f] : all.vertex_face) {
    const CcdResult r = vertex_face_ccd(row(x0, v), row(x0, faces(f, 0)), row(x0, faces(f, 1)), row(x0, faces(f, 2)),
                                        row(x1, v), row(x1, faces(f, 0)), row(x1, faces(f, 1)), row(x1, faces(f, 2)));
    hits += r.hit;
    if (r.hit && r.toi < earliest) earliest = r.toi, ee = false, pair = {v, f};
  }
  for (const auto& [a, b] : all.edge_edge) {
    const CcdResult r =
        edge_edge_ccd(row(x0, edges(a, 0)), row(x0, edges(a, 1)), row(x0, edges(b, 0)), row(x0, edges(b, 1)),
                      row(x1, edges(a, 0)), row(x1, edges(a, 1)), row(x1, edges(b, 0)), row(x1, edges(b, 1)));
    hits += r.hit;
    if (r.hit && r.toi < earliest) earliest = r.toi, ee = true, pair = {a, b};
  }
  ASSERT_GT(hits, 10);  // a real race, not one contact
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
    const SurfaceCcdResult r = surface_ccd(x0, x1, faces, edges);
    ASSERT_TRUE(r.hit);
    EXPECT_EQ(r.toi, earliest);
    EXPECT_EQ(r.edge_edge, ee);
    EXPECT_EQ(r.pair, pair);
    EXPECT_EQ(r.vertex_face_candidates, all.vertex_face.size());
    EXPECT_EQ(r.edge_edge_candidates, all.edge_edge.size());
  }
  // Moving apart: no hit.
  const SurfaceCcdResult none = surface_ccd(x0, x0, faces.topRows(1), unique_edges(Triangles(faces.topRows(1))));
  EXPECT_FALSE(none.hit);
}

// The upstream scalable-CCD test's earliest time of impact between cloth-ball frames 92 and 93 is
// 2⁻¹⁸ = 3.814697265625e-06 (a bisection box's lower bound; the true time is not earlier).
TEST(SurfaceCcd, ClothBallEarliestImpactIsWithinTheBenchmarksBound) {
  XPD_SKIP_IN_SANITIZER_STAGE(
      "34 s under ASan (a benchmark surface); surface-wide CCD runs there in the other SurfaceCcd tests and the IPC "
      "scenes");
  const std::string dir = test::data_path("scalable-ccd-sample/cloth-ball/frames/");
  const SurfaceMesh a = io::read_surface(dir + "cloth_ball92.ply.gz"),
                    b = io::read_surface(dir + "cloth_ball93.ply.gz");
  const SurfaceCcdResult r = surface_ccd(a.nodes, b.nodes, a.triangles, unique_edges(a.triangles));
  ASSERT_TRUE(r.hit);
  EXPECT_GT(r.toi, 0.0);
  EXPECT_LE(r.toi, 7.6e-6);
  EXPECT_EQ(r.capped, 0);
  if (verbose())
    std::printf(
        "  cloth-ball 92 -> 93: toi %.17g (%s pair %d, %d), %zu + %zu candidates, broad %.0f ms, narrow %.0f ms\n",
        r.toi, r.edge_edge ? "edge-edge" : "vertex-face", r.pair[0], r.pair[1], r.vertex_face_candidates,
        r.edge_edge_candidates, r.broad_phase_ms, r.narrow_phase_ms);
}

}  // namespace
}  // namespace xpd
