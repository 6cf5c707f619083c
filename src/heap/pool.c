/* pool.c — the heap pool: thread heaps handed out at thread start, taken back
 * at thread exit and recycled (never unmapped: other threads may signal a
 * heap after its thread is gone). No lock: thread start and exit meet other
 * threads only on single CASes, so a thread preempted anywhere here delays
 * nobody.
 *
 * State. Each heap has one atomic word, pool_word: the kernel id of its
 * thread (32 bits), a state (2 bits) and a generation (30 bits, counted up
 * each time the heap is handed to a thread):
 *   FREE   on the free stack, or popped and about to become LIVE;
 *   LIVE   a thread's heap (its tid in the word);
 *   DYING  torn down but awaiting remote signals (heap_destroy returned
 *          false): on the dying stack, or in the hands of a reaper;
 *   HELD   claimed by one thread for work of its own (a vanished thread's
 *          heap being torn down), or left alone in a forked child.
 * Every heap ever mapped is on the push-only all-heaps list (thread.c), so
 * the states can always be walked.
 *
 * The free stack is a Treiber stack of heaps linked through pool_link, its
 * top one 64-bit word: the heap's address >> 12 (heaps are page-aligned and
 * below 2^48) and a 28-bit tag counted up by every push and pop. A pop reads
 * the top, the top heap's link, and CASes the top to the link with the tag
 * + 1: if the heap was popped and pushed back in between (ABA), the tag
 * differs and the CAS fails. Reading the link of a heap another thread has
 * just popped is harmless: heaps are never unmapped, and the CAS then fails.
 *
 * The dying stack is only pushed (one CAS) and taken whole (one exchange):
 * no ABA. A reaper (every thread start and exit, when the stack is not
 * empty) takes it whole, so each dying heap has one reaper at a time; it
 * calls heap_reap, and pushes a heap that is done onto the free stack
 * (FREE), one still awaiting back onto the dying stack.
 *
 * Vanished threads (a heap created in the last round of key destructors
 * never gets its destructor run: glibc runs no further round). A thread
 * start that finds the free stack empty (about to map a heap), and one start
 * in VANISHED_EVERY otherwise (by its kernel id: no shared counter), steps
 * through up to 16 heaps of the all-heaps list (a shared cursor, moved with
 * a relaxed CAS: a lost update only repeats or skips a look), and for up to
 * two LIVE heaps of other threads, not busy, asks tgkill whether the thread
 * still exists (outside any lock: two system calls). Looking at every start
 * cost bench_thread_churn (5000 threads) two tgkill calls and up to 16
 * other heaps' records per thread start, each tgkill ~0.4 us here; a
 * vanished heap is rare, and a start that would map a heap still always
 * looks first, so a program whose threads all vanish (test_late_heap) keeps
 * reusing their heaps as before. If not (ESRCH: it ran no more code, so the
 * heap is not half-changed), it claims the heap with a CAS of the whole word from the
 * value it read (LIVE, tid, gen) to HELD: a heap whose thread exited
 * normally in between is not LIVE any more, and a recycled one has another
 * generation, so the CAS fails. The claimer tears it down (heap_destroy),
 * then the word becomes FREE (the heap pushed onto the free stack) or DYING
 * (onto the dying stack).
 *
 * The hint (free_pop_hinted, below): a thread whose first call frees pops
 * up to HINT_DEPTH heaps and pushes back those it does not keep. Popped,
 * they stay FREE (parked: a collector may still give their pages up) and
 * off the stack: a start meanwhile may find the stack shorter, or empty
 * and map a heap. A thread preempted there holds at most HINT_DEPTH - 1
 * heaps besides its own; nobody waits for them.
 *
 * Thread exit: heap_park (the heap keeps its pages for the next thread the
 * free stack hands it to: heap/heap_exit.c, "Parking"), then the word
 * becomes FREE and the heap is pushed onto the free stack. A thread
 * preempted between the store and the push holds only its own heap. A FREE
 * heap that has been a thread's (generation > 0) is parked (pool_parked):
 * a collector that holds its lock may give its pages up; the thread that
 * pops it takes that lock before it touches them.
 *
 * Fork. Nothing is held: a thread of the parent may have been anywhere in
 * here. The child (single-threaded) rebuilds both stacks from the states,
 * walking the all-heaps list: every heap but the survivor's and the shared
 * heap goes to the free stack, after heap_reap with `lost` (its pages
 * abandoned or retired; a FREE heap's are those it was parked with), except
 * a heap marked busy (its lists caught half-changed by its owner, a reaper
 * or a claimer that do not exist in the child): that one is set HELD and
 * left alone, memory lost to the child, never corrupted. A heap
 * popped but not yet LIVE is FREE: it goes back to the stack. A heap mapped but not yet on the
 * all-heaps list is lost (its memory only). */
#include "heap/pool.h"
#include "heap/heap.h"
#include "os/os.h"
#include "policy/config.h"
#include "stats/stats.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { POOL_FREE = 0, POOL_LIVE = 1, POOL_DYING = 2, POOL_HELD = 3 };

HAK_INLINE uint64_t w_make(int tid, unsigned state, uint64_t gen) {
  return (uint64_t)(uint32_t)tid | (uint64_t)state << 32 | gen << 34;
}
HAK_INLINE int w_tid(uint64_t w) { return (int)(uint32_t)w; }
HAK_INLINE unsigned w_state(uint64_t w) { return (unsigned)(w >> 32) & 3; }
HAK_INLINE uint64_t w_gen(uint64_t w) { return w >> 34; }

HAK_INLINE uint64_t word(hak_heap_t *h) { return atomic_load_explicit(&h->pool_word, memory_order_acquire); }
HAK_INLINE void set_word(hak_heap_t *h, int tid, unsigned state) {
  atomic_store_explicit(&h->pool_word, w_make(tid, state, w_gen(word(h)) + (state == POOL_LIVE)), memory_order_release);
}

/* ---- the free stack (tagged top) ----------------------------------------- */

#define TOP_PTR_BITS 36 /* address bits 12..47 */
static _Atomic(uint64_t) free_top;

HAK_INLINE hak_heap_t *top_heap(uint64_t t) {
  return (hak_heap_t *)(uintptr_t)((t & ((1ull << TOP_PTR_BITS) - 1)) << 12);
}
HAK_INLINE uint64_t top_make(hak_heap_t *h, uint64_t old) {
  return ((uint64_t)(uintptr_t)h >> 12) | ((old >> TOP_PTR_BITS) + 1) << TOP_PTR_BITS;
}
static bool poolable(hak_heap_t *h) { return ((uintptr_t)h & 4095) == 0 && ((uintptr_t)h >> 48) == 0; }

static void free_push(hak_heap_t *h) {
  uint64_t top = atomic_load_explicit(&free_top, memory_order_relaxed);
  do {
    atomic_store_explicit(&h->pool_link, top_heap(top), memory_order_relaxed);
  } while (!atomic_compare_exchange_weak_explicit(&free_top, &top, top_make(h, top), memory_order_release,
                                                  memory_order_relaxed));
}

static hak_heap_t *free_pop(void) {
  uint64_t top = atomic_load_explicit(&free_top, memory_order_acquire);
  for (;;) {
    hak_heap_t *h = top_heap(top);
    if (!h) return NULL;
    hak_heap_t *next = atomic_load_explicit(&h->pool_link, memory_order_relaxed);
    if (atomic_compare_exchange_weak_explicit(&free_top, &top, top_make(next, top), memory_order_acquire,
                                              memory_order_acquire))
      return h;
  }
}

/* ---- the dying stack (push, take all) ------------------------------------- */

static _Atomic(hak_heap_t *) dying_top;

static void dying_push(hak_heap_t *h) {
  hak_heap_t *top = atomic_load_explicit(&dying_top, memory_order_relaxed);
  do {
    atomic_store_explicit(&h->pool_link, top, memory_order_relaxed);
  } while (!atomic_compare_exchange_weak_explicit(&dying_top, &top, h, memory_order_release, memory_order_relaxed));
}

static void to_free(hak_heap_t *h) {
  set_word(h, 0, POOL_FREE);
  free_push(h);
}

static void reap_dying(void) {
  if (!atomic_load_explicit(&dying_top, memory_order_relaxed)) return;
  hak_heap_t *h = atomic_exchange_explicit(&dying_top, NULL, memory_order_acquire);
  while (h) {
    hak_heap_t *next = atomic_load_explicit(&h->pool_link, memory_order_relaxed);
    if (heap_reap(h, false)) to_free(h);
    else dying_push(h);
    h = next;
  }
}

/* ---- vanished threads ----------------------------------------------------- */

static _Atomic(hak_heap_t *) scan_cursor;
static int process_id;
#define VANISHED_LOOKS 2  /* tgkill calls per thread start, at most */
#define VANISHED_STEPS 16 /* heaps stepped over per thread start, at most */
#define VANISHED_EVERY 16 /* starts that find a free heap look one time in this many */

static hak_heap_t *vanished_heap(int self) {
  int looks = 0;
  for (int steps = 0; steps < VANISHED_STEPS && looks < VANISHED_LOOKS; steps++) {
    hak_heap_t *cur = atomic_load_explicit(&scan_cursor, memory_order_relaxed);
    hak_heap_t *h = cur ? cur : heap_all_first();
    atomic_compare_exchange_strong_explicit(&scan_cursor, &cur, h->all_next, memory_order_relaxed,
                                            memory_order_relaxed);
    uint64_t w = word(h);
    if (h == heap_shared() || w_state(w) != POOL_LIVE || w_tid(w) == self ||
        atomic_load_explicit(&h->busy, memory_order_acquire))
      continue;
    looks++;
    int saved = errno;
    bool gone = syscall(SYS_tgkill, process_id, w_tid(w), 0) != 0 && errno == ESRCH;
    errno = saved;
    if (!gone) continue;
    if (!atomic_compare_exchange_strong_explicit(&h->pool_word, &w, w_make(w_tid(w), POOL_HELD, w_gen(w)),
                                                 memory_order_acq_rel, memory_order_relaxed))
      continue;
    if (!atomic_load_explicit(&h->busy, memory_order_acquire)) return h;
    atomic_store_explicit(&h->pool_word, w, memory_order_release); /* not ours to touch after all */
  }
  return NULL;
}

/* ---- thread start and exit ------------------------------------------------ */

static size_t heap_bytes(void) {
  size_t slots = 0;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) slots += hak_config.tcache_slots[c];
  slots += 2 * HAK_NCLASSES; /* per area, the NULL below it and the FULL word at its room (heap.h: hak_bin_t) */
  return align_up(sizeof(hak_heap_t) + slots * sizeof(void *), os_page_size());
}

void pool_init(void) { process_id = (int)getpid(); }

/* The parked heap `hint` (the owner of the block a new thread frees first)
 * if it is among the top HINT_DEPTH heaps of the free stack, else the top
 * one; the others popped on the way go back. Popped heaps stay FREE until
 * the caller sets one LIVE (see Fork above). bench_larson gives each new
 * thread of a lineage the blocks of the one before it, which it frees
 * first; handed the top heap, a thread got the other lineage's (the order
 * of the exits), and every free of an inherited block went to the other
 * thread remotely, its room waiting there: larson +2.8% CPU time, +10%
 * minor faults, +6% peak RSS against tearing down at every exit. */
#define HINT_DEPTH 4
static hak_heap_t *free_pop_hinted(hak_heap_t *hint) {
  hak_heap_t *h = free_pop();
  if (!h || !hint || h == hint || !pool_parked(hint)) return h;
  hak_heap_t *held[HINT_DEPTH], *got = NULL;
  unsigned n = 0;
  held[n++] = h;
  while (n < HINT_DEPTH && (h = free_pop()) != NULL) {
    if (h == hint) {
      got = h;
      break;
    }
    held[n++] = h;
  }
  if (!got) got = held[0]; /* not found: the top one, as without a hint */
  while (n) { /* the others back, in their order */
    h = held[--n];
    if (h != got) free_push(h);
  }
  return got;
}

hak_heap_t *pool_take(int tid, hak_heap_t *hint) {
  reap_dying();
  hak_heap_t *h = free_pop_hinted(hint); /* FREE until set LIVE below, as before the look */
  hak_heap_t *gone =
      (!h || (unsigned)tid % VANISHED_EVERY == 0) && heap_all_first()->all_next ? vanished_heap(tid) : NULL;
  if (gone) { /* torn down (heap_destroy) */
    pool_retire(gone, heap_destroy(gone));
    HAK_STAT_INC(HAK_EV_THREAD_EXIT);
    if (!h) h = free_pop();
  }
  if (h) {
    set_word(h, tid, POOL_LIVE);
    return h;
  }
  h = os_map(heap_bytes());
  if (!h) return NULL;
  if (!poolable(h)) { /* cannot sit on the tagged stack: no heap (the shared one serves) */
    os_unmap(h, heap_bytes());
    return NULL;
  }
  h->slot_store = (void **)(h + 1);
  set_word(h, tid, POOL_LIVE);
  heap_all_push(h);
  return h;
}

void pool_retire(hak_heap_t *h, bool destroyed) {
  if (destroyed) {
    to_free(h);
  } else {
    set_word(h, 0, POOL_DYING);
    dying_push(h);
  }
  reap_dying();
}

bool pool_parked(hak_heap_t *h) {
  uint64_t w = word(h);
  return w_state(w) == POOL_FREE && w_gen(w) != 0; /* (gen 0: never a thread's: user heaps, the shared one) */
}

void pool_atfork_child(hak_heap_t *mine) {
  process_id = (int)getpid();
  atomic_store_explicit(&free_top, 0, memory_order_relaxed);
  atomic_store_explicit(&dying_top, NULL, memory_order_relaxed);
  atomic_store_explicit(&scan_cursor, NULL, memory_order_relaxed);
  if (mine) set_word(mine, (int)syscall(SYS_gettid), POOL_LIVE); /* the survivor has a new kernel id */
  for (hak_heap_t *h = heap_all_first(); h; h = h->all_next) {
    if (h == mine || h == heap_shared()) continue;
    if (atomic_load_explicit(&h->busy, memory_order_acquire)) {
      set_word(h, 0, POOL_HELD);
      continue;
    }
    heap_reap(h, true); /* FREE ones too: a parked heap's pages (heap_park) */
    to_free(h);
  }
}
