/* overaligned.h — the table of blocks aligned to 2 MiB or more (large.c maps
 * them; overaligned.c finds them by address; protocol there). */
#ifndef HAK_OVERALIGNED_H
#define HAK_OVERALIGNED_H

#include "hak_internal.h"

/* The record of one block, in its mapping just before the block (the
 * mapping's first OS page holds it). */
typedef struct overaligned {
  uint64_t magic;
  uint8_t *base;
  size_t map, usable;
  struct overaligned *next; /* in its bucket's chain */
} overaligned_t;

/* o, the record before its block (o + 1), joins the table. */
void overaligned_insert(overaligned_t *o) HAK_HIDDEN;
/* The record of the block starting at p, out of the table (NULL: p is not a
 * live over-aligned block); the caller unmaps it. */
overaligned_t *overaligned_take(const void *p) HAK_HIDDEN;
#if HAK_STATS
/* Records compared by every lookup so far (tests: the work per lookup). */
extern _Atomic(uint64_t) overaligned_steps HAK_HIDDEN;
#endif

void overaligned_atfork_prepare(void) HAK_HIDDEN;
void overaligned_atfork_parent(void) HAK_HIDDEN;
void overaligned_atfork_child(void) HAK_HIDDEN;

#endif
