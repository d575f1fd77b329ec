#include <dlfcn.h>
#include <tbb/global_control.h>

#include <optional>
#include <xpd/core/threads.hpp>

namespace xpd {

namespace {
// OpenBLAS's thread controls, looked up once in the process (absent with another BLAS).
struct OpenBlas {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
};

const OpenBlas& openblas() {
  static const OpenBlas f = [] {
    OpenBlas o;
    o.set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    o.get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (!o.set || !o.get) o = OpenBlas{};
    return o;
  }();
  return f;
}
}  // namespace

struct ThreadLimit::Impl {
  std::optional<tbb::global_control> tbb;
  int blas_before = 0;  // 0: OpenBLAS untouched
};

ThreadLimit::ThreadLimit(int threads) : impl_(std::make_unique<Impl>()) {
  if (threads <= 0) return;
  impl_->tbb.emplace(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(threads));
  if (const OpenBlas& o = openblas(); o.set) {
    impl_->blas_before = o.get();
    if (impl_->blas_before != threads)
      o.set(threads);
    else
      impl_->blas_before = 0;
  }
}

ThreadLimit::~ThreadLimit() {
  if (impl_->blas_before > 0) openblas().set(impl_->blas_before);
}

int tbb_threads() {
  return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

int blas_threads() {
  const OpenBlas& o = openblas();
  return o.get ? o.get() : 0;
}

}  // namespace xpd
