/* test_big_classes: blocks of 32-256 KiB come from size classes (pages of
 * four blocks), not from large pages of their own (linked with libhakmem.a,
 * so it runs HAKMEM whatever the environment).
 *
 *  1. malloc(n) for n in 32 KiB..256 KiB has the class's usable size, at most
 *     12.5% above n (a large page rounds to 64 KiB slices: 40000 -> 65536).
 *  2. Blocks of one class share pages: of 64 live blocks of 40000 B, at
 *     least half have a neighbour exactly one class size after them (a
 *     large page of its own each: none).
 *  3. A buffer grown by realloc from 32 KiB to 256 KiB in 1 KiB steps moves
 *     at most 8 times (a large page grows in place; through the classes,
 *     12.5% apart, it moved at every class step: 24 times), contents kept.
 *  4. Cross-thread: blocks of every class above 32 KiB allocated by one
 *     thread and freed by another, contents checked, then allocated again
 *     by the first: no block handed out twice (pattern of each live block
 *     intact at the end).
 * The secure build keeps blocks above 32 KiB on large pages (their guard
 * pages, hak_internal.h: HAK_MID_MAX): there only 3 and 4 run (3: the
 * large page grows in place over the free slices after it, guard and all).
 */
#include "hak_test.h"
#include "hak_internal.h"

#include <malloc.h>
#include <pthread.h>

#define KiB ((size_t)1024)
#define NX 512

static void check_usable(void) {
  for (size_t n = 32 * KiB + 1; n <= 256 * KiB; n += 997) {
    void *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    size_t u = malloc_usable_size(p);
    CHECK(u >= n && u <= n + n / 8, "malloc(%zu): usable size %zu (a class block is at most 12.5%% bigger)", n, u);
    memset(p, 0x5a, n);
    free(p);
  }
}

static void check_neighbours(void) {
  enum { N = 64 };
  char *b[N];
  for (int i = 0; i < N; i++) {
    b[i] = malloc(40000);
    CHECK(b[i] != NULL, "malloc(40000)");
    memset(b[i], i, 40000);
  }
  size_t size = malloc_usable_size(b[0]);
  int paired = 0;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      if (b[j] == b[i] + size) { paired++; break; }
  CHECK(paired >= N / 2, "only %d of %d blocks of 40000 B have a neighbour %zu bytes after them", paired, N, size);
  for (int i = 0; i < N; i++) {
    CHECK(b[i][0] == (char)i && b[i][39999] == (char)i, "block %d overwritten", i);
    free(b[i]);
  }
}

static void check_realloc(void) {
  size_t n = 32 * KiB;
  unsigned char *p = malloc(n);
  CHECK(p != NULL, "malloc(%zu)", n);
  ht_fill(p, 7, 0, n);
  int moves = 0;
  for (; n + KiB <= 256 * KiB; n += KiB) {
    unsigned char *q = realloc(p, n + KiB);
    CHECK(q != NULL, "realloc(%zu)", n + KiB);
    if (q != p) moves++;
    ht_fill(q, 7, n, n + KiB);
    p = q;
  }
  CHECK(ht_verify(p, 7, 0, n) == (size_t)-1, "contents lost growing to %zu", n);
  printf("test_big_classes: a buffer grown from 32 to 256 KiB in 1 KiB steps moved %d times\n", moves);
  CHECK(moves <= 8, "a buffer grown from 32 to 256 KiB in 1 KiB steps moved %d times", moves);
  free(p);
}

static unsigned char *g_x[NX];
static size_t g_n[NX];

static void *freer(void *arg) {
  (void)arg;
  for (int i = 0; i < NX; i++) {
    CHECK(ht_verify(g_x[i], (uint64_t)i, 0, g_n[i]) == (size_t)-1, "block %d corrupted before its remote free", i);
    free(g_x[i]);
  }
  return NULL;
}

static void check_cross_thread(void) {
  ht_rng r = {11};
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < NX; i++) {
      g_n[i] = 32 * KiB + 1 + ht_below(&r, 224 * KiB);
      g_x[i] = malloc(g_n[i]);
      CHECK(g_x[i] != NULL, "malloc(%zu)", g_n[i]);
      ht_fill(g_x[i], (uint64_t)i, 0, g_n[i]);
    }
    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0, "pthread_create");
    CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  }
  /* The freed blocks come back to this thread: all live at once, each its own. */
  for (int i = 0; i < NX; i++) {
    g_x[i] = malloc(g_n[i]);
    CHECK(g_x[i] != NULL, "malloc(%zu)", g_n[i]);
    ht_fill(g_x[i], (uint64_t)i + 1000, 0, g_n[i]);
  }
  for (int i = 0; i < NX; i++) {
    CHECK(ht_verify(g_x[i], (uint64_t)i + 1000, 0, g_n[i]) == (size_t)-1, "block %d shares memory with another", i);
    free(g_x[i]);
  }
}

int main(void) {
  if (HAK_MID_MAX > 32768) {
    check_usable();
    check_neighbours();
  }
  check_realloc();
  check_cross_thread();
  printf("test_big_classes: usable sizes, shared pages, realloc growth, cross-thread frees: ok\n");
  return 0;
}
