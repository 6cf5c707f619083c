/* test_cancel - threads cancelled (pthread_cancel, deferred) at the
 * cancellation points of a loop that allocates.
 *
 * Each round starts NT workers that malloc, realloc and free blocks of
 * 16 B .. 600 KiB, pass them through a shared table of mailboxes (most frees
 * remote, many of blocks whose thread was cancelled), keep a ring of their
 * own that a cleanup handler frees while the thread unwinds, and reach a
 * cancellation point every few operations (write to /dev/null, nanosleep,
 * pthread_testcancel). Main cancels them all after 0.05-2 ms and joins
 * them: each must end PTHREAD_CANCELED, every block in the table must keep
 * its contents, and resident memory must not grow with the rounds (a heap
 * or cache stranded by a cancelled thread would). No HAKMEM code is a
 * cancellation point (no system call of the malloc paths is one), so a
 * thread is never unwound from inside malloc or free; this checks that its
 * exit by unwinding (key destructors run as at pthread_exit) leaves
 * everything as a normal exit does. */
#include "hak_test.h"

#include <pthread.h>
#include <stdatomic.h>

#define NBOX 4096
#define RING 64
#define NT 8

static _Atomic(unsigned char *) g_box[NBOX];

static void block_check(const unsigned char *p) {
  size_t n;
  memcpy(&n, p, sizeof n);
  for (size_t i = sizeof n; i < n; i++)
    CHECK(p[i] == (unsigned char)n, "block %p of %zu bytes changed at %zu", (const void *)p, n, i);
}

static unsigned char *block_new(size_t n) {
  unsigned char *p = malloc(n);
  CHECK(p != NULL, "malloc(%zu)", n);
  memcpy(p, &n, sizeof n);
  memset(p + sizeof n, (unsigned char)n, n - sizeof n);
  return p;
}

static void ring_free(void *arg) {
  void **ring = arg;
  for (int i = 0; i < RING; i++) free(ring[i]);
  free(ring);
}

static void *worker(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15ull + 1;
  void **ring = calloc(RING, sizeof *ring);
  CHECK(ring != NULL, "calloc");
  int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  CHECK(fd >= 0, "open /dev/null");
  pthread_cleanup_push(ring_free, ring);
  for (unsigned long it = 1;; it++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    unsigned r = (unsigned)(x % 100);
    size_t n = 16 + (r < 90 ? x % 512 : r < 99 ? x % 40000 : x % 600000);
    unsigned char *old = atomic_exchange(&g_box[(x >> 20) % NBOX], block_new(n));
    if (old) {
      block_check(old);
      if (x & 1) {
        free(old);
      } else {
        size_t m;
        memcpy(&m, old, sizeof m);
        unsigned char *q = realloc(old, m + 100);
        CHECK(q != NULL, "realloc");
        free(q);
      }
    }
    unsigned k = (unsigned)(x >> 30) % RING;
    free(ring[k]);
    ring[k] = malloc(1 + (x >> 40) % 3000);
    if (it % 16 == 0) {
      char c = 0;
      if (write(fd, &c, 1) < 0) { /* a cancellation point */ }
    }
    if (it % 64 == 0) pthread_testcancel();
    if (it % 256 == 0) {
      struct timespec ts = {0, 1000};
      nanosleep(&ts, NULL);
    }
  }
  pthread_cleanup_pop(1);
  return NULL;
}

int main(int argc, char **argv) {
  hak_test_require_hakmem("test_cancel");
  unsigned rounds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 150;
  size_t rss_third = 0, rss_max = 0;
  for (unsigned r = 0; r < rounds; r++) {
    pthread_t t[NT];
    for (unsigned i = 0; i < NT; i++)
      CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(r * NT + i + 1)) == 0, "pthread_create");
    struct timespec ts = {0, (long)(r % 7) * 300000 + 50000};
    nanosleep(&ts, NULL);
    for (unsigned i = 0; i < NT; i++) CHECK(pthread_cancel(t[i]) == 0, "pthread_cancel");
    for (unsigned i = 0; i < NT; i++) {
      void *ret = NULL;
      CHECK(pthread_join(t[i], &ret) == 0, "pthread_join");
      CHECK(ret == PTHREAD_CANCELED, "round %u thread %u was not cancelled", r, i);
    }
    size_t rss = ht_rss_bytes();
    if (r == rounds / 3) rss_third = rss;
    if (r > rounds / 3 && rss > rss_max) rss_max = rss;
  }
  unsigned long left = 0;
  for (unsigned i = 0; i < NBOX; i++) {
    unsigned char *p = atomic_exchange(&g_box[i], NULL);
    if (p) {
      block_check(p);
      free(p);
      left++;
    }
  }
  /* The table holds ~4096 blocks of ~6 KiB on average at every round; a
   * cancelled thread that stranded its heap's pages would add to every round. */
  CHECK(HT_RSS_SHADOWED || rss_max <= rss_third + rss_third / 2 + 32 * 1024 * 1024,
        "resident memory grows with cancelled threads: %.1f MiB after a third of the rounds, %.1f MiB later",
        rss_third / 1048576.0, rss_max / 1048576.0);
  printf("test_cancel: OK: %u rounds of %u threads cancelled while allocating, %lu blocks left in the table intact; "
         "RSS MiB after 1/3 %.1f, max later %.1f\n",
         rounds, NT, left, rss_third / 1048576.0, rss_max / 1048576.0);
  return 0;
}
