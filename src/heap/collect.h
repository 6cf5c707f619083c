/* collect.h — process-wide collection: remote frees waiting in heaps whose
 * owner does not come to collect them (see collect.c). */
#ifndef HAK_COLLECT_H
#define HAK_COLLECT_H

#include "hak_internal.h"

/* Collect the remote frees of heaps that have left them waiting for a purge
 * delay (force: of every heap, now), retiring pages that become empty.
 * Returns when waiting ones will be due (coarse ms), 0 if none. */
uint32_t heap_collect_idle(uint32_t now, bool force) HAK_HIDDEN;

#endif
