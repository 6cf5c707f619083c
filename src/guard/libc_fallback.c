/* libc_fallback.c — hands foreign pointers to glibc's allocator, so a block
 * that glibc made (before HAKMEM was loaded, or through __libc_malloc) is
 * freed, resized and measured exactly as glibc would. */
#include "guard/guard.h"
#include "stats/stats.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void  __libc_free(void *) __attribute__((weak));
extern void *__libc_realloc(void *, size_t) __attribute__((weak));

typedef void (*free_fn)(void *);
typedef void *(*realloc_fn)(void *, size_t);
typedef size_t (*usable_fn)(void *);

static void *next_symbol(const char *name) { return dlsym(RTLD_NEXT, name); }

void foreign_free(void *p) {
  HAK_STAT_INC(HAK_EV_FOREIGN_FREE);
  if (__libc_free) { __libc_free(p); return; }
  static free_fn real;
  if (!real) real = (free_fn)next_symbol("free");
  if (real) real(p);
}

void *foreign_realloc(void *p, size_t n) {
  HAK_STAT_INC(HAK_EV_FOREIGN_REALLOC);
  if (__libc_realloc) return __libc_realloc(p, n);
  static realloc_fn real;
  if (!real) real = (realloc_fn)next_symbol("realloc");
  return real ? real(p, n) : NULL;
}

size_t foreign_usable_size(void *p) {
  HAK_STAT_INC(HAK_EV_FOREIGN_SIZE);
  static _Atomic(usable_fn) real;
  usable_fn f = atomic_load_explicit(&real, memory_order_acquire);
  if (!f) {
    f = (usable_fn)next_symbol("malloc_usable_size");
    atomic_store_explicit(&real, f, memory_order_release);
  }
  return f ? f(p) : 0;
}

static void put_hex(char *buf, uintptr_t v) {
  static const char digits[] = "0123456789abcdef";
  buf[0] = '0'; buf[1] = 'x';
  for (int i = 0; i < 16; i++) buf[2 + i] = digits[(v >> (60 - 4 * i)) & 15];
  buf[18] = 0;
}

void report_bad(const char *fn, const char *problem, const void *p) {
  int saved = errno; /* free and realloc leave errno alone, even when the write fails */
  char hex[20], msg[160];
  put_hex(hex, (uintptr_t)p);
  size_t n = 0;
#if HAK_SECURE /* the secure build stops at the first sign of misuse */
  const char *parts[] = {"hakmem: ", fn, ": ", problem, " ", hex, " (aborting)\n"};
#else
  const char *parts[] = {"hakmem: ", fn, ": ", problem, " ", hex, " (ignored)\n"};
#endif
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
    size_t l = strlen(parts[i]);
    if (n + l >= sizeof msg) break;
    memcpy(msg + n, parts[i], l);
    n += l;
  }
  ssize_t w = write(STDERR_FILENO, msg, n);
  (void)w;
  errno = saved;
#if HAK_SECURE
  abort();
#endif
}
