/* random.c — see random.h. The seed comes from getrandom (non-blocking: at
 * early boot it fails rather than waits), else from the 16 bytes the kernel
 * gave the process at exec (AT_RANDOM), mixed with the clock and a stack
 * address; the generator is splitmix64 on one word of TLS: a few
 * instructions per number, enough to keep keys and block order unknown to
 * a program that cannot read HAKMEM's metadata. */
#include "os/random.h"

#if HAK_SECURE
#include <errno.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread uint64_t rng_state;

/* Raw system calls: the first segment can be mapped inside a sanitizer's
 * own start-up (AddressSanitizer's dlsym allocates), before its
 * interceptors of getrandom and clock_gettime work. */
static HAK_NOINLINE uint64_t seed(void) {
  uint64_t s = 0;
  int saved = errno;
  long got = syscall(SYS_getrandom, &s, sizeof s, GRND_NONBLOCK);
  errno = saved;
  if (got != (long)sizeof s) {
    const uint64_t *at = (const uint64_t *)getauxval(AT_RANDOM);
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
    s = (at ? at[0] ^ at[1] : 0) ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)&s;
  }
  return s | 1; /* 0 means "not seeded" */
}

uint64_t os_random_next(void) {
  if (HAK_UNLIKELY(rng_state == 0)) rng_state = seed();
  return rng_split(&rng_state);
}

void os_random_atfork_child(void) { rng_state = 0; }
#endif
