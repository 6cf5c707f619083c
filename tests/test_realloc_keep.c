/* test_realloc_keep - the block a realloc moved away from is freed as free()
 * frees it up to 1 KiB (into the thread's cache); a bigger one goes into the
 * cache while its class holds fewer than two blocks there (one for classes
 * above 8 KiB), else back to its page (front/api.c, free_moved): the next
 * buffer that grows into the class takes it, without the heap lock's wait
 * on the copy's stores, and the cache holds no more than that.
 *
 * Linked with libhakmem.a, to read the caches of the thread's bins. In a
 * thread of its own (a fresh heap), for classes of 64 B - 20 KiB:
 *  1. The class's cache is emptied (its blocks held), three of the held
 *     blocks are filled and moved by realloc to a bigger class: the cache
 *     holds all three up to 1 KiB, the first two up to 8 KiB, the first
 *     above, contents kept in the moved blocks.
 *  2. malloc of the class hands back the cached ones, last moved first.
 *  3. Everything freed, the class again: realloc of a block to 0 bytes,
 *     realloc(NULL, n), and a shrink that stays in place, as before.
 *
 * usage: test_realloc_keep
 */
#include "hak_test.h"
#include "hakmem.h"
#include "heap/canary.h"
#include "heap/heap.h"
#include "heap/size_class.h"
#include "policy/config.h"

#include <pthread.h>

#define HELD 4096

static void *held[HELD];

static void check_class(size_t want) {
  unsigned x = size_class_of(want);
  size_t xs = hak_class_size[x] - HAK_TAIL;
  unsigned keep = hak_class_size[x] <= 1024 ? 3u : hak_class_size[x] <= 8192 ? 2u : 1u;
  hak_bin_t *b = bin_of(&hak_tls, x);
  /* Warm the class (its cache opens and gets a cap), then empty its cache. */
  for (int round = 0; round < 8; round++) {
    for (int i = 0; i < 32; i++) CHECK((held[i] = malloc(xs)) != NULL, "malloc(%zu)", xs);
    for (int i = 0; i < 32; i++) free(held[i]);
  }
  unsigned n = 0;
  do {
    CHECK(n < HELD, "class %zu: the cache did not empty after %u blocks", xs, n);
    CHECK((held[n++] = malloc(xs)) != NULL, "malloc(%zu)", xs);
  } while (bin_count(&hak_tls, x) > 0);
  CHECK(n >= 3, "class %zu: only %u blocks held", xs, n);
  if (!bin_room(b) || bin_cap(&hak_tls, x) < 3 || hak_config.zero_on_free) { /* no cache for them: nothing to check */
    for (unsigned i = 0; i < n; i++) free(held[i]);
    return;
  }

  void *moved[3], *to[3];
  for (int k = 0; k < 3; k++) {
    moved[k] = held[n - 1 - k];
    ht_fill(moved[k], 100 + k, 0, xs);
    to[k] = realloc(moved[k], 2 * xs + 100);
    CHECK(to[k] != NULL && to[k] != moved[k], "class %zu: realloc to %zu did not move (%p -> %p)", xs, 2 * xs + 100,
          moved[k], to[k]);
    size_t bad = ht_verify(to[k], 100 + k, 0, xs);
    CHECK(bad == (size_t)-1, "class %zu: realloc lost contents at offset %zu", xs, bad);
    unsigned want_count = (unsigned)k + 1 < keep ? (unsigned)k + 1 : keep;
    CHECK(bin_count(&hak_tls, x) == want_count, "class %zu: %d moves left %u blocks in the cache (want %u)", xs, k + 1,
          bin_count(&hak_tls, x), want_count);
  }
  n -= 3;
  /* The cached blocks come back last moved first. */
  for (unsigned k = keep; k-- > 0;) {
    void *p = malloc(xs);
    CHECK(p == moved[k], "class %zu: malloc gave %p, not the cached moved-from block %p", xs, p, moved[k]);
    held[n++] = p;
  }
  for (int k = 0; k < 3; k++) free(to[k]);
  for (unsigned i = 0; i < n; i++) free(held[i]);

  /* The rules that did not change. */
  void *p = realloc(NULL, xs);
  CHECK(p != NULL && malloc_usable_size(p) >= xs, "realloc(NULL, %zu)", xs);
  ht_fill(p, 7, 0, xs);
  void *q = realloc(p, xs - xs / 4);
  CHECK(q == p, "class %zu: a shrink by a quarter moved the block", xs);
  CHECK(ht_verify(q, 7, 0, xs - xs / 4) == (size_t)-1, "class %zu: the shrink lost contents", xs);
  errno = 0;
  CHECK(realloc(q, 0) == NULL, "realloc(p, 0) returns NULL (the block freed)");
}

static void *worker(void *arg) {
  (void)arg;
  static const size_t sizes[] = {64, 200, 1000, 3000, 8000, 12000, 20000};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) check_class(sizes[i]);
  return NULL;
}

int main(void) {
  hak_test_name = "test_realloc_keep";
  free(malloc(16));
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  printf("test_realloc_keep: ok\n");
  return 0;
}
