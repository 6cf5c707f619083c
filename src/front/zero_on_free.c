/* zero_on_free.c — HAKMEM_ZERO_ON_FREE: a freed small block is wiped, and
 * checked still wiped when it is handed out again (write after free).
 *
 * With the option on, config_load turns the thread caches off, so every
 * free and malloc of a small block takes the slow path (free_slow,
 * alloc_bin_slow): the fast paths are the same instructions whether the
 * option is on or not. Carved blocks are wiped too (heap.c), so every
 * block a page hands out must be wiped, whichever way it came. Not wiped:
 * the first word (the page's free-list link) and the block's own marks:
 * the double-free key (second word) of the standard build, the word before
 * the block in the secure build (its last 8 bytes are the next block's
 * word), both checked against their own values. Large and huge blocks are
 * not covered. */
#include "front/front.h"
#include "guard/guard.h"

#include <stdlib.h>
#include <string.h>

#if HAK_SECURE
#define WIPE_KEEP 8u /* the next block's word (heap/canary.h) */
#else
#define WIPE_KEEP 0u
#endif

void zero_on_free_wipe(void *p, size_t bsize) {
  memset(p, 0, bsize - WIPE_KEEP);
}

static bool wiped(const void *p, size_t bsize) {
  const uint64_t *w = p;
  size_t words = (bsize - WIPE_KEEP) / 8, first = 1; /* word 0: the free-list link */
#if HAK_SECURE
  if (canary_code(p) != 0) return false; /* a freed word stays so until handed out */
#elif HAK_CHECKS
  /* the free key (freed), or 0 (carved and wiped) */
  if (words > 1 && w[1] != 0 && w[1] != HAK_FREE_MARK(p)) return false;
  first = 2;
#endif
  for (size_t i = first; i < words; i++)
    if (w[i] != 0) return false;
  return true;
}

void zero_on_free_check(void *p, size_t bsize) {
  if (HAK_LIKELY(wiped(p, bsize))) return;
  report_bad("malloc", "write after free to block", p); /* the secure build aborts there */
  memset(p, 0, bsize - WIPE_KEEP);
}
