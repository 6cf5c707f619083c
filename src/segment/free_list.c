/* free_list.c — the secure build's free-list keys and its report of a
 * corrupted link (segment/free_list.h); the checks of HAKMEM_DEBUG_LISTS
 * (segment/list_check.h). */
#include "segment/free_list.h"
#include "segment/list_check.h"

#if HAK_SECURE
#include "guard/guard.h"
#include "os/random.h"

#include <stdlib.h>

uintptr_t hak_list_secret;

/* segment_map, with no lock held: two threads may map their first
 * segments at once, so the secret is set once with a CAS (the loser takes
 * the winner's), before the first segment holds a block. */
void free_list_keys_init(hak_segment_t *s) {
  while (HAK_UNLIKELY(__atomic_load_n(&hak_list_secret, __ATOMIC_ACQUIRE) == 0)) {
    uintptr_t none = 0, v = os_random_next();
    if (v) __atomic_compare_exchange_n(&hak_list_secret, &none, v, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  s->list_key = os_random_next();
}

void free_list_corrupt(const void *block) {
  report_bad("malloc", "corrupted free list (a free block was written)", block); /* aborts in this build */
  abort();
}
#endif

#if HAK_DEBUG_LISTS
#include "heap/canary.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void list_check_fail(const char *list, const char *problem, const hak_page_t *pg, const void *b, const char *fmt,
                     ...) {
  char msg[320];
  int n = snprintf(msg, sizeof msg, "hakmem: debug lists: %s: %s: page %p class %u (%u B, used %u of %u) block %p",
                   list, problem, (const void *)pg, pg->cls, pg->bsize, pg->used, pg->capacity, b);
  if (n < 0) n = 0;
  if (fmt && n < (int)sizeof msg) {
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (m > 0) n += m;
  }
  if (n > (int)sizeof msg - 2) n = (int)sizeof msg - 2;
  msg[n++] = '\n';
  ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
  (void)w;
  abort();
}

void list_check_block(const char *list, const hak_page_t *pg, const void *b) {
  const uint8_t *x = b;
  if (x < pg->start || x >= pg->bump)
    list_check_fail(list, "link outside the page's carved blocks", pg, b, " (carved: %p..%p)", (void *)pg->start,
                    (void *)pg->bump);
  if ((size_t)(x - pg->start) % pg->bsize != 0)
    list_check_fail(list, "link not at a block start", pg, b, " (%zu B past the page's first block)",
                    (size_t)(x - pg->start));
}

void list_check_chain(const char *list, const hak_page_t *pg, const void *head, unsigned n, const void *tail,
                      bool ends) {
  unsigned k = 0, cap = pg->capacity;
  const void *last = NULL;
  for (const void *b = head; b; b = block_next(pg, b)) {
    list_check_block(list, pg, b);
    if (++k > cap) list_check_fail(list, "longer than the page's capacity (a loop?)", pg, b, " (%u blocks)", k);
    last = b;
    if (!ends && k == n) break;
  }
  if (n != LIST_ANY && k != n)
    list_check_fail(list, "length differs from its count", pg, head, " (head; %u blocks, counted %u)", k, n);
  if (tail && last != tail)
    list_check_fail(list, "last block is not the tail recorded", pg, last, " (last of %u; tail %p)", k, tail);
}

void list_check_page(const char *list, const hak_page_t *pg) {
  unsigned carved = (unsigned)((size_t)(pg->bump - pg->start) / pg->bsize);
#if HAK_SECURE
  if (pg->bsize <= HAK_GUARD_BLOCK_MAX && carved) carved--; /* canary_guard_page */
#endif
  if (pg->used > carved) list_check_fail(list, "more blocks used than carved", pg, pg->free, " (carved %u)", carved);
  list_check_chain(list, pg, pg->free, carved - pg->used, pg->free ? pg->free_tail : NULL, true);
}
#endif
