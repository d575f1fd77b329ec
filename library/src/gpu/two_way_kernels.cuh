#pragma once
// Internal: the kernels of the device two-way projection (two_way_kernels.cu) behind plain launch
// functions, for the host code in device_two_way.cpp (gpu/two_way.hpp). Positions are row-major
// #rows × 3 arrays of doubles; pair keys are (a << 32) | b with a, b the pair's two indices.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace xpd::gpu::detail {

/// The backend's stream and error check (cuda_backend.cpp).
cudaStream_t backend_stream();
void check_cuda(cudaError_t e, const char* what);

/// A growable device array (host code only allocates; contents are not kept on growth).
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  /// Makes room for n elements (discarding the contents when it has to grow).
  void reserve(std::size_t n, const char* what) {
    if (n <= capacity_) return;
    if (p_) cudaFree(p_);
    p_ = nullptr;
    capacity_ = 0;
    check_cuda(cudaMalloc(reinterpret_cast<void**>(&p_), (n > 0 ? n : 1) * sizeof(T)), what);
    capacity_ = n;
  }
  void upload(const T* host, std::size_t n, const char* what) {
    reserve(n, what);
    if (n > 0) check_cuda(cudaMemcpyAsync(p_, host, n * sizeof(T), cudaMemcpyHostToDevice, backend_stream()), what);
  }
  void download(T* host, std::size_t n, const char* what) const {
    if (n > 0) check_cuda(cudaMemcpyAsync(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost, backend_stream()), what);
    check_cuda(cudaStreamSynchronize(backend_stream()), what);
  }
  T* data() { return p_; }
  const T* data() const { return p_; }
  std::size_t capacity() const { return capacity_; }

 private:
  T* p_ = nullptr;
  std::size_t capacity_ = 0;
};

/// The projector's setup on the device.
struct TwoWaySetup {
  int n = 0;                              // nodes
  int np = 0;                             // contact points
  int nf = 0;                             // contact faces
  int ne = 0;                             // contact edges
  int nsp = 0;                            // surface points (corners of a face), listed in surface_points
  const int* emb_nodes = nullptr;         // np × 4, −1 unused
  const double* emb_w = nullptr;          // np × 4
  const double* l1 = nullptr;             // np
  const char* on_surface = nullptr;       // np
  const char* node_on_surface = nullptr;  // n
  const double* inverse_mass = nullptr;   // n
  const int* faces = nullptr;             // nf × 3
  const int* edges = nullptr;             // ne × 2
  const int* surface_points = nullptr;    // nsp
  const int* component = nullptr;         // np
  const double* rest_points = nullptr;    // np × 3
  double delta = 0, gamma = 0, rest_fraction = 0;
  bool volume_constraint = true;
  int forward = 0;  // 0 separating planes, 1 impact zones, 2 per-vertex (TwoWayForward's order)
};

/// Constraints with K node entries each (node −1: unused), in slots 0..m−1. colour: −2 inactive,
/// −1 not yet coloured, ≥ 0 its colour.
struct ConstraintSlots {
  int m = 0;
  int K = 0;
  int* node = nullptr;
  double* J = nullptr;     // m × K × 3
  double* base = nullptr;  // m × K × 3
  double* c0 = nullptr;    // m
  int* colour = nullptr;   // m
};

/// The pair set P: vertex–triangle keys (v << 32 | f) first, then edge–edge keys (a << 32 | b).
struct PairList {
  int nvt = 0, nee = 0;
  const long long* vt = nullptr;
  const long long* ee = nullptr;
};

// --- proximity search -------------------------------------------------------------------------
/// Counts the grid cells of each primitive's box grown by `grow`: rows of `K` indices into s. A
/// primitive over 4,096 cells counts 0 and is appended to `large` (*n_large of them): the queries
/// scan that list instead of the grid.
void launch_cell_counts(const double* s, const int* rows, int count, int K, double grow, double cell, long long* counts,
                        int* large, int* n_large, cudaStream_t st);
/// Exclusive scan of counts (count + 1 entries: the last receives the total); CUB, with its
/// scratch in `temp` (grown on demand).
void scan_counts(long long* counts, int count, DeviceArray<char>& temp, cudaStream_t st);
void launch_cell_fill(const double* s, const int* rows, int count, int K, double grow, double cell,
                      const long long* offsets, unsigned long long* codes, int* items, cudaStream_t st);
/// Radix sort of the (code, item) entries by code (CUB; `*_alt` are the second buffers).
void sort_entries(unsigned long long* codes, int* items, long long n, DeviceArray<unsigned long long>& codes_alt,
                  DeviceArray<int>& items_alt, DeviceArray<char>& temp, cudaStream_t st);
/// Vertex–triangle candidates: the surface points against the registered faces and the large ones;
/// found pairs go to keys/dist while *found < capacity (*found counts all).
void launch_query_vt(const TwoWaySetup& d, const double* s, double D, double cell, const unsigned long long* codes,
                     const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                     double* dist, int capacity, int* found, cudaStream_t st);
/// Edge–edge candidates, each pair once as (smaller, larger).
void launch_query_ee(const TwoWaySetup& d, const double* s, double D, double cell, const unsigned long long* codes,
                     const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                     double* dist, int capacity, int* found, cudaStream_t st);
/// Radix sort of the pairs by key over its low end_bit bits.
void sort_pairs(long long* keys, double* dist, int n, int end_bit, DeviceArray<long long>& keys_alt,
                DeviceArray<double>& dist_alt, DeviceArray<char>& temp, cudaStream_t st);

// --- projection -------------------------------------------------------------------------------
/// s = W x.
void launch_contact_points(const TwoWaySetup& d, const double* x, double* s, cudaStream_t st);
/// Per pair at contact positions s: distance and its rounding lower bound.
void launch_pair_distances(const TwoWaySetup& d, const PairList& p, const double* s, double* pair_d, double* pair_lb,
                           cudaStream_t st);
/// The smallest pair distance at s into *min_bits (bits of a non-negative double, atomicMin).
void launch_min_pair_distance(const TwoWaySetup& d, const PairList& p, const double* s, unsigned long long* min_bits,
                              cudaStream_t st);
/// Contact constraints (K = 16) of the pairs closer than their δ, slot q = pair q; counts the
/// active ones into *active.
void launch_build_contacts(const TwoWaySetup& d, const PairList& p, const double* s, const double* x,
                           const double* pair_d, ConstraintSlots c, int* active, cudaStream_t st);
/// Edge-length constraints (K = 2) linearized at y_target.
void launch_build_lengths(const double* inverse_mass, const int* length_edges, const double* y_target, double sigma,
                          ConstraintSlots c, cudaStream_t st);
/// Volume floors (K = 4) of the tets below 2 min_volume V_rest at y.
void launch_build_floors(const double* inverse_mass, const int* tets, const double* rest_volume, const double* y,
                         double min_volume, ConstraintSlots c, cudaStream_t st);
/// One round of the independent-set colouring: the uncoloured constraints whose priority (salted)
/// is the largest at each of their movable nodes take colour `round`; *remaining counts the others.
/// best: one zeroed word per node (left zeroed).
void launch_colour_round(ConstraintSlots c, const double* inverse_mass, std::uint64_t salt, int round,
                         unsigned long long* best, int* remaining, cudaStream_t st);
/// Relaxes the constraints of colour k (projected Gauss–Seidel on y, λ from 0).
void launch_relax(ConstraintSlots c, int colour, const double* inverse_mass, double* y, cudaStream_t st);

/// Forward step. safe: per contact point (on the surface D, else ∞), lowered by every pair's lb;
/// delta_x = y − x, len = |delta_x|, alpha = 1 (bits) per node.
void launch_forward_init(const TwoWaySetup& d, double D, const double* x, const double* y, double* safe,
                         double* delta_x, double* len, unsigned long long* alpha, cudaStream_t st);
void launch_safe_from_pairs(const TwoWaySetup& d, const PairList& p, const double* pair_lb, double* safe,
                            cudaStream_t st);
/// The caps of every surface point: ½γD (planes) or ½γ safe_i (per-vertex rule).
void launch_point_caps(const TwoWaySetup& d, double D, const double* safe, const double* len, unsigned long long* alpha,
                       cudaStream_t st);
/// The separating-plane bounds of every pair.
void launch_plane_bounds(const TwoWaySetup& d, const PairList& p, const double* s, const double* pair_lb,
                         const double* delta_x, const double* len, unsigned long long* alpha, cudaStream_t st);
/// Impact zones (forward = Zones): parent[j] = j and zone_alpha[j] = 1 per node.
void launch_zone_init(int n, int* parent, unsigned long long* zone_alpha, cudaStream_t st);
/// One hooking pass over the pairs closer than δ (the nodes of a pair join one zone, the larger
/// root hooked under the smaller); *changed = 1 when a root moved.
void launch_zone_hook(const TwoWaySetup& d, const PairList& p, const double* pair_d, int* parent, int* changed,
                      cudaStream_t st);
/// parent[j] ← the root of j.
void launch_zone_compress(int n, int* parent, cudaStream_t st);
/// The cap ½γD of every surface point on its nodes' zones.
void launch_zone_caps(const TwoWaySetup& d, double D, const int* zone, const double* len,
                      unsigned long long* zone_alpha, cudaStream_t st);
/// Pairs within one zone lower it to (1 − 1e−12) γ lb/(‖w_a‖₁‖w_b‖₁ rel0); the others are marked in
/// `across`.
void launch_zone_pairs(const TwoWaySetup& d, const PairList& p, const double* pair_lb, const int* zone,
                       const double* delta_x, const double* len, unsigned long long* zone_alpha, char* across,
                       cudaStream_t st);
/// One round over the pairs across zones: a pair whose relative motion at the zones' α of the
/// round's start (copied into `snapshot`, n words) exceeds its limit (every pair when `last`) lowers
/// its nodes' zones by the per-node bound and sets *changed.
void launch_zone_round(const TwoWaySetup& d, const PairList& p, const double* pair_lb, const int* zone,
                       const double* delta_x, const double* len, unsigned long long* snapshot,
                       unsigned long long* zone_alpha, const char* across, bool last, int* changed, cudaStream_t st);
/// alpha[j] = zone_alpha[zone[j]].
void launch_zone_alpha(int n, const int* zone, const unsigned long long* zone_alpha, unsigned long long* alpha,
                       cudaStream_t st);
/// x += α Δ, r *= 1 − α on surface nodes; ‖r‖∞ into *max_r_bits.
void launch_apply(const TwoWaySetup& d, double* x, const double* delta_x, const double* len,
                  const unsigned long long* alpha, double* r, unsigned long long* max_r_bits, cudaStream_t st);
/// max over surface points |s − s_prev| into *bits.
void launch_max_move(const TwoWaySetup& d, const double* s, const double* s_prev, unsigned long long* bits,
                     cudaStream_t st);
/// max_i |x_i − y_i| over nodes, and max over length edges of |x_i − x_j| / |y_i − y_j|.
void launch_result_figures(int n, const double* x, const double* y, const int* length_edges, int nl,
                           unsigned long long* max_displacement_bits, unsigned long long* max_stretch_bits,
                           cudaStream_t st);
/// r = 1 on surface nodes, 0 elsewhere.
void launch_init_r(const TwoWaySetup& d, double* r, cudaStream_t st);

}  // namespace xpd::gpu::detail
