#pragma once
// Counts heap allocations made by the calling thread while a CountAllocations object is alive.
// malloc_counter.cpp replaces malloc & co. in the xpd_alloc_tests executable (forwarding to
// glibc's __libc_* entry points); operator new and Eigen both allocate through them.

namespace xpd::test {

long allocations_on_this_thread();
void set_counting(bool on);

class CountAllocations {
 public:
  CountAllocations() : start_(allocations_on_this_thread()) { set_counting(true); }
  ~CountAllocations() { set_counting(false); }
  long count() const { return allocations_on_this_thread() - start_; }

 private:
  long start_;
};

}  // namespace xpd::test
