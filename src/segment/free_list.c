/* free_list.c — the secure build's free-list keys and its report of a
 * corrupted link (segment/free_list.h). */
#include "segment/free_list.h"

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
