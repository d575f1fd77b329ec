// Host side of the CUDA backend: memory, streams, graphs and the library calls (cuSPARSE,
// cuSOLVER). Kernels live in kernels.cu. Without XPD_WITH_CUDA every entry point throws GpuError.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>
#include <xpd/config.hpp>
#include <xpd/core/error.hpp>
#include <xpd/gpu/cuda_backend.hpp>
#include <xpd/gpu/device.hpp>

#if XPD_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include "kernels.cuh"
#include "two_way_kernels.cuh"
#endif

namespace xpd::gpu {

#if !XPD_WITH_CUDA

namespace {
[[noreturn]] void no_cuda() {
  throw GpuError("the CUDA backend is not compiled in (configure with -DXPD_WITH_CUDA=ON)");
}
}  // namespace

DeviceVector::DeviceVector(size_t) { no_cuda(); }
DeviceVector::~DeviceVector() = default;
DeviceVector::DeviceVector(DeviceVector&&) noexcept = default;
DeviceVector& DeviceVector::operator=(DeviceVector&&) noexcept = default;
void DeviceVector::upload(const double*, size_t) { no_cuda(); }
void DeviceVector::download(double*, size_t) const { no_cuda(); }
double time_device_ms(const std::function<void()>&, int, int) { no_cuda(); }
void synchronize() { no_cuda(); }
double device_free_bytes() { no_cuda(); }
struct DeviceSolve::Impl {};
DeviceSolve::DeviceSolve(const SupernodalPlan&) { no_cuda(); }
DeviceSolve::~DeviceSolve() = default;
long DeviceSolve::rows() const { no_cuda(); }
void DeviceSolve::solve_device(double*, int) { no_cuda(); }
void DeviceSolve::solve(Eigen::Ref<Eigen::MatrixXd>) { no_cuda(); }
void DeviceSolve::forward_device(const double*, int) { no_cuda(); }
void DeviceSolve::backward_device(double*, int) { no_cuda(); }
double* DeviceSolve::work() { no_cuda(); }
struct CusparseSolve::Impl {};
CusparseSolve::CusparseSolve(const SupernodalFactorView&, int, bool) { no_cuda(); }
CusparseSolve::~CusparseSolve() = default;
void CusparseSolve::solve_device(double*) { no_cuda(); }
struct DevicePd::Impl {};
DevicePd::DevicePd(const DevicePdDesc&) { no_cuda(); }
DevicePd::~DevicePd() = default;
void DevicePd::set_positions(const Points&) { no_cuda(); }
Points DevicePd::positions() const { no_cuda(); }
void DevicePd::evaluate_forces() { no_cuda(); }
Points DevicePd::forces() const { no_cuda(); }
void DevicePd::iterate() { no_cuda(); }
void DevicePd::check() { no_cuda(); }
void DevicePd::set_inputs(const Points&, const Vec3&, const Points&) { no_cuda(); }
DevicePd::Evaluation DevicePd::evaluate() { no_cuda(); }
void DevicePd::apply_step() { no_cuda(); }
void DevicePd::anderson_prepare(int) { no_cuda(); }
int DevicePd::anderson_record(int, Eigen::MatrixXd&, Eigen::VectorXd&) { no_cuda(); }
void DevicePd::anderson_combine(const Eigen::VectorXd&, int) { no_cuda(); }
void DevicePd::anderson_reject() { no_cuda(); }
void DevicePd::anderson_reset() { no_cuda(); }
DeviceSolve& DevicePd::solver() { no_cuda(); }
struct DeviceDenseCholesky::Impl {};
DeviceDenseCholesky::DeviceDenseCholesky(int, int) { no_cuda(); }
DeviceDenseCholesky::~DeviceDenseCholesky() = default;
void DeviceDenseCholesky::upload(const Eigen::MatrixXd&) { no_cuda(); }
void DeviceDenseCholesky::factorize_async() { no_cuda(); }
void DeviceDenseCholesky::restore_async() { no_cuda(); }
void DeviceDenseCholesky::factorize() { no_cuda(); }
void DeviceDenseCholesky::solve(Eigen::Ref<Eigen::MatrixXd>) { no_cuda(); }

struct DeviceSchurSystem::Impl {};
DeviceSchurSystem::DeviceSchurSystem(const Eigen::MatrixXd&, const Eigen::MatrixXd&, int, int) { no_cuda(); }
DeviceSchurSystem::~DeviceSchurSystem() = default;
void DeviceSchurSystem::set_springs(const std::vector<ContactSpring>&) { no_cuda(); }
void DeviceSchurSystem::set_rhs(const Eigen::MatrixXd&) { no_cuda(); }
void DeviceSchurSystem::refactor_async() { no_cuda(); }
void DeviceSchurSystem::woodbury_async() { no_cuda(); }
Eigen::MatrixXd DeviceSchurSystem::result() { no_cuda(); }
double* DeviceSchurSystem::device_rhs(int) { no_cuda(); }
const double* DeviceSchurSystem::device_result() const { no_cuda(); }
void DeviceSchurSystem::check() { no_cuda(); }

struct DeviceCollisionPd::Impl {};
DeviceCollisionPd::DeviceCollisionPd(const DeviceCollisionDesc&) { no_cuda(); }
DeviceCollisionPd::~DeviceCollisionPd() = default;
DevicePd& DeviceCollisionPd::pd() { no_cuda(); }
int DeviceCollisionPd::region_size() const { no_cuda(); }
void DeviceCollisionPd::set_springs(const std::vector<ContactSpring>&, const Points&) { no_cuda(); }
void DeviceCollisionPd::outer_iteration(int) { no_cuda(); }
void DeviceCollisionPd::check() { no_cuda(); }
std::vector<double> DeviceCollisionPd::inner_residuals() { no_cuda(); }

#else

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    throw GpuError(
        fmt::format("{}: {} — xpd's kernels were compiled for CUDA architecture(s) {} but the device is "
                    "sm_{}{}; rebuild with -DCMAKE_CUDA_ARCHITECTURES={}{}",
                    what, cudaGetErrorString(e), XPD_CUDA_ARCHITECTURES, major, minor, major, minor));
  }
  throw GpuError(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
}

void cuda_check(cusparseStatus_t e, const char* what) {
  if (e != CUSPARSE_STATUS_SUCCESS) throw GpuError(fmt::format("{}: {}", what, cusparseGetErrorString(e)));
}

void cuda_check(cublasStatus_t e, const char* what) {
  if (e != CUBLAS_STATUS_SUCCESS) throw GpuError(fmt::format("{}: {}", what, cublasGetStatusString(e)));
}

void cuda_check(cusolverStatus_t e, const char* what) {
  if (e != CUSOLVER_STATUS_SUCCESS) throw GpuError(fmt::format("{}: cuSOLVER status {}", what, static_cast<int>(e)));
}

// The backend's one stream on device 0, created on first use. Without a device: GpuError.
cudaStream_t stream() {
  static cudaStream_t s = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw GpuError(fmt::format("no CUDA device: {}", e != cudaSuccess ? cudaGetErrorString(e) : "none found"));
    }
    cuda_check(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t st = nullptr;
    cuda_check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate");
    return st;
  }();
  return s;
}

// Refuses an allocation that cannot fit, naming the bytes needed and free.
void require_memory(double bytes, const char* what) {
  stream();
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  if (bytes > static_cast<double>(free_b))
    throw GpuError(fmt::format("{}: needs {:.1f} MiB of device memory, {:.1f} MiB free of {:.1f} MiB", what,
                               bytes / 1048576.0, free_b / 1048576.0, total_b / 1048576.0));
}

template <class T>
T* device_alloc(size_t n, const char* what) {
  stream();
  void* p = nullptr;
  if (n == 0) n = 1;
  cuda_check(cudaMalloc(&p, n * sizeof(T)), what);
  return static_cast<T*>(p);
}

template <class T>
T* device_copy(const std::vector<T>& v, const char* what) {
  T* p = device_alloc<T>(v.size(), what);
  if (!v.empty()) cuda_check(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), what);
  return p;
}

// Device allocations of one object, released together.
struct Allocations {
  std::vector<void*> ptrs;
  template <class T>
  T* copy(const std::vector<T>& v, const char* what) {
    T* p = device_copy(v, what);
    ptrs.push_back(p);
    return p;
  }
  template <class T>
  T* alloc(size_t n, const char* what) {
    T* p = device_alloc<T>(n, what);
    ptrs.push_back(p);
    return p;
  }
  void release() {
    for (void* p : ptrs) cudaFree(p);
    ptrs.clear();
  }
  ~Allocations() { release(); }
};

template <class To, class From>
std::vector<To> narrow(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

}  // namespace

namespace detail {
cudaStream_t backend_stream() { return stream(); }
void check_cuda(cudaError_t e, const char* what) { cuda_check(e, what); }
}  // namespace detail

// ---------------------------------------------------------------------------------------------
DeviceVector::DeviceVector(size_t n) : p_(device_alloc<double>(n, "DeviceVector")), n_(n) {}
DeviceVector::~DeviceVector() {
  if (p_) cudaFree(p_);
}
DeviceVector::DeviceVector(DeviceVector&& o) noexcept : p_(o.p_), n_(o.n_) {
  o.p_ = nullptr;
  o.n_ = 0;
}
DeviceVector& DeviceVector::operator=(DeviceVector&& o) noexcept {
  std::swap(p_, o.p_);
  std::swap(n_, o.n_);
  return *this;
}
void DeviceVector::upload(const double* host, size_t n) {
  if (n > n_) throw GpuError(fmt::format("DeviceVector::upload: {} values into {}", n, n_));
  cuda_check(cudaMemcpyAsync(p_, host, n * sizeof(double), cudaMemcpyHostToDevice, stream()), "upload");
  cuda_check(cudaStreamSynchronize(stream()), "upload");
}
void DeviceVector::download(double* host, size_t n) const {
  if (n > n_) throw GpuError(fmt::format("DeviceVector::download: {} values from {}", n, n_));
  cuda_check(cudaMemcpyAsync(host, p_, n * sizeof(double), cudaMemcpyDeviceToHost, stream()), "download");
  cuda_check(cudaStreamSynchronize(stream()), "download");
}

void synchronize() {
  cuda_check(cudaStreamSynchronize(stream()), "kernel");
  cuda_check(cudaGetLastError(), "kernel launch");
}

double device_free_bytes() {
  stream();
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return static_cast<double>(free_b);
}

double time_device_ms(const std::function<void()>& work, int repeats, int warmup) {
  cudaStream_t st = stream();
  for (int i = 0; i < warmup; ++i) work();
  synchronize();
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "cudaEventCreate");
  cuda_check(cudaEventCreate(&b), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    cuda_check(cudaEventRecord(a, st), "cudaEventRecord");
    work();
    cuda_check(cudaEventRecord(b, st), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cuda_check(cudaGetLastError(), "kernel launch");
  std::sort(ms.begin(), ms.end());
  const size_t m = ms.size() / 2;
  return ms.size() % 2 ? ms[m] : 0.5 * (ms[m - 1] + ms[m]);
}

// ---------------------------------------------------------------------------------------------
struct DeviceSolve::Impl {
  Allocations mem;
  detail::SolveData d{};
  std::vector<detail::LevelLaunch> levels;
  // Work arrays are sized for 8 groups of 8 right-hand sides (64 columns) up front; more columns
  // grow them once (outside any captured graph).
  int capacity_groups = 0;
  double *Y = nullptr, *C = nullptr, *P = nullptr;
  // One graph per (right-hand sides, count, kind): 0 the whole solve, 1 forward, 2 backward.
  std::map<std::tuple<const double*, int, int>, cudaGraphExec_t> graphs;
  DeviceVector transfer;  // solve()'s device copy of the host right-hand sides
  long n = 0;

  ~Impl() {
    for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
    if (Y) cudaFree(Y);
    if (C) cudaFree(C);
    if (P) cudaFree(P);
  }

  // Captures (first use) and replays the graph of `kind` (0: permute, forward, backward, permute
  // back; 1: permute and forward; 2: backward and permute back).
  void launch(double* X, int k, int K, int groups, int kind) {
    auto it = graphs.find({X, k, kind});
    cudaStream_t st = stream();
    if (it == graphs.end()) {
      detail::SolveData dd = d;
      dd.Y = Y;
      dd.C = C;
      dd.P = P;
      cudaGraph_t graph = nullptr;
      cuda_check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      if (kind != 2) {
        detail::launch_permute_in(dd, X, k, K, groups, st);
        for (const auto& L : levels) detail::launch_forward_level(dd, L, K, groups, st);
      }
      if (kind != 1) {
        for (auto l = levels.rbegin(); l != levels.rend(); ++l) detail::launch_backward_level(dd, *l, K, groups, st);
        detail::launch_permute_out(dd, X, k, K, groups, st);
      }
      cuda_check(cudaStreamEndCapture(st, &graph), "cudaStreamEndCapture");
      cudaGraphExec_t exec = nullptr;
      cuda_check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
      cudaGraphDestroy(graph);
      it = graphs.emplace(std::make_tuple(static_cast<const double*>(X), k, kind), exec).first;
    }
    cuda_check(cudaGraphLaunch(it->second, st), "cudaGraphLaunch");
  }

  void reserve(int groups) {
    if (groups <= capacity_groups) return;
    for (auto& [key, g] : graphs) cudaGraphExecDestroy(g);
    graphs.clear();
    if (Y) cudaFree(Y);
    if (C) cudaFree(C);
    if (P) cudaFree(P);
    Y = C = P = nullptr;
    const double per_group = 8.0 * (d.n + d.contrib_rows + d.partial_slots);
    require_memory(per_group * groups * sizeof(double), "GPU solve work arrays");
    Y = device_alloc<double>(static_cast<size_t>(8 * d.n * groups), "GPU solve Y");
    C = device_alloc<double>(static_cast<size_t>(8 * std::max(1LL, d.contrib_rows) * groups), "GPU solve C");
    P = device_alloc<double>(static_cast<size_t>(8 * d.partial_slots * groups), "GPU solve P");
    capacity_groups = groups;
  }
};

DeviceSolve::DeviceSolve(const SupernodalPlan& p) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  require_memory(p.device_bytes() * 1.05 + 64.0 * (p.n + p.contrib_rows + p.partial_slots) * sizeof(double),
                 "GPU solve: uploading the factor");
  if (p.rows.size() > 0 && *std::max_element(p.rows.begin(), p.rows.end()) > (1L << 31) - 1)
    throw GpuError("GPU solve: row indices beyond 32 bits");
  auto& d = m.d;
  d.values = m.mem.copy(p.values, "GPU solve values");
  d.rows = m.mem.copy(narrow<int>(p.rows), "GPU solve rows");
  d.relmap = m.mem.copy(p.relmap, "GPU solve relmap");
  d.first_col = m.mem.copy(narrow<long long>(p.first_col), "GPU solve first_col");
  d.ncols = m.mem.copy(p.ncols, "GPU solve ncols");
  d.nrows = m.mem.copy(p.nrows, "GPU solve nrows");
  d.value_offset = m.mem.copy(narrow<long long>(p.value_offset), "GPU solve value_offset");
  d.row_offset = m.mem.copy(narrow<long long>(p.row_offset), "GPU solve row_offset");
  d.contrib_offset = m.mem.copy(narrow<long long>(p.contrib_offset), "GPU solve contrib_offset");
  d.partial_offset = m.mem.copy(narrow<long long>(p.partial_offset), "GPU solve partial_offset");
  d.child_offsets = m.mem.copy(p.child_offsets, "GPU solve child_offsets");
  d.children = m.mem.copy(p.children, "GPU solve children");
  d.level_supernodes = m.mem.copy(p.level_supernodes, "GPU solve levels");
  d.perm = m.mem.copy(narrow<int>(p.perm), "GPU solve perm");
  d.n = p.n;
  d.contrib_rows = p.contrib_rows;
  d.partial_slots = p.partial_slots;
  m.n = p.n;
  auto tiles = [&](const std::vector<PlanTile>& t) {
    std::vector<int2> v(t.size());
    for (size_t i = 0; i < t.size(); ++i) v[i] = make_int2(t[i].super, t[i].first);
    return m.mem.copy(v, "GPU solve tiles");
  };
  const int2* diag = tiles(p.diag_tiles);
  const int2* below = tiles(p.below_tiles);
  const int2* cols = tiles(p.col_tiles);
  for (int l = 0; l < p.levels; ++l) {
    detail::LevelLaunch L{};
    L.supernode_begin = p.level_offsets[l];
    L.supernodes = p.level_offsets[l + 1] - p.level_offsets[l];
    L.diag_tiles = diag + p.diag_tile_offsets[l];
    L.n_diag_tiles = p.diag_tile_offsets[l + 1] - p.diag_tile_offsets[l];
    L.below_tiles = below + p.below_tile_offsets[l];
    L.n_below_tiles = p.below_tile_offsets[l + 1] - p.below_tile_offsets[l];
    L.col_tiles = cols + p.col_tile_offsets[l];
    L.n_col_tiles = p.col_tile_offsets[l + 1] - p.col_tile_offsets[l];
    L.max_chunks_fwd = p.level_max_chunks_fwd[l];
    L.max_chunks_bwd = p.level_max_chunks_bwd[l];
    m.levels.push_back(L);
  }
  m.reserve(1);
}

DeviceSolve::~DeviceSolve() = default;
long DeviceSolve::rows() const { return impl_->n; }

void DeviceSolve::solve_device(double* X, int k) {
  if (k <= 0) return;
  Impl& m = *impl_;
  const int K = k <= 4 ? k : 8;
  const int groups = (k + K - 1) / K;
  m.reserve(groups);
  m.launch(X, k, K, groups, 0);
}

void DeviceSolve::forward_device(const double* X, int k) {
  if (k < 1 || k > 4) throw GpuError(fmt::format("GPU solve: forward sweep of {} columns (1 to 4)", k));
  impl_->launch(const_cast<double*>(X), k, k, 1, 1);
}

void DeviceSolve::backward_device(double* X, int k) {
  if (k < 1 || k > 4) throw GpuError(fmt::format("GPU solve: backward sweep of {} columns (1 to 4)", k));
  impl_->launch(X, k, k, 1, 2);
}

double* DeviceSolve::work() { return impl_->Y; }

void DeviceSolve::solve(Eigen::Ref<Eigen::MatrixXd> B) {
  Impl& m = *impl_;
  if (B.rows() != m.n) throw GpuError(fmt::format("GPU solve: rhs has {} rows, matrix {}", B.rows(), m.n));
  Eigen::MatrixXd tmp = B;
  if (m.transfer.size() < static_cast<size_t>(tmp.size())) {
    // A new buffer: the graphs captured for the old one must not be replayed on a reused address.
    for (auto it = m.graphs.begin(); it != m.graphs.end();) {
      if (std::get<0>(it->first) == m.transfer.data()) {
        cudaGraphExecDestroy(it->second);
        it = m.graphs.erase(it);
      } else {
        ++it;
      }
    }
    m.transfer = DeviceVector(static_cast<size_t>(tmp.size()));
  }
  m.transfer.upload(tmp.data(), tmp.size());
  solve_device(m.transfer.data(), static_cast<int>(tmp.cols()));
  synchronize();
  m.transfer.download(tmp.data(), tmp.size());
  B = tmp;
}

// ---------------------------------------------------------------------------------------------
struct CusparseSolve::Impl {
  Allocations mem;
  cusparseHandle_t h = nullptr;
  cusparseSpMatDescr_t lower = nullptr, upper = nullptr;
  cusparseDnMatDescr_t in = nullptr, out = nullptr;
  cusparseSpSMDescr_t fwd = nullptr, bwd = nullptr;
  bool spsv = false;  // one SpSV per column instead of SpSM
  cusparseSpSVDescr_t vfwd = nullptr, vbwd = nullptr;
  cusparseDnVecDescr_t vin = nullptr, vout = nullptr;
  double* buf_f = nullptr;
  double* buf_b = nullptr;
  double* W = nullptr;  // permuted right-hand sides
  double* V = nullptr;
  detail::SolveData perm{};
  int k = 0;
  long n = 0;
  ~Impl() {
    if (vfwd) cusparseSpSV_destroyDescr(vfwd);
    if (vbwd) cusparseSpSV_destroyDescr(vbwd);
    if (vin) cusparseDestroyDnVec(vin);
    if (vout) cusparseDestroyDnVec(vout);
    if (fwd) cusparseSpSM_destroyDescr(fwd);
    if (bwd) cusparseSpSM_destroyDescr(bwd);
    if (in) cusparseDestroyDnMat(in);
    if (out) cusparseDestroyDnMat(out);
    if (lower) cusparseDestroySpMat(lower);
    if (upper) cusparseDestroySpMat(upper);
    if (h) cusparseDestroy(h);
  }
};

CusparseSolve::CusparseSolve(const SupernodalFactorView& L, int k, bool spsv) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spsv = spsv;
  if (L.nsuper <= 0) throw SolverError("cuSPARSE baseline: the factor is not supernodal");
  const long n = L.n;
  m.n = n;
  m.k = k;
  // CSC of L (column j: its supernode's rows from j down) = CSR of Lᵀ; CSR of L by transposition.
  std::vector<int> colptr(n + 1, 0);
  for (long s = 0; s < L.nsuper; ++s) {
    const long nc = L.super[s + 1] - L.super[s], nr = L.pi[s + 1] - L.pi[s];
    for (long j = 0; j < nc; ++j) colptr[L.super[s] + j + 1] = static_cast<int>(nr - j);
  }
  for (long j = 0; j < n; ++j) colptr[j + 1] += colptr[j];
  const long nnz = colptr[n];
  if (nnz > (1L << 31) - 1) throw GpuError("cuSPARSE baseline: more than 2^31 stored entries");
  require_memory(2.0 * nnz * 12.0 + 4.0 * n * k * 8.0, "cuSPARSE baseline");
  std::vector<int> rowind(nnz);
  std::vector<double> val(nnz);
  for (long s = 0; s < L.nsuper; ++s) {
    const long nc = L.super[s + 1] - L.super[s], nr = L.pi[s + 1] - L.pi[s];
    for (long j = 0; j < nc; ++j) {
      long q = colptr[L.super[s] + j];
      for (long i = j; i < nr; ++i, ++q) {
        rowind[q] = static_cast<int>(L.s[L.pi[s] + i]);
        val[q] = L.x[L.px[s] + i + j * nr];
      }
    }
  }
  std::vector<int> rowptr(n + 1, 0), colind(nnz);
  std::vector<double> lval(nnz);
  for (long q = 0; q < nnz; ++q) ++rowptr[rowind[q] + 1];
  for (long i = 0; i < n; ++i) rowptr[i + 1] += rowptr[i];
  {
    std::vector<int> fill(rowptr.begin(), rowptr.end() - 1);
    for (long j = 0; j < n; ++j)
      for (int q = colptr[j]; q < colptr[j + 1]; ++q) {
        const int p = fill[rowind[q]]++;
        colind[p] = static_cast<int>(j);
        lval[p] = val[q];
      }
  }
  cuda_check(cusparseCreate(&m.h), "cusparseCreate");
  cuda_check(cusparseSetStream(m.h, stream()), "cusparseSetStream");
  int* d_rowptr = m.mem.copy(rowptr, "cuSPARSE L");
  int* d_colind = m.mem.copy(colind, "cuSPARSE L");
  double* d_lval = m.mem.copy(lval, "cuSPARSE L");
  int* d_colptr = m.mem.copy(colptr, "cuSPARSE Lt");
  int* d_rowind = m.mem.copy(rowind, "cuSPARSE Lt");
  double* d_val = m.mem.copy(val, "cuSPARSE Lt");
  cuda_check(cusparseCreateCsr(&m.lower, n, n, nnz, d_rowptr, d_colind, d_lval, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
             "cusparseCreateCsr L");
  cuda_check(cusparseCreateCsr(&m.upper, n, n, nnz, d_colptr, d_rowind, d_val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                               CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F),
             "cusparseCreateCsr Lt");
  cusparseFillMode_t lo = CUSPARSE_FILL_MODE_LOWER, up = CUSPARSE_FILL_MODE_UPPER;
  cusparseDiagType_t nu = CUSPARSE_DIAG_TYPE_NON_UNIT;
  cuda_check(cusparseSpMatSetAttribute(m.lower, CUSPARSE_SPMAT_FILL_MODE, &lo, sizeof(lo)), "fill mode");
  cuda_check(cusparseSpMatSetAttribute(m.lower, CUSPARSE_SPMAT_DIAG_TYPE, &nu, sizeof(nu)), "diag type");
  cuda_check(cusparseSpMatSetAttribute(m.upper, CUSPARSE_SPMAT_FILL_MODE, &up, sizeof(up)), "fill mode");
  cuda_check(cusparseSpMatSetAttribute(m.upper, CUSPARSE_SPMAT_DIAG_TYPE, &nu, sizeof(nu)), "diag type");
  m.W = m.mem.alloc<double>(static_cast<size_t>(n * k), "cuSPARSE rhs");
  m.V = m.mem.alloc<double>(static_cast<size_t>(n * k), "cuSPARSE rhs");
  const double one = 1.0;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  size_t bytes_f = 0, bytes_b = 0;
  if (spsv) {
    cuda_check(cusparseCreateDnVec(&m.vin, n, m.W, CUDA_R_64F), "cusparseCreateDnVec");
    cuda_check(cusparseCreateDnVec(&m.vout, n, m.V, CUDA_R_64F), "cusparseCreateDnVec");
    cuda_check(cusparseSpSV_createDescr(&m.vfwd), "cusparseSpSV_createDescr");
    cuda_check(cusparseSpSV_createDescr(&m.vbwd), "cusparseSpSV_createDescr");
    cuda_check(cusparseSpSV_bufferSize(m.h, op, &one, m.lower, m.vin, m.vout, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT,
                                       m.vfwd, &bytes_f),
               "cusparseSpSV_bufferSize");
    cuda_check(cusparseSpSV_bufferSize(m.h, op, &one, m.upper, m.vout, m.vin, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT,
                                       m.vbwd, &bytes_b),
               "cusparseSpSV_bufferSize");
    m.buf_f = m.mem.alloc<double>(bytes_f / sizeof(double) + 1, "cuSPARSE buffer");
    m.buf_b = m.mem.alloc<double>(bytes_b / sizeof(double) + 1, "cuSPARSE buffer");
    cuda_check(cusparseSpSV_analysis(m.h, op, &one, m.lower, m.vin, m.vout, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT,
                                     m.vfwd, m.buf_f),
               "cusparseSpSV_analysis");
    cuda_check(cusparseSpSV_analysis(m.h, op, &one, m.upper, m.vout, m.vin, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT,
                                     m.vbwd, m.buf_b),
               "cusparseSpSV_analysis");
  } else {
    cuda_check(cusparseCreateDnMat(&m.in, n, k, n, m.W, CUDA_R_64F, CUSPARSE_ORDER_COL), "cusparseCreateDnMat");
    cuda_check(cusparseCreateDnMat(&m.out, n, k, n, m.V, CUDA_R_64F, CUSPARSE_ORDER_COL), "cusparseCreateDnMat");
    cuda_check(cusparseSpSM_createDescr(&m.fwd), "cusparseSpSM_createDescr");
    cuda_check(cusparseSpSM_createDescr(&m.bwd), "cusparseSpSM_createDescr");
    cuda_check(cusparseSpSM_bufferSize(m.h, op, op, &one, m.lower, m.in, m.out, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT,
                                       m.fwd, &bytes_f),
               "cusparseSpSM_bufferSize");
    cuda_check(cusparseSpSM_bufferSize(m.h, op, op, &one, m.upper, m.out, m.in, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT,
                                       m.bwd, &bytes_b),
               "cusparseSpSM_bufferSize");
    m.buf_f = m.mem.alloc<double>(bytes_f / sizeof(double) + 1, "cuSPARSE buffer");
    m.buf_b = m.mem.alloc<double>(bytes_b / sizeof(double) + 1, "cuSPARSE buffer");
    cuda_check(cusparseSpSM_analysis(m.h, op, op, &one, m.lower, m.in, m.out, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT,
                                     m.fwd, m.buf_f),
               "cusparseSpSM_analysis");
    cuda_check(cusparseSpSM_analysis(m.h, op, op, &one, m.upper, m.out, m.in, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT,
                                     m.bwd, m.buf_b),
               "cusparseSpSM_analysis");
  }
  std::vector<int> perm(L.perm, L.perm + n);
  m.perm.perm = m.mem.copy(perm, "cuSPARSE perm");
  m.perm.n = n;
  m.perm.Y = m.W;
  synchronize();
}

CusparseSolve::~CusparseSolve() = default;

void CusparseSolve::solve_device(double* X) {
  Impl& m = *impl_;
  cudaStream_t st = stream();
  // W (L order, column-major, one group of k "rows" of width 1 would not fit the grouped layout):
  // permute with K = 1 per column so that W is column-major n × k.
  detail::SolveData d = m.perm;
  for (int r = 0; r < m.k; ++r) {
    d.Y = m.W + r * m.n;
    detail::launch_permute_in(d, X + r * m.n, 1, 1, 1, st);
  }
  const double one = 1.0;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  if (m.spsv) {
    for (int r = 0; r < m.k; ++r) {
      cuda_check(cusparseDnVecSetValues(m.vin, m.W + r * m.n), "cusparseDnVecSetValues");
      cuda_check(cusparseDnVecSetValues(m.vout, m.V + r * m.n), "cusparseDnVecSetValues");
      cuda_check(
          cusparseSpSV_solve(m.h, op, &one, m.lower, m.vin, m.vout, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, m.vfwd),
          "cusparseSpSV_solve");
      cuda_check(
          cusparseSpSV_solve(m.h, op, &one, m.upper, m.vout, m.vin, CUDA_R_64F, CUSPARSE_SPSV_ALG_DEFAULT, m.vbwd),
          "cusparseSpSV_solve");
    }
  } else {
    cuda_check(
        cusparseSpSM_solve(m.h, op, op, &one, m.lower, m.in, m.out, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, m.fwd),
        "cusparseSpSM_solve");
    cuda_check(
        cusparseSpSM_solve(m.h, op, op, &one, m.upper, m.out, m.in, CUDA_R_64F, CUSPARSE_SPSM_ALG_DEFAULT, m.bwd),
        "cusparseSpSM_solve");
  }
  for (int r = 0; r < m.k; ++r) {
    d.Y = m.W + r * m.n;
    detail::launch_permute_out(d, X + r * m.n, 1, 1, 1, st);
  }
}

// ---------------------------------------------------------------------------------------------
struct DevicePd::Impl {
  Allocations mem;
  detail::PdData d{};
  std::unique_ptr<DeviceSolve> solve;
  std::vector<int> att_slot;       // attachment j (description order) → its slot (grouped by node)
  std::vector<double> att_host;    // the slots as uploaded: k, target
  double* nodal_buffer = nullptr;  // d.nodal points here when the frame has nodal forces
  double* partials = nullptr;      // kSumBlocks × 3 block sums
  double* sums = nullptr;          // device: E_tets, E_nodes, ||f||²
  double* readback = nullptr;      // pinned host: the sums and the status word
  // Anderson (anderson.cu): buffers made on first use, for one window.
  Allocations anderson_mem;
  detail::AndersonData ad{};
  int window = 0, history = 0, head = 0;
  bool has_prev = false;
  double* dot_partials = nullptr;
  double* dot_out = nullptr;
  double* dot_readback = nullptr;  // pinned host
  ~Impl() {
    if (readback) cudaFreeHost(readback);
    if (dot_readback) cudaFreeHost(dot_readback);
  }
};

DevicePd::DevicePd(const DevicePdDesc& desc) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  if (!desc.elements) throw GpuError("GPU PD: no elements");
  const TetElements& e = *desc.elements;
  const int nt = e.size(), nn = static_cast<int>(desc.rest.rows());
  m.d.num_tets = nt;
  m.d.num_nodes = nn;
  std::vector<int4> tets(nt);
  std::vector<double> dm(9 * static_cast<size_t>(nt)), w(e.weight);
  for (int t = 0; t < nt; ++t) {
    const auto& q = e.nodes[t];
    tets[t] = make_int4(q[0], q[1], q[2], q[3]);
    for (int k = 0; k < 9; ++k) dm[static_cast<size_t>(k) * nt + t] = e.Dm_inv[t].data()[k];
  }
  for (int t = 0; t < nt; ++t)
    for (int a = 0; a < 4; ++a)
      if (e.nodes[t][a] < 0 || e.nodes[t][a] >= nn)
        throw GpuError(fmt::format("GPU PD: element {} names node {} of {}", t, e.nodes[t][a], nn));
  for (const auto& a : desc.attachments)
    if (a.point.nodes[0] < 0 || a.point.nodes[0] >= nn)
      throw GpuError(fmt::format("GPU PD: an attachment names node {} of {}", a.point.nodes[0], nn));
  std::vector<int> off(nn + 1, 0), inc(4 * static_cast<size_t>(nt));
  for (int t = 0; t < nt; ++t)
    for (int a = 0; a < 4; ++a) ++off[e.nodes[t][a] + 1];
  for (int i = 0; i < nn; ++i) off[i + 1] += off[i];
  {
    std::vector<int> fill(off.begin(), off.end() - 1);
    for (int t = 0; t < nt; ++t)
      for (int a = 0; a < 4; ++a) inc[fill[e.nodes[t][a]]++] = t * 4 + a;
  }
  // Attachments per node in list order (the CPU adds them in that order), then the loads.
  std::vector<int> att_off(nn + 1, 0);
  std::vector<double> att_data;
  {
    const auto& sp = desc.attachments;
    if (desc.attachment_targets.rows() != static_cast<long>(sp.size()))
      throw GpuError("GPU PD: attachment targets do not match the attachments");
    for (const auto& a : sp) {
      if (a.point.nodes[1] >= 0 || a.point.weights[0] != 1.0)
        throw GpuError("GPU PD: only node attachments run on the device (barycentric attachment found)");
      ++att_off[a.point.nodes[0] + 1];
    }
    for (int i = 0; i < nn; ++i) att_off[i + 1] += att_off[i];
    att_data.assign(4 * sp.size(), 0.0);
    m.att_slot.resize(sp.size());
    std::vector<int> fill(att_off.begin(), att_off.end() - 1);
    for (size_t j = 0; j < sp.size(); ++j) {
      const int q = fill[sp[j].point.nodes[0]]++;
      m.att_slot[j] = q;
      att_data[4 * q] = sp[j].stiffness;
      for (int r = 0; r < 3; ++r) att_data[4 * q + 1 + r] = desc.attachment_targets(static_cast<long>(j), r);
    }
    m.att_host = att_data;
  }
  if (desc.masses.size() != nn) throw GpuError("GPU PD: masses do not match the nodes");
  std::vector<double> mass(desc.masses.data(), desc.masses.data() + nn);
  std::vector<double> gravity{desc.gravity(0), desc.gravity(1), desc.gravity(2)};
  std::vector<double> nodal;
  if (desc.nodal_forces.rows() == nn) {
    nodal.resize(3 * static_cast<size_t>(nn));
    for (int i = 0; i < nn; ++i)
      for (int r = 0; r < 3; ++r) nodal[3 * i + r] = desc.nodal_forces(i, r);
  }
  require_memory((nt * (4.0 * 4 + 20 * 8 + 16) + nn * (12 * 8.0 + 4)), "GPU PD: uploading the mesh");
  m.d.tets = m.mem.copy(tets, "GPU PD tets");
  m.d.dm_inv = m.mem.copy(dm, "GPU PD Dm_inv");
  m.d.weight = m.mem.copy(w, "GPU PD weights");
  m.d.inc_offsets = m.mem.copy(off, "GPU PD incidences");
  m.d.incidences = m.mem.copy(inc, "GPU PD incidences");
  m.d.att_offsets = m.mem.copy(att_off, "GPU PD attachments");
  m.d.attachments = m.mem.copy(att_data, "GPU PD attachments");
  m.d.mass = m.mem.copy(mass, "GPU PD masses");
  m.d.gravity = m.mem.copy(gravity, "GPU PD gravity");
  // The nodal forces' buffer exists even when the description has none: set_inputs may add them.
  m.nodal_buffer = m.mem.alloc<double>(3 * static_cast<size_t>(nn), "GPU PD nodal forces");
  if (!nodal.empty())
    cuda_check(cudaMemcpy(m.nodal_buffer, nodal.data(), nodal.size() * sizeof(double), cudaMemcpyHostToDevice),
               "GPU PD nodal forces");
  m.d.nodal = nodal.empty() ? nullptr : m.nodal_buffer;
  m.d.tet_energy = m.mem.alloc<double>(static_cast<size_t>(nt), "GPU PD energies");
  m.d.node_energy = m.mem.alloc<double>(static_cast<size_t>(nn), "GPU PD energies");
  m.d.node_force_sq = m.mem.alloc<double>(static_cast<size_t>(nn), "GPU PD residual");
  m.partials = m.mem.alloc<double>(3 * static_cast<size_t>(detail::kSumBlocks), "GPU PD sums");
  m.sums = m.mem.alloc<double>(3, "GPU PD sums");
  cuda_check(cudaMallocHost(&m.readback, 4 * sizeof(double)), "GPU PD pinned readback");
  m.d.x = m.mem.alloc<double>(3 * static_cast<size_t>(nn), "GPU PD x");
  m.d.H = m.mem.alloc<double>(9 * static_cast<size_t>(nt), "GPU PD H");
  m.d.f = m.mem.alloc<double>(3 * static_cast<size_t>(nn), "GPU PD f");
  m.d.status = m.mem.alloc<int>(1, "GPU PD status");
  cuda_check(cudaMemset(m.d.status, 0, sizeof(int)), "cudaMemset");
  m.solve = std::make_unique<DeviceSolve>(make_supernodal_plan(desc.factor));
  set_positions(desc.rest);
}

DevicePd::~DevicePd() = default;

void DevicePd::set_positions(const Points& x) {
  const Impl& m = *impl_;
  if (x.rows() != m.d.num_nodes) throw GpuError("GPU PD: positions of the wrong size");
  Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor> xr = x;
  cuda_check(cudaMemcpyAsync(m.d.x, xr.data(), xr.size() * sizeof(double), cudaMemcpyHostToDevice, stream()),
             "upload x");
  synchronize();
}

Points DevicePd::positions() const {
  const Impl& m = *impl_;
  Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor> xr(m.d.num_nodes, 3);
  cuda_check(cudaMemcpyAsync(xr.data(), m.d.x, xr.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
             "download x");
  synchronize();
  return xr;
}

void DevicePd::evaluate_forces() { detail::launch_forces(impl_->d, stream()); }

Points DevicePd::forces() const {
  const Impl& m = *impl_;
  Eigen::MatrixXd f(m.d.num_nodes, 3);
  cuda_check(cudaMemcpyAsync(f.data(), m.d.f, f.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
             "download f");
  synchronize();
  return f;
}

void DevicePd::iterate() {
  evaluate_forces();
  apply_step();
}

void DevicePd::check() {
  Impl& m = *impl_;
  int status = 0;
  cuda_check(cudaMemcpyAsync(&status, m.d.status, sizeof(int), cudaMemcpyDeviceToHost, stream()), "status");
  synchronize();
  if (status & 1) {
    cuda_check(cudaMemset(m.d.status, 0, sizeof(int)), "cudaMemset");
    throw SolverError(
        "GPU PD: an element is inverted or degenerate; the device local step has no SVD fallback yet (run on the CPU)");
  }
}

void DevicePd::set_inputs(const Points& targets, const Vec3& gravity, const Points& nodal_forces) {
  Impl& m = *impl_;
  const long nn = m.d.num_nodes;
  if (targets.rows() != static_cast<long>(m.att_slot.size()) || targets.cols() != 3)
    throw GpuError(fmt::format("GPU PD: {} attachment targets for {} attachments", targets.rows(), m.att_slot.size()));
  if (nodal_forces.rows() != 0 && nodal_forces.rows() != nn)
    throw GpuError(fmt::format("GPU PD: nodal forces for {} nodes, the mesh has {}", nodal_forces.rows(), nn));
  if (!targets.allFinite() || !gravity.allFinite() || !nodal_forces.allFinite())
    throw GpuError("GPU PD: non-finite frame input");
  for (size_t j = 0; j < m.att_slot.size(); ++j)
    for (int r = 0; r < 3; ++r) m.att_host[4 * m.att_slot[j] + 1 + r] = targets(static_cast<long>(j), r);
  if (!m.att_host.empty())
    cuda_check(cudaMemcpyAsync(m.d.attachments, m.att_host.data(), m.att_host.size() * sizeof(double),
                               cudaMemcpyHostToDevice, stream()),
               "upload attachment targets");
  const double g[3] = {gravity(0), gravity(1), gravity(2)};
  cuda_check(cudaMemcpyAsync(m.d.gravity, g, sizeof(g), cudaMemcpyHostToDevice, stream()), "upload gravity");
  if (nodal_forces.rows() == nn) {
    const Eigen::Matrix<double, Eigen::Dynamic, 3, Eigen::RowMajor> fr = nodal_forces;
    cuda_check(cudaMemcpyAsync(m.nodal_buffer, fr.data(), fr.size() * sizeof(double), cudaMemcpyHostToDevice, stream()),
               "upload nodal forces");
    m.d.nodal = m.nodal_buffer;
  } else {
    m.d.nodal = nullptr;
  }
  synchronize();  // the host staging copies go out of scope
}

DevicePd::Evaluation DevicePd::evaluate() {
  Impl& m = *impl_;
  detail::launch_forces(m.d, stream());
  detail::SumJob job{};
  job.arrays[0] = m.d.tet_energy;
  job.sizes[0] = m.d.num_tets;
  job.arrays[1] = m.d.node_energy;
  job.sizes[1] = m.d.num_nodes;
  job.arrays[2] = m.d.node_force_sq;
  job.sizes[2] = m.d.num_nodes;
  job.count = 3;
  detail::launch_sums(job, m.partials, m.sums, stream());
  cuda_check(cudaMemcpyAsync(m.readback, m.sums, 3 * sizeof(double), cudaMemcpyDeviceToHost, stream()), "sums");
  cuda_check(cudaMemcpyAsync(reinterpret_cast<int*>(m.readback + 3), m.d.status, sizeof(int), cudaMemcpyDeviceToHost,
                             stream()),
             "status");
  synchronize();
  if (*reinterpret_cast<const int*>(m.readback + 3) & 1) check();
  return {m.readback[0] + m.readback[1], std::sqrt(m.readback[2])};
}

void DevicePd::apply_step() {
  Impl& m = *impl_;
  m.solve->solve_device(m.d.f, 3);
  detail::launch_add_step(m.d, stream());
}

void DevicePd::anderson_prepare(int window) {
  Impl& m = *impl_;
  if (window < 1 || window > detail::kMaxAndersonWindow)
    throw GpuError(fmt::format("GPU PD: anderson_window {} (the device runs windows 1 to {})", window,
                               detail::kMaxAndersonWindow));
  const size_t n3 = 3 * static_cast<size_t>(m.d.num_nodes);
  if (m.window != window) {  // first use, or another window: the buffers once
    m.anderson_mem.release();
    require_memory((2.0 * window + 3) * static_cast<double>(n3) * sizeof(double), "GPU PD: Anderson's history");
    m.ad.num_nodes = m.d.num_nodes;
    m.ad.x = m.d.x;
    m.ad.f = m.d.f;
    m.ad.x_pd = m.anderson_mem.alloc<double>(n3, "GPU Anderson");
    m.ad.F_prev = m.anderson_mem.alloc<double>(n3, "GPU Anderson");
    m.ad.G_prev = m.anderson_mem.alloc<double>(n3, "GPU Anderson");
    m.ad.dF = m.anderson_mem.alloc<double>(n3 * window, "GPU Anderson");
    m.ad.dG = m.anderson_mem.alloc<double>(n3 * window, "GPU Anderson");
    m.dot_partials =
        m.anderson_mem.alloc<double>(static_cast<size_t>(detail::kMaxDots) * detail::kSumBlocks, "GPU Anderson");
    m.dot_out = m.anderson_mem.alloc<double>(detail::kMaxDots, "GPU Anderson");
    if (!m.dot_readback) cuda_check(cudaMallocHost(&m.dot_readback, detail::kMaxDots * sizeof(double)), "pinned");
    m.window = window;
    m.history = m.head = 0;
    m.has_prev = false;
  }
}

int DevicePd::anderson_record(int window, Eigen::MatrixXd& gram, Eigen::VectorXd& rhs) {
  Impl& m = *impl_;
  anderson_prepare(window);
  if (gram.rows() < window || gram.cols() < window || rhs.size() < window)
    throw GpuError("GPU PD: Anderson's Gram matrix is smaller than the window");
  const size_t n3 = 3 * static_cast<size_t>(m.d.num_nodes);
  // The ring as in the host loop: this record writes column `head` when a previous pair exists.
  m.ad.dF_col = m.ad.dF + n3 * m.head;
  m.ad.dG_col = m.ad.dG + n3 * m.head;
  detail::launch_anderson_record(m.ad, m.has_prev, stream());
  if (m.has_prev) {
    m.head = (m.head + 1) % window;
    m.history = std::min(m.history + 1, window);
  }
  m.has_prev = true;
  const int k = m.history;
  if (k == 0) return 0;
  // dFᵀdF (upper triangle) and dFᵀδ over the k columns held, in one launch.
  detail::DotJob job{};
  job.n = static_cast<long long>(n3);
  for (int a = 0; a < k; ++a)
    for (int b = a; b < k; ++b) {
      job.a[job.count] = m.ad.dF + n3 * a;
      job.b[job.count] = m.ad.dF + n3 * b;
      ++job.count;
    }
  for (int a = 0; a < k; ++a) {
    job.a[job.count] = m.ad.dF + n3 * a;
    job.b[job.count] = m.d.f;
    ++job.count;
  }
  detail::launch_dots(job, m.dot_partials, m.dot_out, stream());
  cuda_check(cudaMemcpyAsync(m.dot_readback, m.dot_out, job.count * sizeof(double), cudaMemcpyDeviceToHost, stream()),
             "Anderson dots");
  synchronize();
  int q = 0;
  for (int a = 0; a < k; ++a)
    for (int b = a; b < k; ++b) {
      gram(a, b) = m.dot_readback[q];
      gram(b, a) = m.dot_readback[q];
      ++q;
    }
  rhs.setZero();
  for (int a = 0; a < k; ++a) rhs(a) = m.dot_readback[q++];
  return k;
}

void DevicePd::anderson_combine(const Eigen::VectorXd& gamma, int k) {
  Impl& m = *impl_;
  if (k < 1 || k > m.history || gamma.size() < k) throw GpuError("GPU PD: Anderson combination beyond the history");
  detail::AndersonGamma g{};
  g.k = k;
  for (int a = 0; a < k; ++a) g.g[a] = gamma(a);
  detail::launch_anderson_combine(m.ad, g, stream());
}

void DevicePd::anderson_reject() {
  Impl& m = *impl_;
  if (m.window > 0)
    cuda_check(cudaMemcpyAsync(m.d.x, m.ad.x_pd, 3 * static_cast<size_t>(m.d.num_nodes) * sizeof(double),
                               cudaMemcpyDeviceToDevice, stream()),
               "Anderson reject");
  anderson_reset();
}

void DevicePd::anderson_reset() {
  Impl& m = *impl_;
  m.history = m.head = 0;
  m.has_prev = false;
}

DeviceSolve& DevicePd::solver() { return *impl_->solve; }

// ---------------------------------------------------------------------------------------------
struct DeviceDenseCholesky::Impl {
  Allocations mem;
  cusolverDnHandle_t h = nullptr;
  int m = 0, max_rhs = 0, lwork = 0;
  double* A = nullptr;
  double* A0 = nullptr;  // the uploaded matrix (potrf overwrites A)
  double* work = nullptr;
  double* B = nullptr;
  int* info = nullptr;
  ~Impl() {
    if (h) cusolverDnDestroy(h);
  }
};

DeviceDenseCholesky::DeviceDenseCholesky(int m, int max_rhs) : impl_(std::make_unique<Impl>()) {
  Impl& q = *impl_;
  if (m <= 0 || max_rhs <= 0) throw GpuError("GPU dense Cholesky: size and right-hand sides must be positive");
  q.m = m;
  q.max_rhs = max_rhs;
  require_memory(8.0 * (static_cast<double>(m) * m * 2.1 + m * max_rhs), "GPU dense Cholesky");
  cuda_check(cusolverDnCreate(&q.h), "cusolverDnCreate");
  cuda_check(cusolverDnSetStream(q.h, stream()), "cusolverDnSetStream");
  q.A = q.mem.alloc<double>(static_cast<size_t>(m) * m, "GPU dense Cholesky matrix");
  q.A0 = q.mem.alloc<double>(static_cast<size_t>(m) * m, "GPU dense Cholesky matrix");
  q.B = q.mem.alloc<double>(static_cast<size_t>(m) * max_rhs, "GPU dense Cholesky rhs");
  q.info = q.mem.alloc<int>(1, "GPU dense Cholesky info");
  cuda_check(cusolverDnDpotrf_bufferSize(q.h, CUBLAS_FILL_MODE_LOWER, m, q.A, m, &q.lwork), "potrf_bufferSize");
  q.work = q.mem.alloc<double>(static_cast<size_t>(std::max(1, q.lwork)), "GPU dense Cholesky workspace");
}

DeviceDenseCholesky::~DeviceDenseCholesky() = default;

void DeviceDenseCholesky::upload(const Eigen::MatrixXd& H) {
  Impl& q = *impl_;
  if (H.rows() != q.m || H.cols() != q.m) throw GpuError("GPU dense Cholesky: matrix of the wrong size");
  cuda_check(cudaMemcpyAsync(q.A0, H.data(), H.size() * sizeof(double), cudaMemcpyHostToDevice, stream()), "upload H");
  restore_async();
  synchronize();
}

void DeviceDenseCholesky::restore_async() {
  Impl& q = *impl_;
  cuda_check(
      cudaMemcpyAsync(q.A, q.A0, static_cast<size_t>(q.m) * q.m * sizeof(double), cudaMemcpyDeviceToDevice, stream()),
      "restore H");
}

void DeviceDenseCholesky::factorize_async() {
  Impl& q = *impl_;
  cuda_check(cusolverDnDpotrf(q.h, CUBLAS_FILL_MODE_LOWER, q.m, q.A, q.m, q.work, q.lwork, q.info), "cusolverDnDpotrf");
}

void DeviceDenseCholesky::factorize() {
  factorize_async();
  int info = 0;
  cuda_check(cudaMemcpyAsync(&info, impl_->info, sizeof(int), cudaMemcpyDeviceToHost, stream()), "potrf info");
  synchronize();
  if (info > 0)
    throw SolverError(
        fmt::format("GPU dense Cholesky: the matrix is not positive definite (cuSOLVER potrf failed at "
                    "column {} of {})",
                    info - 1, impl_->m));
  if (info < 0) throw GpuError(fmt::format("GPU dense Cholesky: potrf argument {} invalid", -info));
}

void DeviceDenseCholesky::solve(Eigen::Ref<Eigen::MatrixXd> Bh) {
  Impl& q = *impl_;
  if (Bh.rows() != q.m || Bh.cols() > q.max_rhs) throw GpuError("GPU dense Cholesky: rhs of the wrong size");
  Eigen::MatrixXd tmp = Bh;
  const int r = static_cast<int>(tmp.cols());
  cuda_check(cudaMemcpyAsync(q.B, tmp.data(), tmp.size() * sizeof(double), cudaMemcpyHostToDevice, stream()),
             "upload B");
  cuda_check(cusolverDnDpotrs(q.h, CUBLAS_FILL_MODE_LOWER, q.m, r, q.A, q.m, q.B, q.m, q.info), "cusolverDnDpotrs");
  cuda_check(cudaMemcpyAsync(tmp.data(), q.B, tmp.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
             "download B");
  synchronize();
  Bh = tmp;
}

// ---------------------------------------------------------------------------------------------
struct DeviceSchurSystem::Impl {
  Allocations mem;
  cublasHandle_t blas = nullptr;
  cusolverDnHandle_t solver = nullptr;
  int m = 0, kmax = 0, rmax = 0, r = 0;
  int k = 0, q = 0, nentries = 0, lwork = 0;
  bool all_positive = false;
  double *sigma = nullptr, *sigma_inv = nullptr, *H = nullptr, *work = nullptr;
  double *G = nullptr, *U = nullptr, *V = nullptr, *R = nullptr;
  double *B = nullptr, *WN = nullptr, *T = nullptr, *S = nullptr, *vN = nullptr, *y = nullptr, *Z = nullptr;
  double *cinv = nullptr, *vals = nullptr;
  int *rows = nullptr, *cols = nullptr, *nodes = nullptr, *info = nullptr;
  enum class Last { None, Refactor, Woodbury } last = Last::None;
  ~Impl() {
    if (blas) cublasDestroy(blas);
    if (solver) cusolverDnDestroy(solver);
  }
};

DeviceSchurSystem::DeviceSchurSystem(const Eigen::MatrixXd& sigma, const Eigen::MatrixXd& sigma_inv, int max_springs,
                                     int max_rhs)
    : impl_(std::make_unique<Impl>()) {
  Impl& q = *impl_;
  const int m = static_cast<int>(sigma.rows());
  if (m <= 0 || sigma.cols() != m || sigma_inv.rows() != m || sigma_inv.cols() != m)
    throw GpuError("GPU collision system: Sigma and its inverse must be square and of one size");
  if (max_springs <= 0 || max_rhs <= 0) throw GpuError("GPU collision system: max_springs and max_rhs must be > 0");
  q.m = m;
  q.kmax = max_springs;
  q.rmax = max_rhs;
  const int qmax = std::min(m, 8 * max_springs);
  const double mm = static_cast<double>(m) * m;
  require_memory(8.0 * (3.0 * mm + 4.0 * m * max_rhs + static_cast<double>(qmax) * qmax +
                        static_cast<double>(max_springs) * (2.0 * qmax + max_springs + 2.0 * max_rhs)) +
                     64.0 * max_springs * 64,
                 "GPU collision system");
  cuda_check(cublasCreate(&q.blas), "cublasCreate");
  cuda_check(cublasSetStream(q.blas, stream()), "cublasSetStream");
  cuda_check(cusolverDnCreate(&q.solver), "cusolverDnCreate");
  cuda_check(cusolverDnSetStream(q.solver, stream()), "cusolverDnSetStream");
  const size_t m2 = static_cast<size_t>(m) * m, mr = static_cast<size_t>(m) * max_rhs;
  q.sigma = q.mem.alloc<double>(m2, "GPU collision system Sigma");
  q.sigma_inv = q.mem.alloc<double>(m2, "GPU collision system Sigma^-1");
  q.H = q.mem.alloc<double>(m2, "GPU collision system H");
  cuda_check(cudaMemcpy(q.sigma, sigma.data(), m2 * sizeof(double), cudaMemcpyHostToDevice), "upload Sigma");
  cuda_check(cudaMemcpy(q.sigma_inv, sigma_inv.data(), m2 * sizeof(double), cudaMemcpyHostToDevice), "upload Sigma^-1");
  q.G = q.mem.alloc<double>(mr, "GPU collision system g");
  q.U = q.mem.alloc<double>(mr, "GPU collision system u");
  q.V = q.mem.alloc<double>(mr, "GPU collision system v");
  q.R = q.mem.alloc<double>(mr, "GPU collision system r");
  const size_t K = static_cast<size_t>(max_springs), Q = static_cast<size_t>(qmax), Rr = static_cast<size_t>(max_rhs);
  q.B = q.mem.alloc<double>(Q * Q, "GPU collision system B");
  q.WN = q.mem.alloc<double>(K * Q, "GPU collision system W");
  q.T = q.mem.alloc<double>(K * Q, "GPU collision system T");
  q.S = q.mem.alloc<double>(K * K, "GPU collision system S");
  q.vN = q.mem.alloc<double>(Q * Rr, "GPU collision system v_N");
  q.y = q.mem.alloc<double>(K * Rr, "GPU collision system s");
  q.Z = q.mem.alloc<double>(Q * Rr, "GPU collision system z");
  q.cinv = q.mem.alloc<double>(K, "GPU collision system C^-1");
  q.vals = q.mem.alloc<double>(K * 64, "GPU collision system entries");
  q.rows = q.mem.alloc<int>(K * 64, "GPU collision system entries");
  q.cols = q.mem.alloc<int>(K * 64, "GPU collision system entries");
  q.nodes = q.mem.alloc<int>(Q, "GPU collision system nodes");
  q.info = q.mem.alloc<int>(2, "GPU collision system info");  // potrf, potrs
  int lh = 0, ls = 0;
  cuda_check(cusolverDnDpotrf_bufferSize(q.solver, CUBLAS_FILL_MODE_LOWER, m, q.H, m, &lh), "potrf_bufferSize");
  cuda_check(cusolverDnDpotrf_bufferSize(q.solver, CUBLAS_FILL_MODE_LOWER, max_springs, q.S, max_springs, &ls),
             "potrf_bufferSize");
  q.lwork = std::max({lh, ls, 1});
  q.work = q.mem.alloc<double>(static_cast<size_t>(q.lwork), "GPU collision system workspace");
}

DeviceSchurSystem::~DeviceSchurSystem() = default;

void DeviceSchurSystem::set_springs(const std::vector<ContactSpring>& springs) {
  Impl& q = *impl_;
  const int k = static_cast<int>(springs.size());
  if (k > q.kmax) throw GpuError(fmt::format("GPU collision system: {} springs, built for {}", k, q.kmax));
  // Distinct nodes N (ascending) and W_N (k × q, column-major); the entries c w wᵀ of the lower
  // triangle merged per (row, column) in a fixed order.
  std::vector<int> nodes;
  for (const auto& sp : springs)
    for (int a = 0; a < 8; ++a)
      if (sp.weights[a] != 0.0) {
        if (sp.nodes[a] < 0 || sp.nodes[a] >= q.m)
          throw GpuError(fmt::format("GPU collision system: node {} outside the region of {}", sp.nodes[a], q.m));
        nodes.push_back(sp.nodes[a]);
      }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  const int nq = static_cast<int>(nodes.size());
  std::vector<double> WN(static_cast<size_t>(k) * nq, 0.0), cinv(k);
  std::map<std::pair<int, int>, double> entries;
  q.all_positive = true;
  for (int j = 0; j < k; ++j) {
    const auto& sp = springs[j];
    q.all_positive = q.all_positive && sp.stiffness > 0;
    cinv[j] = sp.stiffness > 0 ? 1.0 / sp.stiffness : 0.0;
    for (int a = 0; a < 8; ++a) {
      if (sp.weights[a] == 0.0) continue;
      const int pa = static_cast<int>(std::lower_bound(nodes.begin(), nodes.end(), sp.nodes[a]) - nodes.begin());
      WN[j + static_cast<size_t>(pa) * k] += sp.weights[a];
      for (int b = 0; b < 8; ++b)
        if (sp.weights[b] != 0.0 && sp.nodes[a] >= sp.nodes[b])
          entries[{sp.nodes[a], sp.nodes[b]}] += sp.stiffness * sp.weights[a] * sp.weights[b];
    }
  }
  std::vector<int> rows, cols;
  std::vector<double> vals;
  for (const auto& [rc, v] : entries) {
    rows.push_back(rc.first);
    cols.push_back(rc.second);
    vals.push_back(v);
  }
  auto up = [](auto* dst, const auto& v) {
    if (!v.empty())
      cuda_check(cudaMemcpyAsync(dst, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice, stream()),
                 "upload springs");
  };
  up(q.rows, rows);
  up(q.cols, cols);
  up(q.vals, vals);
  up(q.nodes, nodes);
  up(q.WN, WN);
  up(q.cinv, cinv);
  synchronize();
  q.k = k;
  q.q = nq;
  q.nentries = static_cast<int>(vals.size());
}

void DeviceSchurSystem::set_rhs(const Eigen::MatrixXd& g) {
  Impl& q = *impl_;
  if (g.rows() != q.m || g.cols() < 1 || g.cols() > q.rmax)
    throw GpuError(
        fmt::format("GPU collision system: rhs {}x{} for m = {}, up to {} columns", g.rows(), g.cols(), q.m, q.rmax));
  q.r = static_cast<int>(g.cols());
  cuda_check(cudaMemcpyAsync(q.G, g.data(), g.size() * sizeof(double), cudaMemcpyHostToDevice, stream()), "upload g");
  synchronize();
}

void DeviceSchurSystem::refactor_async() {
  Impl& q = *impl_;
  cudaStream_t st = stream();
  const size_t m2 = static_cast<size_t>(q.m) * q.m;
  cuda_check(cudaMemsetAsync(q.info, 0, 2 * sizeof(int), st), "info");
  cuda_check(cudaMemcpyAsync(q.H, q.sigma, m2 * sizeof(double), cudaMemcpyDeviceToDevice, st), "H = Sigma");
  detail::launch_add_entries(q.H, q.m, q.rows, q.cols, q.vals, q.nentries, st);
  cuda_check(cusolverDnDpotrf(q.solver, CUBLAS_FILL_MODE_LOWER, q.m, q.H, q.m, q.work, q.lwork, q.info), "potrf H");
  cuda_check(cudaMemcpyAsync(q.U, q.G, static_cast<size_t>(q.m) * q.r * sizeof(double), cudaMemcpyDeviceToDevice, st),
             "u = g");
  cuda_check(cusolverDnDpotrs(q.solver, CUBLAS_FILL_MODE_LOWER, q.m, q.r, q.H, q.m, q.U, q.m, q.info + 1), "potrs H");
  q.last = Impl::Last::Refactor;
}

void DeviceSchurSystem::woodbury_async() {
  Impl& q = *impl_;
  if (!q.all_positive) throw GpuError("GPU collision system: Woodbury needs every spring stiffness > 0");
  cudaStream_t st = stream();
  const double one = 1.0, zero = 0.0;
  const auto N = CUBLAS_OP_N, T = CUBLAS_OP_T;
  cuda_check(cudaMemsetAsync(q.info, 0, 2 * sizeof(int), st), "info");
  // v = Σ⁻¹ g; B = Σ⁻¹[N, N]; v_N = v[N].
  cuda_check(cublasDgemm(q.blas, N, N, q.m, q.r, q.m, &one, q.sigma_inv, q.m, q.G, q.m, &zero, q.V, q.m), "v");
  if (q.k > 0) {
    detail::launch_gather(q.sigma_inv, q.m, q.nodes, q.q, q.B, st);
    detail::launch_gather_rows(q.V, q.m, q.nodes, q.q, q.r, q.vN, st);
    // S = W_N B W_Nᵀ + C⁻¹.
    cuda_check(cublasDgemm(q.blas, N, N, q.k, q.q, q.q, &one, q.WN, q.k, q.B, q.q, &zero, q.T, q.k), "T");
    cuda_check(cublasDgemm(q.blas, N, T, q.k, q.k, q.q, &one, q.T, q.k, q.WN, q.k, &zero, q.S, q.k), "S");
    detail::launch_add_diagonal(q.S, q.k, q.cinv, st);
    cuda_check(cusolverDnDpotrf(q.solver, CUBLAS_FILL_MODE_LOWER, q.k, q.S, q.k, q.work, q.lwork, q.info), "potrf S");
    // s = S⁻¹ W_N v_N; r = g − W_Nᵀ s scattered to N.
    cuda_check(cublasDgemm(q.blas, N, N, q.k, q.r, q.q, &one, q.WN, q.k, q.vN, q.q, &zero, q.y, q.k), "W v");
    cuda_check(cusolverDnDpotrs(q.solver, CUBLAS_FILL_MODE_LOWER, q.k, q.r, q.S, q.k, q.y, q.k, q.info + 1), "potrs S");
    cuda_check(cublasDgemm(q.blas, T, N, q.q, q.r, q.k, &one, q.WN, q.k, q.y, q.k, &zero, q.Z, q.q), "W^T s");
  }
  cuda_check(cudaMemcpyAsync(q.R, q.G, static_cast<size_t>(q.m) * q.r * sizeof(double), cudaMemcpyDeviceToDevice, st),
             "r = g");
  if (q.k > 0) detail::launch_scatter_subtract(q.R, q.m, q.nodes, q.q, q.r, q.Z, st);
  cuda_check(cublasDgemm(q.blas, N, N, q.m, q.r, q.m, &one, q.sigma_inv, q.m, q.R, q.m, &zero, q.U, q.m), "u");
  q.last = Impl::Last::Woodbury;
}

void DeviceSchurSystem::check() {
  Impl& q = *impl_;
  if (q.last == Impl::Last::None) throw GpuError("GPU collision system: nothing solved yet");
  int info = 0;
  cuda_check(cudaMemcpyAsync(&info, q.info, sizeof(int), cudaMemcpyDeviceToHost, stream()), "info");
  synchronize();
  if (info > 0)
    throw SolverError(fmt::format("GPU collision system: {} is not positive definite (potrf failed at column {})",
                                  q.last == Impl::Last::Refactor ? "H = Sigma + W^T C W" : "the Woodbury capacitance S",
                                  info - 1));
}

Eigen::MatrixXd DeviceSchurSystem::result() {
  Impl& q = *impl_;
  check();
  Eigen::MatrixXd u(q.m, q.r);
  cuda_check(cudaMemcpyAsync(u.data(), q.U, u.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()), "download u");
  synchronize();
  return u;
}

double* DeviceSchurSystem::device_rhs(int r) {
  Impl& q = *impl_;
  if (r < 1 || r > q.rmax) throw GpuError(fmt::format("GPU collision system: {} columns, up to {}", r, q.rmax));
  q.r = r;
  return q.G;
}

const double* DeviceSchurSystem::device_result() const { return impl_->U; }

// ---------------------------------------------------------------------------------------------
struct DeviceCollisionPd::Impl {
  std::unique_ptr<DevicePd> pd;
  std::unique_ptr<DeviceSchurSystem> sys;
  Allocations mem;
  cublasHandle_t blas = nullptr;
  detail::PdData beta{};  // the E_β local step (positions and status shared with pd)
  int* beta_offsets = nullptr;
  int* beta_inc = nullptr;
  detail::RegionData r{};
  double *l22 = nullptr, *Y2 = nullptr, *Z2 = nullptr;
  unsigned char* mask = nullptr;
  std::vector<int> fpos;  // region index → factor position
  int m = 0, kmax = 0, max_springs = 0, last_inner = 0;
  long n = 0;
  double *res_partials = nullptr, *res_out = nullptr;
  // Host staging of the springs (sized at construction).
  std::vector<int> h_nodes, h_offsets, h_inc;
  std::vector<double> h_w, h_c, h_o;
  static constexpr int kMaxInner = 256;
  ~Impl() {
    if (blas) cublasDestroy(blas);
  }
};

DeviceCollisionPd::DeviceCollisionPd(const DeviceCollisionDesc& desc) : impl_(std::make_unique<Impl>()) {
  Impl& q = *impl_;
  const int m = static_cast<int>(desc.region_nodes.size());
  const long n = desc.pd.rest.rows();
  if (m == 0) throw GpuError("GPU collision PD: the region is empty");
  if (desc.pd.factor.n != n) throw GpuError("GPU collision PD: the factor does not match the mesh");
  if (static_cast<int>(desc.factor_position.size()) != m || desc.l22.rows() != m || desc.l22.cols() != m ||
      desc.sigma.rows() != m || desc.sigma.cols() != m || desc.sigma_inv.rows() != m || desc.sigma_inv.cols() != m ||
      desc.a22_beta.rows() != m || desc.a22_beta.cols() != m)
    throw GpuError(fmt::format("GPU collision PD: the region's blocks are not all of size m = {}", m));
  const long n1 = n - m;
  std::vector<int> inv(m, -1), gnode(m);
  q.fpos = desc.factor_position;
  for (int i = 0; i < m; ++i) {
    const int p = desc.factor_position[i];
    if (p < 0 || p >= m || inv[p] >= 0) throw GpuError("GPU collision PD: factor_position is not a permutation");
    inv[p] = i;
    gnode[p] = desc.region_nodes[i];
    if (desc.pd.factor.perm[n1 + p] != desc.region_nodes[i])
      throw GpuError(fmt::format("GPU collision PD: factor row {} is node {}, the region says {}", n1 + p,
                                 desc.pd.factor.perm[n1 + p], desc.region_nodes[i]));
  }
  if (desc.max_springs < 0) throw GpuError("GPU collision PD: max_springs < 0");
  if (!desc.pd.elements) throw GpuError("GPU collision PD: no elements");
  q.m = m;
  q.n = n;
  q.max_springs = desc.max_springs;
  q.kmax = std::max(1, desc.max_springs);  // device buffers of at least one spring
  // A22^(β) as CSR rows in factor order (symmetric: row i = column i), columns ascending.
  std::vector<int> a_off(m + 1, 0), a_col;
  std::vector<double> a_val;
  for (int p = 0; p < m; ++p) {
    std::vector<std::pair<int, double> > row;
    for (Eigen::SparseMatrix<double>::InnerIterator it(desc.a22_beta, inv[p]); it; ++it)
      row.emplace_back(q.fpos[static_cast<size_t>(it.row())], it.value());
    std::sort(row.begin(), row.end());
    for (const auto& [c, v] : row) {
      a_col.push_back(c);
      a_val.push_back(v);
    }
    a_off[p + 1] = static_cast<int>(a_col.size());
  }
  // E_β: the elements' data and per region node its incidences (4 b + a), b ascending.
  const TetElements& e = *desc.pd.elements;
  const int nb = static_cast<int>(desc.beta_elements.size());
  std::vector<int> local_p(static_cast<size_t>(n), -1);
  for (int p = 0; p < m; ++p) local_p[static_cast<size_t>(gnode[p])] = p;
  std::vector<int4> btets(nb);
  std::vector<double> bdm(9 * static_cast<size_t>(nb)), bw(nb);
  std::vector<int> b_off(m + 1, 0), b_inc(4 * static_cast<size_t>(nb));
  for (int b = 0; b < nb; ++b) {
    const int t = desc.beta_elements[b];
    if (t < 0 || t >= e.size())
      throw GpuError(fmt::format("GPU collision PD: E_beta names element {} of {}", t, e.size()));
    const auto& nd = e.nodes[t];
    btets[b] = make_int4(nd[0], nd[1], nd[2], nd[3]);
    for (int k = 0; k < 9; ++k) bdm[static_cast<size_t>(k) * nb + b] = e.Dm_inv[t].data()[k];
    bw[b] = e.weight[t];
    for (int a = 0; a < 4; ++a) {
      if (local_p[static_cast<size_t>(nd[a])] < 0)
        throw GpuError(fmt::format("GPU collision PD: E_beta element {} has node {} outside the region", t, nd[a]));
      ++b_off[local_p[static_cast<size_t>(nd[a])] + 1];
    }
  }
  for (int p = 0; p < m; ++p) b_off[p + 1] += b_off[p];
  {
    std::vector<int> fill(b_off.begin(), b_off.end() - 1);
    for (int b = 0; b < nb; ++b)
      for (int a = 0; a < 4; ++a)
        b_inc[fill[local_p[static_cast<size_t>(e.nodes[desc.beta_elements[b]][a])]]++] = 4 * b + a;
  }
  std::vector<unsigned char> mask(static_cast<size_t>(n), 0);
  for (int p = 0; p < m; ++p) mask[static_cast<size_t>(gnode[p])] = 1;
  // The host inputs are checked: now the uploads (the factor, Σ, Σ⁻¹: seconds on box:48).
  q.pd = std::make_unique<DevicePd>(desc.pd);
  // Σ and Σ⁻¹ in factor order for the Schur system (every region vector on the device is).
  {
    Eigen::MatrixXd sf(m, m), sif(m, m);
    for (int c = 0; c < m; ++c)
      for (int rr = 0; rr < m; ++rr) {
        sf(rr, c) = desc.sigma(inv[rr], inv[c]);
        sif(rr, c) = desc.sigma_inv(inv[rr], inv[c]);
      }
    q.sys = std::make_unique<DeviceSchurSystem>(sf, sif, q.kmax, 3);
  }
  const double mm = static_cast<double>(m) * m;
  require_memory(8.0 * (mm + 7.0 * 3 * m + nb * 20.0 + a_val.size()) + 4.0 * (nb * 8.0 + a_col.size() + 3.0 * m) + n +
                     q.kmax * (8 * 12.0 + 8 * 8.0 + 7 * 8.0),
                 "GPU collision PD");
  DevicePd::Impl& P = *q.pd->impl_;
  q.beta.num_tets = nb;
  q.beta.tets = q.mem.copy(btets, "GPU E_beta tets");
  q.beta.dm_inv = q.mem.copy(bdm, "GPU E_beta Dm_inv");
  q.beta.weight = q.mem.copy(bw, "GPU E_beta weights");
  q.beta.x = P.d.x;
  q.beta.status = P.d.status;
  q.beta.H = q.mem.alloc<double>(9 * static_cast<size_t>(std::max(1, nb)), "GPU E_beta H");
  q.beta.tet_energy = q.mem.alloc<double>(static_cast<size_t>(std::max(1, nb)), "GPU E_beta energies");
  q.beta_offsets = q.mem.copy(b_off, "GPU E_beta incidences");
  q.beta_inc = q.mem.copy(b_inc, "GPU E_beta incidences");
  q.mask = q.mem.copy(mask, "GPU region mask");
  q.l22 = q.mem.copy(std::vector<double>(desc.l22.data(), desc.l22.data() + desc.l22.size()), "GPU L22");
  const size_t m3 = 3 * static_cast<size_t>(m);
  q.Y2 = q.mem.alloc<double>(m3, "GPU region y2");
  q.Z2 = q.mem.alloc<double>(m3, "GPU region z2");
  auto& r = q.r;
  r.m = m;
  r.n1 = n1;
  r.gnode = q.mem.copy(gnode, "GPU region nodes");
  r.x = P.d.x;
  const size_t K = static_cast<size_t>(q.kmax);
  r.k = 0;
  r.spring_nodes = q.mem.alloc<int>(8 * K, "GPU springs");
  r.spring_w = q.mem.alloc<double>(8 * K, "GPU springs");
  r.spring_c = q.mem.alloc<double>(K, "GPU springs");
  r.spring_o = q.mem.alloc<double>(3 * K, "GPU springs");
  r.spring_t = q.mem.alloc<double>(3 * K, "GPU springs");
  r.sp_offsets = q.mem.copy(std::vector<int>(m + 1, 0), "GPU springs");
  r.sp_inc = q.mem.alloc<int>(8 * K, "GPU springs");
  r.a_offsets = q.mem.copy(a_off, "GPU A22 beta");
  r.a_cols = q.mem.copy(a_col, "GPU A22 beta");
  r.a_vals = q.mem.copy(a_val, "GPU A22 beta");
  r.g_alpha = q.mem.alloc<double>(m3, "GPU g_alpha");
  r.fbeta = q.mem.alloc<double>(m3, "GPU f_beta");
  r.Utot = q.mem.alloc<double>(m3, "GPU sum of u2");
  r.G = q.sys->device_rhs(3);
  r.U = q.sys->device_result();
  q.res_partials = q.mem.alloc<double>(detail::kSumBlocks, "GPU inner residuals");
  q.res_out = q.mem.alloc<double>(Impl::kMaxInner, "GPU inner residuals");
  q.h_nodes.reserve(8 * K);
  q.h_w.reserve(8 * K);
  q.h_c.reserve(K);
  q.h_o.reserve(3 * K);
  q.h_inc.reserve(8 * K);
  q.h_offsets.assign(m + 1, 0);
  cuda_check(cublasCreate(&q.blas), "cublasCreate");
  cuda_check(cublasSetStream(q.blas, stream()), "cublasSetStream");
  q.sys->set_springs({});  // no contacts until set_springs (synchronizes)
}

DeviceCollisionPd::~DeviceCollisionPd() = default;
DevicePd& DeviceCollisionPd::pd() { return *impl_->pd; }
int DeviceCollisionPd::region_size() const { return impl_->m; }

void DeviceCollisionPd::set_springs(const std::vector<ContactSpring>& springs, const Points& offsets) {
  Impl& q = *impl_;
  const int k = static_cast<int>(springs.size());
  if (k > q.max_springs) throw GpuError(fmt::format("GPU collision PD: {} springs, built for {}", k, q.max_springs));
  if (offsets.rows() != k || (k > 0 && offsets.cols() != 3) || !offsets.allFinite())
    throw GpuError("GPU collision PD: the springs' offsets must be #springs x 3 and finite");
  std::vector<ContactSpring> factor_order = springs;
  q.h_nodes.assign(8 * static_cast<size_t>(k), 0);
  q.h_w.assign(8 * static_cast<size_t>(k), 0.0);
  q.h_c.assign(static_cast<size_t>(k), 0.0);
  q.h_o.assign(3 * static_cast<size_t>(k), 0.0);
  std::fill(q.h_offsets.begin(), q.h_offsets.end(), 0);
  for (int s = 0; s < k; ++s) {
    auto& sp = factor_order[s];
    if (!(sp.stiffness > 0) || !std::isfinite(sp.stiffness))
      throw GpuError(fmt::format("GPU collision PD: spring {} has stiffness {} (must be > 0)", s, sp.stiffness));
    for (int a = 0; a < 8; ++a) {
      // Every slot names a region node, used (weight ≠ 0) or not.
      if (sp.nodes[a] < 0 || sp.nodes[a] >= q.m)
        throw GpuError(fmt::format("GPU collision PD: spring {} names region node {} of {}", s, sp.nodes[a], q.m));
      if (!std::isfinite(sp.weights[a]))
        throw GpuError(fmt::format("GPU collision PD: spring {} has a non-finite weight", s));
      sp.nodes[a] = q.fpos[static_cast<size_t>(sp.nodes[a])];
      if (sp.weights[a] == 0.0) continue;
      q.h_nodes[8 * s + a] = sp.nodes[a];
      q.h_w[8 * s + a] = sp.weights[a];
      ++q.h_offsets[sp.nodes[a] + 1];
    }
    q.h_c[s] = sp.stiffness;
    for (int c = 0; c < 3; ++c) q.h_o[3 * s + c] = offsets(s, c);
  }
  for (int p = 0; p < q.m; ++p) q.h_offsets[p + 1] += q.h_offsets[p];
  q.h_inc.assign(static_cast<size_t>(q.h_offsets[q.m]), 0);
  {
    std::vector<int> fill(q.h_offsets.begin(), q.h_offsets.end() - 1);
    for (int s = 0; s < k; ++s)
      for (int a = 0; a < 8; ++a)
        if (q.h_w[8 * s + a] != 0.0) q.h_inc[fill[q.h_nodes[8 * s + a]]++] = 8 * s + a;
  }
  q.sys->set_springs(factor_order);  // synchronizes
  auto up = [](const auto* dst, const auto& v) {
    if (!v.empty())
      cuda_check(cudaMemcpyAsync(const_cast<void*>(static_cast<const void*>(dst)), v.data(), v.size() * sizeof(v[0]),
                                 cudaMemcpyHostToDevice, stream()),
                 "upload springs");
  };
  up(q.r.spring_nodes, q.h_nodes);
  up(q.r.spring_w, q.h_w);
  up(q.r.spring_c, q.h_c);
  up(q.r.spring_o, q.h_o);
  up(q.r.sp_offsets, q.h_offsets);
  up(q.r.sp_inc, q.h_inc);
  synchronize();
  q.r.k = k;
}

void DeviceCollisionPd::outer_iteration(int inner) {
  Impl& q = *impl_;
  if (inner < 1 || inner > Impl::kMaxInner)
    throw GpuError(fmt::format("GPU collision PD: {} inner iterations (1 to {})", inner, Impl::kMaxInner));
  cudaStream_t st = stream();
  DevicePd::Impl& P = *q.pd->impl_;
  DeviceSolve& solve = *P.solve;
  const double one = 1.0;
  const int m = q.m;
  // f(x); y = L⁻¹ P f; g2 = L22 y2 (Algorithm 1, steps 1-3).
  detail::launch_forces(P.d, st);
  solve.forward_device(P.d.f, 3);
  double* Y = solve.work();
  detail::launch_y2_gather(q.r, Y, q.Y2, st);  // Y holds 3 interleaved columns: forward_device(·, 3)
  cuda_check(cublasDtrmm(q.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_NON_UNIT, m, 3,
                         &one, q.l22, m, q.Y2, m, q.r.g_alpha, m),
             "g2 = L22 y2");
  // g_α = g2 − f_β(x).
  detail::launch_tet_forces(q.beta, st);
  detail::launch_beta_gather(m, q.beta_offsets, q.beta_inc, q.beta.H, q.beta.num_tets, q.r.fbeta, q.r.g_alpha, st);
  cuda_check(cudaMemsetAsync(q.r.Utot, 0, 3 * static_cast<size_t>(m) * sizeof(double), st), "sum of u2");
  for (int j = 0; j < inner; ++j) {
    if (j > 0) {  // R_β at the moved x2 (step 4.2)
      detail::launch_tet_forces(q.beta, st);
      detail::launch_beta_gather(m, q.beta_offsets, q.beta_inc, q.beta.H, q.beta.num_tets, q.r.fbeta, nullptr, st);
    }
    detail::launch_spring_eval(q.r, true, st);
    detail::launch_compose_g(q.r, st);
    detail::DotJob job{};
    job.a[0] = q.r.G;
    job.b[0] = q.r.G;
    job.n = 3LL * m;
    job.count = 1;
    detail::launch_dots(job, q.res_partials, q.res_out + j, st);
    q.sys->woodbury_async();
    detail::launch_apply_u2(q.r, st);
    detail::launch_spring_eval(q.r, false, st);
    detail::launch_update_g_alpha(q.r, st);
  }
  q.last_inner = inner;
  // z = [y1; L22ᵀ Σ u2]; backward sweep; x1 += z1 (step 5).
  cuda_check(cublasDtrmm(q.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, CUBLAS_DIAG_NON_UNIT, m, 3,
                         &one, q.l22, m, q.r.Utot, m, q.Z2, m),
             "L22^T u2");
  detail::launch_z2_scatter(q.r, Y, q.Z2, st);
  solve.backward_device(P.d.f, 3);
  detail::launch_add_x1(P.d.x, P.d.f, q.mask, q.n, st);
}

void DeviceCollisionPd::check() {
  impl_->pd->check();
  if (impl_->last_inner > 0) impl_->sys->check();
}

std::vector<double> DeviceCollisionPd::inner_residuals() {
  Impl& q = *impl_;
  std::vector<double> out(static_cast<size_t>(q.last_inner));
  if (!out.empty())
    cuda_check(cudaMemcpyAsync(out.data(), q.res_out, out.size() * sizeof(double), cudaMemcpyDeviceToHost, stream()),
               "inner residuals");
  synchronize();
  for (double& v : out) v = std::sqrt(v);
  return out;
}

#endif

}  // namespace xpd::gpu
