/* test_idle_release: the empty page a thread keeps per class for its next
 * refill goes back when the thread goes idle (heap_release_idle, driven by
 * the purge deadline's collector, hak_collect and malloc_trim), and a thread
 * that touched a class in passing keeps no page of it at all. Read through
 * the internal hook heap_thread_kept_bytes() (linked with libhakmem.a).
 *
 *  1. One block of every class allocated and freed: no empty page kept
 *     (each thread used to keep one page per class, ~480 KiB resident per
 *     idle thread in bench_thread_mem), and at most 64 KiB of blocks cached
 *     (the bound; heap_thread_cached_bytes, as in test_tcache).
 *  2. A class used again and again keeps its empty page while the thread is
 *     active, and a class whose bursts span several pages keeps them all
 *     (up to 256 KiB); after two collector passes with the thread idle in
 *     between, every one is gone, and the class still works afterwards.
 *  3. Concurrency: threads that alternate bursts (contents checked) with
 *     idle pauses, while the main thread collects in a loop: the collector
 *     takes pages only under the heap's lock, only empty ones, so no block
 *     is lost or handed out twice.
 */
#include "hak_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

size_t heap_thread_kept_bytes(void);
size_t heap_thread_cached_bytes(void);
int hak_collect(bool force);

static pthread_barrier_t step;

static void *passing_thread(void *arg) {
  (void)arg;
  for (size_t s = 16; s <= 256 * 1024; s = s < 128 ? s + 16 : s + s / 8) {
    char *p = malloc(s);
    CHECK(p != NULL, "malloc(%zu)", s);
    memset(p, 1, s);
    free(p);
  }
  size_t kept = heap_thread_kept_bytes(), cached = heap_thread_cached_bytes();
  printf("test_idle_release: one block of every class: %zu bytes of empty pages kept, %zu bytes of blocks cached\n",
         kept, cached);
  CHECK(kept == 0, "a thread that touched each class once keeps %zu bytes of empty pages", kept);
  CHECK(cached <= 64 * 1024, "an idle thread holds %zu bytes of cached blocks (at most 64 KiB)", cached);
  return NULL;
}

enum { BURST = 200, BURST_SIZE = 1000 }; /* about 4 pages of the 1 KiB class */

static void *warm_thread(void *arg) {
  (void)arg;
  for (int i = 0; i < 16; i++) {
    char *p = malloc(20000);
    CHECK(p != NULL, "malloc");
    memset(p, 2, 20000);
    free(p);
  }
  hak_collect(false); /* flushes this thread's caches: the page empties, and stays (warm) */
  size_t one = heap_thread_kept_bytes();
  /* A class whose bursts span several pages keeps them all (up to 256 KiB
   * of empty pages), not only the last one: the next burst reuses what this
   * one touched instead of cutting pages afresh. */
  static char *burst[BURST];
  for (int r = 0; r < 4; r++) {
    for (int i = 0; i < BURST; i++) {
      burst[i] = malloc(BURST_SIZE);
      CHECK(burst[i] != NULL, "malloc");
      memset(burst[i], 4, BURST_SIZE);
    }
    for (int i = 0; i < BURST; i++) free(burst[i]);
  }
  hak_collect(false);
  size_t active = heap_thread_kept_bytes();
  pthread_barrier_wait(&step); /* idle while main collects */
  pthread_barrier_wait(&step);
  size_t idle = heap_thread_kept_bytes();
  printf("test_idle_release: warm classes: %zu bytes of empty pages kept for one, %zu for both while active, %zu "
         "after idling\n", one, active, idle);
  CHECK(one > 0, "a class in use keeps its page for the next refill");
  CHECK(active >= one + 3 * 65536 && active <= one + 4 * 65536,
        "a class whose bursts span ~4 pages keeps %zu bytes of empty pages (want 3 or 4 pages)", active - one);
  CHECK(idle == 0, "an idle thread still keeps %zu bytes of empty pages", idle);
  char *p = malloc(20000);
  CHECK(p != NULL, "malloc after the release");
  memset(p, 3, 20000);
  CHECK(p[0] == 3 && p[19999] == 3, "contents");
  free(p);
  return NULL;
}

static _Atomic int stop;

static void *bursty_thread(void *arg) {
  ht_rng r = {(uint64_t)(uintptr_t)arg * 7919 + 1};
  static const size_t sizes[] = {24, 200, 700, 3000, 9000, 20000, 32768};
  char *blk[16];
  size_t len[16];
  unsigned rounds = 0;
  while (!atomic_load(&stop)) {
    unsigned n = 1 + ht_below(&r, 16);
    for (unsigned i = 0; i < n; i++) {
      len[i] = sizes[ht_below(&r, sizeof sizes / sizeof *sizes)];
      blk[i] = malloc(len[i]);
      CHECK(blk[i] != NULL, "malloc(%zu)", len[i]);
      memset(blk[i], (int)(i + rounds) & 0xff, len[i]);
    }
    for (unsigned i = 0; i < n; i++) {
      unsigned char want = (unsigned char)((i + rounds) & 0xff);
      CHECK((unsigned char)blk[i][0] == want && (unsigned char)blk[i][len[i] - 1] == want &&
                (unsigned char)blk[i][len[i] / 2] == want,
            "block %u of %zu bytes changed while in use", i, len[i]);
    }
    for (unsigned i = 0; i < n; i++) free(blk[i]);
    if (++rounds % 64 == 0) {
      hak_collect(false); /* caches to the pages: empty pages kept */
      usleep(200);        /* idle: the collector may take them */
    }
  }
  return (void *)(uintptr_t)rounds;
}

int main(void) {
  hak_test_name = "test_idle_release";
  pthread_t t;
  CHECK(pthread_create(&t, NULL, passing_thread, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);

  pthread_barrier_init(&step, NULL, 2);
  CHECK(pthread_create(&t, NULL, warm_thread, NULL) == 0, "pthread_create");
  pthread_barrier_wait(&step);
  hak_collect(false); /* notes the thread's activity */
  hak_collect(false); /* none since: its kept pages go */
  pthread_barrier_wait(&step);
  pthread_join(t, NULL);

  enum { N = 4 };
  pthread_t b[N];
  for (uintptr_t i = 0; i < N; i++) CHECK(pthread_create(&b[i], NULL, bursty_thread, (void *)i) == 0, "pthread_create");
  double t0 = ht_now_ms();
  unsigned passes = 0;
  while (ht_now_ms() - t0 < 500) {
    hak_collect(false);
    passes++;
    usleep(100);
  }
  atomic_store(&stop, 1);
  uintptr_t rounds = 0;
  for (int i = 0; i < N; i++) {
    void *r;
    pthread_join(b[i], &r);
    rounds += (uintptr_t)r;
  }
  printf("test_idle_release: %u collector passes beside %d bursty threads (%lu bursts), contents intact\n", passes, N,
         (unsigned long)rounds);
  printf("test_idle_release: OK\n");
  return 0;
}
