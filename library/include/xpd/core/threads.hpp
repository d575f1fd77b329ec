#pragma once
// One cap on every thread pool xpd's work runs on: TBB's (element loops, the tree-parallel
// substitution, collision detection) and the BLAS's (CHOLMOD's factorization and the large dense
// blocks of the solves), so that "1 thread" means one thread and two pools never oversubscribe
// a small machine.
#include <memory>

namespace xpd {

/// While alive, limits TBB to `threads` (a tbb::global_control) and, when the process's BLAS is
/// OpenBLAS (found at run time with dlsym; other BLAS libraries are left alone), OpenBLAS to the
/// same count, restoring its previous count afterwards. threads ≤ 0: no limit at all.
class ThreadLimit {
 public:
  explicit ThreadLimit(int threads);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// TBB's current maximum parallelism.
int tbb_threads();
/// OpenBLAS's current thread count; 0 when the BLAS is not OpenBLAS.
int blas_threads();

}  // namespace xpd
