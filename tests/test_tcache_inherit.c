/* test_tcache_inherit - a thread handed a recycled heap raises a class's cap,
 * at the class's first refill, to the largest the heap's previous thread
 * reached, within the budget (heap/tcache.c, "Inherited caps").
 *
 * Linked with libhakmem.a, to read the class caps of the thread's bins.
 *  1. A thread uses class X (4 KiB, no starting cap) in bursts until its cap
 *     has grown, and exits. The next thread started after the join gets the
 *     same heap back (the pool's free stack is last in, first out). It starts
 *     with X at cap 0; after one malloc of X (its first refill) X's cap must
 *     be where the first thread left its largest.
 *  2. A thread on the recycled heap that only frees X blocks (main's: a
 *     consumer) does not take the inherited cap up (its cap grows only as
 *     its own cold events make it): it must not park a producer's cap of
 *     others' blocks.
 *  3. With the budget lowered below what X inherits, the first refill raises
 *     X only as far as the budget allows.
 * A thread that got another heap (a heap still awaiting a remote signal is
 * not reused at once) proves nothing: the test then retries, a few times.
 *
 * usage: test_tcache_inherit
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/heap.h"
#include "heap/canary.h"
#include "heap/size_class.h"
#include "policy/config.h"

#include <pthread.h>

static unsigned x_class;

struct seen {
  hak_heap_t *heap;
  uint32_t x_cap, x_cap_before;
  size_t cap_bytes;
};

#define GIVEN 8
static void *given[GIVEN];

/* Grows X's cap, reports the heap and the cap reached. */
static void *grower(void *arg) {
  struct seen *s = arg;
  size_t xs = hak_class_size[x_class] - HAK_TAIL;
  void *blk[32];
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < 32; i++) {
      blk[i] = malloc(xs);
      CHECK(blk[i] != NULL, "malloc(%zu)", xs);
    }
    for (int i = 0; i < 32; i++) free(blk[i]);
  }
  s->heap = hak_tls.heap;
  s->x_cap = bin_cap(&hak_tls, x_class);
  return NULL;
}

/* Reports X's cap before and after its first malloc of X. */
static void *starter(void *arg) {
  struct seen *s = arg;
  free(malloc(16)); /* the heap */
  s->heap = hak_tls.heap;
  s->x_cap_before = bin_cap(&hak_tls, x_class);
  void *p = malloc(hak_class_size[x_class] - HAK_TAIL);
  CHECK(p != NULL, "malloc");
  s->x_cap = bin_cap(&hak_tls, x_class);
  s->cap_bytes = hak_tls.heap->cap_bytes;
  free(p);
  return NULL;
}

/* Frees the X blocks main allocated, allocates none. */
static void *consumer(void *arg) {
  struct seen *s = arg;
  free(malloc(16));
  s->heap = hak_tls.heap;
  for (int i = 0; i < GIVEN; i++) free(given[i]);
  s->x_cap = bin_cap(&hak_tls, x_class);
  return NULL;
}

static struct seen run(void *(*fn)(void *)) {
  struct seen s = {0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fn, &s) == 0, "pthread_create");
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  return s;
}

int main(void) {
  hak_test_name = "test_tcache_inherit";
  free(malloc(16));
  x_class = size_class_of(4096);
  CHECK(hak_config.tcache_start[x_class] == 0, "the 4 KiB class has a starting cap");

  bool checked = false;
  for (int attempt = 0; attempt < 20 && !checked; attempt++) {
    struct seen g = run(grower);
    CHECK(g.x_cap >= 8, "the 4 KiB class's cap grew to only %u", g.x_cap);
    struct seen s = run(starter);
    if (s.heap != g.heap) continue;
    CHECK(s.x_cap_before == 0, "the 4 KiB class started at cap %u before its first refill", s.x_cap_before);
    CHECK(s.x_cap >= g.x_cap, "after its first refill the 4 KiB class has cap %u, its previous thread left %u",
          s.x_cap, g.x_cap);
    checked = true;
  }
  CHECK(checked, "no thread got its predecessor's heap back in 20 tries");

  /* A consumer on a recycled heap keeps the starting cap. */
  checked = false;
  for (int attempt = 0; attempt < 20 && !checked; attempt++) {
    struct seen g = run(grower);
    for (int i = 0; i < GIVEN; i++) CHECK((given[i] = malloc(hak_class_size[x_class] - HAK_TAIL)) != NULL, "malloc");
    struct seen s = run(consumer);
    if (s.heap != g.heap) continue;
    CHECK(s.x_cap < g.x_cap / 2, "a thread that only freed %d 4 KiB blocks raised the class's cap to %u (its heap's previous thread: %u)",
          GIVEN, s.x_cap, g.x_cap);
    checked = true;
  }
  CHECK(checked, "no thread got its predecessor's heap back in 20 tries");

  /* Budget below what the 4 KiB class alone inherits: raised only within it. */
  checked = false;
  for (int attempt = 0; attempt < 20 && !checked; attempt++) {
    CHECK(hak_option_set("HAKMEM_TCACHE_BUDGET", 1 << 20) == 0, "setting the budget");
    struct seen g = run(grower);
    CHECK(hak_option_set("HAKMEM_TCACHE_BUDGET", (long long)g.x_cap * hak_class_size[x_class] - 1) == 0,
          "lowering the budget");
    struct seen s = run(starter);
    if (s.heap != g.heap) continue;
    size_t budget = (size_t)g.x_cap * hak_class_size[x_class] - 1;
    CHECK(s.x_cap < g.x_cap && s.cap_bytes <= budget, "over the budget (%zu), the 4 KiB class went to cap %u (%zu bytes in caps)",
          budget, s.x_cap, s.cap_bytes);
    checked = true;
  }
  CHECK(checked, "no thread got its predecessor's heap back in 20 tries");
  printf("test_tcache_inherit: ok\n");
  return 0;
}
