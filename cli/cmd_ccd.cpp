// `xpd ccd FILE... [--json]`: runs the conservative CCD (collision/ccd.hpp) over query files of the
// CCD benchmark format (io/ccd_queries.hpp) and compares with their ground truth.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <xpd/collision/ccd.hpp>
#include <xpd/collision/surface_ccd.hpp>
#include <xpd/core/error.hpp>
#include <xpd/io/ccd_queries.hpp>
#include <xpd/io/mesh_io.hpp>

#include "commands.hpp"

namespace xpd::cli {

namespace {

struct CcdCliOptions {
  std::vector<std::string> files;
  std::vector<std::string> frames;  // two surface files: t = 0 and t = 1
  std::string kind;                 // "", "vf" or "ee"
  std::string truth;                // JSON truth for a single six-column file
  CcdOptions ccd;
  bool json = false;
};

struct Tally {
  std::int64_t queries = 0, with_truth = 0, colliding = 0, hits = 0, false_negatives = 0, false_positives = 0;
  std::int64_t capped = 0, checks = 0;
  double seconds = 0;

  void add(const Tally& o) {
    queries += o.queries;
    with_truth += o.with_truth;
    colliding += o.colliding;
    hits += o.hits;
    false_negatives += o.false_negatives;
    false_positives += o.false_positives;
    capped += o.capped;
    checks += o.checks;
    seconds += o.seconds;
  }

  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json j;
    j["queries"] = queries;
    j["with_truth"] = with_truth;
    j["colliding"] = colliding;
    j["hits"] = hits;
    j["false_negatives"] = false_negatives;
    j["false_positives"] = false_positives;
    j["capped"] = capped;
    j["checks_per_query"] = queries > 0 ? static_cast<double>(checks) / static_cast<double>(queries) : 0.0;
    j["us_per_query"] = queries > 0 ? 1e6 * seconds / static_cast<double>(queries) : 0.0;
    return j;
  }
};

Tally run_file(const CcdCliOptions& o, const std::string& path, io::CcdQueryKind kind) {
  std::vector<io::CcdQuery> queries = io::read_ccd_queries(path);
  std::string truth_path = o.truth;
  if (truth_path.empty() && !queries.empty() && queries.front().truth < 0) {
    const std::string guess = io::ccd_truth_path_for(path);
    if (!guess.empty() && std::filesystem::exists(guess)) truth_path = guess;
  }
  if (!truth_path.empty()) {
    const std::vector<int> truth = io::read_ccd_truth_json(truth_path);
    if (truth.size() != queries.size())
      throw Error(
          fmt::format("{}: {} truth values for {} queries in {}", truth_path, truth.size(), queries.size(), path));
    for (std::size_t i = 0; i < queries.size(); ++i) queries[i].truth = truth[i];
  }

  Tally t;
  std::vector<CcdResult> results(queries.size());
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const auto& x = queries[i].points;
    results[i] = kind == io::CcdQueryKind::vertex_face
                     ? vertex_face_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o.ccd)
                     : edge_edge_ccd(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], o.ccd);
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const CcdResult& r = results[i];
    ++t.queries;
    t.hits += r.hit;
    t.capped += r.capped;
    t.checks += r.checks;
    if (queries[i].truth < 0) continue;
    ++t.with_truth;
    t.colliding += queries[i].truth;
    t.false_negatives += queries[i].truth == 1 && !r.hit;
    t.false_positives += queries[i].truth == 0 && r.hit;
  }
  return t;
}

// Broad + narrow phase between two frames of one surface (same triangles).
void run_frames(const CcdCliOptions& o) {
  const SurfaceMesh s0 = io::read_surface(o.frames[0]), s1 = io::read_surface(o.frames[1]);
  if (s0.nodes.rows() != s1.nodes.rows() || s0.triangles != s1.triangles)
    throw Error(fmt::format("ccd: {} and {} are not the same surface (vertex counts {} and {}, or different triangles)",
                            o.frames[0], o.frames[1], s0.nodes.rows(), s1.nodes.rows()));
  const Edges edges = unique_edges(s0.triangles);
  const SurfaceCcdResult r = surface_ccd(s0.nodes, s1.nodes, s0.triangles, edges, o.ccd);
  nlohmann::ordered_json j;
  j["frames"] = o.frames;
  j["vertices"] = s0.nodes.rows();
  j["triangles"] = s0.triangles.rows();
  j["tolerance"] = o.ccd.tolerance;
  j["minimum_separation"] = o.ccd.minimum_separation;
  j["vertex_face_candidates"] = r.vertex_face_candidates;
  j["edge_edge_candidates"] = r.edge_edge_candidates;
  j["hit"] = r.hit;
  j["toi"] = r.hit ? nlohmann::ordered_json(r.toi) : nlohmann::ordered_json(nullptr);
  j["pair_kind"] = r.hit ? (r.edge_edge ? "edge-edge" : "vertex-face") : "";
  j["pair"] = r.pair;
  if (r.hit) {
    // The pair's vertices: (vertex, face corners) or (edge ends, edge ends).
    const auto& t = s0.triangles;
    j["pair_vertices"] = r.edge_edge
                             ? nlohmann::ordered_json{{edges(r.pair[0], 0), edges(r.pair[0], 1)},
                                                      {edges(r.pair[1], 0), edges(r.pair[1], 1)}}
                             : nlohmann::ordered_json{{r.pair[0]}, {t(r.pair[1], 0), t(r.pair[1], 1), t(r.pair[1], 2)}};
  }
  j["checks"] = r.checks;
  j["capped"] = r.capped;
  j["broad_phase_ms"] = r.broad_phase_ms;
  j["narrow_phase_ms"] = r.narrow_phase_ms;
  print_result(j, o.json, 24);
}

void run_ccd(const CcdCliOptions& o) {
  if (!o.frames.empty()) {
    if (!o.files.empty()) throw Error("ccd: give query files or --frames, not both");
    run_frames(o);
    return;
  }
  if (o.files.empty()) throw Error("ccd: give query files, or --frames T0 T1");
  if (!o.truth.empty() && o.files.size() != 1) throw Error("ccd: --truth applies to exactly one query file");
  nlohmann::ordered_json out;
  out["tolerance"] = o.ccd.tolerance;
  out["minimum_separation"] = o.ccd.minimum_separation;
  out["max_checks"] = o.ccd.max_checks;
  out["files"] = nlohmann::ordered_json::array();
  Tally total;
  for (const std::string& path : o.files) {
    const io::CcdQueryKind kind = o.kind.empty()   ? io::ccd_query_kind_from_path(path)
                                  : o.kind == "vf" ? io::CcdQueryKind::vertex_face
                                                   : io::CcdQueryKind::edge_edge;
    const Tally t = run_file(o, path, kind);
    total.add(t);
    nlohmann::ordered_json f;
    f["file"] = path;
    f["kind"] = kind == io::CcdQueryKind::vertex_face ? "vertex-face" : "edge-edge";
    f.update(t.to_json());
    out["files"].push_back(f);
    if (!o.json) {
      std::cout << fmt::format(
          "{}  {}  queries {}  colliding {}  hits {}  false negatives {}  false positives {}  "
          "capped {}  {:.2f} us/query\n",
          path, f["kind"].get<std::string>(), t.queries, t.colliding, t.hits, t.false_negatives, t.false_positives,
          t.capped, f["us_per_query"].get<double>());
    }
  }
  out["total"] = total.to_json();
  if (o.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    const auto& j = out["total"];
    std::cout << fmt::format(
        "total  queries {}  with truth {}  colliding {}  hits {}  false negatives {}  false positives {}  capped {}  "
        "{:.2f} checks/query  {:.2f} us/query\n",
        total.queries, total.with_truth, total.colliding, total.hits, total.false_negatives, total.false_positives,
        total.capped, j["checks_per_query"].get<double>(), j["us_per_query"].get<double>());
  }
  if (total.false_negatives > 0)
    throw Error(fmt::format("ccd: {} false negatives (a colliding query reported as free)", total.false_negatives));
}

}  // namespace

void add_ccd_command(CLI::App& app) {
  auto o = std::make_shared<CcdCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "ccd",
      "Run the conservative continuous collision detection over CCD benchmark query files and compare with their "
      "truth (exits with status 1 when any colliding query is missed), or over two frames of a surface");
  cmd->add_option(
         "files", o->files,
         "Query files (CSV, optionally .gz: 8 rows per query, x_num,x_den,y_num,y_den,z_num,z_den[,truth]). "
         "Six-column files D/queries/NAME.csv take their truth from D/mma_bool/NAME_mma_bool.json when present")
      ->check(CLI::ExistingFile);
  cmd->add_option("--frames", o->frames,
                  "Two frames of one triangle surface (t = 0 and t = 1, any surface format): run the broad and the "
                  "narrow phase over all vertex-face and edge-edge pairs and print the earliest time of impact")
      ->expected(2)
      ->check(CLI::ExistingFile);
  cmd->add_option("--type", o->kind,
                  "Query kind: vf (vertex-face) or ee (edge-edge); by default read from the path (a vertex-face or "
                  "edge-edge folder, or a name ending in vf/ee)")
      ->check(CLI::IsMember({"vf", "ee"}));
  cmd->add_option("--truth", o->truth, "JSON array of booleans with the truth of a single six-column file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tolerance", o->ccd.tolerance, "Codomain tolerance (input length units)")->capture_default_str();
  cmd->add_option("--minimum-separation", o->ccd.minimum_separation,
                  "Report a hit when the primitives come this close (input length units)")
      ->capture_default_str();
  cmd->add_option("--max-checks", o->ccd.max_checks, "Box checks per query before a conservative hit")
      ->capture_default_str();
  cmd->add_flag("--json", o->json,
                "Print JSON: per file and total queries, colliding, hits, false_negatives, "
                "false_positives, capped, checks_per_query, us_per_query");
  cmd->callback([o] { run_ccd(*o); });
}

}  // namespace xpd::cli
