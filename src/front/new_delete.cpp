// new_delete.cpp — the C++ operator new/delete family on top of HAKMEM.
//
// libhakmem.so must not pull the C++ runtime into C programs, so the two
// things only libstdc++ provides (the new-handler and throwing bad_alloc) are
// reached through weak references: in a C++ program they resolve to
// libstdc++, and a C program never calls operator new. Built without
// exception tables of its own; the unwinder passes through these frames.
#include <cstddef>
#include <cstdlib>
#include <new>
#include "hakmem.h"

extern "C" {
typedef void (*hak_new_handler_fn)();
hak_new_handler_fn hak_cxx_get_new_handler() __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
[[noreturn]] void hak_cxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv") __attribute__((weak));
}

namespace {

void *alloc_aligned(std::size_t n, std::size_t align) {
  void *p = nullptr;
  if (align < sizeof(void *)) align = sizeof(void *);
  return hak_posix_memalign(&p, align, n) == 0 ? p : nullptr;
}

// The standard loop: ask the new-handler for memory until it gives up.
__attribute__((noinline)) void *new_slow(std::size_t n, std::size_t align, bool nothrow) {
  for (;;) {
    void *p = align ? alloc_aligned(n, align) : hak_malloc(n);
    if (p) return p;
    hak_new_handler_fn h = hak_cxx_get_new_handler ? hak_cxx_get_new_handler() : nullptr;
    if (!h) {
      if (nothrow) return nullptr;
      if (hak_cxx_throw_bad_alloc) hak_cxx_throw_bad_alloc();
      std::abort();
    }
    h();
  }
}

inline void *new_plain(std::size_t n) {
  void *p = hak_malloc(n);
  return __builtin_expect(p != nullptr, 1) ? p : new_slow(n, 0, false);
}

inline void *new_aligned(std::size_t n, std::align_val_t a) {
  void *p = alloc_aligned(n, static_cast<std::size_t>(a));
  return p ? p : new_slow(n, static_cast<std::size_t>(a), false);
}

}  // namespace

#define HAK_CXX_EXPORT __attribute__((visibility("default")))

HAK_CXX_EXPORT void *operator new(std::size_t n) { return new_plain(n); }
HAK_CXX_EXPORT void *operator new[](std::size_t n) { return new_plain(n); }
HAK_CXX_EXPORT void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
  void *p = hak_malloc(n);
  return p ? p : new_slow(n, 0, true);
}
HAK_CXX_EXPORT void *operator new[](std::size_t n, const std::nothrow_t &) noexcept {
  void *p = hak_malloc(n);
  return p ? p : new_slow(n, 0, true);
}
HAK_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t a) { return new_aligned(n, a); }
HAK_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t a) { return new_aligned(n, a); }
HAK_CXX_EXPORT void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  void *p = alloc_aligned(n, static_cast<std::size_t>(a));
  return p ? p : new_slow(n, static_cast<std::size_t>(a), true);
}
HAK_CXX_EXPORT void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
  void *p = alloc_aligned(n, static_cast<std::size_t>(a));
  return p ? p : new_slow(n, static_cast<std::size_t>(a), true);
}

HAK_CXX_EXPORT void operator delete(void *p) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, const std::nothrow_t &) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, const std::nothrow_t &) noexcept { hak_free(p); }
#if HAK_SECURE
extern "C" void hak_sized_free_check(void *p, std::size_t n);
#define HAK_SIZED_CHECK(p, n) hak_sized_free_check((p), (n))
#else
#define HAK_SIZED_CHECK(p, n) ((void)(n))
#endif
HAK_CXX_EXPORT void operator delete(void *p, std::size_t n) noexcept { HAK_SIZED_CHECK(p, n); hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::size_t n) noexcept { HAK_SIZED_CHECK(p, n); hak_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::align_val_t) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::align_val_t) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::size_t, std::align_val_t) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { hak_free(p); }
HAK_CXX_EXPORT void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept { hak_free(p); }
