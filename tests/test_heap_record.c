/* test_heap_record: how much of its heap record a thread touches, and the
 * slot areas inside it (heap/tcache.c, "Slots"). Linked with libhakmem.a:
 * reads the thread's bins and heap directly.
 *
 *  1. A thread that allocates and frees a few blocks of each of 32 classes
 *     (16 B .. 1 KiB) has at most the header's pages and one page of slots
 *     of its heap record resident (mincore). Each class had its
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
  for (unsigned c = 0; c < NCLASSES; c++) slots += hak_config.tcache_slots[c] + 2; /* + NULL below, FULL at room */
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
  /* The header's pages and one page of slots. (A fixed 4 once: the
   * standard build's record, with its statistics, grew to 3.6 pages, and
   * the slot areas' NULL and FULL words (heap.h: hak_bin_t) with the area
   * table pushed 32 classes' slots onto a fifth.) */
  size_t header = (sizeof(hak_heap_t) + pg - 1) / pg;
  CHECK(r <= header + 1, "%zu pages of the heap record resident (at most %zu)", r, header + 1);
  return NULL;
}

static void check_areas(int round) {
  hak_tls_t *t = &hak_tls;
  hak_heap_t *h = t->heap;
  void **end = h->slot_store;
  for (unsigned c = 0; c < NCLASSES; c++) end += hak_config.tcache_slots[c] + 2;
  void **prev_end = h->slot_store;
  static void *seen[1 << 16];
  size_t nseen = 0;
  for (unsigned c = 0; c < NCLASSES; c++) {
    void **slots = bin_slots(t, c);
    uint32_t count = bin_count(t, c), cap = bin_cap(t, c);
    hak_bin_t *b = bin_of(t, c);
    CHECK(slots - 1 >= prev_end, "round %d: class %u's area overlaps the one before", round, c);
    CHECK(count <= cap && cap <= h->room[c], "round %d: class %u count %u cap %u room %u", round, c,
          count, cap, h->room[c]);
    /* The bin's layout (heap.h: hak_bin_t): NULL below, FULL at the cap, top = ptr[-1]. */
    CHECK(!bin_is_open(b) || (slots[-1] == NULL && slots[cap] == HAK_SLOT_FULL && b->top == b->ptr[-1]),
          "round %d: class %u's sentinel, marker or top is wrong", round, c);
    prev_end = slots + h->room[c] + 1;
    CHECK(prev_end <= end, "round %d: class %u's area ends past the store", round, c);
    for (unsigned i = 0; i < count; i++) {
      void *p = slots[i];
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
