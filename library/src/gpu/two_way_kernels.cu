// Kernels of the device two-way projection (two_way_kernels.cuh, gpu/two_way.hpp). The geometry
// follows collision/distance.cpp, mesh/tet_locator.cpp (closest point on a triangle) and
// collision/two_way.cpp formula by formula, in FP64 without contraction into FMAs (-fmad=false);
// sums and products may be taken in another order than Eigen's (a dot product left to right, a
// reciprocal multiplied), so a value differs from the CPU's by rounding only.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "two_way_kernels.cuh"

namespace xpd::gpu::detail {

namespace {

constexpr int kThreads = 256;
int blocks(long long n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

struct V3 {
  double x, y, z;
};
__device__ inline V3 operator+(V3 a, V3 b) { return {a.x + b.x, a.y + b.y, a.z + b.z}; }
__device__ inline V3 operator-(V3 a, V3 b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }
__device__ inline V3 operator*(double s, V3 a) { return {s * a.x, s * a.y, s * a.z}; }
__device__ inline double dot(V3 a, V3 b) { return a.x * b.x + a.y * b.y + a.z * b.z; }
__device__ inline V3 cross(V3 a, V3 b) { return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x}; }
__device__ inline double norm2(V3 a) { return dot(a, a); }
__device__ inline double amax(V3 a) { return fmax(fabs(a.x), fmax(fabs(a.y), fabs(a.z))); }
__device__ inline V3 load(const double* p, int i) { return {p[3 * i], p[3 * i + 1], p[3 * i + 2]}; }
__device__ inline double clamp01(double v) { return fmin(fmax(v, 0.0), 1.0); }

// Non-negative doubles order like their bit patterns: atomicMin/atomicMax on the bits are exact.
__device__ inline void atomic_min_nonneg(unsigned long long* a, double v) {
  atomicMin(a, static_cast<unsigned long long>(__double_as_longlong(v > 0 ? v : 0.0)));
}
__device__ inline void atomic_max_nonneg(unsigned long long* a, double v) {
  atomicMax(a, static_cast<unsigned long long>(__double_as_longlong(v > 0 ? v : 0.0)));
}
__device__ inline double from_bits(unsigned long long b) { return __longlong_as_double(static_cast<long long>(b)); }

// --- distances (collision/distance.cpp) ---------------------------------------------------------
__device__ inline double point_point(V3 p, V3 q) { return norm2(p - q); }
__device__ inline double point_line(V3 p, V3 a, V3 b) {
  const V3 c = cross(a - p, b - p), e = b - a;
  return dot(c, c) / dot(e, e);
}
__device__ inline double point_plane(V3 p, V3 a, V3 b, V3 c) {
  const V3 n = cross(b - a, c - a);
  const double e = dot(p - a, n);
  return e * e / dot(n, n);
}
__device__ inline double line_line(V3 a0, V3 a1, V3 b0, V3 b1) {
  const V3 n = cross(a1 - a0, b1 - b0);
  const double e = dot(b0 - a0, n);
  return e * e / dot(n, n);
}
// Parameter of the closest point of segment (a, b) to p, and the squared distance.
__device__ inline double point_segment(V3 p, V3 a, V3 b, double* dist2) {
  const V3 e = b - a;
  const double len2 = dot(e, e);
  const double s = len2 > 0 ? clamp01(dot(p - a, e) / len2) : 0.0;
  *dist2 = norm2(a + s * e - p);
  return s;
}

// Point–triangle: true for the face interior (P_T); the squared distance by the closest feature.
__device__ double point_triangle_sq(V3 p, V3 t0, V3 t1, V3 t2, bool* face) {
  const V3 e0 = t1 - t0, e1 = t2 - t0, q = p - t0;
  const double a = dot(e0, e0), b = dot(e0, e1), c = dot(e1, e1), d = dot(e0, q), e = dot(e1, q);
  const double det = a * c - b * b;
  *face = false;
  if (det > 0) {
    const double u = (c * d - b * e) / det, v = (a * e - b * d) / det;
    if (u >= 0 && v >= 0 && u + v <= 1) {
      *face = true;
      return point_plane(p, t0, t1, t2);
    }
  }
  const V3 t[3] = {t0, t1, t2};
  int best = 0, kind = 0;       // kind: 0 start vertex, 1 end vertex, 2 edge interior
  double best_d = DBL_MAX * 2;  // +∞
  for (int k = 0; k < 3; ++k) {
    double dist = 0;
    const double s = point_segment(p, t[k], t[(k + 1) % 3], &dist);
    if (dist < best_d) {
      best_d = dist;
      best = k;
      kind = s <= 0 ? 0 : s >= 1 ? 1 : 2;
    }
  }
  if (kind == 0) return point_point(p, t[best]);
  if (kind == 1) return point_point(p, t[(best + 1) % 3]);
  return point_line(p, t[best], t[(best + 1) % 3]);
}

// Edge–edge: true for interior closest points of non-parallel edges (A_B).
__device__ double edge_edge_sq(V3 a0, V3 a1, V3 b0, V3 b1, bool* interior) {
  const V3 da = a1 - a0, db = b1 - b0, r = a0 - b0;
  const double A = dot(da, da), B = dot(da, db), C = dot(db, db), D = dot(da, r), E = dot(db, r);
  const V3 n = cross(da, db);
  const double n2 = dot(n, n);
  *interior = false;
  if (n2 > 1e-20 * A * C) {
    const double det = A * C - B * B;
    const double s = (B * E - C * D) / det, t = (A * E - B * D) / det;
    if (s > 0 && s < 1 && t > 0 && t < 1) {
      *interior = true;
      return line_line(a0, a1, b0, b1);
    }
  }
  double ds[4];
  const double s0 = point_segment(a0, b0, b1, &ds[0]);
  const double s1 = point_segment(a1, b0, b1, &ds[1]);
  const double s2 = point_segment(b0, a0, a1, &ds[2]);
  const double s3 = point_segment(b1, a0, a1, &ds[3]);
  int m = 0;
  for (int k = 1; k < 4; ++k)
    if (ds[k] < ds[m]) m = k;
  // The end's point against the other segment: a vertex (point–point) or its interior (point–line).
  const double s = m == 0 ? s0 : m == 1 ? s1 : m == 2 ? s2 : s3;
  const V3 p = m == 0 ? a0 : m == 1 ? a1 : m == 2 ? b0 : b1;
  const V3 u = m < 2 ? b0 : a0, w = m < 2 ? b1 : a1;
  if (s <= 0) return point_point(p, u);
  if (s >= 1) return point_point(p, w);
  return point_line(p, u, w);
}

// Closest-point weights on triangle (a, b, c) (Ericson 2005, §5.1.5; mesh/tet_locator.cpp).
__device__ V3 closest_weights_on_triangle(V3 p, V3 a, V3 b, V3 c) {
  const V3 ab = b - a, ac = c - a, ap = p - a;
  const double d1 = dot(ab, ap), d2 = dot(ac, ap);
  if (d1 <= 0 && d2 <= 0) return {1, 0, 0};
  const V3 bp = p - b;
  const double d3 = dot(ab, bp), d4 = dot(ac, bp);
  if (d3 >= 0 && d4 <= d3) return {0, 1, 0};
  const double vc = d1 * d4 - d3 * d2;
  if (vc <= 0 && d1 >= 0 && d3 <= 0) {
    const double s = d1 / (d1 - d3);
    return {1 - s, s, 0};
  }
  const V3 cp = p - c;
  const double d5 = dot(ab, cp), d6 = dot(ac, cp);
  if (d6 >= 0 && d5 <= d6) return {0, 0, 1};
  const double vb = d5 * d2 - d1 * d6;
  if (vb <= 0 && d2 >= 0 && d6 <= 0) {
    const double s = d2 / (d2 - d6);
    return {1 - s, 0, s};
  }
  const double va = d3 * d6 - d5 * d4;
  if (va <= 0 && (d4 - d3) >= 0 && (d5 - d6) >= 0) {
    const double s = (d4 - d3) / ((d4 - d3) + (d5 - d6));
    return {0, 1 - s, s};
  }
  const double denom = 1.0 / (va + vb + vc);
  const double s = vb * denom, t = vc * denom;
  return {1 - s - t, s, t};
}

// Closest points of two segments as parameters (Ericson 2004, §5.1.9; collision/two_way.cpp).
__device__ void closest_on_segments(V3 p0, V3 p1, V3 q0, V3 q1, double* s_out, double* t_out) {
  const V3 d1 = p1 - p0, d2 = q1 - q0, r = p0 - q0;
  const double a = dot(d1, d1), e = dot(d2, d2), f = dot(d2, r);
  const double tiny = 1e-300;
  *s_out = 0, *t_out = 0;
  if (a <= tiny && e <= tiny) return;
  if (a <= tiny) {
    *t_out = clamp01(f / e);
    return;
  }
  const double c = dot(d1, r);
  if (e <= tiny) {
    *s_out = clamp01(-c / a);
    return;
  }
  const double b = dot(d1, d2), denom = a * e - b * b;
  double s = denom > 0 ? clamp01((b * f - c * e) / denom) : 0;
  double t = (b * s + f) / e;
  if (t < 0) {
    t = 0;
    s = clamp01(-c / a);
  } else if (t > 1) {
    t = 1;
    s = clamp01((b - c) / a);
  }
  *s_out = s, *t_out = t;
}

// Closest points of a pair as weights w on its four points (side A: the first na).
__device__ void closest_points(bool ee, const V3* p, double* w, V3* pa, V3* pb) {
  if (ee) {
    double s = 0, t = 0;
    closest_on_segments(p[0], p[1], p[2], p[3], &s, &t);
    w[0] = 1 - s, w[1] = s, w[2] = 1 - t, w[3] = t;
  } else {
    const V3 b = closest_weights_on_triangle(p[0], p[1], p[2], p[3]);
    w[0] = 1, w[1] = b.x, w[2] = b.y, w[3] = b.z;
  }
  const int na = ee ? 2 : 1;
  *pa = {0, 0, 0}, *pb = {0, 0, 0};
  for (int k = 0; k < 4; ++k) {
    if (k < na)
      *pa = *pa + w[k] * p[k];
    else
      *pb = *pb + w[k] * p[k];
  }
}

// Lower bound of a distance from its computed square (collision/two_way.cpp).
__device__ inline double distance_lower_bound(double squared, const V3* p) {
  double m = 0;
  for (int k = 0; k < 4; ++k) m = fmax(m, amax(p[k]));
  const double allowance = 64 * DBL_EPSILON * m * m;
  return sqrt(fmax(0.0, squared - allowance));
}

// The contact points of pair q (vertex–triangle pairs first): true for edge–edge.
__device__ inline bool pair_points(const TwoWaySetup& d, const PairList& p, int q, int* v) {
  const bool ee = q >= p.nvt;
  const long long key = ee ? p.ee[q - p.nvt] : p.vt[q];
  const int a = static_cast<int>(key >> 32), b = static_cast<int>(key & 0xffffffffLL);
  if (ee) {
    v[0] = d.edges[2 * a], v[1] = d.edges[2 * a + 1], v[2] = d.edges[2 * b], v[3] = d.edges[2 * b + 1];
  } else {
    v[0] = a, v[1] = d.faces[3 * b], v[2] = d.faces[3 * b + 1], v[3] = d.faces[3 * b + 2];
  }
  return ee;
}

__device__ inline double pair_squared(bool ee, const V3* p) {
  bool interior = false;
  return ee ? edge_edge_sq(p[0], p[1], p[2], p[3], &interior) : point_triangle_sq(p[0], p[1], p[2], p[3], &interior);
}

// --- grid -------------------------------------------------------------------------------------
constexpr long long kCellRange = 1LL << 20;  // coordinates clamped to ±(2^20 − 1): 21 bits each

__device__ inline long long cell_of(double v, double cell) {
  double c = floor(v / cell);
  c = fmin(fmax(c, static_cast<double>(-kCellRange + 1)), static_cast<double>(kCellRange - 1));
  return static_cast<long long>(c);
}
__device__ inline unsigned long long cell_code(long long i, long long j, long long k) {
  return (static_cast<unsigned long long>(i + kCellRange) << 42) |
         (static_cast<unsigned long long>(j + kCellRange) << 21) | static_cast<unsigned long long>(k + kCellRange);
}

struct Box {
  V3 lo, hi;
};
__device__ inline Box row_box(const double* s, const int* rows, int r, int K, double grow) {
  V3 lo = load(s, rows[K * r]), hi = lo;
  for (int k = 1; k < K; ++k) {
    const V3 p = load(s, rows[K * r + k]);
    lo = {fmin(lo.x, p.x), fmin(lo.y, p.y), fmin(lo.z, p.z)};
    hi = {fmax(hi.x, p.x), fmax(hi.y, p.y), fmax(hi.z, p.z)};
  }
  lo = {lo.x - grow, lo.y - grow, lo.z - grow};
  hi = {hi.x + grow, hi.y + grow, hi.z + grow};
  return {lo, hi};
}
__device__ inline bool contains(const Box& b, V3 p) {
  return p.x >= b.lo.x && p.y >= b.lo.y && p.z >= b.lo.z && p.x <= b.hi.x && p.y <= b.hi.y && p.z <= b.hi.z;
}
__device__ inline bool overlap(const Box& a, const Box& b) {
  return a.lo.x <= b.hi.x && a.lo.y <= b.hi.y && a.lo.z <= b.hi.z && b.lo.x <= a.hi.x && b.lo.y <= a.hi.y &&
         b.lo.z <= a.hi.z;
}

// First entry with code ≥ c (codes sorted ascending).
__device__ inline long long lower_bound(const unsigned long long* codes, long long n, unsigned long long c) {
  long long lo = 0, hi = n;
  while (lo < hi) {
    const long long mid = (lo + hi) / 2;
    if (codes[mid] < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// A primitive whose grown box covers more cells than this is not registered in the grid but kept
// in a list that every query scans (the obstacle plates of a funnel against a fine body).
constexpr long long kLargeCells = 4096;

__device__ inline long long box_cells(const Box& b, double cell) {
  return (cell_of(b.hi.x, cell) - cell_of(b.lo.x, cell) + 1) * (cell_of(b.hi.y, cell) - cell_of(b.lo.y, cell) + 1) *
         (cell_of(b.hi.z, cell) - cell_of(b.lo.z, cell) + 1);
}

__global__ void k_cell_counts(const double* s, const int* rows, int count, int K, double grow, double cell,
                              long long* counts, int* large, int* n_large) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= count) return;
  long long c = box_cells(row_box(s, rows, r, K, grow), cell);
  if (c > kLargeCells) {
    large[atomicAdd(n_large, 1)] = r;
    c = 0;
  }
  counts[r] = c;
}

__global__ void k_cell_fill(const double* s, const int* rows, int count, int K, double grow, double cell,
                            const long long* offsets, unsigned long long* codes, int* items) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= count) return;
  const Box b = row_box(s, rows, r, K, grow);
  if (box_cells(b, cell) > kLargeCells) return;
  const long long i0 = cell_of(b.lo.x, cell), i1 = cell_of(b.hi.x, cell);
  const long long j0 = cell_of(b.lo.y, cell), j1 = cell_of(b.hi.y, cell);
  const long long k0 = cell_of(b.lo.z, cell), k1 = cell_of(b.hi.z, cell);
  long long o = offsets[r];
  for (long long i = i0; i <= i1; ++i)
    for (long long j = j0; j <= j1; ++j)
      for (long long k = k0; k <= k1; ++k) {
        codes[o] = cell_code(i, j, k);
        items[o] = r;
        ++o;
      }
}

__device__ inline void record(long long key, double dist, long long* keys, double* out, int capacity, int* found) {
  const int slot = atomicAdd(found, 1);
  if (slot < capacity) {
    keys[slot] = key;
    out[slot] = dist;
  }
}

// Vertex v (at p) against face f: the CPU's filters (not a corner, inside the grown box, the plane
// distance as a lower bound), then the distance.
__device__ inline void test_vt(const TwoWaySetup& d, const double* s, double D, int v, V3 p, int f, long long* keys,
                               double* dist, int capacity, int* found) {
  const int f0 = d.faces[3 * f], f1 = d.faces[3 * f + 1], f2 = d.faces[3 * f + 2];
  if (f0 == v || f1 == v || f2 == v) return;
  if (!contains(row_box(s, d.faces, f, 3, D), p)) return;
  const V3 a = load(s, f0), b = load(s, f1), c = load(s, f2);
  const V3 n = cross(b - a, c - a);
  const double nn = sqrt(dot(n, n));
  if (nn > 0 && fabs(dot(p - a, n)) / nn > D * (1 + 1e-9)) return;
  bool face = false;
  const double dd = sqrt(point_triangle_sq(p, a, b, c, &face));
  if (dd < D) record((static_cast<long long>(v) << 32) | f, dd, keys, dist, capacity, found);
}

__global__ void k_query_vt(TwoWaySetup d, const double* s, double D, double cell, const unsigned long long* codes,
                           const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                           double* dist, int capacity, int* found) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= d.nsp) return;
  const int v = d.surface_points[q];
  const V3 p = load(s, v);
  const unsigned long long c = cell_code(cell_of(p.x, cell), cell_of(p.y, cell), cell_of(p.z, cell));
  for (long long e = lower_bound(codes, n_entries, c); e < n_entries && codes[e] == c; ++e)
    test_vt(d, s, D, v, p, items[e], keys, dist, capacity, found);
  for (int l = 0; l < n_large; ++l) test_vt(d, s, D, v, p, large[l], keys, dist, capacity, found);
}

// Edges a and b (a ≠ b, either order): no shared vertex, boxes in reach, the line distance as a lower
// bound (skipped when nearly parallel), then the distance; recorded as (min, max).
__device__ inline void test_ee(const TwoWaySetup& d, const double* s, double D, int a, int b, long long* keys,
                               double* dist, int capacity, int* found) {
  const int a0 = d.edges[2 * a], a1 = d.edges[2 * a + 1], b0 = d.edges[2 * b], b1 = d.edges[2 * b + 1];
  if (a0 == b0 || a0 == b1 || a1 == b0 || a1 == b1) return;
  if (!overlap(row_box(s, d.edges, b, 2, D), row_box(s, d.edges, a, 2, 0.0))) return;
  const V3 pa0 = load(s, a0), pa1 = load(s, a1), pb0 = load(s, b0), pb1 = load(s, b1);
  const V3 ua = pa1 - pa0, ub = pb1 - pb0, n = cross(ua, ub);
  const double nn = dot(n, n);
  if (nn > 1e-6 * dot(ua, ua) * dot(ub, ub) && fabs(dot(pb0 - pa0, n)) / sqrt(nn) > D * (1 + 1e-9)) return;
  bool interior = false;
  const double dd = sqrt(edge_edge_sq(pa0, pa1, pb0, pb1, &interior));
  if (dd < D) record((static_cast<long long>(min(a, b)) << 32) | max(a, b), dd, keys, dist, capacity, found);
}

// Each pair is found once: two registered edges by the smaller one in the lowest cell both ranges
// share; a registered and a large edge by the registered one (scanning the large list); two large
// edges by the smaller one.
__global__ void k_query_ee(TwoWaySetup d, const double* s, double D, double cell, const unsigned long long* codes,
                           const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                           double* dist, int capacity, int* found) {
  const int a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= d.ne) return;
  const bool a_large = box_cells(row_box(s, d.edges, a, 2, D), cell) > kLargeCells;
  for (int l = 0; l < n_large; ++l)
    if (!a_large || large[l] > a) test_ee(d, s, D, a, large[l], keys, dist, capacity, found);
  if (a_large) return;
  const Box own = row_box(s, d.edges, a, 2, 0.0);
  const long long i0 = cell_of(own.lo.x, cell), i1 = cell_of(own.hi.x, cell);
  const long long j0 = cell_of(own.lo.y, cell), j1 = cell_of(own.hi.y, cell);
  const long long k0 = cell_of(own.lo.z, cell), k1 = cell_of(own.hi.z, cell);
  for (long long i = i0; i <= i1; ++i)
    for (long long j = j0; j <= j1; ++j)
      for (long long k = k0; k <= k1; ++k) {
        const unsigned long long c = cell_code(i, j, k);
        for (long long e = lower_bound(codes, n_entries, c); e < n_entries && codes[e] == c; ++e) {
          const int b = items[e];
          if (b <= a) continue;
          // Seen from several cells: kept in the lowest cell both ranges share.
          const Box grown = row_box(s, d.edges, b, 2, D);
          if (max(i0, cell_of(grown.lo.x, cell)) != i || max(j0, cell_of(grown.lo.y, cell)) != j ||
              max(k0, cell_of(grown.lo.z, cell)) != k)
            continue;
          test_ee(d, s, D, a, b, keys, dist, capacity, found);
        }
      }
}

// --- projection kernels -----------------------------------------------------------------------
__global__ void k_contact_points(TwoWaySetup d, const double* x, double* s) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.np) return;
  double sx = 0, sy = 0, sz = 0;
  for (int k = 0; k < 4; ++k) {
    const int v = d.emb_nodes[4 * i + k];
    if (v < 0) continue;
    const double w = d.emb_w[4 * i + k];
    sx += w * x[3 * v], sy += w * x[3 * v + 1], sz += w * x[3 * v + 2];
  }
  s[3 * i] = sx, s[3 * i + 1] = sy, s[3 * i + 2] = sz;
}

__global__ void k_pair_distances(TwoWaySetup d, PairList pl, const double* s, double* pair_d, double* pair_lb) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int v[4];
  const bool ee = pair_points(d, pl, q, v);
  V3 p[4];
  for (int k = 0; k < 4; ++k) p[k] = load(s, v[k]);
  const double d2 = pair_squared(ee, p);
  pair_d[q] = sqrt(d2);
  pair_lb[q] = distance_lower_bound(d2, p);
}

__global__ void k_min_pair_distance(TwoWaySetup d, PairList pl, const double* s, unsigned long long* bits) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int v[4];
  const bool ee = pair_points(d, pl, q, v);
  V3 p[4];
  for (int k = 0; k < 4; ++k) p[k] = load(s, v[k]);
  atomic_min_nonneg(bits, sqrt(pair_squared(ee, p)));
}

// Adds g to slot c's entry of node v (merging repeated nodes).
__device__ inline void add_entry(ConstraintSlots& c, int slot, int& used, int v, V3 g, V3 b) {
  const int K = c.K;
  for (int e = 0; e < used; ++e)
    if (c.node[static_cast<long long>(slot) * K + e] == v) {
      double* J = c.J + 3 * (static_cast<long long>(slot) * K + e);
      J[0] += g.x, J[1] += g.y, J[2] += g.z;
      return;
    }
  if (used >= K) return;  // cannot happen: 4 points × 4 nodes = 16 = K
  const long long e = static_cast<long long>(slot) * K + used++;
  c.node[e] = v;
  c.J[3 * e] = g.x, c.J[3 * e + 1] = g.y, c.J[3 * e + 2] = g.z;
  c.base[3 * e] = b.x, c.base[3 * e + 1] = b.y, c.base[3 * e + 2] = b.z;
}

__device__ inline void close_slot(ConstraintSlots& c, int slot, int used, double c0, bool active) {
  for (int e = used; e < c.K; ++e) c.node[static_cast<long long>(slot) * c.K + e] = -1;
  c.c0[slot] = c0;
  c.colour[slot] = active ? -1 : -2;
}

__global__ void k_build_contacts(TwoWaySetup d, PairList pl, const double* s, const double* x, const double* pair_d,
                                 ConstraintSlots c, int* active) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int used = 0;
  const double dist = pair_d[q];
  if (!(dist < d.delta)) {
    close_slot(c, q, 0, 0, false);
    return;
  }
  int v[4];
  const bool ee = pair_points(d, pl, q, v);
  V3 p[4];
  for (int k = 0; k < 4; ++k) p[k] = load(s, v[k]);
  double delta = d.delta;
  if (d.rest_fraction > 0 && d.component[v[0]] == d.component[v[3]]) {
    V3 rp[4];
    for (int k = 0; k < 4; ++k) rp[k] = load(d.rest_points, v[k]);
    const double rest = sqrt(pair_squared(ee, rp));
    if (rest < d.delta) delta = d.rest_fraction * rest;
    if (!(dist < delta)) {
      close_slot(c, q, 0, 0, false);
      return;
    }
  }
  V3 J[4];
  double c0 = 0;
  bool volume = false;
  if (d.volume_constraint && dist > 0) {
    V3 g[4];
    double base_area = 0, lmax2 = 0;
    bool inner = false;
    if (!ee) {
      (void)point_triangle_sq(p[0], p[1], p[2], p[3], &inner);
      if (inner) {
        const V3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
        g[1] = cross(w1, w2), g[2] = cross(w2, u), g[3] = cross(u, w1);
        const V3 n = cross(p[2] - p[1], p[3] - p[1]);
        base_area = sqrt(dot(n, n));
        lmax2 = fmax(norm2(p[2] - p[1]), fmax(norm2(p[3] - p[1]), norm2(p[3] - p[2])));
        volume = base_area > 1e-6 * lmax2;
      }
    } else {
      (void)edge_edge_sq(p[0], p[1], p[2], p[3], &inner);
      if (inner) {
        const V3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
        g[1] = cross(w1, w2), g[2] = cross(w2, u), g[3] = cross(u, w1);
        const V3 n = cross(u, p[3] - p[2]);
        base_area = sqrt(dot(n, n));
        lmax2 = sqrt(norm2(u)) * sqrt(norm2(p[3] - p[2]));
        volume = base_area > 1e-3 * lmax2;
      }
    }
    if (volume) {
      g[0] = -1.0 * (g[1] + g[2] + g[3]);
      const double V = dot(p[1] - p[0], g[1]);
      const double sgn = V >= 0 ? 1.0 : -1.0;
      const double Vr = fabs(V) + base_area * (delta - dist);
      volume = fabs(V) > 0 && Vr > 0;
      if (volume) {
        for (int k = 0; k < 4; ++k) J[k] = (sgn / Vr) * g[k];
        c0 = fabs(V) / Vr - 1;
      }
    }
  }
  if (!volume) {
    double w[4];
    V3 pa, pb;
    closest_points(ee, p, w, &pa, &pb);
    const V3 dv = pa - pb;
    const double dn = sqrt(dot(dv, dv));
    if (!(dn > 0)) {
      close_slot(c, q, 0, 0, false);
      return;
    }
    const V3 n = (1.0 / dn) * dv;
    const int na = ee ? 2 : 1;
    for (int k = 0; k < 4; ++k) J[k] = ((k < na ? 1.0 : -1.0) * w[k] / delta) * n;
    c0 = dn / delta - 1;
  }
  bool any_movable = false;
  for (int k = 0; k < 4; ++k)
    for (int kk = 0; kk < 4; ++kk) {
      const int node = d.emb_nodes[4 * v[k] + kk];
      const double wt = d.emb_w[4 * v[k] + kk];
      if (node < 0 || wt == 0) continue;
      add_entry(c, q, used, node, wt * J[k], load(x, node));
      any_movable = any_movable || d.inverse_mass[node] > 0;
    }
  close_slot(c, q, used, c0, any_movable);
  if (any_movable) atomicAdd(active, 1);
}

__global__ void k_build_lengths(const double* im, const int* edges, const double* y, double sigma, ConstraintSlots c) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= c.m) return;
  const int i = edges[2 * e], j = edges[2 * e + 1];
  const V3 yi = load(y, i), yj = load(y, j), dv = yi - yj;
  const double L = sqrt(dot(dv, dv));
  int used = 0;
  if ((im[i] == 0 && im[j] == 0) || !(L > 0)) {
    close_slot(c, e, 0, 0, false);
    return;
  }
  const double inv = 1.0 / (L * L);
  add_entry(c, e, used, i, -inv * dv, yi);
  add_entry(c, e, used, j, inv * dv, yj);
  close_slot(c, e, used, sigma - 1, true);
}

__global__ void k_build_floors(const double* im, const int* tets, const double* rest_volume, const double* y,
                               double min_volume, ConstraintSlots c) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= c.m) return;
  V3 p[4];
  bool any_movable = false;
  for (int k = 0; k < 4; ++k) {
    p[k] = load(y, tets[4 * t + k]);
    any_movable = any_movable || im[tets[4 * t + k]] > 0;
  }
  const double V0 = rest_volume[t];
  const V3 u = p[1] - p[0], w1 = p[2] - p[0], w2 = p[3] - p[0];
  const double V = dot(u, cross(w1, w2)) / 6;
  int used = 0;
  if (!any_movable || V >= 2 * min_volume * V0) {
    close_slot(c, t, 0, 0, false);
    return;
  }
  const double sc = 1.0 / (6 * V0);
  const V3 g1 = sc * cross(w1, w2), g2 = sc * cross(w2, u), g3 = sc * cross(u, w1);
  add_entry(c, t, used, tets[4 * t], -1.0 * (g1 + g2 + g3), p[0]);
  add_entry(c, t, used, tets[4 * t + 1], g1, p[1]);
  add_entry(c, t, used, tets[4 * t + 2], g2, p[2]);
  add_entry(c, t, used, tets[4 * t + 3], g3, p[3]);
  close_slot(c, t, used, V / V0 - min_volume, true);
}

// splitmix64: the constraints' priorities (seeded, per step).
__device__ inline std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
__device__ inline unsigned long long priority(std::uint64_t salt, int slot) {
  return ((mix(salt ^ static_cast<std::uint64_t>(slot)) >> 32) << 32) | static_cast<unsigned long long>(slot + 1);
}

__global__ void k_colour_propose(ConstraintSlots c, const double* im, std::uint64_t salt, unsigned long long* best) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= c.m || c.colour[q] != -1) return;
  const unsigned long long key = priority(salt, q);
  for (int e = 0; e < c.K; ++e) {
    const int v = c.node[static_cast<long long>(q) * c.K + e];
    if (v >= 0 && im[v] > 0) atomicMax(&best[v], key);
  }
}
__global__ void k_colour_select(ConstraintSlots c, const double* im, std::uint64_t salt, int round,
                                const unsigned long long* best, int* remaining) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= c.m || c.colour[q] != -1) return;
  const unsigned long long key = priority(salt, q);
  bool wins = true;
  for (int e = 0; e < c.K; ++e) {
    const int v = c.node[static_cast<long long>(q) * c.K + e];
    if (v >= 0 && im[v] > 0 && best[v] != key) wins = false;
  }
  if (wins)
    c.colour[q] = round;
  else
    atomicAdd(remaining, 1);
}
__global__ void k_colour_reset(ConstraintSlots c, int round, unsigned long long* best) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= c.m || (c.colour[q] != -1 && c.colour[q] != round)) return;
  for (int e = 0; e < c.K; ++e) {
    const int v = c.node[static_cast<long long>(q) * c.K + e];
    if (v >= 0) best[v] = 0;
  }
}

__global__ void k_relax(ConstraintSlots c, int colour, const double* im, double* y) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= c.m || c.colour[q] != colour) return;
  double g = c.c0[q], w = 0;
  for (int e = 0; e < c.K; ++e) {
    const int v = c.node[static_cast<long long>(q) * c.K + e];
    if (v < 0) continue;
    const double* J = c.J + 3 * (static_cast<long long>(q) * c.K + e);
    const double* b = c.base + 3 * (static_cast<long long>(q) * c.K + e);
    g += J[0] * (y[3 * v] - b[0]) + J[1] * (y[3 * v + 1] - b[1]) + J[2] * (y[3 * v + 2] - b[2]);
    w += im[v] * (J[0] * J[0] + J[1] * J[1] + J[2] * J[2]);
  }
  if (g >= 0 || !(w > 0)) return;
  const double dl = -g / w;
  for (int e = 0; e < c.K; ++e) {
    const int v = c.node[static_cast<long long>(q) * c.K + e];
    if (v < 0 || im[v] == 0) continue;
    const double* J = c.J + 3 * (static_cast<long long>(q) * c.K + e);
    const double f = im[v] * dl;
    y[3 * v] += f * J[0], y[3 * v + 1] += f * J[1], y[3 * v + 2] += f * J[2];
  }
}

__global__ void k_forward_points(TwoWaySetup d, double D, double* safe) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.np) return;
  safe[i] = d.on_surface[i] ? D : __longlong_as_double(0x7ff0000000000000LL);
}
__global__ void k_forward_nodes(int n, const double* x, const double* y, double* delta_x, double* len,
                                unsigned long long* alpha) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const V3 dv = load(y, j) - load(x, j);
  delta_x[3 * j] = dv.x, delta_x[3 * j + 1] = dv.y, delta_x[3 * j + 2] = dv.z;
  len[j] = sqrt(dot(dv, dv));
  alpha[j] = static_cast<unsigned long long>(__double_as_longlong(1.0));
}
__global__ void k_safe_from_pairs(TwoWaySetup d, PairList pl, const double* pair_lb, double* safe) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int v[4];
  (void)pair_points(d, pl, q, v);
  for (int k = 0; k < 4; ++k) atomic_min_nonneg(reinterpret_cast<unsigned long long*>(safe + v[k]), pair_lb[q]);
}
// α_j ≤ bound / (‖w‖₁ |Δ_j|) for every node j of contact point i.
__device__ inline void cap_point(const TwoWaySetup& d, int i, double bound, const double* len,
                                 unsigned long long* alpha) {
  for (int k = 0; k < 4; ++k) {
    const int j = d.emb_nodes[4 * i + k];
    if (j < 0 || d.emb_w[4 * i + k] == 0) continue;
    if (len[j] > 0) atomic_min_nonneg(&alpha[j], bound / (d.l1[i] * len[j]));
  }
}
__global__ void k_point_caps(TwoWaySetup d, double D, const double* safe, const double* len,
                             unsigned long long* alpha) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.np || !d.on_surface[i]) return;
  cap_point(d, i, 0.5 * d.gamma * (d.forward == 2 ? safe[i] : D), len, alpha);
}
__global__ void k_plane_bounds(TwoWaySetup d, PairList pl, const double* s, const double* pair_lb,
                               const double* delta_x, const double* len, unsigned long long* alpha) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int v[4];
  const bool ee = pair_points(d, pl, q, v);
  const int na = ee ? 2 : 1;
  V3 p[4];
  double m = 0;
  for (int k = 0; k < 4; ++k) {
    p[k] = load(s, v[k]);
    m = fmax(m, amax(p[k]));
  }
  double w[4];
  V3 pa, pb;
  closest_points(ee, p, w, &pa, &pb);
  const V3 diff = pa - pb;
  const double dn = sqrt(dot(diff, diff));
  double gap = -1;
  V3 n = {0, 0, 0};
  if (dn > 0) {
    n = (1.0 / dn) * diff;
    double smin = __longlong_as_double(0x7ff0000000000000LL), smax = -smin;
    for (int k = 0; k < na; ++k) smin = fmin(smin, dot(n, p[k]));
    for (int k = na; k < 4; ++k) smax = fmax(smax, dot(n, p[k]));
    gap = smin - smax - 16 * DBL_EPSILON * m;
  }
  for (int k = 0; k < 4; ++k) {
    if (!(gap > 0)) {
      cap_point(d, v[k], 0.5 * d.gamma * pair_lb[q], len, alpha);
      continue;
    }
    const double side = k < na ? -1.0 : 1.0;
    for (int kk = 0; kk < 4; ++kk) {
      const int j = d.emb_nodes[4 * v[k] + kk];
      const double wt = d.emb_w[4 * v[k] + kk];
      if (j < 0 || wt == 0) continue;
      const double toward = side * (wt > 0 ? 1.0 : -1.0) * dot(n, load(delta_x, j));
      if (toward > 0) atomic_min_nonneg(&alpha[j], 0.5 * d.gamma * gap / (d.l1[v[k]] * toward));
    }
  }
}
// The nodes of pair q, side A first (count, count of side A) and the largest ‖w‖₁ of each side.
__device__ inline int pair_nodes(const TwoWaySetup& d, const PairList& pl, int q, int* nodes, int* na_nodes,
                                 double* l1a, double* l1b) {
  int v[4];
  const bool ee = pair_points(d, pl, q, v);
  const int na = ee ? 2 : 1;
  int count = 0;
  *l1a = 0, *l1b = 0, *na_nodes = 0;
  for (int k = 0; k < 4; ++k) {
    if (k == na) *na_nodes = count;
    for (int kk = 0; kk < 4; ++kk) {
      const int j = d.emb_nodes[4 * v[k] + kk];
      if (j < 0 || d.emb_w[4 * v[k] + kk] == 0) continue;
      nodes[count++] = j;
      if (k < na)
        *l1a = fmax(*l1a, d.l1[v[k]]);
      else
        *l1b = fmax(*l1b, d.l1[v[k]]);
    }
  }
  return count;
}
// Reads through volatile: other threads lower parent[] with atomicMin meanwhile (the values only
// decrease, parent[x] ≤ x, so the walk ends).
__device__ inline int root_of(const int* parent, int a) {
  const volatile int* p = parent;
  for (int up = p[a]; up != a; up = p[a]) a = up;
  return a;
}
__global__ void k_zone_init(int n, int* parent, unsigned long long* zone_alpha) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  parent[j] = j;
  zone_alpha[j] = static_cast<unsigned long long>(__double_as_longlong(1.0));
}
__global__ void k_zone_hook(TwoWaySetup d, PairList pl, const double* pair_d, int* parent, int* changed) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee || !(pair_d[q] < d.delta)) return;
  int nodes[16], na_nodes = 0;
  double l1a = 0, l1b = 0;
  const int count = pair_nodes(d, pl, q, nodes, &na_nodes, &l1a, &l1b);
  for (int k = 1; k < count; ++k) {
    const int a = root_of(parent, nodes[0]), b = root_of(parent, nodes[k]);
    if (a == b) continue;
    // Parents only decrease: the hooks of one pass form no cycle.
    atomicMin(&parent[max(a, b)], min(a, b));
    *changed = 1;
  }
}
__global__ void k_zone_compress(int n, int* parent) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  parent[j] = root_of(parent, j);
}
__global__ void k_zone_caps(TwoWaySetup d, double D, const int* zone, const double* len,
                            unsigned long long* zone_alpha) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.np || !d.on_surface[i]) return;
  for (int k = 0; k < 4; ++k) {
    const int j = d.emb_nodes[4 * i + k];
    if (j < 0 || d.emb_w[4 * i + k] == 0 || !(len[j] > 0)) continue;
    atomic_min_nonneg(&zone_alpha[zone[j]], 0.5 * d.gamma * D / (d.l1[i] * len[j]));
  }
}
__global__ void k_zone_pairs(TwoWaySetup d, PairList pl, const double* pair_lb, const int* zone, const double* delta_x,
                             const double* len, unsigned long long* zone_alpha, char* across) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee) return;
  int nodes[16], na_nodes = 0;
  double l1a = 0, l1b = 0;
  const int count = pair_nodes(d, pl, q, nodes, &na_nodes, &l1a, &l1b);
  bool one_zone = true;
  for (int k = 1; k < count; ++k) one_zone = one_zone && zone[nodes[k]] == zone[nodes[0]];
  across[q] = one_zone ? 0 : 1;
  if (!one_zone) return;
  // A pair within one zone moves relatively by α rel0 whatever else happens.
  const double limit = d.gamma * pair_lb[q] / (l1a * l1b);
  double rel0 = 0;
  for (int i = 0; i < na_nodes; ++i)
    for (int k = na_nodes; k < count; ++k) {
      const V3 r = load(delta_x, nodes[i]) - load(delta_x, nodes[k]);
      rel0 = fmax(rel0, sqrt(dot(r, r)));
    }
  // Unconditional (a min commutes): the CPU lowers only when α rel0 > limit; this lowers also in
  // the band between (1 − 1e−12) limit and limit, so that no outcome depends on the threads' order.
  if (rel0 > 0) atomic_min_nonneg(&zone_alpha[zone[nodes[0]]], (1 - 1e-12) * limit / rel0);
}
// Checks read the zones' α of the round's start (`snapshot`), lowering goes to zone_alpha: the
// decisions do not depend on the threads' order.
__global__ void k_zone_round(TwoWaySetup d, PairList pl, const double* pair_lb, const int* zone, const double* delta_x,
                             const double* len, const unsigned long long* snapshot, unsigned long long* zone_alpha,
                             const char* across, bool last, int* changed) {
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= pl.nvt + pl.nee || !across[q]) return;
  int nodes[16], na_nodes = 0;
  double l1a = 0, l1b = 0;
  const int count = pair_nodes(d, pl, q, nodes, &na_nodes, &l1a, &l1b);
  const double limit = d.gamma * pair_lb[q] / (l1a * l1b);
  if (!last) {
    double rel = 0;
    for (int i = 0; i < na_nodes; ++i)
      for (int k = na_nodes; k < count; ++k) {
        const V3 r = from_bits(snapshot[zone[nodes[i]]]) * load(delta_x, nodes[i]) -
                     from_bits(snapshot[zone[nodes[k]]]) * load(delta_x, nodes[k]);
        rel = fmax(rel, sqrt(dot(r, r)));
      }
    if (rel <= limit) return;
    *changed = 1;
  }
  // The per-node bound: satisfies the pair whatever the other zones do.
  for (int k = 0; k < count; ++k)
    if (len[nodes[k]] > 0) atomic_min_nonneg(&zone_alpha[zone[nodes[k]]], 0.5 * limit / len[nodes[k]]);
}
__global__ void k_zone_alpha(int n, const int* zone, const unsigned long long* zone_alpha, unsigned long long* alpha) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  alpha[j] = zone_alpha[zone[j]];
}

__global__ void k_apply(TwoWaySetup d, double* x, const double* delta_x, const double* len,
                        const unsigned long long* alpha, double* r, unsigned long long* max_r) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d.n) return;
  const bool surface = d.node_on_surface[j];
  const double a = surface ? from_bits(alpha[j]) : 1.0;
  if (len[j] > 0) {
    x[3 * j] += a * delta_x[3 * j];
    x[3 * j + 1] += a * delta_x[3 * j + 1];
    x[3 * j + 2] += a * delta_x[3 * j + 2];
  }
  if (surface) {
    r[j] *= (1 - a);
    atomic_max_nonneg(max_r, r[j]);
  }
}
__global__ void k_max_move(TwoWaySetup d, const double* s, const double* s_prev, unsigned long long* bits) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= d.np || !d.on_surface[i]) return;
  const V3 m = load(s, i) - load(s_prev, i);
  atomic_max_nonneg(bits, sqrt(dot(m, m)));
}
__global__ void k_displacement(int n, const double* x, const double* y, unsigned long long* bits) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  const V3 m = load(x, j) - load(y, j);
  atomic_max_nonneg(bits, sqrt(dot(m, m)));
}
__global__ void k_stretch(const int* edges, int nl, const double* x, const double* y, unsigned long long* bits) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= nl) return;
  const int i = edges[2 * e], j = edges[2 * e + 1];
  const V3 dy = load(y, i) - load(y, j), dx = load(x, i) - load(x, j);
  const double L = sqrt(dot(dy, dy));
  if (L > 0) atomic_max_nonneg(bits, sqrt(dot(dx, dx)) / L);
}
__global__ void k_init_r(TwoWaySetup d, double* r) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= d.n) return;
  r[j] = d.node_on_surface[j] ? 1.0 : 0.0;
}

}  // namespace

// --- launch functions -------------------------------------------------------------------------
void launch_cell_counts(const double* s, const int* rows, int count, int K, double grow, double cell, long long* counts,
                        int* large, int* n_large, cudaStream_t st) {
  if (count > 0)
    k_cell_counts<<<blocks(count), kThreads, 0, st>>>(s, rows, count, K, grow, cell, counts, large, n_large);
}
void scan_counts(long long* counts, int count, DeviceArray<char>& temp, cudaStream_t st) {
  std::size_t bytes = 0;
  check_cuda(cub::DeviceScan::ExclusiveSum(nullptr, bytes, counts, counts, count + 1, st), "two-way scan");
  temp.reserve(bytes, "two-way scan scratch");
  check_cuda(cub::DeviceScan::ExclusiveSum(temp.data(), bytes, counts, counts, count + 1, st), "two-way scan");
}
void launch_cell_fill(const double* s, const int* rows, int count, int K, double grow, double cell,
                      const long long* offsets, unsigned long long* codes, int* items, cudaStream_t st) {
  if (count > 0) k_cell_fill<<<blocks(count), kThreads, 0, st>>>(s, rows, count, K, grow, cell, offsets, codes, items);
}
// CUB's double-buffered radix sort; the result is copied back when it ends in the second buffer.
template <class K, class V>
void radix_sort(K* keys, V* values, long long n, int end_bit, DeviceArray<K>& keys_alt, DeviceArray<V>& values_alt,
                DeviceArray<char>& temp, cudaStream_t st) {
  if (n < 2) return;
  keys_alt.reserve(static_cast<std::size_t>(n), "two-way sort");
  values_alt.reserve(static_cast<std::size_t>(n), "two-way sort");
  cub::DoubleBuffer<K> k(keys, keys_alt.data());
  cub::DoubleBuffer<V> v(values, values_alt.data());
  std::size_t bytes = 0;
  check_cuda(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, n, 0, end_bit, st), "two-way sort");
  temp.reserve(bytes, "two-way sort scratch");
  check_cuda(cub::DeviceRadixSort::SortPairs(temp.data(), bytes, k, v, n, 0, end_bit, st), "two-way sort");
  if (k.Current() != keys)
    check_cuda(
        cudaMemcpyAsync(keys, k.Current(), static_cast<std::size_t>(n) * sizeof(K), cudaMemcpyDeviceToDevice, st),
        "two-way sort");
  if (v.Current() != values)
    check_cuda(
        cudaMemcpyAsync(values, v.Current(), static_cast<std::size_t>(n) * sizeof(V), cudaMemcpyDeviceToDevice, st),
        "two-way sort");
}

void sort_entries(unsigned long long* codes, int* items, long long n, DeviceArray<unsigned long long>& codes_alt,
                  DeviceArray<int>& items_alt, DeviceArray<char>& temp, cudaStream_t st) {
  radix_sort(codes, items, n, 63, codes_alt, items_alt, temp, st);
}
void launch_query_vt(const TwoWaySetup& d, const double* s, double D, double cell, const unsigned long long* codes,
                     const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                     double* dist, int capacity, int* found, cudaStream_t st) {
  if (d.nsp > 0)
    k_query_vt<<<blocks(d.nsp), kThreads, 0, st>>>(d, s, D, cell, codes, items, n_entries, large, n_large, keys, dist,
                                                   capacity, found);
}
void launch_query_ee(const TwoWaySetup& d, const double* s, double D, double cell, const unsigned long long* codes,
                     const int* items, long long n_entries, const int* large, int n_large, long long* keys,
                     double* dist, int capacity, int* found, cudaStream_t st) {
  if (d.ne > 0)
    k_query_ee<<<blocks(d.ne), kThreads, 0, st>>>(d, s, D, cell, codes, items, n_entries, large, n_large, keys, dist,
                                                  capacity, found);
}
void sort_pairs(long long* keys, double* dist, int n, int end_bit, DeviceArray<long long>& keys_alt,
                DeviceArray<double>& dist_alt, DeviceArray<char>& temp, cudaStream_t st) {
  radix_sort(keys, dist, n, end_bit, keys_alt, dist_alt, temp, st);
}
void launch_contact_points(const TwoWaySetup& d, const double* x, double* s, cudaStream_t st) {
  if (d.np > 0) k_contact_points<<<blocks(d.np), kThreads, 0, st>>>(d, x, s);
}
void launch_pair_distances(const TwoWaySetup& d, const PairList& p, const double* s, double* pair_d, double* pair_lb,
                           cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_pair_distances<<<blocks(n), kThreads, 0, st>>>(d, p, s, pair_d, pair_lb);
}
void launch_min_pair_distance(const TwoWaySetup& d, const PairList& p, const double* s, unsigned long long* min_bits,
                              cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_min_pair_distance<<<blocks(n), kThreads, 0, st>>>(d, p, s, min_bits);
}
void launch_build_contacts(const TwoWaySetup& d, const PairList& p, const double* s, const double* x,
                           const double* pair_d, ConstraintSlots c, int* active, cudaStream_t st) {
  if (c.m > 0) k_build_contacts<<<blocks(c.m), kThreads, 0, st>>>(d, p, s, x, pair_d, c, active);
}
void launch_build_lengths(const double* inverse_mass, const int* length_edges, const double* y_target, double sigma,
                          ConstraintSlots c, cudaStream_t st) {
  if (c.m > 0) k_build_lengths<<<blocks(c.m), kThreads, 0, st>>>(inverse_mass, length_edges, y_target, sigma, c);
}
void launch_build_floors(const double* inverse_mass, const int* tets, const double* rest_volume, const double* y,
                         double min_volume, ConstraintSlots c, cudaStream_t st) {
  if (c.m > 0) k_build_floors<<<blocks(c.m), kThreads, 0, st>>>(inverse_mass, tets, rest_volume, y, min_volume, c);
}
void launch_colour_round(ConstraintSlots c, const double* inverse_mass, std::uint64_t salt, int round,
                         unsigned long long* best, int* remaining, cudaStream_t st) {
  if (c.m == 0) return;
  k_colour_propose<<<blocks(c.m), kThreads, 0, st>>>(c, inverse_mass, salt, best);
  k_colour_select<<<blocks(c.m), kThreads, 0, st>>>(c, inverse_mass, salt, round, best, remaining);
  k_colour_reset<<<blocks(c.m), kThreads, 0, st>>>(c, round, best);
}
void launch_relax(ConstraintSlots c, int colour, const double* inverse_mass, double* y, cudaStream_t st) {
  if (c.m > 0) k_relax<<<blocks(c.m), kThreads, 0, st>>>(c, colour, inverse_mass, y);
}
void launch_forward_init(const TwoWaySetup& d, double D, const double* x, const double* y, double* safe,
                         double* delta_x, double* len, unsigned long long* alpha, cudaStream_t st) {
  if (d.np > 0) k_forward_points<<<blocks(d.np), kThreads, 0, st>>>(d, D, safe);
  if (d.n > 0) k_forward_nodes<<<blocks(d.n), kThreads, 0, st>>>(d.n, x, y, delta_x, len, alpha);
}
void launch_safe_from_pairs(const TwoWaySetup& d, const PairList& p, const double* pair_lb, double* safe,
                            cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_safe_from_pairs<<<blocks(n), kThreads, 0, st>>>(d, p, pair_lb, safe);
}
void launch_point_caps(const TwoWaySetup& d, double D, const double* safe, const double* len, unsigned long long* alpha,
                       cudaStream_t st) {
  if (d.np > 0) k_point_caps<<<blocks(d.np), kThreads, 0, st>>>(d, D, safe, len, alpha);
}
void launch_plane_bounds(const TwoWaySetup& d, const PairList& p, const double* s, const double* pair_lb,
                         const double* delta_x, const double* len, unsigned long long* alpha, cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_plane_bounds<<<blocks(n), kThreads, 0, st>>>(d, p, s, pair_lb, delta_x, len, alpha);
}
void launch_zone_init(int n, int* parent, unsigned long long* zone_alpha, cudaStream_t st) {
  if (n > 0) k_zone_init<<<blocks(n), kThreads, 0, st>>>(n, parent, zone_alpha);
}
void launch_zone_hook(const TwoWaySetup& d, const PairList& p, const double* pair_d, int* parent, int* changed,
                      cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_zone_hook<<<blocks(n), kThreads, 0, st>>>(d, p, pair_d, parent, changed);
}
void launch_zone_compress(int n, int* parent, cudaStream_t st) {
  if (n > 0) k_zone_compress<<<blocks(n), kThreads, 0, st>>>(n, parent);
}
void launch_zone_caps(const TwoWaySetup& d, double D, const int* zone, const double* len,
                      unsigned long long* zone_alpha, cudaStream_t st) {
  if (d.np > 0) k_zone_caps<<<blocks(d.np), kThreads, 0, st>>>(d, D, zone, len, zone_alpha);
}
void launch_zone_pairs(const TwoWaySetup& d, const PairList& p, const double* pair_lb, const int* zone,
                       const double* delta_x, const double* len, unsigned long long* zone_alpha, char* across,
                       cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n > 0) k_zone_pairs<<<blocks(n), kThreads, 0, st>>>(d, p, pair_lb, zone, delta_x, len, zone_alpha, across);
}
void launch_zone_round(const TwoWaySetup& d, const PairList& p, const double* pair_lb, const int* zone,
                       const double* delta_x, const double* len, unsigned long long* snapshot,
                       unsigned long long* zone_alpha, const char* across, bool last, int* changed, cudaStream_t st) {
  const int n = p.nvt + p.nee;
  if (n == 0) return;
  check_cuda(cudaMemcpyAsync(snapshot, zone_alpha, static_cast<std::size_t>(d.n) * sizeof(unsigned long long),
                             cudaMemcpyDeviceToDevice, st),
             "two-way zones");
  k_zone_round<<<blocks(n), kThreads, 0, st>>>(d, p, pair_lb, zone, delta_x, len, snapshot, zone_alpha, across, last,
                                               changed);
}
void launch_zone_alpha(int n, const int* zone, const unsigned long long* zone_alpha, unsigned long long* alpha,
                       cudaStream_t st) {
  if (n > 0) k_zone_alpha<<<blocks(n), kThreads, 0, st>>>(n, zone, zone_alpha, alpha);
}
void launch_apply(const TwoWaySetup& d, double* x, const double* delta_x, const double* len,
                  const unsigned long long* alpha, double* r, unsigned long long* max_r_bits, cudaStream_t st) {
  if (d.n > 0) k_apply<<<blocks(d.n), kThreads, 0, st>>>(d, x, delta_x, len, alpha, r, max_r_bits);
}
void launch_max_move(const TwoWaySetup& d, const double* s, const double* s_prev, unsigned long long* bits,
                     cudaStream_t st) {
  if (d.np > 0) k_max_move<<<blocks(d.np), kThreads, 0, st>>>(d, s, s_prev, bits);
}
void launch_result_figures(int n, const double* x, const double* y, const int* length_edges, int nl,
                           unsigned long long* max_displacement_bits, unsigned long long* max_stretch_bits,
                           cudaStream_t st) {
  if (n > 0) k_displacement<<<blocks(n), kThreads, 0, st>>>(n, x, y, max_displacement_bits);
  if (nl > 0) k_stretch<<<blocks(nl), kThreads, 0, st>>>(length_edges, nl, x, y, max_stretch_bits);
}
void launch_init_r(const TwoWaySetup& d, double* r, cudaStream_t st) {
  if (d.n > 0) k_init_r<<<blocks(d.n), kThreads, 0, st>>>(d, r);
}

}  // namespace xpd::gpu::detail
