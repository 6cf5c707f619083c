/* test_free_run - a thread that flushes HAK_FREE_RUN times without a refill
 * of any class (the frees at the end of its work) gives back the cached
 * blocks of its classes of a page or more (4 KiB and up) and caches no more
 * of those until it refills again (heap/tcache.c, "Free
 * runs"): a thread descheduled between its last frees and its exit kept
 * them from every other thread.
 *
 * Linked with libhakmem.a, to read the caches of the thread's bins.
 *  1. A thread grows the cap of class X (4 KiB) with
 *     malloc/free bursts; its cache then holds X blocks.
 *  2. It allocates many 64 B blocks (refills), then frees them all (a long
 *     run of flushes of the 64 B class, no refill).
 *  3. After the run, X's cache must be empty with cap 0, and X blocks freed
 *     later in a run go back to their pages (X stays at cap 0).
 *  4. A malloc of X (a refill) ends the run: X's cap grows again.
 *
 * usage: test_free_run
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/heap.h"
#include "heap/canary.h"
#include "heap/size_class.h"
#include "policy/config.h"

#include <pthread.h>

#define SMALL 40000

static void *worker(void *arg) {
  (void)arg;
  unsigned x = size_class_of(4096);
  size_t xs = hak_class_size[x] - HAK_TAIL;
  void *blk[32];
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 32; i++) CHECK((blk[i] = malloc(xs)) != NULL, "malloc(%zu)", xs);
    for (int i = 0; i < 32; i++) free(blk[i]);
  }
  CHECK(bin_cap(&hak_tls, x) >= 8 && bin_count(&hak_tls, x) > 0, "the 4 KiB class grew to cap %u holding %u blocks", bin_cap(&hak_tls, x), bin_count(&hak_tls, x));

  static void *small[SMALL];
  for (int i = 0; i < SMALL; i++) CHECK((small[i] = malloc(64)) != NULL, "malloc(64)");
  for (int i = 0; i < SMALL; i++) free(small[i]);
  CHECK(bin_count(&hak_tls, x) == 0 && bin_cap(&hak_tls, x) == 0, "after a run of frees the 4 KiB class holds %u blocks at cap %u", bin_count(&hak_tls, x), bin_cap(&hak_tls, x));

  /* More frees of X in the run: straight back to their pages. */
  for (int i = 0; i < 4; i++) CHECK((blk[i] = malloc(xs)) != NULL, "malloc(%zu)", xs);
  for (int i = 0; i < SMALL; i++) CHECK((small[i] = malloc(64)) != NULL, "malloc(64)");
  for (int i = 0; i < SMALL; i++) free(small[i]);
  for (int i = 0; i < 4; i++) free(blk[i]);
  CHECK(bin_count(&hak_tls, x) == 0 && bin_cap(&hak_tls, x) == 0, "X blocks freed in a run of frees were cached (%u at cap %u)", bin_count(&hak_tls, x), bin_cap(&hak_tls, x));

  /* Allocating again ends the run: X's cap grows as before. */
  for (int round = 0; round < 20; round++) {
    for (int i = 0; i < 32; i++) CHECK((blk[i] = malloc(xs)) != NULL, "malloc(%zu)", xs);
    for (int i = 0; i < 32; i++) free(blk[i]);
  }
  CHECK(bin_cap(&hak_tls, x) >= 2, "after the run the 4 KiB class grew only to cap %u", bin_cap(&hak_tls, x));
  return NULL;
}

int main(void) {
  hak_test_name = "test_free_run";
  free(malloc(16));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  printf("test_free_run: ok\n");
  return 0;
}
