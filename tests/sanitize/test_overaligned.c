/* test_overaligned - blocks aligned to 2 MiB or more (large/overaligned.c:
 * a table keyed by address, 64 stripe locks, an array that grows).
 *
 * On the hak_ API (the same entry points as malloc's names: aliases), linked
 * with libhakmem.a to read the table's step counter; so it runs in the
 * sanitizer builds too (TSan: the table's locking).
 *  1. Concurrency: 4 threads allocate blocks aligned to 2, 4 or 8 MiB (0 B
 *     to 3 MiB), check malloc_usable_size and hak_owns, write and check their
 *     first and last bytes, realloc some, hand a third of them to the next
 *     thread through a mailbox (freed there), and free glibc blocks (some of
 *     them 2 MiB aligned) through hak_free in between; 1,000+ blocks live at
 *     once, so the table's array grows while the others look up. The main
 *     thread forks in the middle: the child frees and allocates
 *     over-aligned blocks of its own and exits.
 *  2. Work per lookup, timed nowhere (builds with stats): 4096 blocks are
 *     allocated, then each asked for its usable size, realloc'd to the same
 *     size (a lookup; it moves the block to an ordinary one) or freed in
 *     allocation order (the oldest first, the end of a list kept newest
 *     first). The lookups' record comparisons (overaligned_steps) must stay
 *     under 4 per lookup; a list walk of main before makes ~n/2 (2048).
 *  3. A double free of an over-aligned block: reported ("invalid
 *     pointer"), as before, and nothing else happens.
 *
 * usage: test_overaligned
 */
#include "hak_test.h"
#include "hakmem.h"
#include "large/overaligned.h"

#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

extern void *__libc_malloc(size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define MiB ((size_t)1 << 20)
#define THREADS 4
#define LIVE 256 /* per thread */
#define ROUNDS 6
#define N2 4096

typedef struct {
  unsigned char *p;
  size_t size;
  unsigned char key;
} blk_t;

static _Atomic(blk_t *) mailbox[THREADS][64];
static _Atomic(int) forked;

static void put(blk_t *b, size_t size, unsigned char key) {
  b->size = size;
  b->key = key;
  if (size) {
    b->p[size - 1] = (unsigned char)(key ^ 0x5a);
    b->p[0] = key; /* the same byte when size is 1 */
  }
}

static void check(const blk_t *b, const char *who) {
  CHECK(b->p && ((uintptr_t)b->p & (2 * MiB - 1)) == 0, "%s: block %p not 2 MiB aligned", who, (void *)b->p);
  CHECK(hak_usable_size(b->p) >= b->size, "%s: usable %zu < %zu", who, hak_usable_size(b->p), b->size);
  CHECK(hak_owns(b->p), "%s: hak_owns(%p) = 0", who, (void *)b->p);
  if (b->size)
    CHECK(b->p[0] == b->key && (b->size < 2 || b->p[b->size - 1] == (unsigned char)(b->key ^ 0x5a)),
          "%s: block %p overwritten", who,
          (void *)b->p);
}

static void new_block(blk_t *b, ht_rng *r) {
  size_t align = (2 * MiB) << ht_below(r, 3), size = ht_below(r, 4) ? ht_below(r, 3 * MiB) : ht_below(r, 64);
  void *p = NULL;
  int e = hak_posix_memalign(&p, align, size);
  CHECK(e == 0 && p, "posix_memalign(%zu, %zu) = %d", align, size, e);
  CHECK(((uintptr_t)p & (align - 1)) == 0, "posix_memalign(%zu): %p misaligned", align, p);
  b->p = p;
  put(b, size, (unsigned char)ht_next(r));
}

/* 2 MiB-aligned addresses of a mapping of the test's own: never HAKMEM's. */
static unsigned char *own_aligned;

/* A glibc block (every fourth 2 MiB aligned; not under TSan, which takes
 * __libc_memalign over) freed through hak_free, and a 2 MiB-aligned address
 * that is not a block asked about: lookups that find nothing. */
static void foreign_free(ht_rng *r) {
  void *f = __libc_malloc(1 + ht_below(r, 5000));
#ifndef __SANITIZE_THREAD__
  if (!ht_below(r, 4)) {
    __libc_free(f);
    f = __libc_memalign(2 * MiB, 100);
  }
#endif
  CHECK(f != NULL, "glibc allocation failed");
  CHECK(!hak_owns(f), "glibc block %p taken for HAKMEM's", f);
  hak_free(f);
  void *a = own_aligned + ht_below(r, 2) * 2 * MiB;
  CHECK(!hak_owns(a), "an address %p of the test's own mapping taken for HAKMEM's", a);
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  ht_rng r = {0x0a11 + id};
  blk_t *live = calloc(LIVE, sizeof *live);
  CHECK(live != NULL, "calloc");
  for (int round = 0; round < ROUNDS; round++) {
    for (int i = 0; i < LIVE; i++) new_block(&live[i], &r);
    for (int i = 0; i < LIVE; i++) {
      check(&live[i], "worker");
      if (i % 8 == 0) foreign_free(&r);
      if (i % 16 == 5) { /* realloc: an ordinary block now, contents kept */
        size_t keep = live[i].size < 4096 ? live[i].size : 4096;
        unsigned char k0 = keep ? live[i].p[0] : 0;
        unsigned char *q = hak_realloc(live[i].p, 4096);
        CHECK(q && (!keep || q[0] == k0), "realloc of an over-aligned block lost its contents");
        hak_free(q);
      } else if (i % 3 == 0) { /* to the next thread */
        blk_t *b = malloc(sizeof *b);
        *b = live[i];
        blk_t *old = atomic_exchange(&mailbox[(id + 1) % THREADS][i % 64], b);
        if (old) {
          check(old, "mailbox");
          hak_free(old->p);
          free(old);
        }
      } else {
        hak_free(live[i].p);
      }
      /* one taken from our own mailbox */
      blk_t *in = atomic_exchange(&mailbox[id][(i * 7) % 64], NULL);
      if (in) {
        check(in, "received");
        hak_free(in->p);
        free(in);
      }
    }
  }
  free(live);
  return NULL;
}

static void fork_child(void) {
  alarm(20);
  ht_rng r = {77};
  blk_t b[64];
  for (int i = 0; i < 64; i++) new_block(&b[i], &r);
  for (int i = 0; i < 64; i++) {
    check(&b[i], "child");
    foreign_free(&r);
    hak_free(b[i].p);
  }
  _exit(0);
}

static void concurrency(void) {
  pthread_t t[THREADS];
  for (unsigned i = 0; i < THREADS; i++)
    CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0, "pthread_create");
  for (int k = 0; k < 3; k++) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ht_fork_wait(fork_child);
    atomic_fetch_add(&forked, 1);
  }
  for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (unsigned i = 0; i < THREADS; i++)
    for (unsigned j = 0; j < 64; j++) {
      blk_t *b = atomic_exchange(&mailbox[i][j], NULL);
      if (b) {
        check(b, "left");
        hak_free(b->p);
        free(b);
      }
    }
}

static void steps_per_lookup(void) {
#if HAK_STATS
  static void *blocks[N2];
  for (int i = 0; i < N2; i++) {
    CHECK(hak_posix_memalign(&blocks[i], 2 * MiB, 64) == 0, "posix_memalign(2 MiB, 64), block %d", i);
    memset(blocks[i], i & 0xff, 64);
  }
  uint64_t s0 = atomic_load(&overaligned_steps);
  unsigned long lookups = 0;
  for (int i = 0; i < N2; i++, lookups++)
    CHECK(hak_usable_size(blocks[i]) >= 64, "malloc_usable_size of block %d", i);
  for (int i = 0; i < N2; i++, lookups++) {
    if (i % 4 == 1) {
      unsigned char *q = hak_realloc(blocks[i], 64);
      CHECK(q && q[63] == (i & 0xff), "realloc of block %d", i);
      lookups++; /* realloc's own lookup, then its free of the old block */
      hak_free(q);
    } else {
      hak_free(blocks[i]);
    }
  }
  uint64_t steps = atomic_load(&overaligned_steps) - s0;
  printf("test_overaligned: %d blocks: %lu lookups compared %llu records (%.2f per lookup)\n", N2, lookups,
         (unsigned long long)steps, (double)steps / (double)lookups);
  CHECK(steps <= 4 * (uint64_t)lookups, "%llu record comparisons for %lu lookups: more than 4 per lookup",
        (unsigned long long)steps, lookups);
#else
  printf("test_overaligned: work per lookup not checked (no stats in this build)\n");
#endif
}

static void double_free_child(void *arg) {
  (void)arg;
  void *p = NULL;
  if (hak_posix_memalign(&p, 4 * MiB, 1000) != 0) _exit(2);
  hak_free(p);
  hak_free(p);
  _exit(0);
}

static void double_free(void) {
  char err[512];
  int st = ht_run_captured(double_free_child, NULL, err, sizeof err, NULL, 0);
  char how[64];
  CHECK(strstr(err, "invalid pointer") != NULL, "a double free of an over-aligned block was not reported: %s (%s)",
        err, ht_status_text(st, how, sizeof how));
#if !HAK_SECURE
  CHECK(ht_exited0(st), "the second free did more than report: %s", ht_status_text(st, how, sizeof how));
#endif
}

int main(void) {
  hak_test_name = "test_overaligned";
  setvbuf(stdout, NULL, _IONBF, 0);
  void *m = mmap(NULL, 6 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED, "mmap");
  own_aligned = (unsigned char *)(((uintptr_t)m + 2 * MiB - 1) & ~(2 * MiB - 1));
  concurrency();
  CHECK(atomic_load(&forked) == 3, "forks");
  steps_per_lookup();
  double_free();
  printf("test_overaligned: OK\n");
  return 0;
}
