/* test_large_grow: a large block (a run of 64 KiB slices in a segment)
 * resized by realloc in place (segment/large_run.c), linked with libhakmem.a
 * so it runs HAKMEM in the build's own variant (in the secure build, with
 * the guard page after every large block).
 *
 *  1. grow: a 300000-byte block (5 slices) grown to 600000 with the slices
 *     after it free keeps its address and contents; its usable size covers
 *     the request and all of it is writable (in the secure build that is
 *     the old guard page, opened); in the secure build a linear overflow
 *     past it faults (the guard is at the new end: a child process must
 *     die of a signal).
 *  2. shrink: the same block shrunk to 100000 (less than half) stays where
 *     it is (it used to move to a new 2-slice page: in the secure build a
 *     string builder just past one slice moved at every step between 61 and
 *     63 KiB, 24377 times in bench_realloc 2000000 256 64K); its usable
 *     size is at most 2 slices; secure build: overflow faults.
 *  3. grow again over the slices the shrink gave back: same address.
 *  4. blocked: a block whose next slices hold another block moves, both
 *     keep their contents.
 *  5. reuse: large blocks cut over the given-back slices (where the
 *     shrunk run's old guard stays behind) are writable in full.
 *  6. threads: 4 threads resize, free and allocate their own large blocks
 *     (33 KiB .. 1 MiB, some becoming huge) in shared segments, contents
 *     checked at every step: the shard lock and returned stack the resizes
 *     use, under contention.
 *  7. books: after 1-5 and after 6, with every shard locked, each shard's
 *     free and dirty slice counts and the process-wide free and dirty
 *     bytes (segment/shard.h) equal what its segments' masks say: a grow
 *     takes its slices out of them once, a shrink's tail goes back once.
 */
#include "hak_test.h"
#include "hak_internal.h"
#include "segment/shard.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif

#define SLICE ((size_t)65536)

static void overflow_child(void *p) {
  alarm(20);
  size_t u = malloc_usable_size(p);
  for (size_t i = u; i < u + (4u << 20); i++) ((volatile char *)p)[i] = 1;
}

/* Secure build: a child writing from the end of p's usable size onwards
 * must be killed (SIGSEGV, or SIGABRT from the fault handler naming it). */
static void check_overflow_faults(char *p, const char *what) {
  if (!HAK_SECURE) return;
  int st = ht_run_captured(overflow_child, p, NULL, 0, NULL, 0);
  CHECK(ht_killed_by(st, SIGSEGV) || ht_killed_by(st, SIGABRT),
        "%s: an overflow past the block did not fault (status %#x)", what, st);
}

static void check_usable(char *p, size_t n, size_t max_slices, const char *what) {
  size_t u = malloc_usable_size(p);
  CHECK(u >= n, "%s: usable size %zu below the request %zu", what, u, n);
  CHECK(u <= max_slices * SLICE, "%s: usable size %zu beyond %zu slices", what, u, max_slices);
  memset(p + n, 0x33, u - n); /* all of it writable */
}

/* Every shard locked in order (no holder of one waits for another), so the
 * books are still; a segment off its shard's list has no free slice. */
static void check_books(const char *when) {
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) shard_lock(&hak_seg_shards[i]);
  size_t free_b = 0, dirty_b = 0;
  int bad = -1;
  unsigned fs = 0, ds = 0;
  for (unsigned i = 0; i < HAK_SEG_SHARDS && bad < 0; i++) {
    seg_shard_t *sh = &hak_seg_shards[i];
    fs = ds = 0;
    for (hak_segment_t *sg = sh->head; sg; sg = sg->next) {
      fs += pop32(sg->free_mask);
      ds += pop32(sg->dirty_mask);
      free_b += mask_bytes(sg->free_mask);
      dirty_b += mask_bytes(sg->dirty_mask);
    }
    if (LOAD(sh->free_slices) != fs || LOAD(sh->dirty_slices) != ds) bad = (int)i;
  }
  /* The bytes are the shards' (shard.h); the process-wide dirty figure is
   * their folded sum, within DIRTY_FOLD of each shard's and 0 only for none. */
  size_t book_free = 0, book_dirty = 0, folded = 0, ffolded = 0;
  int bad_fold = -1;
  for (unsigned i = 0; i < HAK_SEG_SHARDS; i++) {
    seg_shard_t *sh = &hak_seg_shards[i];
    size_t d = LOAD(sh->dirty_bytes), f = sh->dirty_folded;
    book_free += LOAD(sh->free_bytes);
    book_dirty += d;
    folded += f;
    ffolded += sh->free_folded;
    if ((d != 0) != (f != 0) || (d > f ? d - f : f - d) >= DIRTY_FOLD) bad_fold = (int)i;
    d = LOAD(sh->free_bytes), f = sh->free_folded;
    if ((d != 0) != (f != 0) || (d > f ? d - f : f - d) >= DIRTY_FOLD) bad_fold = (int)i;
  }
  size_t book_folded = LOAD(hak_seg_books.dirty), book_ffolded = LOAD(hak_seg_books.free);
  unsigned sh_free = bad >= 0 ? LOAD(hak_seg_shards[bad].free_slices) : 0;
  unsigned sh_dirty = bad >= 0 ? LOAD(hak_seg_shards[bad].dirty_slices) : 0;
  for (unsigned i = HAK_SEG_SHARDS; i-- > 0;) hak_unlock(&hak_seg_shards[i].lock);
  CHECK(bad < 0, "%s: shard %d counts %u free and %u dirty slices, its segments have %u and %u", when, bad, sh_free,
        sh_dirty, fs, ds);
  CHECK(bad_fold < 0 && book_folded == folded && book_ffolded == ffolded,
        "%s: shard %d's bytes folded out of band, or the books' %zu dirty / %zu free are not the folded %zu / %zu",
        when, bad_fold, book_folded, book_ffolded, folded, ffolded);
  CHECK(book_free == free_b && book_dirty == dirty_b,
        "%s: books say %zu free and %zu dirty bytes, the segments have %zu and %zu", when, book_free, book_dirty,
        free_b, dirty_b);
  printf("test_large_grow: books %s: %zu free bytes, %zu dirty, as the segments say\n", when, free_b, dirty_b);
}

enum { T = 4, B = 6, STEPS = 3000 };

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  ht_rng rng = {0x9e3779b97f4a7c15ull * (id + 1)};
  char *buf[B] = {0};
  size_t len[B] = {0};
  uint64_t key[B] = {0};
  for (int step = 0; step < STEPS; step++) {
    int i = (int)ht_below(&rng, B);
    uint64_t op = ht_below(&rng, 8);
    if (!buf[i] || op == 0) {
      free(buf[i]);
      len[i] = 33000 + ht_below(&rng, 300000);
      key[i] = ((uint64_t)id << 32) | (uint64_t)step;
      buf[i] = malloc(len[i]);
      CHECK(buf[i] != NULL, "malloc(%zu)", len[i]);
      ht_fill(buf[i], key[i], 0, len[i]);
      continue;
    }
    size_t n = op < 5 ? len[i] + 1 + ht_below(&rng, len[i]) : 33000 + ht_below(&rng, len[i] / 2 + 1);
    if (n > (1u << 20)) n = 33000 + ht_below(&rng, 100000);
    char *nb = realloc(buf[i], n);
    CHECK(nb != NULL, "realloc(%zu)", n);
    size_t keep = n < len[i] ? n : len[i];
    CHECK(ht_verify(nb, key[i], 0, keep) == (size_t)-1, "thread %u: contents lost resizing %zu -> %zu", id, len[i], n);
    if (n > len[i]) ht_fill(nb, key[i], len[i], n);
    buf[i] = nb;
    len[i] = n;
  }
  for (int i = 0; i < B; i++) {
    if (buf[i]) CHECK(ht_verify(buf[i], key[i], 0, len[i]) == (size_t)-1, "thread %u: block %d overwritten", id, i);
    free(buf[i]);
  }
  return NULL;
}

static void check_threads(void) {
  pthread_t t[T];
  for (unsigned i = 0; i < T; i++)
    CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (unsigned i = 0; i < T; i++) CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
  printf("test_large_grow: %d threads x %d resizes of large blocks: ok\n", T, STEPS);
}

int main(void) {
  hak_test_name = "test_large_grow";
  char *p = malloc(ht_hide(300000));
  CHECK(p != NULL, "malloc(300000)");
  ht_fill(p, 1, 0, 300000);

  char *q = realloc(p, ht_hide(600000));
  CHECK(q != NULL, "realloc to 600000");
  CHECK(q == p, "grow: a large block with free slices after it moved (%p -> %p)", (void *)p, (void *)q);
  CHECK(ht_verify(q, 1, 0, 300000) == (size_t)-1, "grow: contents lost");
  check_usable(q, 600000, 10, "grow");
  ht_fill(q, 1, 300000, 600000);
  check_overflow_faults(q, "grow");

  q = realloc(q, ht_hide(100000));
  CHECK(q == p, "shrink: a large block shrunk to 100000 moved (%p -> %p)", (void *)p, (void *)q);
  CHECK(ht_verify(q, 1, 0, 100000) == (size_t)-1, "shrink: contents lost");
  check_usable(q, 100000, 2, "shrink");
  check_overflow_faults(q, "shrink");

  q = realloc(q, ht_hide(500000));
  CHECK(q == p, "grow again: moved (%p -> %p)", (void *)p, (void *)q);
  CHECK(ht_verify(q, 1, 0, 100000) == (size_t)-1, "grow again: contents lost");
  check_usable(q, 500000, 8, "grow again");
  check_overflow_faults(q, "grow again");

  /* A neighbour right after the run: the block cannot grow there. */
  char *a = malloc(ht_hide(300000)), *b = malloc(ht_hide(300000));
  CHECK(a && b, "malloc(300000) x2");
  ht_fill(a, 2, 0, 300000);
  ht_fill(b, 3, 0, 300000);
  int adjacent = (size_t)(b - a) == 5 * SLICE;
  char *a2 = realloc(a, ht_hide(400000));
  CHECK(a2 != NULL, "realloc to 400000");
  CHECK(!adjacent || a2 != a, "blocked: grew over its neighbour %p", (void *)b);
  CHECK(ht_verify(a2, 2, 0, 300000) == (size_t)-1, "blocked: contents lost");
  CHECK(ht_verify(b, 3, 0, 300000) == (size_t)-1, "blocked: the neighbour was overwritten");
  printf("test_large_grow: grow, shrink, grow again in place; blocked (%s): ok\n",
         adjacent ? "neighbour adjacent, moved" : "neighbour not adjacent");
  free(a2);
  free(b);

  /* The run shrinks once more, and the slices it gives back (its old guard
   * behind them in the secure build) are cut into other blocks. */
  q = realloc(q, ht_hide(70000));
  CHECK(q == p, "shrink to 70000: moved");
  enum { R = 24 };
  char *r[R];
  for (int i = 0; i < R; i++) {
    size_t n = 40000 + (size_t)(i % 6) * 60000;
    r[i] = malloc(n);
    CHECK(r[i] != NULL, "malloc(%zu)", n);
    memset(r[i], 0x44, malloc_usable_size(r[i]));
  }
  for (int i = 0; i < R; i++) free(r[i]);
  CHECK(ht_verify(q, 1, 0, 70000) == (size_t)-1, "contents lost after neighbours came and went");
  free(q);
  printf("test_large_grow: slices given back reused in full: ok\n");
  check_books("after one thread's resizes");

  check_threads();
  check_books("after 4 threads' resizes");
  printf("test_large_grow: OK\n");
  return 0;
}
