/* test_tcache: what a thread's class caches hold (heap/tcache.c), read through
 * the internal hook heap_thread_cached_bytes() (so linked with libhakmem.a).
 *
 *  1. A thread that allocates and frees one block of every class, then goes
 *     idle, holds at most 64 KiB of cached blocks (it used to hold ~1.6 MiB:
 *     four blocks of each class).
 *  2. A busy thread (bursts of 1..64 blocks of every class, freed again)
 *     never holds more than its budget (argv[1], default 32 MiB, the speed profile).
 *  3. A class used over and over is cached: a malloc/free loop of one size
 *     ends with blocks in the cache.
 *  4. With the learner on (argv[2] "learn", HAKMEM_TCACHE_LEARN=1), a class that goes idle gives its room back: after
 *     a burst phase on 4 KiB blocks and a long phase on 64 B blocks only, the
 *     thread holds less than one 4 KiB cache's worth.
 *  5. A consumer (a thread that only frees blocks main allocated) is
 *     drained: after freeing 20000 blocks of each of 16 classes up to 1 KiB
 *     it holds at most 4 KiB per class (it used to hold up to 32 KiB per
 *     class: 464 KiB here, blocks their owner could not reuse).
 *  6. Without the learner too (budgets of 8 MiB and up), classes a thread
 *     stopped using give their blocks back: see big_then_small.
 */
#include "hak_test.h"

#include <pthread.h>

size_t heap_thread_cached_bytes(void);
extern const uint32_t hak_class_size[];
#define NCLASSES 96

static size_t budget = 32 << 20;

static void *idle_thread(void *arg) {
  (void)arg;
  for (unsigned c = 0; c < NCLASSES; c++) {
    void *p = malloc(hak_class_size[c]);
    CHECK(p != NULL, "malloc(%u)", hak_class_size[c]);
    memset(p, 1, hak_class_size[c]);
    free(p);
  }
  size_t held = heap_thread_cached_bytes();
  printf("test_tcache: one block of each of %d classes allocated and freed: %zu bytes cached\n", NCLASSES, held);
  CHECK(held <= 64 * 1024, "an idle thread holds %zu bytes of cached blocks (at most 64 KiB)", held);
  return NULL;
}

static void *busy_thread(void *arg) {
  (void)arg;
  static __thread void *blk[64];
  size_t most = 0;
  ht_rng r = {7};
  for (int round = 0; round < 400; round++) {
    for (unsigned c = 0; c < NCLASSES; c++) {
      unsigned n = 1 + ht_below(&r, 64);
      for (unsigned i = 0; i < n; i++) {
        blk[i] = malloc(hak_class_size[c]);
        CHECK(blk[i] != NULL, "malloc(%u)", hak_class_size[c]);
      }
      for (unsigned i = 0; i < n; i++) free(blk[i]);
      size_t held = heap_thread_cached_bytes();
      if (held > most) most = held;
      CHECK(held <= budget, "round %d class %u: %zu bytes cached, budget %zu", round, c, held, budget);
    }
  }
  printf("test_tcache: busy thread: at most %zu bytes cached (budget %zu)\n", most, budget);
  return NULL;
}

/* A long phase on 64 B blocks only (1 to 200 at a time, blk holds 200):
 * the bytes the thread's caches hold after it. */
static size_t small_phase(void **blk) {
  for (int round = 0; round < 3000; round++) {
    int n = 1 + round % 200;
    for (int i = 0; i < n; i++) blk[i] = malloc(64);
    for (int i = 0; i < n; i++) free(blk[i]);
  }
  return heap_thread_cached_bytes();
}

static void *hot_then_idle(void *arg) {
  (void)arg;
  void *blk[200];
  for (int round = 0; round < 300; round++) {
    for (int i = 0; i < 16; i++) blk[i] = malloc(4096);
    for (int i = 0; i < 16; i++) free(blk[i]);
  }
  size_t hot = heap_thread_cached_bytes();
  size_t after = small_phase(blk);
  printf("test_tcache: 4 KiB blocks cached while in use: %zu bytes; after a long 64 B phase: %zu bytes\n", hot, after);
  CHECK(hot >= 4 * 4096, "a class in use is cached (%zu bytes)", hot);
  CHECK(after < 4 * 4096 + 128 * 64, "the idle class kept its blocks: %zu bytes cached", after);
  return NULL;
}

/* Blocks of 64-256 KiB used in bursts (their
 *    caps grow), then a long phase on 64 B blocks only; the big classes,
 *    untouched, give their room back. With the budget at 32 MiB they used to
 *    keep what the bursts left in them (MiBs) for as long as the thread ran. */
static void *big_then_small(void *arg) {
  (void)arg;
  void *blk[200];
  for (int round = 0; round < 40; round++)
    for (size_t size = 64 * 1024 + 1; size <= 256 * 1024; size += size / 8) {
      for (int i = 0; i < 16; i++) {
        blk[i] = malloc(size);
        CHECK(blk[i] != NULL, "malloc(%zu)", size);
      }
      for (int i = 0; i < 16; i++) free(blk[i]);
    }
  size_t hot = heap_thread_cached_bytes();
  size_t after = small_phase(blk);
  printf("test_tcache: 64-256 KiB blocks cached after their bursts: %zu bytes; after a long 64 B phase: %zu bytes\n", hot,
         after);
  /* The secure build caches no blocks this big (hot is 0 there): only
   * the bound after is checked. */
  CHECK(after < 256 * 1024 + 128 * 64, "the idle big classes kept their blocks: %zu bytes cached", after);
  return NULL;
}

#define DRAIN_N 20000
#define DRAIN_CLASSES 16
static void *drain_blocks[DRAIN_CLASSES][DRAIN_N];

static void *consumer(void *arg) {
  (void)arg;
  size_t most = 0;
  for (unsigned k = 0; k < DRAIN_N; k++)
    for (unsigned c = 0; c < DRAIN_CLASSES; c++) {
      free(drain_blocks[c][k]);
      size_t held = heap_thread_cached_bytes();
      if (held > most) most = held;
    }
  printf("test_tcache: consumer of %d classes: at most %zu bytes cached\n", DRAIN_CLASSES, most);
  CHECK(most <= DRAIN_CLASSES * (4096 + 1024), "a consumer held %zu bytes of others' blocks", most);
  return NULL;
}

static size_t drain_size(unsigned c) { return 64 * (c + 1); }

static void drain_test(void) {
  for (unsigned c = 0; c < DRAIN_CLASSES; c++)
    for (unsigned k = 0; k < DRAIN_N; k++) {
      drain_blocks[c][k] = malloc(drain_size(c));
      CHECK(drain_blocks[c][k] != NULL, "malloc");
    }
  pthread_t t;
  CHECK(pthread_create(&t, NULL, consumer, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
}

static void run(void *(*fn)(void *)) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fn, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  hak_test_name = "test_tcache";
  if (argc > 1) budget = strtoul(argv[1], NULL, 0);
  int learn = argc > 2 && strcmp(argv[2], "learn") == 0;
  run(idle_thread);
  run(busy_thread);
  for (int i = 0; i < 1000; i++) free(malloc(100));
  CHECK(heap_thread_cached_bytes() >= 112, "a class used over and over keeps a block cached");
  if (learn) run(hot_then_idle);
  if (budget >= 8 << 20) run(big_then_small);
  drain_test();
  printf("test_tcache: OK\n");
  return 0;
}
