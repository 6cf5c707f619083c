/* test_tcache_mid - a thread whose blocks of 129 B to 8 KiB are replaced at
 * random (the middle of bench_sizemix's size mix: 25% of its blocks up to
 * 1 KiB, 10% up to 8 KiB) gets most of them from its class caches, without
 * a cold event (refill or flush, heap/tcache.c) for each.
 *
 * Linked with libhakmem.a, to read the thread's count of cold events
 * (hak_tls.heap->tick).
 *  WS slots hold blocks of random sizes, five in seven from 129 B to 1 KiB
 *  and two in seven from 1 KiB to 8 KiB; each step frees a random slot's
 *  block and puts a new one of a random size there, writing its first and
 *  last byte. Each class's cache count walks up and down between 0 (a
 *  refill) and its cap (a flush): the larger the caps, the rarer the cold
 *  events.
 * A class cache aims at HAKMEM_TCACHE_BYTES (at least 16 blocks, at most
 * HAKMEM_TCACHE_MAX, 128). At 32 KiB, the speed profile's until 2026-11-26,
 * the caches of these classes held 16 to 113 blocks (32 of 1 KiB, 16 of
 * 2 KiB and above); at 128 KiB those up to 1 KiB hold 128 and those above
 * 128 KiB of blocks (down to 16 at 8 KiB). The test asks for at most one
 * cold event in 500 steps: 32 KiB gave 572 in 200,000 steps (1 in 350),
 * 64 KiB 488, 128 KiB 266 (1 in 752; the balanced profile's 16 KiB 999);
 * with 5d6276a's borrowing, 580 and 275.
 *
 * usage: test_tcache_mid
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/heap.h"
#include "heap/canary.h"

#define WS 1000
#define STEPS 200000

static void *slot[WS];

static void *fill(ht_rng *r) {
  size_t n = ht_below(r, 7) < 5 ? 129 + ht_below(r, 1024 - 128) : 1025 + ht_below(r, 8192 - 1024);
  return ht_malloc_ends(n - HAK_TAIL);
}

int main(void) {
  hak_test_name = "test_tcache_mid";
  free(malloc(16)); /* the thread's heap exists from here on */
  CHECK(hak_tls.state == HAK_THREAD_LIVE, "no thread heap");
  ht_rng r = {7};
  uint32_t events = ht_cold_events(slot, WS, STEPS, fill, &r, &hak_tls.heap->tick);
  long long bytes = 0;
  CHECK(hak_option_get("HAKMEM_TCACHE_BYTES", &bytes) == 0, "reading the class cache bytes");
  printf("test_tcache_mid: %u cold events in %u steps (1 in %.1f); class cache bytes %lld KiB\n", events, STEPS,
         events ? (double)STEPS / events : 0.0, bytes >> 10);
  CHECK(events <= STEPS / 500, "%u cold events in %u steps: the caches of blocks of 129 B-8 KiB stay small", events,
        STEPS);
  for (unsigned i = 0; i < WS; i++) free(slot[i]);
  printf("test_tcache_mid: OK\n");
  return 0;
}
