// `xpd bench cut`: paper 003's Table 2 analogue (Li, Liu, Kavan & Chen 2021). A plane cut through a
// box bar (both x-ends attached) advances k ∈ {1, 4, 8, 16, 32, 64} faces per frame; each frame's
// factor change is applied to a DynamicLdlt (progressive Cholesky) and timed against a full
// analyze + factorize with CHOLMOD, then the cut goes on (8 faces per frame) to `--frames` cut
// frames for the fill figure, with the fill policy (DynamicLdlt::refill) checked every
// `--refill-every` frames; one PD iteration with each factor closes the run. All in one run.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/mesh/box.hpp>
#include <xpd/solver/dynamic_ldlt.hpp>
#include <xpd/solver/model.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/schur.hpp>
#include <xpd/solver/state.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/cut_surface.hpp>
#include <xpd/topology/face_cut.hpp>

#include "commands.hpp"
#include "progress.hpp"

namespace xpd::cli {

namespace {

struct BenchCutOptions {
  int box = 32;
  int repeats = 3;           // frames per k (median reported)
  int frames = 300;          // cut frames in all (the fill figure)
  int fill_k = 8;            // faces per frame after the k sweep
  int iterations = 5;        // PD iterations timed per factor (median)
  int refill_every = 50;     // cut frames between fill-policy checks after the k sweep (0 = off)
  double fill_ratio = 1.15;  // FillPolicy::nnz_ratio
  bool json = false;
  bool split = false;  // element splits (FaceCutter::split) instead of face cuts
  bool schur = false;  // the collision region's Σ, Σ⁻¹ through the cut (SchurFactorization::modify)
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

ModelDesc bar_desc(const TetMesh& mesh) {
  ModelDesc d;
  d.mesh = mesh;
  d.mu = {1e4};
  d.density = {1000.0};
  d.gravity = Vec3(0, 0, -9.81);
  const double lo = mesh.nodes.col(0).minCoeff(), hi = mesh.nodes.col(0).maxCoeff();
  for (Eigen::Index i = 0; i < mesh.nodes.rows(); ++i)
    if (mesh.nodes(i, 0) < lo + 1e-9 || mesh.nodes(i, 0) > hi - 1e-9)
      d.attachments.push_back({BaryPoint::node(static_cast<int>(i)), 1e6, mesh.nodes.row(i).transpose()});
  return d;
}

// The start of both benches: the bar box:N, its model (CHOLMOD-factored: the refactorization
// figure) and a DynamicLdlt of its matrix.
struct BarStart {
  TetMesh box;
  ModelDesc desc;
  Model model;
  double refactor_ms = 0;
  DynamicLdlt dyn;
  double nnz_start = 0, build_ms = 0;
};

BarStart bar_start(int n) {
  TetMesh box = make_box_from_spec(fmt::format("box:{}", n));
  ModelDesc desc = bar_desc(box);
  Model model = build_model(desc);
  BarStart b{std::move(box), std::move(desc), std::move(model), 0.0, DynamicLdlt{}};
  b.refactor_ms = b.model.factor().info().analyze_ms + b.model.factor().info().factorize_ms;
  b.dyn.compute(b.model.matrix());
  b.nnz_start = b.dyn.info().nnz_L;
  b.build_ms = b.dyn.info().analyze_ms + b.dyn.info().factorize_ms;
  return b;
}

// The plane cut of the face-cut benches: the node layer nearest the middle of x, its faces in rows
// of cells along y, each row ordered along z (the blade advances along z, then to the next row).
std::vector<TetPair> blade_faces(const TetMesh& box) {
  const double h = box.nodes(1, 0) - box.nodes(0, 0);
  const double x_cut = h * std::round(0.5 * box.nodes.col(0).maxCoeff() / h);
  auto faces = faces_across_plane(box, Vec3::UnitX(), x_cut, Vec3::UnitZ());
  auto row_key = [&](const TetPair& f) {
    double yc = 0, zc = 0;
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b)
        if (box.tets(f.first, a) == box.tets(f.second, b)) {
          yc += box.nodes(box.tets(f.first, a), 1) / 3.0;
          zc += box.nodes(box.tets(f.first, a), 2) / 3.0;
        }
    return std::make_pair(std::floor(yc / h), zc);
  };
  std::stable_sort(faces.begin(), faces.end(),
                   [&](const TetPair& a, const TetPair& b) { return row_key(a) < row_key(b); });
  return faces;
}

// The collision region of the Schur benchmarks (bench/bench_schur.cpp): the nodes of the tets
// touching the top face's central patch that leaves 3 cells on each side (box:48: m = 3,783).
std::vector<int> top_patch_region(const TetMesh& box, int n) {
  std::vector<char> seed(static_cast<size_t>(box.nodes.rows()), 0), in(seed.size(), 0);
  for (int j = 3; j < n - 3; ++j)
    for (int i = 3; i < n - 3; ++i) seed[static_cast<size_t>(i + n * (j + n * (n - 1)))] = 1;
  for (Eigen::Index t = 0; t < box.tets.rows(); ++t) {
    bool touch = false;
    for (int a = 0; a < 4; ++a) touch = touch || seed[static_cast<size_t>(box.tets(t, a))];
    if (touch)
      for (int a = 0; a < 4; ++a) in[static_cast<size_t>(box.tets(t, a))] = 1;
  }
  std::vector<int> region;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i]) region.push_back(static_cast<int>(i));
  return region;
}

// The collision region's Schur pair through the face cut (SchurFactorization::modify): per cut
// frame of k faces the low-rank updates of Σ⁻¹ and Σ with the sparse factor's update, against the
// Schur setup of the same run (x2-last analyze + factorize, Σ, Σ⁻¹ by dpotri); at the end Σ⁻¹ and
// Σ against a fresh setup of the cut matrix.
void run_bench_cut_schur(const BenchCutOptions& o) {
  Timer t;
  const TetMesh box = make_box_from_spec(fmt::format("box:{}", o.box));
  ModelDesc desc = bar_desc(box);
  desc.factorize = false;
  const std::vector<int> region = top_patch_region(box, o.box);
  auto schur = std::make_unique<SchurFactorization>(build_model(desc).matrix(), region);
  const SchurStats setup = schur->stats();
  const std::vector<TetPair> faces = blade_faces(box);
  FaceCutter cutter(box);
  const std::vector<double> stiffness(static_cast<size_t>(box.tets.rows()), desc.mu.front());
  size_t next = 0;
  double updatable_ms = 0, assemble_ms = 0;
  int frames = 0;
  auto cut_frame = [&](int k) -> std::optional<SchurModifyResult> {
    if (next + static_cast<size_t>(k) > faces.size()) return std::nullopt;
    const CutEvent ev = cutter.cut(
        std::vector<TetPair>(faces.begin() + static_cast<long>(next), faces.begin() + static_cast<long>(next + k)));
    next += static_cast<size_t>(k);
    const FactorModification mod = cut_modification(ev, cutter.mesh(), stiffness);
    ModelDesc d = desc;
    d.mesh = cutter.mesh();
    Timer ta;
    const Model m = build_model(d);  // read by modify() only for a rebuild
    assemble_ms += ta.elapsed_ms();
    const SchurModifyResult r = schur->modify(mod, m.matrix());
    updatable_ms += r.updatable_ms;
    ++frames;
    return r;
  };
  // As in the factor bench: the first row of faces (no node split before it is complete) untimed;
  // it also moves the solves to the updatable factor (updatable_ms).
  (void)cut_frame(2 * (o.box - 1));
  const std::vector<int> ks{1, 4, 8, 16, 32, 64};
  Progress progress("cut frames", static_cast<int>(ks.size()) * o.repeats);
  nlohmann::ordered_json cuts = nlohmann::ordered_json::array();
  long rebuilds = 0;
  for (int k : ks) {
    std::vector<double> total, solve, factor, dense, rank;
    for (int r = 0; r < o.repeats; ++r) {
      const auto res = cut_frame(k);
      if (!res) break;
      rebuilds += res->rebuilt ? 1 : 0;
      total.push_back(res->total_ms);
      solve.push_back(res->solve_ms);
      factor.push_back(res->factor_ms);
      dense.push_back(res->dense_ms);
      rank.push_back(res->rank);
      progress.update(frames - 1, fmt::format("k = {}", k));
    }
    if (total.empty()) break;
    cuts.push_back({{"k", k},
                    {"update_ms", median(total)},
                    {"update_ms_max", *std::max_element(total.begin(), total.end())},
                    {"solve_ms", median(solve)},
                    {"factor_ms", median(factor)},
                    {"dense_ms", median(dense)},
                    {"rank", median(rank)}});
  }
  progress.finish();
  ModelDesc d_end = desc;
  d_end.mesh = cutter.mesh();
  const SchurFactorization fresh(build_model(d_end).matrix(), region);
  const SchurStats& fs = fresh.stats();
  auto rel = [](const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) { return (a - b).norm() / b.norm(); };
  nlohmann::ordered_json j;
  j["mesh"] = fmt::format("box:{}", o.box);
  j["mode"] = "schur";
  j["nodes_start"] = box.nodes.rows();
  j["nodes_end"] = cutter.mesh().nodes.rows();
  j["m"] = setup.m;
  j["setup_ms"] = setup.analyze_ms + setup.factor_ms + setup.schur_ms + setup.inverse_ms;
  j["setup"] = {{"analyze_ms", setup.analyze_ms},
                {"factor_ms", setup.factor_ms},
                {"sigma_ms", setup.schur_ms},
                {"inverse_ms", setup.inverse_ms}};
  j["setup_end_ms"] = fs.analyze_ms + fs.factor_ms + fs.schur_ms + fs.inverse_ms;
  j["updatable_ms"] = updatable_ms;
  j["cuts"] = cuts;
  j["frames"] = frames;
  j["rebuilds"] = rebuilds;
  j["assemble_ms_per_frame"] = frames > 0 ? assemble_ms / frames : 0.0;
  j["inverse_rel_error_end"] = rel(schur->schur_inverse(), fresh.schur_inverse());
  j["sigma_rel_error_end"] = rel(schur->schur_complement(), fresh.schur_complement());
  j["total_ms"] = t.elapsed_ms();
  print_result(j, o.json);
}

// Element splits (FaceCutter::split): a slanted blade through the middle of the bar, one cell wide
// along y per event, reaching d cells down from the top for d ∈ {1, 2, 4, 8, 16, N − 1}; each
// event's factor change (weights by volume fraction, new fragments, new nodes) applied to a
// DynamicLdlt and timed against the analyze + factorize of the same run. Each event takes a fresh
// column of cells along y, so none splits a fragment again.
void run_bench_split(const BenchCutOptions& o) {
  Timer t;
  BarStart start = bar_start(o.box);
  const TetMesh& box = start.box;
  const ModelDesc& desc = start.desc;
  const double refactor_ms = start.refactor_ms, nnz_start = start.nnz_start;
  DynamicLdlt& dyn = start.dyn;
  const double h = box.nodes(1, 0) - box.nodes(0, 0);
  const double top = box.nodes.col(2).maxCoeff();
  // x = x0 + 0.1 y: between node layers (0.37 h past the middle one), so no node is snapped.
  const double x0 = h * std::round(0.5 * box.nodes.col(0).maxCoeff() / h) + 0.37 * h;
  FaceCutter cutter(box);
  std::vector<double> stiffness(static_cast<size_t>(box.tets.rows()), desc.mu.front());
  const int cells = o.box - 1;
  std::vector<int> depths{1, 2, 4, 8, 16, cells};
  depths.erase(std::remove_if(depths.begin(), depths.end(), [&](int d) { return d > cells; }), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  nlohmann::ordered_json splits = nlohmann::ordered_json::array();
  int column = 1;  // the y cell of the next event (the first and last stay whole)
  double topology_ms = 0;
  int events = 0;
  Progress progress("split events", static_cast<int>(depths.size()) * o.repeats);
  for (int depth : depths) {
    std::vector<double> ms, tets;
    for (int r = 0; r < o.repeats && column + 1 < cells; ++r, ++column) {
      SweptPath blade;
      const double y0 = (column + 0.5) * h - 0.5 * h, y1 = y0 + h;
      blade.points = {Vec3(x0 + 0.1 * y0, y0, top + 0.5 * h), Vec3(x0 + 0.1 * y1, y1, top + 0.5 * h)};
      blade.sweep = {Vec3(0, 0, -(depth + 0.5) * h)};
      Timer tt;
      const CutEvent ev = cutter.split(*swept_cut_surface(blade));
      for (int src : ev.tet_copy_of) stiffness.push_back(stiffness[static_cast<size_t>(src)]);
      const FactorModification mod = cut_modification(ev, cutter.mesh(), stiffness, cutter.fractions());
      topology_ms += tt.elapsed_ms();
      ++events;
      if (!dyn.modify(mod))
        throw Error(fmt::format("bench cut --split: the factor update failed at event {} (rolled back)", events));
      ms.push_back(dyn.info().last_modify_ms);
      tets.push_back(ev.tets_split);
      progress.update(events, fmt::format("depth {}", depth));
    }
    if (ms.empty()) break;
    splits.push_back({{"depth_cells", depth},
                      {"tets_split", median(tets)},
                      {"update_ms", median(ms)},
                      {"update_ms_max", *std::max_element(ms.begin(), ms.end())}});
  }
  progress.finish();
  // The split model from scratch: the oracle of the updated factor.
  ModelDesc d_end = desc;
  d_end.mesh = cutter.mesh();
  d_end.mu.assign(stiffness.begin(), stiffness.end());
  d_end.density.assign(stiffness.size(), desc.density.front());
  for (size_t k = 0; k < stiffness.size(); ++k) {
    d_end.mu[k] *= cutter.fractions()[k];
    d_end.density[k] *= cutter.fractions()[k];
  }
  const Model m_end = build_model(d_end);
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(m_end.num_nodes(), 3), x = b;
  dyn.solve_in_place(x);
  nlohmann::ordered_json j;
  j["mesh"] = fmt::format("box:{}", o.box);
  j["mode"] = "split";
  j["nodes_start"] = box.nodes.rows();
  j["nodes_end"] = cutter.mesh().nodes.rows();
  j["tets_start"] = box.tets.rows();
  j["tets_end"] = cutter.mesh().tets.rows();
  j["refactor_ms"] = refactor_ms;
  j["refactor_end_ms"] = m_end.factor().info().analyze_ms + m_end.factor().info().factorize_ms;
  j["splits"] = splits;
  j["events"] = events;
  j["topology_ms_per_event"] = events > 0 ? topology_ms / events : 0.0;
  j["nnz_L_start"] = nnz_start;
  j["nnz_L_end"] = dyn.info().nnz_L;
  j["residual_end"] = (m_end.matrix() * x - b).norm() / b.norm();
  j["total_ms"] = t.elapsed_ms();
  print_result(j, o.json);
}

void run_bench_cut(const BenchCutOptions& o) {
  if (o.split && o.schur) throw Error("bench cut: --split and --schur are separate benches; choose one");
  if (o.split) {
    run_bench_split(o);
    return;
  }
  if (o.schur) {
    run_bench_cut_schur(o);
    return;
  }
  Timer t;
  BarStart start = bar_start(o.box);
  const TetMesh& box = start.box;
  const ModelDesc& desc = start.desc;
  const double refactor_ms = start.refactor_ms, nnz_start = start.nnz_start, build_ms = start.build_ms;
  DynamicLdlt& dyn = start.dyn;

  const std::vector<TetPair> faces = blade_faces(box);
  FaceCutter cutter(box);
  const std::vector<double> stiffness(static_cast<size_t>(box.tets.rows()), desc.mu.front());
  size_t next = 0;
  int frames = 0;
  double topology_ms = 0;
  auto cut_frame = [&](int k) -> double {  // returns the factor update time, -1 when out of faces
    if (next + static_cast<size_t>(k) > faces.size()) return -1;
    Timer tt;
    const CutEvent ev = cutter.cut(
        std::vector<TetPair>(faces.begin() + static_cast<long>(next), faces.begin() + static_cast<long>(next + k)));
    next += static_cast<size_t>(k);
    const FactorModification mod = cut_modification(ev, cutter.mesh(), stiffness);
    topology_ms += tt.elapsed_ms();
    ++frames;
    if (!dyn.modify(mod))
      throw Error(fmt::format("bench cut: the factor update failed at cut frame {} (rolled back)", frames));
    return dyn.info().last_modify_ms;
  };

  // The first row of faces (2 (N − 1) triangles along the blade) is cut untimed: before it is
  // complete no node is split (every node still has an uncut face around it), so a k sweep from
  // the mesh boundary would time empty updates.
  (void)cut_frame(2 * (o.box - 1));
  const std::vector<int> ks{1, 4, 8, 16, 32, 64};
  const int total = o.frames;
  Progress progress("cut frames", total);
  nlohmann::ordered_json cuts = nlohmann::ordered_json::array();
  for (int k : ks) {
    std::vector<double> ms;
    for (int r = 0; r < o.repeats; ++r) {
      const double u = cut_frame(k);
      if (u < 0) break;
      ms.push_back(u);
      progress.update(frames, fmt::format("k = {}", k));
    }
    if (ms.empty()) break;
    cuts.push_back({{"k", k}, {"update_ms", median(ms)}, {"update_ms_max", *std::max_element(ms.begin(), ms.end())}});
  }
  // The model through one more cut frame of 16 faces, built both ways (SurgerySession's two
  // modes): assembled from the terms, and the previous model's K changed by the frame's
  // modification (build_model's second form); their difference checks the second.
  double model_assemble_ms = 0, model_update_ms = 0, model_update_error = 0;
  if (next + 16 <= faces.size()) {
    ModelDesc dk = desc;
    dk.mesh = cutter.mesh();
    dk.factorize = false;
    const Model before = build_model(dk);
    const CutEvent ev = cutter.cut(
        std::vector<TetPair>(faces.begin() + static_cast<long>(next), faces.begin() + static_cast<long>(next + 16)));
    next += 16;
    ++frames;
    const FactorModification mod = cut_modification(ev, cutter.mesh(), stiffness);
    if (!dyn.modify(mod))
      throw Error(fmt::format("bench cut: the factor update failed at cut frame {} (rolled back)", frames));
    dk.mesh = cutter.mesh();
    Timer ta;
    const Model assembled = build_model(dk);
    model_assemble_ms = ta.elapsed_ms();
    Timer tu;
    const Model changed = build_model(dk, before, mod);
    model_update_ms = tu.elapsed_ms();
    model_update_error = (changed.matrix() - assembled.matrix()).norm() / assembled.matrix().norm();
  }
  // The fill phase, with the fill policy checked every refill_every cut frames (between
  // interactions): the cut model is assembled (no factorization) and DynamicLdlt::refill analyzes
  // it, refactoring when nnz(L) has passed fill_ratio × the fresh ordering's.
  std::vector<double> fill_ms;
  nlohmann::ordered_json refills = nlohmann::ordered_json::array();
  int refactors = 0, checked_at = -1;
  auto check_fill = [&] {
    checked_at = frames;
    Timer ta;
    ModelDesc dk = desc;
    dk.mesh = cutter.mesh();
    dk.factorize = false;
    const Model mk = build_model(dk);
    const double assemble_ms = ta.elapsed_ms();
    const RefillResult r = dyn.refill(mk.matrix(), FillPolicy{o.fill_ratio, 10000});
    refactors += r.refactored ? 1 : 0;
    refills.push_back({{"frame", frames},
                       {"nnz_L", r.nnz_L},
                       {"nnz_L_fresh", r.nnz_L_fresh},
                       {"refactored", r.refactored},
                       {"reason", r.reason},
                       {"assemble_ms", assemble_ms},
                       {"analyze_ms", r.analyze_ms},
                       {"factorize_ms", r.factorize_ms}});
  };
  while (frames < total) {
    const double u = cut_frame(o.fill_k);
    if (u < 0) break;
    fill_ms.push_back(u);
    if (o.refill_every > 0 && fill_ms.size() % static_cast<size_t>(o.refill_every) == 0) check_fill();
    progress.update(frames, fmt::format("k = {}", o.fill_k));
  }
  // The cut is over: the policy is checked once more, between interactions.
  if (o.refill_every > 0 && !fill_ms.empty() && checked_at != frames) check_fill();
  progress.finish();

  // The cut model, refactored from scratch: the oracle of the updated factor and the other side of
  // the iteration timing.
  ModelDesc d_end = desc;
  d_end.mesh = cutter.mesh();
  const Model m_end = build_model(d_end);
  const double refactor_end_ms = m_end.factor().info().analyze_ms + m_end.factor().info().factorize_ms;
  DynamicLdlt fresh;
  fresh.compute(m_end.matrix());
  Eigen::MatrixXd b = Eigen::MatrixXd::Random(m_end.num_nodes(), 3), x = b;
  dyn.solve_in_place(x);
  const double residual = (m_end.matrix() * x - b).norm() / b.norm();

  // The first solves after the last cut run on the factor's columns (panels are rebuilt at the 8th):
  // timed here as the column solve, then the panel rebuild, then iterations with the panels.
  // (The residual check above was the first solve after the last cut.)
  std::vector<double> solve_columns;
  for (int it = 0; it < 6; ++it) {
    Eigen::MatrixXd rhs = b;
    Timer tc;
    dyn.solve_in_place(rhs);
    solve_columns.push_back(tc.elapsed_ms());
  }
  {
    Eigen::MatrixXd rhs = b;
    dyn.solve_in_place(rhs);  // the 8th: rebuilds the panels (schedule_ms_updatable)
  }
  // One PD iteration = local step (evaluate) + global solve; the two factors alternate.
  State s = make_state(m_end);
  s.inputs.gravity = desc.gravity;
  std::vector<double> local, solve_super, solve_dyn;
  for (int it = 0; it < o.iterations; ++it) {
    Timer tl;
    (void)evaluate(m_end, s);
    local.push_back(tl.elapsed_ms());
    Eigen::MatrixXd rhs = s.force;
    Timer ts;
    m_end.factor().solve_in_place(rhs);
    solve_super.push_back(ts.elapsed_ms());
    rhs = s.force;
    Timer td;
    dyn.solve_in_place(rhs);
    solve_dyn.push_back(td.elapsed_ms());
  }

  nlohmann::ordered_json j;
  j["mesh"] = fmt::format("box:{}", o.box);
  j["nodes_start"] = box.nodes.rows();
  j["nodes_end"] = cutter.mesh().nodes.rows();
  j["tets"] = box.tets.rows();
  j["refactor_ms"] = refactor_ms;
  j["refactor_end_ms"] = refactor_end_ms;
  j["dynamic_build_ms"] = build_ms;
  j["cuts"] = cuts;
  j["model_assemble_ms"] = model_assemble_ms;
  j["model_update_ms"] = model_update_ms;
  j["model_update_error"] = model_update_error;
  j["fill_k"] = o.fill_k;
  j["fill_update_ms"] = median(fill_ms);
  j["cut_frames"] = frames;
  j["faces_cut"] = cutter.num_cut_faces();
  j["topology_ms_per_frame"] = frames > 0 ? topology_ms / frames : 0.0;
  j["nnz_L_start"] = nnz_start;
  j["nnz_L_end"] = dyn.info().nnz_L;
  j["nnz_L_fresh"] = fresh.info().nnz_L;
  j["fill_ratio"] = o.fill_ratio;
  j["refill_every"] = o.refill_every;
  j["refactors"] = refactors;
  j["refills"] = refills;
  j["residual_end"] = residual;
  j["local_ms"] = median(local);
  j["solve_ms_supernodal"] = median(solve_super);
  j["solve_ms_updatable"] = median(solve_dyn);
  j["solve_tasks_updatable"] = dyn.info().solve_tasks;
  j["solve_top_fraction_updatable"] = dyn.info().solve_top_fraction;
  j["solve_panel_fraction_updatable"] = dyn.info().solve_panel_fraction;
  j["solve_ms_updatable_columns"] = median(solve_columns);
  j["schedule_ms_updatable"] = dyn.info().last_schedule_ms;
  j["panels_updatable"] = dyn.info().solve_panels;
  j["panel_values_updatable"] = dyn.info().solve_panel_values;
  j["panel_max_columns_updatable"] = dyn.info().solve_panel_max_columns;
  j["solve_top_fraction_supernodal"] = m_end.factor().info().solve_top_fraction;
  j["iteration_ms_supernodal"] = median(local) + median(solve_super);
  j["iteration_ms_updatable"] = median(local) + median(solve_dyn);
  j["total_ms"] = t.elapsed_ms();
  print_result(j, o.json);
}

}  // namespace

void add_bench_cut_command(CLI::App& bench) {
  auto o = std::make_shared<BenchCutOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "cut",
      "Paper 003's Table 2 analogue: a plane cut advancing k = 1, 4, 8, 16, 32, 64 faces per frame through a box "
      "bar; progressive factor updates (DynamicLdlt) against CHOLMOD analyze + factorize, fill after many cut "
      "frames, and one PD iteration with each factor");
  cmd->add_option("--box", o->box, "Nodes per side of the box (box:48 = 110,592 nodes)")
      ->capture_default_str()
      ->check(CLI::Range(4, 256));
  cmd->add_option("--repeats", o->repeats, "Cut frames per k (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  cmd->add_option("--frames", o->frames, "Cut frames in all, the k sweep included (the fill figure)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--fill-k", o->fill_k, "Faces per frame after the k sweep")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--iterations", o->iterations, "PD iterations timed per factor (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--refill-every", o->refill_every,
                  "Cut frames between checks of the fill policy after the k sweep (assemble the cut model, "
                  "analyze it, refactor when nnz(L) > --fill-ratio x the fresh ordering's); 0 = never")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--fill-ratio", o->fill_ratio, "The fill policy's nnz(L) ratio to a fresh METIS ordering")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 100.0));
  cmd->add_flag("--split", o->split,
                "Element splits instead of face cuts: a slanted blade one cell wide reaching d = 1, 2, 4, 8, 16, N-1 "
                "cells down per event (--repeats events each); prints splits [{depth_cells, tets_split, update_ms}], "
                "refactor_ms, residual_end");
  cmd->add_flag("--schur", o->schur,
                "The collision region's Schur pair through the face cut: region = the nodes under the top face's "
                "central patch (box:48: m = 3,783); per cut frame SchurFactorization::modify (low-rank updates of "
                "Sigma^-1 and Sigma, and the factor update) against the Schur setup (analyze, factorize, Sigma, "
                "dpotri); prints setup_ms, cuts [{k, update_ms, solve_ms, factor_ms, dense_ms, rank}], "
                "inverse_rel_error_end, sigma_rel_error_end");
  cmd->add_flag("--json", o->json,
                "Print JSON: refactor_ms, cuts [{k, update_ms}], nnz_L_start, nnz_L_end, nnz_L_fresh, "
                "iteration_ms_supernodal, iteration_ms_updatable, residual_end");
  cmd->callback([o] { run_bench_cut(*o); });
}

}  // namespace xpd::cli
