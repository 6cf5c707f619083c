/* test_purge_zero - HAKMEM_PURGE_DELAY_MS=0 does not turn every slow path
 * into a pass over every heap.
 *
 * With delay 0 each part that keeps memory (a parked heap with pages, an
 * idle heap's kept page, a freed large block) re-armed the purge deadline at
 * the current coarse time, so the next slow path found it due at once and
 * walked every heap again (heap/collect.c, heap_collect_idle): with many
 * heaps every large malloc paid for a walk over all of them (test_mt_stress
 * with 1024 threads took minutes instead of 20 s). Now a due pass walks the
 * heaps at most once per tick of the coarse clock.
 *
 * NHEAPS threads allocate at once (so each has a heap of its own), leave a
 * few blocks of many classes to main and exit: their heaps are parked with
 * pages. Then main times (its own CPU time) NOPS malloc/free pairs of large
 * blocks (each a slow path that looks at the deadline) with the delay at
 * 100 ms, then at 0 (hak_option_set; ctest turns the background purger
 * off, so the passes run on main's slow paths). Here the first took ~1 ms
 * (the blocks come from the huge-mapping cache), the second 3.6-4.2 s before
 * the fix and 15-23 ms with it. The bound: 20x the first, at least 300 ms. */
#include "hak_test.h"

#define NHEAPS 512
#define NKEEP 24
#define NOPS 20000

static void *g_kept[NHEAPS][NKEEP];
static pthread_barrier_t g_bar;

static void *worker(void *arg) {
  unsigned k = (unsigned)(uintptr_t)arg;
  for (unsigned i = 0; i < NKEEP; i++) { /* sizes across the classes, one block each */
    size_t n = 16 + ((size_t)i * i * 97 + k) % 30000;
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    p[0] = (unsigned char)i;
    g_kept[k][i] = p;
  }
  pthread_barrier_wait(&g_bar); /* all alive at once: NHEAPS heaps */
  return NULL;
}

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double large_loop(void) {
  double t0 = thread_cpu_ms();
  for (unsigned i = 0; i < NOPS; i++) {
    unsigned char *p = malloc(512 * 1024 + (i & 7) * 4096);
    CHECK(p != NULL, "malloc large");
    p[0] = p[4096] = (unsigned char)i;
    free(p);
  }
  return thread_cpu_ms() - t0;
}

int main(void) {
  hak_test_require_hakmem("test_purge_zero");
  int (*opt_set)(const char *, long long) = (int (*)(const char *, long long))dlsym(RTLD_DEFAULT, "hak_option_set");
  CHECK(opt_set != NULL, "hak_option_set not found");
  pthread_barrier_init(&g_bar, NULL, NHEAPS);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  static pthread_t th[NHEAPS];
  for (unsigned k = 0; k < NHEAPS; k++)
    CHECK(pthread_create(&th[k], &attr, worker, (void *)(uintptr_t)k) == 0, "pthread_create %u", k);
  for (unsigned k = 0; k < NHEAPS; k++) CHECK(pthread_join(th[k], NULL) == 0, "pthread_join");

  CHECK(opt_set("purge_delay_ms", 100) == 0, "set purge_delay_ms 100");
  large_loop(); /* warm */
  double slow = large_loop();
  CHECK(opt_set("purge_delay_ms", 0) == 0, "set purge_delay_ms 0");
  double zero = large_loop();
  CHECK(opt_set("purge_delay_ms", 100) == 0, "set purge_delay_ms 100");

  for (unsigned k = 0; k < NHEAPS; k++)
    for (unsigned i = 0; i < NKEEP; i++) {
      unsigned char *p = g_kept[k][i];
      CHECK(p[0] == (unsigned char)i, "kept block %u/%u changed", k, i);
      free(p);
    }
  printf("test_purge_zero: %u heaps parked, %u large malloc/free pairs: %.1f ms CPU at delay 100, %.1f ms at delay 0 (%.1fx)\n",
         NHEAPS, NOPS, slow, zero, zero / (slow > 1 ? slow : 1));
  CHECK(zero <= 20 * (slow > 15 ? slow : 15), "delay 0 took %.1f ms against %.1f ms at 100: every slow path walks every heap", zero, slow);
  printf("test_purge_zero: OK\n");
  return 0;
}
