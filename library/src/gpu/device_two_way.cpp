// Host side of the device two-way projection (gpu/two_way.hpp): uploads, the step loop and the
// few small downloads it needs (counts, ‖r‖∞, the largest motion). Kernels live in
// two_way_kernels.cu. Without XPD_WITH_CUDA every entry point throws GpuError.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/core/timer.hpp>
#include <xpd/gpu/two_way.hpp>
#include <xpd/mesh/surface.hpp>

#if XPD_WITH_CUDA
#include "two_way_kernels.cuh"
#endif

namespace xpd::gpu {

#if !XPD_WITH_CUDA

namespace {
[[noreturn]] void no_cuda() {
  throw GpuError("the CUDA backend is not compiled in (configure with -DXPD_WITH_CUDA=ON)");
}
}  // namespace

struct DeviceTwoWay::Impl {};
DeviceTwoWay::DeviceTwoWay(const TwoWayProjector&) { no_cuda(); }
DeviceTwoWay::~DeviceTwoWay() = default;
const TwoWayProjector& DeviceTwoWay::projector() const { no_cuda(); }
ProximityPairs DeviceTwoWay::proximity_search(const Points&, double) { no_cuda(); }
TwoWayStats DeviceTwoWay::project(const Points&, const Points&, Points&,
                                  const std::function<void(const TwoWayStepInfo&)>&) {
  no_cuda();
}

#else

using namespace detail;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::uint64_t splitmix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double from_bits(unsigned long long b) {
  double d = 0;
  std::memcpy(&d, &b, sizeof d);
  return d;
}
unsigned long long to_bits(double d) {
  unsigned long long b = 0;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

template <class T, class M>
std::vector<T> flat(const M& m) {
  std::vector<T> v(static_cast<std::size_t>(m.size()));
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index k = 0; k < m.cols(); ++k) v[static_cast<std::size_t>(i * m.cols() + k)] = static_cast<T>(m(i, k));
  return v;
}

void memset_async(void* p, int value, std::size_t bytes) {
  check_cuda(cudaMemsetAsync(p, value, bytes, backend_stream()), "two-way: cudaMemsetAsync");
}

// A family of constraint slots with K entries each, grown on demand.
struct Family {
  int K = 0;
  DeviceArray<int> node, colour;
  DeviceArray<double> J, base, c0;
  int colours = 0;
  ConstraintSlots slots(int m) {
    const auto mm = static_cast<std::size_t>(std::max(m, 1));
    const auto mk = mm * static_cast<std::size_t>(K);
    node.reserve(mk, "two-way constraints"), J.reserve(3 * mk, "two-way constraints");
    base.reserve(3 * mk, "two-way constraints"), c0.reserve(mm, "two-way constraints");
    colour.reserve(mm, "two-way constraints");
    ConstraintSlots c;
    c.m = m, c.K = K, c.node = node.data(), c.J = J.data(), c.base = base.data(), c.c0 = c0.data();
    c.colour = colour.data();
    return c;
  }
};

}  // namespace

struct DeviceTwoWay::Impl {
  const TwoWayProjector& pj;
  TwoWaySetup setup;
  int nl = 0, nt = 0;
  double cell = 1;
  DeviceArray<int> emb_nodes, faces, edges, surface_points, component, length_edges, tets;
  DeviceArray<double> emb_w, l1, inverse_mass, rest_points, rest_volume;
  DeviceArray<char> on_surface, node_on_surface;
  // Search.
  DeviceArray<long long> counts, vt_keys, ee_keys;
  DeviceArray<unsigned long long> codes;
  DeviceArray<int> items, large, flags;  // flags: 0 large primitives, 1 found, 2 active, 3 changed
  DeviceArray<double> vt_dist, ee_dist;
  int nvt = 0, nee = 0;
  // CUB's scratch and second buffers; key_bits: the bits of a pair key (a << 32 | b).
  DeviceArray<char> temp;
  DeviceArray<unsigned long long> codes_alt;
  DeviceArray<int> items_alt;
  DeviceArray<long long> keys_alt;
  DeviceArray<double> dist_alt;
  int key_bits = 64;
  // Projection.
  DeviceArray<double> x, y, y_target, s[2], r, delta_x, len, safe, pair_d, pair_lb;
  DeviceArray<unsigned long long> alpha, best, scalars;  // scalars: max_r, max_move, min_d, max_disp, max_stretch
  DeviceArray<int> remaining, parent;
  DeviceArray<unsigned long long> zone_alpha, zone_snapshot;
  DeviceArray<char> across;
  Family contacts, lengths, floors;

  explicit Impl(const TwoWayProjector& p) : pj(p) {}

  void upload_setup() {
    const TwoWayOptions& o = pj.options();
    const TwoWayEmbedding& emb = pj.embedding();
    const int n = static_cast<int>(pj.num_nodes()), np = static_cast<int>(pj.num_contact_points());
    const Triangles& f = pj.faces();
    const Edges& e = pj.contact_edges();
    std::vector<double> l1v(static_cast<std::size_t>(np), 0.0);
    std::vector<char> on(static_cast<std::size_t>(np), 0), node_on(static_cast<std::size_t>(n), 0);
    for (int i = 0; i < np; ++i)
      for (int k = 0; k < 4; ++k) l1v[static_cast<std::size_t>(i)] += std::abs(emb.weights(i, k));
    for (Eigen::Index t = 0; t < f.rows(); ++t)
      for (int k = 0; k < 3; ++k) on[static_cast<std::size_t>(f(t, k))] = 1;
    std::vector<int> sp;
    for (int i = 0; i < np; ++i)
      if (on[static_cast<std::size_t>(i)]) {
        sp.push_back(i);
        for (int k = 0; k < 4; ++k)
          if (emb.nodes(i, k) >= 0 && emb.weights(i, k) != 0) node_on[static_cast<std::size_t>(emb.nodes(i, k))] = 1;
      }
    const char* what = "two-way setup upload";
    emb_nodes.upload(flat<int>(emb.nodes).data(), static_cast<std::size_t>(4 * np), what);
    emb_w.upload(flat<double>(emb.weights).data(), static_cast<std::size_t>(4 * np), what);
    l1.upload(l1v.data(), l1v.size(), what);
    on_surface.upload(on.data(), on.size(), what);
    node_on_surface.upload(node_on.data(), node_on.size(), what);
    const Eigen::VectorXd& im = pj.inverse_mass();
    inverse_mass.upload(im.data(), static_cast<std::size_t>(im.size()), what);
    const auto fv = flat<int>(f), ev = flat<int>(e);
    faces.upload(fv.data(), fv.size(), what);
    edges.upload(ev.data(), ev.size(), what);
    surface_points.upload(sp.data(), sp.size(), what);
    component.upload(pj.components().data(), pj.components().size(), what);
    const auto rp = flat<double>(pj.rest_contact_points());
    rest_points.upload(rp.data(), rp.size(), what);
    const auto le = flat<int>(pj.length_edges());
    length_edges.upload(le.data(), le.size(), what);
    nl = static_cast<int>(pj.length_edges().rows());
    const auto tv = flat<int>(pj.volume_tets());
    tets.upload(tv.data(), tv.size(), what);
    rest_volume.upload(pj.volume_tet_rest_volumes().data(), pj.volume_tet_rest_volumes().size(), what);
    nt = static_cast<int>(pj.volume_tets().rows());
    key_bits = 32;
    while (key_bits < 63 && (1LL << (key_bits - 32)) <= std::max<long long>({np, f.rows(), e.rows()})) ++key_bits;

    setup.n = n, setup.np = np, setup.nf = static_cast<int>(f.rows()), setup.ne = static_cast<int>(e.rows());
    setup.nsp = static_cast<int>(sp.size());
    setup.emb_nodes = emb_nodes.data(), setup.emb_w = emb_w.data(), setup.l1 = l1.data();
    setup.on_surface = on_surface.data(), setup.node_on_surface = node_on_surface.data();
    setup.inverse_mass = inverse_mass.data(), setup.faces = faces.data(), setup.edges = edges.data();
    setup.surface_points = surface_points.data(), setup.component = component.data();
    setup.rest_points = rest_points.data();
    setup.delta = o.delta, setup.gamma = o.gamma, setup.rest_fraction = o.rest_fraction;
    setup.volume_constraint = o.constraint == TwoWayConstraint::Volume;
    setup.forward = o.forward == TwoWayForward::Planes ? 0 : o.forward == TwoWayForward::Zones ? 1 : 2;
    // The grid's cell: D^max or the rest mean edge of the contact surface, whichever is larger.
    cell = std::max(o.d_max, f.rows() > 0 ? mean_edge_length(pj.rest_contact_points(), e) : 0.0);
    if (!(cell > 0)) cell = 1;

    const auto nn = static_cast<std::size_t>(std::max(n, 1));
    const auto npp = static_cast<std::size_t>(std::max(np, 1));
    for (auto* a : {&x, &y, &y_target, &delta_x}) a->reserve(3 * nn, "two-way positions");
    for (auto& a : s) a.reserve(3 * npp, "two-way positions");
    r.reserve(nn, "two-way positions"), len.reserve(nn, "two-way positions"), safe.reserve(npp, "two-way positions");
    alpha.reserve(nn, "two-way positions");
    best.reserve(nn, "two-way colouring");
    memset_async(best.data(), 0, nn * sizeof(unsigned long long));
    scalars.reserve(8, "two-way"), flags.reserve(4, "two-way"), remaining.reserve(kBatch, "two-way");
    contacts.K = 16, lengths.K = 2, floors.K = 4;
    check_cuda(cudaStreamSynchronize(backend_stream()), what);
  }

  // Pairs closer than D among the contact surface's primitives at s: one query per kind.
  int query(const double* pos, bool vt, double D, DeviceArray<long long>& keys, DeviceArray<double>& dist) {
    const cudaStream_t st = backend_stream();
    const int count = vt ? setup.nf : setup.ne;
    const int K = vt ? 3 : 2;
    const int* rows = vt ? setup.faces : setup.edges;
    if (count == 0) return 0;
    counts.reserve(static_cast<std::size_t>(count) + 1, "two-way search");
    large.reserve(static_cast<std::size_t>(count), "two-way search");
    memset_async(flags.data(), 0, 4 * sizeof(int));
    launch_cell_counts(pos, rows, count, K, D, cell, counts.data(), large.data(), flags.data(), st);
    memset_async(counts.data() + count, 0, sizeof(long long));
    scan_counts(counts.data(), count, temp, st);
    long long total = 0;
    int n_large = 0;
    check_cuda(cudaMemcpyAsync(&total, counts.data() + count, sizeof total, cudaMemcpyDeviceToHost, st),
               "two-way search");
    check_cuda(cudaMemcpyAsync(&n_large, flags.data(), sizeof n_large, cudaMemcpyDeviceToHost, st), "two-way search");
    check_cuda(cudaStreamSynchronize(st), "two-way search");
    check_cuda(cudaGetLastError(), "two-way search kernel");
    codes.reserve(static_cast<std::size_t>(std::max(total, 1LL)), "two-way search grid");
    items.reserve(static_cast<std::size_t>(std::max(total, 1LL)), "two-way search grid");
    launch_cell_fill(pos, rows, count, K, D, cell, counts.data(), codes.data(), items.data(), st);
    sort_entries(codes.data(), items.data(), total, codes_alt, items_alt, temp, st);
    int capacity = static_cast<int>(std::max<std::size_t>(keys.capacity(), 1024));
    int found = 0;
    for (;;) {
      keys.reserve(static_cast<std::size_t>(capacity), "two-way pairs");
      dist.reserve(static_cast<std::size_t>(capacity), "two-way pairs");
      memset_async(flags.data() + 1, 0, sizeof(int));
      if (vt)
        launch_query_vt(setup, pos, D, cell, codes.data(), items.data(), total, large.data(), n_large, keys.data(),
                        dist.data(), capacity, flags.data() + 1, st);
      else
        launch_query_ee(setup, pos, D, cell, codes.data(), items.data(), total, large.data(), n_large, keys.data(),
                        dist.data(), capacity, flags.data() + 1, st);
      check_cuda(cudaMemcpyAsync(&found, flags.data() + 1, sizeof found, cudaMemcpyDeviceToHost, st), "two-way search");
      check_cuda(cudaStreamSynchronize(st), "two-way search");
      check_cuda(cudaGetLastError(), "two-way search kernel");
      if (found <= capacity) break;
      capacity = static_cast<int>(std::min<long long>(found + found / 2 + 1LL, std::numeric_limits<int>::max()));
    }
    sort_pairs(keys.data(), dist.data(), found, key_bits, keys_alt, dist_alt, temp, st);
    return found;
  }

  void search(const double* pos, double D) {
    nvt = query(pos, true, D, vt_keys, vt_dist);
    nee = query(pos, false, D, ee_keys, ee_dist);
    check_cuda(cudaStreamSynchronize(backend_stream()), "two-way search");
  }

  PairList pairs() const {
    PairList p;
    p.nvt = nvt, p.nee = nee, p.vt = vt_keys.data(), p.ee = ee_keys.data();
    return p;
  }

  ProximityPairs download_pairs() const {
    ProximityPairs out;
    std::vector<long long> k(static_cast<std::size_t>(std::max(nvt, nee)));
    std::vector<double> dd(k.size());
    auto take = [&](int count, const DeviceArray<long long>& keys, const DeviceArray<double>& dist,
                    std::vector<std::array<int, 2> >& pairs, std::vector<double>& distance) {
      keys.download(k.data(), static_cast<std::size_t>(count), "two-way pairs");
      dist.download(dd.data(), static_cast<std::size_t>(count), "two-way pairs");
      pairs.resize(static_cast<std::size_t>(count));
      distance.assign(dd.begin(), dd.begin() + count);
      for (int q = 0; q < count; ++q)
        pairs[static_cast<std::size_t>(q)] = {static_cast<int>(k[static_cast<std::size_t>(q)] >> 32),
                                              static_cast<int>(k[static_cast<std::size_t>(q)] & 0xffffffffLL)};
    };
    take(nvt, vt_keys, vt_dist, out.vertex_triangle, out.vertex_triangle_distance);
    take(nee, ee_keys, ee_dist, out.edge_edge, out.edge_edge_distance);
    return out;
  }

  static constexpr int kBatch = 8;

  // Colours the active slots of c by rounds of independent sets; returns the number of colours.
  int colour(ConstraintSlots c, std::uint64_t salt) {
    if (c.m == 0) return 0;
    const cudaStream_t st = backend_stream();
    int h[kBatch];
    // Zeroed here as well as by the rounds' resets: a colouring that threw must not leave marks.
    memset_async(best.data(), 0, static_cast<std::size_t>(std::max(setup.n, 1)) * sizeof(unsigned long long));
    for (int rounds = 0; rounds < (1 << 16); rounds += kBatch) {
      memset_async(remaining.data(), 0, kBatch * sizeof(int));
      for (int b = 0; b < kBatch; ++b)
        launch_colour_round(c, setup.inverse_mass, salt, rounds + b, best.data(), remaining.data() + b, st);
      remaining.download(h, kBatch, "two-way colouring");
      for (int b = 0; b < kBatch; ++b)
        if (h[b] == 0) return rounds + b + 1;
    }
    throw GpuError("two-way on the device: the constraint colouring did not finish");
  }

  // The impact-zone forward rule (TwoWayProjector, forward = Zones) into alpha: zones by hooking
  // passes until no root moves, then the caps, the one-zone pairs, and the rounds over the pairs
  // across zones (a round without a change ends them; the 33rd applies the per-node bound to all).
  void zones(const PairList& P, double D) {
    const cudaStream_t st = backend_stream();
    const int n = setup.n, npairs = P.nvt + P.nee;
    parent.reserve(static_cast<std::size_t>(std::max(n, 1)), "two-way zones");
    zone_alpha.reserve(static_cast<std::size_t>(std::max(n, 1)), "two-way zones");
    zone_snapshot.reserve(static_cast<std::size_t>(std::max(n, 1)), "two-way zones");
    across.reserve(static_cast<std::size_t>(std::max(npairs, 1)), "two-way zones");
    launch_zone_init(n, parent.data(), zone_alpha.data(), st);
    int changed = 1;
    for (int pass = 0; changed; ++pass) {
      if (pass == 4096) throw GpuError("two-way on the device: the impact zones did not settle");
      memset_async(flags.data() + 3, 0, sizeof(int));
      launch_zone_hook(setup, P, pair_d.data(), parent.data(), flags.data() + 3, st);
      launch_zone_compress(n, parent.data(), st);
      check_cuda(cudaMemcpyAsync(&changed, flags.data() + 3, sizeof changed, cudaMemcpyDeviceToHost, st),
                 "two-way zones");
      check_cuda(cudaStreamSynchronize(st), "two-way zones");
    }
    launch_zone_caps(setup, D, parent.data(), len.data(), zone_alpha.data(), st);
    launch_zone_pairs(setup, P, pair_lb.data(), parent.data(), delta_x.data(), len.data(), zone_alpha.data(),
                      across.data(), st);
    const int max_rounds = 32;
    for (int round = 0;; ++round) {
      const bool last = round == max_rounds;
      memset_async(flags.data() + 3, 0, sizeof(int));
      launch_zone_round(setup, P, pair_lb.data(), parent.data(), delta_x.data(), len.data(), zone_snapshot.data(),
                        zone_alpha.data(), across.data(), last, flags.data() + 3, st);
      if (last) break;
      check_cuda(cudaMemcpyAsync(&changed, flags.data() + 3, sizeof changed, cudaMemcpyDeviceToHost, st),
                 "two-way zones");
      check_cuda(cudaStreamSynchronize(st), "two-way zones");
      if (!changed) break;
    }
    launch_zone_alpha(n, parent.data(), zone_alpha.data(), alpha.data(), st);
  }

  Points download_points(const DeviceArray<double>& a, Eigen::Index rows) const {
    Points p(rows, 3);
    a.download(p.data(), static_cast<std::size_t>(3 * rows), "two-way download");
    return p;
  }
};

DeviceTwoWay::DeviceTwoWay(const TwoWayProjector& projector) : impl_(std::make_unique<Impl>(projector)) {
  impl_->upload_setup();
}
DeviceTwoWay::~DeviceTwoWay() = default;

const TwoWayProjector& DeviceTwoWay::projector() const { return impl_->pj; }

ProximityPairs DeviceTwoWay::proximity_search(const Points& s, double D) {
  Impl& m = *impl_;
  if (s.rows() != m.setup.np)
    throw Error(fmt::format("two-way: {} positions for {} contact points", s.rows(), m.setup.np));
  if (!(D > 0) || !std::isfinite(D))
    throw Error(fmt::format("proximity search: the distance must be finite and > 0 (got {})", D));
  if (!s.allFinite()) throw Error("proximity search: non-finite position");
  m.s[0].upload(s.data(), static_cast<std::size_t>(3 * s.rows()), "two-way upload");
  m.search(m.s[0].data(), D);
  return m.download_pairs();
}

TwoWayStats DeviceTwoWay::project(const Points& x_safe, const Points& y_target, Points& x_out,
                                  const std::function<void(const TwoWayStepInfo&)>& observe) {
  Timer total;
  Impl& m = *impl_;
  const TwoWayProjector& pj = m.pj;
  const TwoWayOptions& o = pj.options();
  const int n = m.setup.n, np = m.setup.np;
  TwoWayStats stats;
  if (x_safe.rows() != n || y_target.rows() != n)
    throw Error(
        fmt::format("two-way: {} safe and {} target positions for {} vertices", x_safe.rows(), y_target.rows(), n));
  if (!x_safe.allFinite()) throw Error("two-way: non-finite safe position");
  if (!y_target.allFinite()) throw Error("two-way: non-finite target position (the dynamics diverged?)");
  if (m.setup.nf == 0) {
    x_out = y_target;
    stats.min_distance = kInf;
    stats.ms_total = total.elapsed_ms();
    return stats;
  }
  const cudaStream_t st = backend_stream();
  const auto n3 = static_cast<std::size_t>(3 * n);
  m.x.upload(x_safe.data(), n3, "two-way upload");
  m.y.upload(y_target.data(), n3, "two-way upload");
  m.y_target.upload(y_target.data(), n3, "two-way upload");
  int cur = 0;  // s[cur] = W x
  launch_contact_points(m.setup, m.x.data(), m.s[cur].data(), st);
  launch_init_r(m.setup, m.r.data(), st);

  auto salt = [&](int step, int family) {
    return splitmix(o.seed ^ splitmix(static_cast<std::uint64_t>(step + 2) * 4 + static_cast<std::uint64_t>(family)));
  };
  // Edge lengths: built at y^[k+1] and coloured once.
  const ConstraintSlots lengths = m.lengths.slots(m.nl);
  launch_build_lengths(m.setup.inverse_mass, m.length_edges.data(), m.y_target.data(), o.sigma, lengths, st);
  m.lengths.colours = m.colour(lengths, salt(-1, 0));

  ProximityPairs host_pairs;  // for the observer
  Points x_prev, host_safe_points;
  std::vector<double> safe_host;
  double D = 0;
  for (int l = 0; l < o.max_steps; ++l) {
    bool searched = false;
    if (D < o.d_min) {
      Timer ts;
      m.search(m.s[cur].data(), o.d_max);
      D = o.d_max;
      ++stats.searches;
      searched = true;
      stats.max_pairs = std::max(stats.max_pairs, static_cast<std::size_t>(m.nvt + m.nee));
      if (observe) host_pairs = m.download_pairs();
      stats.ms_search += ts.elapsed_ms();
    }
    Timer tb;
    const PairList P = m.pairs();
    const int npairs = P.nvt + P.nee;
    m.pair_d.reserve(static_cast<std::size_t>(std::max(npairs, 1)), "two-way pairs");
    m.pair_lb.reserve(static_cast<std::size_t>(std::max(npairs, 1)), "two-way pairs");
    launch_pair_distances(m.setup, P, m.s[cur].data(), m.pair_d.data(), m.pair_lb.data(), st);
    // Backward step.
    memset_async(m.flags.data() + 2, 0, sizeof(int));
    const ConstraintSlots contacts = m.contacts.slots(npairs);
    launch_build_contacts(m.setup, P, m.s[cur].data(), m.x.data(), m.pair_d.data(), contacts, m.flags.data() + 2, st);
    ConstraintSlots floors = m.floors.slots(o.min_volume > 0 ? m.nt : 0);
    launch_build_floors(m.setup.inverse_mass, m.tets.data(), m.rest_volume.data(), m.y.data(), o.min_volume, floors,
                        st);
    m.floors.colours = m.colour(floors, salt(l, 1));
    m.contacts.colours = m.colour(contacts, salt(l, 2));
    for (int sweep = 0; sweep < o.sweeps; ++sweep) {
      for (int c = 0; c < m.lengths.colours; ++c) launch_relax(lengths, c, m.setup.inverse_mass, m.y.data(), st);
      for (int c = 0; c < m.floors.colours; ++c) launch_relax(floors, c, m.setup.inverse_mass, m.y.data(), st);
      for (int c = 0; c < m.contacts.colours; ++c) launch_relax(contacts, c, m.setup.inverse_mass, m.y.data(), st);
    }
    int active = 0;
    check_cuda(cudaMemcpyAsync(&active, m.flags.data() + 2, sizeof active, cudaMemcpyDeviceToHost, st),
               "two-way backward");
    check_cuda(cudaStreamSynchronize(st), "two-way backward");
    check_cuda(cudaGetLastError(), "two-way backward kernel");
    stats.max_active = std::max(stats.max_active, static_cast<std::size_t>(active));
    stats.ms_backward += tb.elapsed_ms();

    // Forward step.
    Timer tf;
    if (observe) x_prev = m.download_points(m.x, n);
    launch_forward_init(m.setup, D, m.x.data(), m.y.data(), m.safe.data(), m.delta_x.data(), m.len.data(),
                        m.alpha.data(), st);
    launch_safe_from_pairs(m.setup, P, m.pair_lb.data(), m.safe.data(), st);
    if (m.setup.forward == 0) {
      launch_point_caps(m.setup, D, m.safe.data(), m.len.data(), m.alpha.data(), st);
      launch_plane_bounds(m.setup, P, m.s[cur].data(), m.pair_lb.data(), m.delta_x.data(), m.len.data(), m.alpha.data(),
                          st);
    } else if (m.setup.forward == 2) {
      launch_point_caps(m.setup, D, m.safe.data(), m.len.data(), m.alpha.data(), st);
    } else {
      m.zones(P, D);
    }
    memset_async(m.scalars.data(), 0, 2 * sizeof(unsigned long long));
    launch_apply(m.setup, m.x.data(), m.delta_x.data(), m.len.data(), m.alpha.data(), m.r.data(), m.scalars.data(), st);
    launch_contact_points(m.setup, m.x.data(), m.s[1 - cur].data(), st);
    launch_max_move(m.setup, m.s[1 - cur].data(), m.s[cur].data(), m.scalars.data() + 1, st);
    unsigned long long bits[2];
    m.scalars.download(bits, 2, "two-way forward");
    check_cuda(cudaGetLastError(), "two-way forward kernel");
    const double max_r = from_bits(bits[0]), max_move = from_bits(bits[1]);
    const int prev = cur;
    cur = 1 - cur;
    const double D_step = D;
    D -= 2 * max_move;
    stats.ms_forward += tf.elapsed_ms();
    ++stats.steps;
    stats.max_r = max_r;
    if (observe) {
      const Points xa = m.download_points(m.x, n), yy = m.download_points(m.y, n);
      const Points sb = m.download_points(m.s[prev], np), sa = m.download_points(m.s[cur], np);
      safe_host.resize(static_cast<std::size_t>(np));
      m.safe.download(safe_host.data(), safe_host.size(), "two-way download");
      TwoWayStepInfo info;
      info.step = l;
      info.searched = searched;
      info.D = D_step;
      info.x_before = &x_prev;
      info.x_after = &xa;
      info.y = &yy;
      info.s_before = &sb;
      info.s_after = &sa;
      info.safe_distance = &safe_host;
      info.pairs = &host_pairs;
      observe(info);
    }
    if (max_r < o.tolerance) break;
  }
  stats.converged = stats.max_r < o.tolerance;

  // Result figures on the device: smallest distance of P, largest displacement and stretch.
  const unsigned long long init[3] = {to_bits(kInf), 0, to_bits(1.0)};
  check_cuda(cudaMemcpyAsync(m.scalars.data() + 2, init, sizeof init, cudaMemcpyHostToDevice, st), "two-way");
  launch_min_pair_distance(m.setup, m.pairs(), m.s[cur].data(), m.scalars.data() + 2, st);
  launch_result_figures(n, m.x.data(), m.y_target.data(), m.length_edges.data(), m.nl, m.scalars.data() + 3,
                        m.scalars.data() + 4, st);
  unsigned long long fig[5];
  m.scalars.download(fig, 5, "two-way figures");
  stats.min_distance = from_bits(fig[2]);
  stats.max_displacement = from_bits(fig[3]);
  stats.max_stretch = from_bits(fig[4]);
  x_out = m.download_points(m.x, n);
  stats.ms_total = total.elapsed_ms();
  return stats;
}

#endif

}  // namespace xpd::gpu
