/* fault.c — the secure build's handler for SIGSEGV and SIGBUS: a fault in
 * one of HAKMEM's pages of no access is a bug in the program that the page
 * was put there to catch, and gets a name before the process stops:
 *
 *   hakmem: memory access: heap overflow past block 0x... (aborting)
 *     the guard page after a large or huge block (large.c)
 *   hakmem: memory access: read or write of a zero-size block 0x... (aborting)
 *     a malloc(0) block (guard/zero_size.c)
 *   hakmem: memory access: guard page after segment metadata 0x... (aborting)
 *     the guard between a segment's header and its blocks (segment.c)
 *
 * then abort(), as a failed check elsewhere does. Any other fault is not
 * ours: the disposition the handler replaced takes it, as if HAKMEM had not
 * been there: a handler function of the program's is called directly; a
 * default (or ignored) one is put back and the handler returns, so the
 * faulting instruction runs again and faults under it (a core dump
 * included); a signal sent by kill or raise is raised again, as returning
 * would not repeat it. A program that installs a handler of its own after
 * start-up replaces this one, and keeps full control.
 *
 * Installed once, at start-up (hak_init), unless HAKMEM_FAULT_HANDLER=0.
 * The handler is async-signal-safe: it reads the slice map and segment
 * headers (atomic or plain loads of memory the slice map says is mapped),
 * the zero-size regions (never unmapped), and writes with write(2). It
 * runs on the faulting thread's stack (SA_ONSTACK: on its alternate stack
 * if the program gave it one); a fault on an exhausted stack cannot be
 * handled by anyone and ends the process as before. */
#include "guard/fault.h"
#include "guard/guard.h"
#include "guard/registry.h"
#include "guard/zero_size.h"
#include "os/os.h"
#include "policy/config.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#if HAK_SECURE

/* glibc's own name for sigaction: a sanitizer intercepts `sigaction`, and
 * HAKMEM starts up before the sanitizer's runtime is ready to take calls
 * (ASan's start-up allocates through it), so the interceptor would crash. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);

static struct sigaction prev_segv, prev_bus;
static _Atomic(int) installed;

/* How far back from a fault a huge mapping's start is looked for (its
 * guard is at its end, its header at its start): 2 MiB chunks, 8 GiB. */
#define HUGE_WALK 4096

/* The block whose guard page holds a, or NULL; *freed if it was freed. */
static const void *guarded_block(const uint8_t *a, size_t ps, bool *freed) {
  hak_segment_t *s = segment_of(a);
  if (registry_has(a) && s->magic == HAK_SEG_MAGIC && s->kind == HAK_SEG_SMALL) {
    /* A large page's guard is the last OS page of its last slice. guard_mask
     * marks it by that slice's bit (a guard left behind by a freed page,
     * for the next one ending there) or by the page's first slice. */
    unsigned i = slice_index(a);
    const uint8_t *end = (const uint8_t *)s + ((size_t)(i + 1) << HAK_SLICE_SHIFT);
    if (a < end - ps) return NULL;
    uint32_t mask = atomic_load_explicit(&s->guard_mask, memory_order_relaxed);
    hak_page_t *pg = s->slice_page[i];
    bool live = pg && pg->state == HAK_PAGE_LARGE && pg->first_slice + pg->slice_count == i + 1;
    if (!(mask & (1u << i)) && !(live && (mask & (1u << pg->first_slice)))) return NULL;
    *freed = !live;
    return live ? (const void *)pg->start : (const void *)a;
  }
  /* A huge mapping: its header is in the chunk holding its start, the only
   * one the slice map marks; its guard is its last page. */
  for (unsigned k = 0; k < HUGE_WALK && (uintptr_t)s >= HAK_SEG_SIZE; k++, s = (hak_segment_t *)((uintptr_t)s - HAK_SEG_SIZE)) {
    if (!registry_has(s)) continue;
    if (s->magic != HAK_SEG_MAGIC || s->kind != HAK_SEG_HUGE) return NULL;
    const uint8_t *end = (const uint8_t *)s + s->map_size;
    if (a < end - ps || a >= end) return NULL;
    *freed = s->huge_size == 0; /* a cached mapping keeps its guard */
    return *freed ? (const void *)s : (const uint8_t *)s + (s->map_size - s->huge_size - ps);
  }
  return NULL;
}

/* A guard between a small segment's header and its blocks holds a. */
static bool in_header_guard(const uint8_t *a, size_t ps) {
  hak_segment_t *s = segment_of(a);
  if (!registry_has(a) || s->magic != HAK_SEG_MAGIC || s->kind != HAK_SEG_SMALL) return false;
  size_t from = align_up(sizeof(struct hak_segment), ps), off = (size_t)(a - (const uint8_t *)s);
  return off >= from && off < from + ps;
}

static void not_ours(int sig, siginfo_t *info, void *ctx) {
  const struct sigaction *prev = sig == SIGBUS ? &prev_bus : &prev_segv;
  if (!(prev->sa_flags & SA_RESETHAND)) {
    if ((prev->sa_flags & SA_SIGINFO) && prev->sa_sigaction) {
      prev->sa_sigaction(sig, info, ctx);
      return;
    }
    if (!(prev->sa_flags & SA_SIGINFO) && prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
      prev->sa_handler(sig);
      return;
    }
  }
  __sigaction(sig, prev, NULL);
  if (info->si_code <= 0) raise(sig); /* sent, not a fault: pending until we return */
}

static void on_fault(int sig, siginfo_t *info, void *ctx) {
  const uint8_t *a = info->si_addr;
  if (info->si_code > 0 && a) {
    size_t ps = os_page_size();
    bool freed = false;
    if (zero_size_owns(a)) report_bad("memory access", "read or write of a zero-size block", (const void *)((uintptr_t)a & ~(uintptr_t)15));
    const void *b = guarded_block(a, ps, &freed);
    if (b) report_bad("memory access", freed ? "guard page after a freed large block" : "heap overflow past block", b);
    if (in_header_guard(a, ps)) report_bad("memory access", "guard page after segment metadata", a);
  }
  not_ours(sig, info, ctx); /* report_bad aborts in this build */
}

void fault_handler_install(void) {
  if (!hak_config.fault_handler || atomic_exchange(&installed, 1)) return;
  (void)os_page_size(); /* cached before any fault */
  /* No memset or sigemptyset either (interceptors): the initialiser
   * zeroes the struct, the mask included. */
  struct sigaction sa = {.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART};
  sa.sa_sigaction = on_fault;
  __sigaction(SIGSEGV, &sa, &prev_segv);
  __sigaction(SIGBUS, &sa, &prev_bus);
}

#else
void fault_handler_install(void) {}
#endif
