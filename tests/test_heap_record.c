/* test_heap_record: how much of its heap record a thread touches, and the
 * slot areas inside it (heap/tcache.c, "Slots"). Linked with libhakmem.a:
 * reads the thread's bins and heap directly.
 *
 *  1. A thread that allocates and frees a few blocks of each of 32 classes
 *     (16 B .. 1 KiB) has at most 4 pages of its heap record resident
 *     (mincore): the header and one page of slots. Each class had its
 *     largest slot area reserved from the start, 1 KiB for each class up to
 *     256 B, so such a thread touched every page of 40 KiB.
 *  2. Slot areas under growth: bursts of random sizes in random class
 *     order, so that caps grow (and areas move) in every order; after each
 *     burst the areas lie in class order inside the store, each as large as
 *     its cap at least, and every cached block is a distinct block of its
 *     class (its page's class: a borrowed block is handed out, never
 *     cached). Then the
 *     thread's resident record is printed.
 */
#include "hak_test.h"

#include "heap/heap.h"
#include "heap/size_class.h"
#include "policy/config.h"

#include <pthread.h>
#include <sys/mman.h>

#define NCLASSES HAK_NCLASSES

#include "hakmem.h"

static size_t record_bytes(void) {
  size_t slots = 0;
  for (unsigned c = 0; c < NCLASSES; c++) slots += hak_config.tcache_slots[c];
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return (sizeof(hak_heap_t) + slots * sizeof(void *) + pg - 1) / pg * pg;
}

static size_t resident_pages(void) {
  hak_heap_t *h = hak_tls.heap;
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = record_bytes() / pg, r = 0;
  unsigned char vec[256];
  CHECK(n <= sizeof vec, "heap record of %zu pages", n);
  CHECK(mincore((void *)h, n * pg, vec) == 0, "mincore: %s", strerror(errno));
  for (size_t i = 0; i < n; i++) r += vec[i] & 1;
  return r;
}

static void *few_classes(void *arg) {
  (void)arg;
  void *b[8];
  for (int round = 0; round < 100; round++)
    for (unsigned c = 0; c < 32; c++) {
      for (int i = 0; i < 8; i++) CHECK((b[i] = malloc(hak_class_size[c])) != NULL, "malloc");
      for (int i = 0; i < 8; i++) free(b[i]);
    }
  CHECK(hak_tls.state == HAK_THREAD_LIVE, "the thread has a heap");
  size_t r = resident_pages(), pg = (size_t)sysconf(_SC_PAGESIZE);
  printf("test_heap_record: 32 classes, up to 8 blocks each: %zu of %zu KiB of the heap record resident\n",
         r * pg / 1024, record_bytes() / 1024);
  CHECK(r <= 4, "%zu pages of the heap record resident (at most 4)", r);
  return NULL;
}

static void check_areas(int round) {
  hak_tls_t *t = &hak_tls;
  hak_heap_t *h = t->heap;
  void **end = h->slot_store;
  for (unsigned c = 0; c < NCLASSES; c++) end += hak_config.tcache_slots[c];
  void **prev_end = h->slot_store;
  static void *seen[1 << 16];
  size_t nseen = 0;
  for (unsigned c = 0; c < NCLASSES; c++) {
    hak_bin_t *b = bin_of(t, c);
    CHECK(b->slots >= prev_end, "round %d: class %u's area overlaps the one before", round, c);
    CHECK(b->count <= b->cap && b->cap <= h->room[c], "round %d: class %u count %u cap %u room %u", round, c,
          b->count, b->cap, h->room[c]);
    prev_end = b->slots + h->room[c];
    CHECK(prev_end <= end, "round %d: class %u's area ends past the store", round, c);
    for (unsigned i = 0; i < b->count; i++) {
      void *p = b->slots[i];
      /* The page's class, not hak_usable_size: the secure build reports a
       * size query on a free (cached) block as a double free. */
      unsigned pc = page_of(p)->cls;
      CHECK(pc == c, "round %d: class %u slot %u holds %p of a class-%u page", round, c, i, p, pc);
      CHECK(nseen < sizeof seen / sizeof *seen, "too many cached blocks");
      seen[nseen++] = p;
    }
  }
  for (size_t i = 0; i < nseen; i++) /* distinct: a moved area lost nothing and doubled nothing */
    for (size_t j = i + 1; j < nseen; j++) CHECK(seen[i] != seen[j], "round %d: block %p cached twice", round, seen[i]);
}

static void *growing(void *arg) {
  (void)arg;
  static __thread void *blk[300];
  ht_rng r = {11};
  for (int round = 0; round < 300; round++) {
    for (unsigned k = 0; k < 48; k++) {
      unsigned c = ht_below(&r, 48), n = 1 + ht_below(&r, 300);
      for (unsigned i = 0; i < n; i++) CHECK((blk[i] = malloc(hak_class_size[c])) != NULL, "malloc");
      for (unsigned i = 0; i < n; i++) free(blk[i]);
    }
    check_areas(round);
  }
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  printf("test_heap_record: 48 classes grown in random order: %zu of %zu KiB of the heap record resident\n",
         resident_pages() * pg / 1024, record_bytes() / 1024);
  return NULL;
}

int main(void) {
  hak_test_name = "test_heap_record";
  free(malloc(16)); /* main's own heap first: the threads below get fresh records */
  pthread_t t;
  CHECK(pthread_create(&t, NULL, few_classes, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(pthread_create(&t, NULL, growing, NULL) == 0, "pthread_create");
  pthread_join(t, NULL);
  printf("test_heap_record: ok\n");
  return 0;
}
