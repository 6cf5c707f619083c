/* free_list.c — the secure build's free-list keys and its report of a
 * corrupted link (segment/free_list.h). */
#include "segment/free_list.h"

#if HAK_SECURE
#include "guard/guard.h"
#include "os/random.h"

#include <stdlib.h>

uintptr_t hak_list_secret;

/* Under the segment lock (segment_map): the secret is set once, before the
 * first segment holds a block. */
void free_list_keys_init(hak_segment_t *s) {
  while (HAK_UNLIKELY(hak_list_secret == 0)) hak_list_secret = os_random_next();
  s->list_key = os_random_next();
}

void free_list_corrupt(const void *block) {
  report_bad("malloc", "corrupted free list (a free block was written)", block); /* aborts in this build */
  abort();
}
#endif
