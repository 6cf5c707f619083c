/* random.h — random numbers for the secure build's hardening (free-list keys,
 * the order of the blocks of a fresh page): a per-thread generator seeded
 * from the kernel on its first use, all on the cold side. Not compiled into
 * the other builds. */
#ifndef HAK_RANDOM_H
#define HAK_RANDOM_H

#include "hak_internal.h"

/* The next 64 random bits of the calling thread's generator. */
uint64_t os_random_next(void) HAK_HIDDEN;
/* One step of splitmix64 on *s (the thread's generator is the same): a
 * caller that wants many numbers at once seeds a local state with
 * os_random_next() and draws inline. */
HAK_INLINE uint64_t rng_split(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}
/* Fork child: the generator reseeds, so parent and child part ways. */
void os_random_atfork_child(void) HAK_HIDDEN;

#endif
