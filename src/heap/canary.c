/* canary.c — the secure build's canary key and the tails of freshly carved
 * blocks (canary.h). */
#include "heap/canary.h"

#if HAK_SECURE
#include <sys/auxv.h>

uint64_t hak_canary_key;
static bool key_set;

/* Every tail of a small block is written after the block was carved, and
 * large blocks call this before their first seal, so the key is set before
 * any tail exists. From the 16 random bytes the
 * kernel gives every process (no system call, no allocation); threads
 * racing here compute the same value. */
void canary_key_ensure(void) {
  if (__atomic_load_n(&key_set, __ATOMIC_ACQUIRE)) return;
  const void *r = (const void *)getauxval(AT_RANDOM);
  uint64_t k = 0x6a09e667f3bcc909ull ^ (uint64_t)(uintptr_t)&key_set, w[2];
  if (r) {
    memcpy(w, r, sizeof w); /* not aligned */
    k ^= w[0] ^ rotl64(w[1], 29);
  }
  __atomic_store_n(&hak_canary_key, k, __ATOMIC_RELAXED);
  __atomic_store_n(&key_set, true, __ATOMIC_RELEASE);
}

void canary_carved(uint8_t *first, unsigned k, size_t bsize) {
  canary_key_ensure();
  for (unsigned i = 0; i < k; i++) canary_mark_free(first + (size_t)i * bsize, bsize);
}
#endif
