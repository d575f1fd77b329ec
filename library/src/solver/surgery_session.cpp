#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <utility>
#include <xpd/collision/detector.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/solver/pd_solver.hpp>
#include <xpd/solver/surgery_session.hpp>
#include <xpd/solver/topology_update.hpp>
#include <xpd/topology/cut_surface.hpp>

namespace xpd {

struct SurgerySession::Impl {
  SurgeryOptions options;
  ModelDesc desc;                     // the current model's description (mesh = cutter.mesh())
  std::vector<int> spring;            // per desc.springs entry: the suture id, −1 for the desc's own springs
  std::vector<double> tet_stiffness;  // per tet: μ + strain-limit μ′ (cut_modification's weight stiffness)
  std::vector<int> attachment;        // per desc.attachments entry: its key (the desc's own: their index)
  int next_attachment = 0;
  std::vector<int> origin;  // per attachment key: the key it was copied from by cuts (transitively), or itself
  FaceCutter cutter;
  std::unique_ptr<Model> model;
  DynamicLdlt factor;
  State state;
  SurgeryStats stats;
  int next_suture = 0;
  // Collision handling (enable_collision): the detector, model and state of the current model.
  std::optional<SurgeryCollision> collision;
  std::unique_ptr<CollisionDetector> detector;
  std::unique_ptr<CollisionModel> cmodel;
  std::unique_ptr<CollisionState> cstate;
  CollisionFrameStats last_cstats;

  Impl(ModelDesc d, SurgeryOptions o) : options(std::move(o)), desc(std::move(d)), cutter(desc.mesh) {}

  bool progressive() const { return options.factor_update == FactorUpdate::Progressive; }

  // The collision detector, model and state for model `m` (its Schur factorization given, or built).
  struct CollisionParts {
    std::unique_ptr<CollisionDetector> detector;
    std::unique_ptr<CollisionModel> model;
    std::unique_ptr<CollisionState> state;
  };
  static CollisionParts make_collision(const SurgeryCollision& c, const TetMesh& mesh, const Model& m,
                                       std::optional<SchurFactorization> schur) {
    CollisionParts p;
    CollisionDetectorOptions dopt;
    dopt.margin = c.margin;
    p.detector = std::make_unique<CollisionDetector>(mesh, c.proxies, c.region, c.obstacles, nullptr, dopt);
    p.model = std::make_unique<CollisionModel>(m, c.proxies, c.region, c.options, std::move(schur));
    p.state = std::make_unique<CollisionState>(*p.model, *p.detector);
    return p;
  }

  using ProxyRemap = std::function<SurgeryCollision(const SurgeryCollision&)>;

  // Proxies through an element split: a proxy in a tet the split cut goes to the fragment whose
  // material holds it (its weights are the same in every fragment, which share the rest shape).
  static SurgeryCollision rebind_split(const SurgeryCollision& c, const FaceCutter& cutter, const CutEvent& ev) {
    std::vector<char> was_split(static_cast<size_t>(ev.tets_before), 0);
    for (const int t : ev.tet_copy_of) was_split[static_cast<size_t>(t)] = 1;
    const auto by_source = cutter.fragments_by_source();
    SurgeryCollision out = c;
    for (int p = 0; p < c.proxies.size(); ++p) {
      const int t = c.proxies.tet[static_cast<size_t>(p)];
      if (t < ev.tets_before && was_split[static_cast<size_t>(t)])
        out.proxies.tet[static_cast<size_t>(p)] =
            cutter.fragment_holding(t, c.proxies.weights.row(p).transpose(), by_source);
    }
    return out;
  }

  // Proxies through an excision: those in removed tets go with them, the others follow the tets'
  // new ids; the region's proxy indices follow.
  static SurgeryCollision remap_excision(const SurgeryCollision& c, const ExcisionEvent& ev) {
    SurgeryCollision out = c;
    std::vector<int> index(static_cast<size_t>(c.proxies.size()), -1);
    out.proxies.tet.clear();
    int kept = 0;
    for (int p = 0; p < c.proxies.size(); ++p) {
      const int t = ev.tet_map[static_cast<size_t>(c.proxies.tet[static_cast<size_t>(p)])];
      if (t < 0) continue;
      index[static_cast<size_t>(p)] = kept;
      out.proxies.tet.push_back(t);
      out.proxies.weights.row(kept) = c.proxies.weights.row(p);
      out.proxies.rest.row(kept) = c.proxies.rest.row(p);
      ++kept;
    }
    out.proxies.weights.conservativeResize(kept, 4);
    out.proxies.rest.conservativeResize(kept, 3);
    out.region.clear();
    for (const int p : c.region)
      if (index[static_cast<size_t>(p)] >= 0) out.region.push_back(index[static_cast<size_t>(p)]);
    return out;
  }

  // Node proxies (weight 1 on one node of their tet, as proxies_from_nodes makes) through a cut:
  // a proxy stays on its tet, so it follows the side its tet is on, and the other side of the split
  // node would be left without one. Each new node whose twin (or the new node itself) carries a
  // node proxy while the other does not gets one, bound to the lowest tet whose material holds the
  // node, in the region when the proxy it copies is. A copy made by an element split that lies
  // outside every fragment it belongs to (a virtual node: the material at its rest point is on the
  // other side of the blade, or was excised in the same event) gets none. Barycentric proxies ride
  // on their tet (face cuts keep tet ids; rebind_split moves them) and need nothing. Returns the
  // collision with the added proxies (`c` when none).
  static SurgeryCollision with_copied_proxies(const SurgeryCollision& c, const FaceCutter& cutter,
                                              const std::vector<int>& copy_of) {
    if (copy_of.empty()) return c;
    const TetMesh& mesh = cutter.mesh();
    const auto n = static_cast<size_t>(mesh.nodes.rows());
    std::vector<int> proxy_of(n, -1);  // node → a node proxy on it
    for (int p = 0; p < c.proxies.size(); ++p)
      for (int a = 0; a < 4; ++a)
        if (c.proxies.weights(p, a) == 1.0)
          proxy_of[static_cast<size_t>(mesh.tets(c.proxies.tet[static_cast<size_t>(p)], a))] = p;
    std::vector<char> in_region(static_cast<size_t>(c.proxies.size()), 0);
    for (const int p : c.region) in_region[static_cast<size_t>(p)] = 1;
    // The lowest tet whose material holds each node (−1: none, e.g. a node an excision in the same
    // event left without a tet, or a split's virtual copy).
    const double tolerance = 1e-12 * (mesh.nodes.colwise().maxCoeff() - mesh.nodes.colwise().minCoeff()).norm();
    std::vector<int> lowest_tet(n, -1);
    for (Eigen::Index t = mesh.tets.rows() - 1; t >= 0; --t)
      for (int a = 0; a < 4; ++a)
        if (!cutter.has_split_elements() || cutter.material_margin(static_cast<int>(t), Vec4::Unit(a)) >= -tolerance)
          lowest_tet[static_cast<size_t>(mesh.tets(t, a))] = static_cast<int>(t);
    std::vector<std::pair<int, int>> add;  // (node, proxy it copies)
    const size_t n0 = n - copy_of.size();
    for (size_t k = 0; k < copy_of.size(); ++k) {
      const int copy = static_cast<int>(n0 + k), twin = copy_of[k];
      const int pc = proxy_of[static_cast<size_t>(copy)], pt = proxy_of[static_cast<size_t>(twin)];
      if (pc < 0 && pt >= 0 && lowest_tet[static_cast<size_t>(copy)] >= 0) add.emplace_back(copy, pt);
      if (pt < 0 && pc >= 0 && lowest_tet[static_cast<size_t>(twin)] >= 0) add.emplace_back(twin, pc);
    }
    if (add.empty()) return c;
    SurgeryCollision out = c;
    const auto p0 = static_cast<Eigen::Index>(c.proxies.size());
    out.proxies.weights.conservativeResize(p0 + static_cast<Eigen::Index>(add.size()), 4);
    out.proxies.rest.conservativeResize(p0 + static_cast<Eigen::Index>(add.size()), 3);
    for (size_t k = 0; k < add.size(); ++k) {
      const auto [node, from] = add[k];
      const int t = lowest_tet[static_cast<size_t>(node)];
      const auto row = p0 + static_cast<Eigen::Index>(k);
      out.proxies.tet.push_back(t);
      for (int a = 0; a < 4; ++a) out.proxies.weights(row, a) = mesh.tets(t, a) == node ? 1.0 : 0.0;
      out.proxies.rest.row(row) = mesh.nodes.row(node);
      if (in_region[static_cast<size_t>(from)]) out.region.push_back(static_cast<int>(row));
    }
    return out;
  }

  // The collision parts after an event whose new model is `m` and whose change of K is `change`
  // (the model not yet committed): the Schur factorization carried by modify() when the region's
  // nodes are unchanged (progressive mode), else built anew. On an exception the current parts
  // are as they were.
  CollisionParts follow_collision(const Model& m, const FactorModification& change, const SurgeryCollision& c) {
    Timer t;
    std::optional<SchurFactorization> schur;
    const bool same_region =
        progressive() &&
        collision_region_nodes(m.tets(), c.proxies, c.region, c.options.region_tets) == cmodel->region_nodes() &&
        cmodel->schur() != nullptr;
    bool rebuilt = !same_region;
    if (same_region) {
      schur = cmodel->release_schur();
      try {
        rebuilt = schur->modify(change, m.matrix()).rebuilt;
      } catch (...) {  // the factorization is unchanged: give it back to a model of the current matrix
        CollisionParts back = make_collision(*collision, desc.mesh, *model, std::move(schur));
        cstate.reset();  // the state before the model and detector it borrows
        cmodel = std::move(back.model);
        detector = std::move(back.detector);
        cstate = std::move(back.state);
        throw;
      }
    }
    CollisionParts p = make_collision(c, cutter.mesh(), m, std::move(schur));
    stats.schur_updates += rebuilt ? 0 : 1;
    stats.schur_rebuilds += rebuilt ? 1 : 0;
    stats.schur_update_ms = t.elapsed_ms();
    return p;
  }

  // `d` holds each tet's material (base μ, ρ, strain-limit stiffness); a fragment of a split
  // element (FaceCutter::split) weighs its volume fraction of them. `change` (progressive mode,
  // an event's): the new model's K is the current one's changed by it (build_model's second form:
  // no assembly), as the factor is; refactor mode (the oracle) assembles afresh.
  std::unique_ptr<Model> build(const ModelDesc& d, const FactorModification* change = nullptr) {
    ModelDesc b = d;
    b.factorize = !progressive();
    if (cutter.has_split_elements()) {
      const std::vector<double>& f = cutter.fractions();
      auto scaled = [&](const std::vector<double>& v) {
        std::vector<double> out(f.size());
        for (size_t t = 0; t < f.size(); ++t) out[t] = (v.size() == 1 ? v.front() : v[t]) * f[t];
        return out;
      };
      b.mu = scaled(d.mu);
      b.density = scaled(d.density);
      for (StrainLimitDesc& sl : b.strain_limits) sl.stiffness *= f[static_cast<size_t>(sl.tet)];
    }
    Timer t;
    auto m =
        std::make_unique<Model>(progressive() && change && model ? build_model(b, *model, *change) : build_model(b));
    stats.model_ms = t.elapsed_ms();
    return m;
  }

  // A cut's copies of attached nodes inherit their attachments (same stiffness, same current
  // target; rank-1 columns after the cut's change). Appends to d.attachments, keys, origin,
  // targets and mod.added; returns how many. Copies listed in `skip` inherit nothing.
  int inherit_attachments(const CutEvent& ev, ModelDesc& d, std::vector<int>& keys, std::vector<int>& origins,
                          Points& targets, FactorModification& mod, const std::vector<char>* skip = nullptr) const {
    const auto nv = static_cast<int>(d.mesh.nodes.rows());
    std::vector<std::vector<int>> on_node(static_cast<size_t>(ev.nodes_before));
    for (size_t r = 0; r < desc.attachments.size(); ++r) {
      const BaryPoint& p = desc.attachments[r].point;
      if (p.nodes[0] >= 0 && p.weights[0] == 1.0 && p.nodes[1] < 0 && p.nodes[2] < 0 && p.nodes[3] < 0)
        on_node[static_cast<size_t>(p.nodes[0])].push_back(static_cast<int>(r));
    }
    std::vector<std::pair<int, int>> inherited;  // (copy, attachment row it copies)
    for (size_t k = 0; k < ev.copy_of.size(); ++k) {
      const int copy = ev.nodes_before + static_cast<int>(k);
      if (skip && (*skip)[static_cast<size_t>(copy)]) continue;
      for (int r : on_node[static_cast<size_t>(ev.copy_of[k])]) inherited.emplace_back(copy, r);
    }
    if (inherited.empty()) return 0;
    const Eigen::Index base = targets.rows();
    targets.conservativeResize(base + static_cast<Eigen::Index>(inherited.size()), 3);
    for (size_t i = 0; i < inherited.size(); ++i) {
      const auto [copy, r] = inherited[i];
      const AttachmentDesc& a = desc.attachments[static_cast<size_t>(r)];
      d.attachments.push_back({BaryPoint::node(copy), a.stiffness, a.target});
      targets.row(base + static_cast<Eigen::Index>(i)) = state.inputs.attachment_targets.row(r);
      keys.push_back(next_attachment + static_cast<int>(i));
      origins.push_back(origin[static_cast<size_t>(attachment[static_cast<size_t>(r)])]);
      if (progressive()) mod.added.push_back(attachment_column(BaryPoint::node(copy), a.stiffness, nv));
    }
    return static_cast<int>(inherited.size());
  }

  // The base per-tet parameters and limits of `d` after a split appended tets copying
  // ev.tet_copy_of (one value for all stays one value).
  void grow_per_tet(const CutEvent& ev, ModelDesc& d, std::vector<double>& stiffness) const {
    if (ev.tet_copy_of.empty()) return;  // a face cut, or a split that cut nothing
    auto grow = [&](std::vector<double>& v) {
      if (v.size() != static_cast<size_t>(ev.tets_before)) return;
      for (int src : ev.tet_copy_of) v.push_back(v[static_cast<size_t>(src)]);
    };
    grow(d.mu);
    grow(d.density);
    grow(d.lambda);
    grow(stiffness);
    std::vector<std::vector<size_t>> limits_of(static_cast<size_t>(ev.tets_before));
    for (size_t k = 0; k < d.strain_limits.size(); ++k)
      limits_of[static_cast<size_t>(d.strain_limits[k].tet)].push_back(k);
    for (size_t k = 0; k < ev.tet_copy_of.size(); ++k)
      for (size_t l : limits_of[static_cast<size_t>(ev.tet_copy_of[k])]) {
        StrainLimitDesc sl = d.strain_limits[l];
        sl.tet = ev.tets_before + static_cast<int>(k);
        d.strain_limits.push_back(sl);
      }
  }

  // The attachment rows marked in `drop` go: their columns are appended to mod.removed, and
  // `list`, `keys` and `targets` (rows parallel to `list`) keep the others.
  static void drop_attachments(const std::vector<char>& drop, std::vector<AttachmentDesc>& list, std::vector<int>& keys,
                               Points& targets, FactorModification& mod, int num_nodes) {
    std::vector<AttachmentDesc> kept;
    std::vector<int> kept_keys;
    std::vector<Eigen::Index> rows;
    for (size_t r = 0; r < list.size(); ++r) {
      if (drop[r]) {
        mod.removed.push_back(attachment_column(list[r].point, list[r].stiffness, num_nodes));
        continue;
      }
      kept.push_back(list[r]);
      kept_keys.push_back(keys[r]);
      rows.push_back(static_cast<Eigen::Index>(r));
    }
    Points kept_targets(static_cast<Eigen::Index>(rows.size()), 3);
    for (size_t i = 0; i < rows.size(); ++i) kept_targets.row(static_cast<Eigen::Index>(i)) = targets.row(rows[i]);
    list = std::move(kept);
    keys = std::move(kept_keys);
    targets = std::move(kept_targets);
  }

  // After an excision: the per-tet parameters of `d`, the weight stiffness and the strain limits
  // follow the renumbering (those of excised tets go; one value for all stays one value).
  static void follow_excision(const ExcisionEvent& ev, ModelDesc& d, std::vector<double>& stiffness) {
    auto kept = [&](std::vector<double>& per_tet) {
      if (per_tet.size() != ev.tet_map.size()) return;
      std::vector<double> out;
      for (size_t t = 0; t < ev.tet_map.size(); ++t)
        if (ev.tet_map[t] >= 0) out.push_back(per_tet[t]);
      per_tet = std::move(out);
    };
    kept(stiffness);
    kept(d.mu);
    kept(d.density);
    kept(d.lambda);
    std::vector<StrainLimitDesc> limits;
    for (StrainLimitDesc sl : d.strain_limits) {
      sl.tet = ev.tet_map[static_cast<size_t>(sl.tet)];
      if (sl.tet >= 0) limits.push_back(sl);
    }
    d.strain_limits = std::move(limits);
  }

  // Attachments (hooks included) and springs (sutures included) of `d` with a point on a node an
  // excision orphaned go with the tissue: their columns are appended to mod.removed, and `keys`,
  // `targets` (parallel to d.attachments) and `spring_ids` (parallel to d.springs) follow.
  static void drop_on_orphans(const std::vector<char>& orphan, ModelDesc& d, std::vector<int>& keys, Points& targets,
                              std::vector<int>& spring_ids, FactorModification& mod, int num_nodes) {
    auto uses_orphan = [&](const BaryPoint& p) {
      for (size_t a = 0; a < 4; ++a)
        if (p.nodes[a] >= 0 && p.weights[a] != 0.0 && orphan[static_cast<size_t>(p.nodes[a])]) return true;
      return false;
    };
    std::vector<char> drop(d.attachments.size());
    for (size_t r = 0; r < drop.size(); ++r) drop[r] = uses_orphan(d.attachments[r].point) ? 1 : 0;
    drop_attachments(drop, d.attachments, keys, targets, mod, num_nodes);
    std::vector<PointSpring> springs;
    std::vector<int> kept_springs;
    for (size_t k = 0; k < d.springs.size(); ++k) {
      if (uses_orphan(d.springs[k].a) || uses_orphan(d.springs[k].b)) {
        mod.removed.push_back(spring_column(d.springs[k], num_nodes));
        continue;
      }
      springs.push_back(d.springs[k]);
      kept_springs.push_back(spring_ids[k]);
    }
    d.springs = std::move(springs);
    spring_ids = std::move(kept_springs);
  }

  // Per-tet weight stiffness × volume fraction: the weights of a mesh's tets in the PD matrix.
  static std::vector<double> weighted(std::vector<double> stiffness, const std::vector<double>& fractions) {
    for (size_t t = 0; t < stiffness.size(); ++t) stiffness[t] *= fractions[t];
    return stiffness;
  }

  // Steps 2–4 of a cut or a split (header comment), the mesh already changed by `ev`; on failure
  // the mesh is restored to `before` and the exception rethrown. An attached node that splits holds
  // every piece: each copy gets the attachments of the node it duplicates.
  void follow_cut(const CutEvent& ev, FaceCutter before) {
    try {
      ModelDesc d = desc;
      d.mesh = cutter.mesh();
      std::vector<double> stiffness = tet_stiffness;
      grow_per_tet(ev, d, stiffness);
      std::vector<int> keys = attachment, origins = origin;
      Points targets = state.inputs.attachment_targets;
      FactorModification mod =
          progressive() ? cut_modification(ev, cutter.mesh(), stiffness, cutter.fractions()) : FactorModification{};
      const int inherited = inherit_attachments(ev, d, keys, origins, targets, mod);
      ProxyRemap remap;
      if (ev.tets_split > 0) remap = [&](const SurgeryCollision& c) { return rebind_split(c, cutter, ev); };
      follow(build(d, &mod), mod, ev.copy_of, &targets, remap);
      desc = std::move(d);
      tet_stiffness = std::move(stiffness);
      attachment = std::move(keys);
      origin = std::move(origins);
      next_attachment += inherited;
    } catch (...) {
      cutter = std::move(before);
      throw;
    }
  }

  // Steps 3 and 4 of an event (header comment) once the new model is built: on an exception the
  // factor is unchanged (modify rolls back, compute throws before touching it).
  // `targets`: the new model's attachment targets; null carries the current ones over.
  void follow(std::unique_ptr<Model> m, const FactorModification& mod, const std::vector<int>& copy_of,
              const Points* targets = nullptr, const ProxyRemap& remap = {}) {
    // The new state first (it allocates), then the factor, then only moves: an exception before
    // the factor's change leaves everything as it was.
    State s = make_state(*m);
    const Eigen::Index n0 = state.x.rows();
    s.x.topRows(n0) = state.x;
    for (size_t k = 0; k < copy_of.size(); ++k) s.x.row(n0 + static_cast<Eigen::Index>(k)) = state.x.row(copy_of[k]);
    // Implicit Euler: a copy moves with its twin, and the lumped masses' change enters the factor
    // (K = Σ w GᵀG + M/h²): ΔM/h² on the diagonal of every node whose mass changed (a new node had
    // none).
    FactorModification with_mass;
    const FactorModification* change = &mod;
    if (m->integrator() == Integrator::ImplicitEuler) {
      s.velocity.topRows(n0) = state.velocity;
      for (size_t k = 0; k < copy_of.size(); ++k)
        s.velocity.row(n0 + static_cast<Eigen::Index>(k)) = state.velocity.row(copy_of[k]);
      if (progressive()) {
        with_mass = with_mass_change(mod, model->masses(), m->masses(), m->time_step());
        change = &with_mass;
      }
    }
    s.inputs.attachment_targets = targets ? *targets : state.inputs.attachment_targets;
    s.inputs.gravity = state.inputs.gravity;
    // The collision region's Schur factorization first: it is left as it was on an exception.
    CollisionParts parts;
    std::optional<SurgeryCollision> next_collision;
    if (collision) {
      next_collision = with_copied_proxies(remap ? remap(*collision) : *collision, cutter, copy_of);
      if (next_collision->region.empty())
        throw SolverError("SurgerySession: the event leaves the collision region without a proxy (all excised)");
      parts = follow_collision(*m, *change, *next_collision);
    }
    Timer t;
    bool fallback = false;
    if (progressive() && !factor.modify(*change)) {
      factor.compute(m->matrix());
      fallback = true;
    }
    stats.factor_fallback += fallback ? 1 : 0;
    stats.factor_update_ms =
        progressive() ? t.elapsed_ms() : m->factor().info().analyze_ms + m->factor().info().factorize_ms;
    if (collision) {  // the state before the model it borrows
      cstate.reset();
      cmodel.reset();
    }
    model = std::move(m);
    state = std::move(s);
    if (collision) {
      collision = std::move(next_collision);
      detector = std::move(parts.detector);
      cmodel = std::move(parts.model);
      cstate = std::move(parts.state);
    }
    ++stats.topology_events;
    stats.factor_update_ms_total += stats.factor_update_ms;
    stats.model_ms_total += stats.model_ms;
    stats.nnz_L = progressive() ? factor.info().nnz_L : 0.0;
  }
};

SurgerySession::SurgerySession(ModelDesc desc, SurgeryOptions options) {
  if (!desc.shape_targets.empty() ||
      std::any_of(desc.lambda.begin(), desc.lambda.end(), [](double l) { return l != 0.0; }))
    throw SolverError(
        "SurgerySession: corotated tets, optionally strain-limited (no shape targets or lambda volume term)");
  if (desc.allow_unattached)
    throw SolverError(
        "SurgerySession: allow_unattached is not supported (its regularization follows K's diagonal, "
        "which the factor updates do not track); attach every part");
  if (desc.nodal_forces.rows() != 0)
    throw SolverError("SurgerySession: nodal forces are not carried through cuts; use gravity or attachments");
  impl_ = std::make_unique<Impl>(std::move(desc), std::move(options));
  Impl& m = *impl_;
  const auto nt = static_cast<size_t>(m.desc.mesh.tets.rows());
  if (m.desc.mu.size() != 1 && m.desc.mu.size() != nt)
    throw SolverError(fmt::format("SurgerySession: mu needs 1 or {} values, got {}", nt, m.desc.mu.size()));
  m.tet_stiffness = m.desc.mu.size() == 1 ? std::vector<double>(nt, m.desc.mu.front()) : m.desc.mu;
  // A strain limit on a tet adds its stiffness μ′ to the tet's weight: its term has the same
  // G_tᵀ G_t block with w = 2 μ′ Vol_t (make_tet_elements), so cuts and excisions carry it alike.
  for (const StrainLimitDesc& s : m.desc.strain_limits) {
    if (s.tet < 0 || static_cast<size_t>(s.tet) >= nt)
      throw SolverError(fmt::format("SurgerySession: strain limit on tet {} of {}", s.tet, nt));
    m.tet_stiffness[static_cast<size_t>(s.tet)] += s.stiffness;
  }
  m.spring.assign(m.desc.springs.size(), -1);
  for (size_t a = 0; a < m.desc.attachments.size(); ++a) m.attachment.push_back(static_cast<int>(a));
  m.next_attachment = static_cast<int>(m.desc.attachments.size());
  m.origin = m.attachment;
  m.model = m.build(m.desc);
  if (m.progressive()) {
    m.factor.compute(m.model->matrix());
    m.stats.nnz_L = m.factor.info().nnz_L;
  }
  m.state = make_state(*m.model);
}

SurgerySession::~SurgerySession() = default;
SurgerySession::SurgerySession(SurgerySession&&) noexcept = default;
SurgerySession& SurgerySession::operator=(SurgerySession&&) noexcept = default;

const TetMesh& SurgerySession::mesh() const { return impl_->cutter.mesh(); }
const FaceCutter& SurgerySession::cutter() const { return impl_->cutter; }
const Model& SurgerySession::model() const { return *impl_->model; }
const State& SurgerySession::state() const { return impl_->state; }
State& SurgerySession::state() { return impl_->state; }
const SurgeryStats& SurgerySession::stats() const { return impl_->stats; }
const SurgeryOptions& SurgerySession::options() const { return impl_->options; }
SolverOptions& SurgerySession::solver_options() { return impl_->options.solver; }
const DynamicLdlt& SurgerySession::factor() const { return impl_->factor; }

CutEvent SurgerySession::cut(const std::vector<TetPair>& faces) {
  Impl& m = *impl_;
  FaceCutter before = m.cutter;       // the mesh to restore when the event fails
  CutEvent ev = m.cutter.cut(faces);  // MeshError: mesh unchanged
  if (ev.faces_cut > 0) m.follow_cut(ev, std::move(before));
  return ev;
}

CutEvent SurgerySession::split(const CutSurface& surface) {
  Impl& m = *impl_;
  FaceCutter before = m.cutter;
  CutEvent ev = m.cutter.split(surface);  // MeshError: mesh unchanged
  if (ev.tets_split > 0) m.follow_cut(ev, std::move(before));
  return ev;
}

ExcisionEvent SurgerySession::excise_inside(const CutSurface& surface, CutEvent* split_event) {
  Impl& m = *impl_;
  FaceCutter before = m.cutter;
  const CutEvent cut = m.cutter.split(surface);  // MeshError: mesh unchanged
  const std::vector<int> inside = m.cutter.tets_inside(surface);
  if (inside.empty()) {
    m.cutter = std::move(before);  // a split with nothing to take out is no event
    return {};
  }
  try {
    const TetMesh split_mesh = m.cutter.mesh();
    const std::vector<double> split_fractions = m.cutter.fractions();
    // The collision proxies through the split while the cutter still holds the split mesh's
    // fragments; the excision then drops those inside and renumbers the rest (follow()).
    std::optional<SurgeryCollision> split_proxies;
    if (m.collision) split_proxies = Impl::rebind_split(*m.collision, m.cutter, cut);
    ExcisionEvent ev = m.cutter.excise(inside);  // MeshError: every tet
    const int nv = static_cast<int>(split_mesh.nodes.rows());
    ModelDesc d = m.desc;
    d.mesh = split_mesh;
    std::vector<double> stiffness = m.tet_stiffness;
    m.grow_per_tet(cut, d, stiffness);
    std::vector<char> orphan(static_cast<size_t>(nv), 0);
    for (int j : ev.orphaned) orphan[static_cast<size_t>(j)] = 1;
    // The split's change, its copies' inherited attachments (not on nodes the excision leaves
    // without a tet), then the excision's change on the split mesh.
    std::vector<int> keys = m.attachment, origin = m.origin;
    Points targets = m.state.inputs.attachment_targets;
    FactorModification mod =
        m.progressive() ? cut_modification(cut, split_mesh, stiffness, split_fractions) : FactorModification{};
    const int inherited = m.inherit_attachments(cut, d, keys, origin, targets, mod, &orphan);
    // Placeholders: an old node keeps its current diagonal, a new one its twin's.
    std::vector<std::pair<int, double>> placeholders;
    for (int j : ev.orphaned) {
      const int twin = j < cut.nodes_before ? j : cut.copy_of[static_cast<size_t>(j - cut.nodes_before)];
      placeholders.emplace_back(j, m.model->matrix().coeff(twin, twin));
    }
    if (m.progressive()) {
      const FactorModification ex =
          excision_modification(ev, split_mesh, Impl::weighted(stiffness, split_fractions), placeholders);
      mod.change.insert(mod.change.end(), ex.change.begin(), ex.change.end());
    }
    Impl::follow_excision(ev, d, stiffness);
    d.mesh = m.cutter.mesh();
    d.inactive_nodes.insert(d.inactive_nodes.end(), placeholders.begin(), placeholders.end());
    std::vector<int> spring_ids = m.spring;
    Impl::drop_on_orphans(orphan, d, keys, targets, spring_ids, mod, nv);
    Impl::ProxyRemap remap;
    if (split_proxies) remap = [&](const SurgeryCollision&) { return Impl::remap_excision(*split_proxies, ev); };
    m.follow(m.build(d, &mod), mod, cut.copy_of, &targets, remap);
    m.desc = std::move(d);
    m.tet_stiffness = std::move(stiffness);
    m.attachment = std::move(keys);
    m.origin = std::move(origin);
    m.next_attachment += inherited;
    m.spring = std::move(spring_ids);
    if (split_event) *split_event = cut;
    return ev;
  } catch (...) {
    m.cutter = std::move(before);
    throw;
  }
}

ExcisionEvent SurgerySession::excise(const std::vector<int>& tets) {
  Impl& m = *impl_;
  if (tets.empty()) return {};
  FaceCutter before = m.cutter;
  ExcisionEvent ev = m.cutter.excise(tets);  // MeshError: mesh unchanged
  try {
    const int nv = m.model->num_nodes();
    ModelDesc d = m.desc;
    d.mesh = m.cutter.mesh();
    std::vector<double> stiffness = m.tet_stiffness;
    Impl::follow_excision(ev, d, stiffness);
    // Placeholders: each orphan keeps its current diagonal (any δ > 0 would do; this one keeps the
    // matrix's scale).
    std::vector<char> orphan(static_cast<size_t>(nv), 0);
    std::vector<std::pair<int, double>> placeholders;
    for (int j : ev.orphaned) {
      orphan[static_cast<size_t>(j)] = 1;
      placeholders.emplace_back(j, m.model->matrix().coeff(j, j));
    }
    d.inactive_nodes.insert(d.inactive_nodes.end(), placeholders.begin(), placeholders.end());
    FactorModification mod =
        excision_modification(ev, before.mesh(), Impl::weighted(m.tet_stiffness, before.fractions()), placeholders);
    // Hooks, attachments, sutures and springs on excised tissue go with it.
    std::vector<int> keys = m.attachment, spring_ids = m.spring;
    Points targets = m.state.inputs.attachment_targets;
    Impl::drop_on_orphans(orphan, d, keys, targets, spring_ids, mod, nv);
    m.follow(m.build(d, &mod), mod, {}, &targets,
             [&](const SurgeryCollision& c) { return Impl::remap_excision(c, ev); });
    m.desc = std::move(d);
    m.tet_stiffness = std::move(stiffness);
    m.attachment = std::move(keys);
    m.spring = std::move(spring_ids);
  } catch (...) {
    m.cutter = std::move(before);
    throw;
  }
  return ev;
}

int SurgerySession::add_suture(const BaryPoint& a, const BaryPoint& b, double stiffness) {
  Impl& m = *impl_;
  const PointSpring s{a, b, stiffness, 0.0};
  FactorModification mod;
  mod.added.push_back(spring_column(s, m.model->num_nodes()));  // validates; nothing changed yet
  ModelDesc d = m.desc;
  d.springs.push_back(s);
  m.follow(m.build(d, &mod), mod, {});
  m.desc.springs = std::move(d.springs);
  m.spring.push_back(m.next_suture);
  return m.next_suture++;
}

void SurgerySession::remove_suture(int id) {
  Impl& m = *impl_;
  const auto it = std::find(m.spring.begin(), m.spring.end(), id);
  if (id < 0 || it == m.spring.end()) throw SolverError(fmt::format("SurgerySession: no suture with id {}", id));
  const auto k = static_cast<size_t>(it - m.spring.begin());
  FactorModification mod;
  mod.removed.push_back(spring_column(m.desc.springs[k], m.model->num_nodes()));
  ModelDesc d = m.desc;
  d.springs.erase(d.springs.begin() + static_cast<long>(k));
  m.follow(m.build(d, &mod), mod, {});
  m.desc.springs = std::move(d.springs);
  m.spring.erase(it);
}

int SurgerySession::num_sutures() const {
  return static_cast<int>(std::count_if(impl_->spring.begin(), impl_->spring.end(), [](int id) { return id >= 0; }));
}

int SurgerySession::add_hook(const BaryPoint& point, const Vec3& target, double stiffness) {
  return add_hooks({point}, {target}, stiffness).front();
}

std::vector<int> SurgerySession::add_hooks(const std::vector<BaryPoint>& points, const std::vector<Vec3>& targets,
                                           double stiffness) {
  Impl& m = *impl_;
  if (points.empty() || points.size() != targets.size())
    throw SolverError(fmt::format("SurgerySession::add_hooks: {} points and {} targets (equal, at least one)",
                                  points.size(), targets.size()));
  FactorModification mod;
  ModelDesc d = m.desc;
  const Eigen::Index old_rows = m.state.inputs.attachment_targets.rows();
  Points all_targets(old_rows + static_cast<Eigen::Index>(points.size()), 3);
  all_targets.topRows(old_rows) = m.state.inputs.attachment_targets;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!targets[i].allFinite()) throw SolverError("SurgerySession::add_hook: the target is not finite");
    mod.added.push_back(attachment_column(points[i], stiffness, m.model->num_nodes()));  // validates
    d.attachments.push_back({points[i], stiffness, targets[i]});
    all_targets.row(old_rows + static_cast<Eigen::Index>(i)) = targets[i].transpose();
  }
  m.follow(m.build(d, &mod), mod, {}, &all_targets);
  m.desc.attachments = std::move(d.attachments);
  std::vector<int> keys;
  for (std::size_t i = 0; i < points.size(); ++i) {
    m.attachment.push_back(m.next_attachment);
    m.origin.push_back(m.next_attachment);
    keys.push_back(m.next_attachment++);
  }
  return keys;
}

void SurgerySession::remove_attachments(const std::vector<int>& keys) {
  Impl& m = *impl_;
  std::vector<char> drop(m.attachment.size(), 0);
  for (int key : keys) {
    const int row = attachment_row(key);
    if (row < 0) throw SolverError(fmt::format("SurgerySession: no attachment with key {}", key));
    if (drop[static_cast<size_t>(row)])
      throw SolverError(fmt::format("SurgerySession: attachment {} listed twice", key));
    drop[static_cast<size_t>(row)] = 1;
  }
  if (keys.empty()) return;
  FactorModification mod;
  ModelDesc d = m.desc;
  std::vector<int> kept_keys = m.attachment;
  Points targets = m.state.inputs.attachment_targets;
  Impl::drop_attachments(drop, d.attachments, kept_keys, targets, mod, m.model->num_nodes());
  m.follow(m.build(d, &mod), mod, {}, &targets);
  m.desc.attachments = std::move(d.attachments);
  m.attachment = std::move(kept_keys);
}

int SurgerySession::attachment_row(int key) const {
  const auto& a = impl_->attachment;
  const auto it = std::find(a.begin(), a.end(), key);
  return it == a.end() ? -1 : static_cast<int>(it - a.begin());
}

int SurgerySession::num_attachments() const { return static_cast<int>(impl_->attachment.size()); }
const std::vector<int>& SurgerySession::attachment_keys() const { return impl_->attachment; }
const BaryPoint& SurgerySession::attachment_point(int key) const {
  const int row = attachment_row(key);
  if (row < 0) throw SolverError(fmt::format("SurgerySession: no attachment with key {}", key));
  return impl_->desc.attachments[static_cast<size_t>(row)].point;
}
int SurgerySession::attachment_origin(int key) const {
  if (key < 0 || key >= impl_->next_attachment) return -1;
  return impl_->origin[static_cast<size_t>(key)];
}

void SurgerySession::enable_collision(SurgeryCollision collision) {
  Impl& m = *impl_;
  if (collision.options.method != CollisionMethod::Schur)
    throw SolverError("SurgerySession: collisions through topology events need the schur collision method");
  Impl::CollisionParts p = Impl::make_collision(collision, m.cutter.mesh(), *m.model, std::nullopt);
  m.cstate.reset();  // (a second call: the old state before the model and detector it borrows)
  m.collision = std::move(collision);
  m.detector = std::move(p.detector);
  m.cmodel = std::move(p.model);
  m.cstate = std::move(p.state);
}

const CollisionModel* SurgerySession::collision_model() const { return impl_->cmodel.get(); }
const CollisionFrameStats& SurgerySession::last_collision_stats() const { return impl_->last_cstats; }
const std::vector<ProxyContact>& SurgerySession::contacts() const {
  static const std::vector<ProxyContact> none;
  return impl_->cstate ? impl_->cstate->contacts() : none;
}

FrameStats SurgerySession::step(double frame) {
  Impl& m = *impl_;
  if (m.collision) {
    m.last_cstats = collision_step(*m.cmodel, *m.cstate, m.state, m.options.solver, frame);
    return m.last_cstats.pd;
  }
  if (!m.progressive()) return xpd::step(*m.model, m.state, m.options.solver);
  PdStep pd(*m.model, m.factor);
  return run_frame(*m.model, m.state, pd, m.options.solver);
}

RefillResult SurgerySession::check_fill() {
  Impl& m = *impl_;
  if (!m.progressive()) return {};
  // The model's K is the previous one changed by each event (build_model's second form): where an
  // event cancelled an entry (a face a cut separated) a round-off residue stays, which the fresh
  // ordering would read as a coupling the cut removed. Off-diagonal entries below 1e-13 √(K_ii K_jj)
  // go from the matrix the factor is analyzed (and, when the policy says so, refactored) from.
  Eigen::SparseMatrix<double> A = m.model->matrix();
  const Eigen::VectorXd d = A.diagonal();
  A.prune([&](Eigen::Index i, Eigen::Index j, double v) {
    return i == j || std::abs(v) > 1e-13 * std::sqrt(std::abs(d(i) * d(j)));
  });
  const RefillResult r = m.factor.refill(A, m.options.fill);
  if (r.refactored) ++m.stats.fill_refactors;
  m.stats.nnz_L = m.factor.info().nnz_L;
  return r;
}

}  // namespace xpd
