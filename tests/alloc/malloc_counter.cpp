// Replacement of the C allocation functions for xpd_alloc_tests: every call made while the
// calling thread is counting increments that thread's counter, then forwards to glibc.
#include "alloc/malloc_counter.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
thread_local long t_count = 0;
thread_local bool t_on = false;
// XPD_ALLOC_TRAP=1: every counted allocation calls xpd_alloc_hit(), a place for a debugger
// breakpoint (gdb -ex 'break xpd_alloc_hit' ...) to show where a step allocates.
bool g_trap = false;
inline void note();
}  // namespace
extern "C" [[gnu::noinline]] void xpd_alloc_hit() { asm volatile(""); }
namespace {
inline void note() {
  if (t_on) {
    ++t_count;
    if (g_trap) xpd_alloc_hit();
  }
}
}  // namespace

namespace xpd::test {
long allocations_on_this_thread() { return t_count; }
void set_counting(bool on) {
  if (on) {
    const char* trap = std::getenv("XPD_ALLOC_TRAP");
    g_trap = trap && trap[0] == '1';
  }
  t_on = on;
}
}  // namespace xpd::test

extern "C" {
void* malloc(std::size_t n) {
  note();
  return __libc_malloc(n);
}
void* calloc(std::size_t a, std::size_t b) {
  note();
  return __libc_calloc(a, b);
}
void* realloc(void* p, std::size_t n) {
  note();
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(std::size_t alignment, std::size_t n) {
  note();
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  note();
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  note();
  void* p = __libc_memalign(alignment, n);
  if (!p && n != 0) return ENOMEM;
  *out = p;
  return 0;
}
}
