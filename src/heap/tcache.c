/* tcache.c — how many blocks each class cache of a thread may hold (its cap).
 *
 * The fast paths test a cache's top block (malloc) or the FULL word at
 * slots[cap] (free) and nothing else (heap.h: hak_bin_t); every decision
 * here runs on the cold side, at a refill (count was 0) or a flush (count
 * was cap), so malloc and free pay nothing for it. A cap change moves the
 * FULL word (bin_set_cap).
 *
 * - Start small: a new thread's class caches hold HAK_TCACHE_START_BYTES each
 *   (none for classes above that size), so a thread that touches a class once
 *   or twice keeps next to nothing of it.
 * - Inherited caps: a thread handed a recycled heap raises a class's cap, at
 *   the class's first cold event if that is a refill, to the largest the
 *   heap's previous thread reached (its room, which the new thread's slot
 *   layout keeps: the record's pages it spans were resident already), within
 *   the budget. Threads re-created for the same work (bench_stress: 32
 *   threads a round, each living ~1 ms) spent their lives growing the caps
 *   again, their classes above 512 B starting at 0 and going to their pages
 *   at nearly every malloc and free. At the first refill, not at thread
 *   start: a thread that only frees a class (a consumer, "Drain" below)
 *   keeps its starting cap, and does not park up to a producer's cap of
 *   others' blocks before its first flush finds it draining.
 * - Grow on demand: a class that goes to the cold side HAK_GROW_EVENTS times
 *   without its cap changing doubles its cap (0 -> 1 -> 2 -> 4 ...), up to the
 *   class maximum (config: tcache_cap).
 * - One budget per thread: the caps of all classes together, in bytes
 *   (cap * class size), stay within hak_config.tcache_budget. A class that
 *   wants to grow past it takes room from the least recently used idle
 *   classes (their caps halve and blocks beyond the new cap go back to their
 *   pages); if none is idle, it does not grow, so busy classes never take
 *   turns evicting each other. The speed profile's budget, 32 MiB, was 8
 *   MiB, set above the sum of the class maxima when classes ended at 32 KiB
 *   (6.9 MiB); with classes to 256 KiB those sum to 50.6 MiB, and at 8 MiB a
 *   thread using the classes above 8 KiB filled its budget early: its caps
 *   froze where they stood, the rarely used 64-256 KiB classes, always idle
 *   by the above, were halved to 0-2 blocks by every class that wanted to
 *   grow, and most of their blocks went through a refill and a flush
 *   (bench_sizemix 4 1500000 1000, HAKMEM_STATS=1: class 80 had 802 refills
 *   for 1168 allocations; 126 of 1114 at 32 MiB). 64 MiB (above all the
 *   maxima) held 49 MiB more at sizemix's peak than 32 MiB, for no gain
 *   (tests/test_tcache_big.c).
 * - Idle, seen from the cold side only: a class with no cold event for
 *   HAK_STEAL_AGE events of the thread whose cache has the same count and the
 *   same top block as when last looked at. A class in use without cold
 *   events (its cache absorbs its traffic) changes both almost surely; a
 *   miss costs it at worst a few refills before it grows back. A look that
 *   finds a class changed counts as a use (its age starts again from that
 *   look): a class used from its cache after its last cold event, then left
 *   alone, used to count as in use until its next cold event, however late.
 *   The classes are kept in order of their last use (a list, so make_room
 *   reads only the oldest ones, not all 96).
 * - The periodic step: every HAK_LEARN_PERIOD cold events of the thread,
 *   from per-class counters (refills, flushes, remote collects), it halves
 *   the caps of classes idle for two periods in a row (down to their
 *   starting size), sending their blocks beyond the new cap back and giving
 *   their room back to the budget (the trim). With the learner on
 *   (hak_config.tcache_learn, off by default: no suite-wide win in A/B
 *   runs) it also doubles the caps of classes that refilled or flushed often
 *   in the period. The trim used to run only with the learner, and make_room
 *   shrinks only when a class wants room past the budget: a thread that
 *   stopped using some classes but never reached its budget kept their
 *   blocks for as long as it ran, up to the whole budget (27 MiB of 64-256
 *   KiB blocks at 32 MiB: test_tcache's big_then_small; trim on, 4.5 KiB;
 *   bench_sizemix's refills and flushes unchanged). The caps it leaves are
 *   the thread's snapshot; HAKMEM_STATS=1 reports them.
 *
 * - Free runs: a thread that flushes HAK_FREE_RUN times in a row without a
 *   refill of any class is in a run of frees (the end of its work, before
 *   it exits). Its classes of blocks of a page or more (HAK_FREE_RUN_SIZE)
 *   then give their cached blocks back to their pages and cache none (cap
 *   0, no growth) until the thread refills again. A thread descheduled
 *   between its last frees and its exit (a system call on its way out is a
 *   preemption point; 32 threads on 2 CPUs) held them there, out of every
 *   other thread's reach, until it ran again: with a clock read between its
 *   last free and its exit, a copy of bench_stress had up to 11 such
 *   threads at once, each holding ~0.8 MB of 4-256 KiB blocks in its caches
 *   (of ~0.9 MB cached) and the pages around them, and its peak RSS went
 *   20 -> 30 MB (tcmalloc unaffected). Only the big classes: a balanced
 *   thread whose caches absorb both its mallocs and its frees (bench_larson,
 *   8-1000 B) also flushes for long stretches without a refill, and
 *   emptying its classes above 512 B too cost it 9-16% CPU time; blocks of
 *   a page or more are where a cache holds its memory. The room a next
 *   thread inherits ("Inherited caps") is kept.
 *
 * - Drain (thread.c): a class the thread only frees others' blocks of
 *   heads for HAK_DRAIN_BYTES' worth (tcache_drain_event) and is flushed
 *   whole: its blocks are of no use here and their owner needs them.
 *
 * Since cached bytes <= sum of cap * size <= budget at every moment, the
 * budget bounds what a thread holds, idle or not.
 *
 * Slots. The class caches' slot arrays share the heap's slot store (sized
 * for every class at its largest cap, heap/pool.c), packed in class order,
 * each area as large as the most its class's cap has been in this thread
 * (h->room). A thread that uses a few classes, or keeps small caps (a
 * consumer's drained classes), touches a few pages of it, not one page or
 * more per class as when each class had its largest area reserved from the
 * start (of a 40 KiB heap record, bench_prodcons's consumer had 32 KiB
 * resident, now 20). A cap growing past its room moves the areas of the
 * classes after it up by the difference, their live slots only, and
 * re-points their bins: a cold event, at most one per doubling of a cap, and the fast
 * paths see only b->ptr, as before. Each area has a word below it (NULL:
 * malloc's next top when one block is left) and one above its room (for
 * FULL at a cap equal to the room); a class's words are written at its
 * first miss (heap.h: bin_open), so unused classes' areas stay untouched.
 * A move leaves the old FULL word behind, which may now lie below the
 * cap: a free that meets it goes to the cold side (heap_flush_free), which
 * goes by count and cap and pushes over it. Rooms never shrink, not even when
 * the heap is handed to a new thread ("Inherited caps"), so the sum of
 * rooms stays within the store: each room is at most the class's
 * tcache_slots. */
#include "heap/heap.h"
#include "heap/size_class.h"
#include "policy/config.h"
#include "stats/stats.h"

#include <string.h>

#define HAK_GROW_EVENTS  3     /* cold events of a class before its cap doubles */
#define HAK_STEAL_AGE    64    /* a class idle this many cold events may be shrunk */
#define HAK_LEARN_PERIOD 256   /* cold events between learner steps */
#define HAK_LEARN_HOT    16    /* events in one period that make a class hot */
#ifndef HAK_FREE_RUN
#define HAK_FREE_RUN     32    /* flushes without a refill of any class that make a free run ("Free runs") */
#endif
#ifndef HAK_FREE_RUN_SIZE
#define HAK_FREE_RUN_SIZE 4096 /* the classes a free run empties: blocks of a page or more */
#endif
#ifndef HAK_DRAIN_BYTES
#define HAK_DRAIN_BYTES  4096  /* cap, in bytes, of a class the thread only frees others' blocks of */
#endif

/* The recency list (heap.h: lru_*): a class moves to its end at each of its
 * cold events, when its last_use becomes the newest tick, so the list stays
 * in the order of last_use and make_room finds the least recently used idle
 * class from the front, stopping at the first class too young to be idle.
 * It used to scan all classes for it on every cold event of a class wanting
 * to grow past the budget: with 96 classes that scan (about 1,000
 * instructions) was 7% of bench_sizemix's instructions, whose threads sit at
 * their budget.
 *
 * Only classes make_room could shrink start on the list: those with a
 * starting cap. A class without one (above HAK_TCACHE_START_BYTES) joins at
 * its first cold event (LRU_OFF until then). With all 96 classes on it from
 * the start, every class a program never used sat at its front with
 * last_use 0, skipped for its cap 0 but never moved, so each make_room call
 * of a thread at its budget walked past all of them first. */
#define LRU_OFF 255
_Static_assert(HAK_NCLASSES < LRU_OFF, "class links are bytes; HAK_NCLASSES is the null link");

static void lru_init(hak_heap_t *h) {
  unsigned last = HAK_NCLASSES;
  h->lru_first = HAK_NCLASSES;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    h->lru_prev[c] = h->lru_next[c] = LRU_OFF;
    if (heap_area(h, c)->cap == 0) continue; /* (t->heap is not set yet) */
    h->lru_prev[c] = (uint8_t)last;
    h->lru_next[c] = HAK_NCLASSES;
    if (last < HAK_NCLASSES) h->lru_next[last] = (uint8_t)c; else h->lru_first = (uint8_t)c;
    last = c;
  }
  h->lru_last = (uint8_t)last;
}

static void lru_touch(hak_heap_t *h, unsigned c) {
  if (h->lru_last == c) return;
  unsigned p = h->lru_prev[c], n = h->lru_next[c];
  if (HAK_UNLIKELY(n == LRU_OFF)) { /* its first cold event: joins at the end */
    h->lru_prev[c] = h->lru_last;
    h->lru_next[c] = HAK_NCLASSES;
    if (h->lru_last < HAK_NCLASSES) h->lru_next[h->lru_last] = (uint8_t)c; else h->lru_first = (uint8_t)c;
    h->lru_last = (uint8_t)c;
    return;
  }
  /* n is a class: c is not last */
  if (p < HAK_NCLASSES) h->lru_next[p] = (uint8_t)n; else h->lru_first = (uint8_t)n;
  h->lru_prev[n] = (uint8_t)p;
  h->lru_prev[c] = h->lru_last;
  h->lru_next[c] = HAK_NCLASSES;
  h->lru_next[h->lru_last] = (uint8_t)c;
  h->lru_last = (uint8_t)c;
}

/* Pack the slot areas, each as large as the class's cap or, on a recycled
 * heap, as the room the heap's previous thread left it ("Inherited caps";
 * 0 on a new heap), whichever is larger (see "Slots"). */
static void slots_layout(hak_tls_t *t, hak_heap_t *h) {
  void **s = h->slot_store;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    s++; /* below the area: the NULL that is malloc's top when one block is left */
    area_set_slots(h, c, s);
    if (h->room[c] < heap_area(h, c)->cap) h->room[c] = (uint16_t)heap_area(h, c)->cap;
    *bin_of(t, c) = HAK_BIN_NONE; /* its words are written at its first miss (heap.h: bin_open) */
    s += h->room[c] + 1; /* + the word for FULL at a cap equal to the room */
  }
}

/* Make room for `want` slots in class c's area: the areas after it move up. */
static void slots_widen(hak_tls_t *t, unsigned c, uint32_t want) {
  hak_heap_t *h = t->heap;
  if (want <= h->room[c]) return;
  size_t delta = want - h->room[c];
  for (unsigned k = HAK_NCLASSES - 1; k > c; k--) { /* from the top: nothing is overwritten before it moves */
    hak_bin_t *b = bin_of(t, k);
    void **s = area_slots(h, k);
    area_set_slots(h, k, s + delta);
    if (!bin_is_open(b)) continue; /* no words yet */
    if (b->top) memmove(s + delta, s, (size_t)(b->ptr - s) * sizeof(void *));
    s += delta;
    s[-1] = NULL;
    s[heap_area(h, k)->cap] = HAK_SLOT_FULL;
    b->ptr += delta; /* top, the same block, stays */
  }
  h->room[c] = (uint16_t)want;
}

/* At every thread start (a recycled heap starts afresh): the owner-only
 * arrays are cleared whole (memset), not class by class in one loop, which
 * was ~5,000 instructions per thread start, a tenth of what HAKMEM spent
 * per thread life in bench_thread_churn. */
void tcache_init(hak_tls_t *t, hak_heap_t *h) {
  h->tick = 0;
  h->next_step = HAK_LEARN_PERIOD;
  h->free_run = 0;
  memset(h->last_use, 0, sizeof h->last_use);
  memset(h->refills, 0, sizeof h->refills);
  memset(h->flushes, 0, sizeof h->flushes);
  memset(h->heat, 0, sizeof h->heat);
  memset(h->idle_steps, 0, sizeof h->idle_steps);
  memset(h->seen_count, 0, sizeof h->seen_count);
  memset(h->seen_top, 0, sizeof h->seen_top);
  /* collectors count into it (heap.c, heap_page_collect) */
  for (unsigned c = 0; c < HAK_NCLASSES; c++) __atomic_store_n(&h->collects[c], 0, __ATOMIC_RELAXED);
  size_t cap_bytes = 0;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    uint32_t start = hak_config.tcache_start[c], max = __atomic_load_n(&hak_config.tcache_cap[c], __ATOMIC_RELAXED);
    uint32_t cap = start < max ? start : max;
    heap_area(h, c)->cap = cap; /* (slots_layout places the marker) */
    cap_bytes += (size_t)cap * hak_class_size[c];
  }
  h->cap_bytes = cap_bytes;
  slots_layout(t, h);
  lru_init(h);
}

static bool class_untouched(hak_tls_t *t, unsigned c) {
  return bin_count(t, c) == t->heap->seen_count[c] && tcache_mark_of(t, c) == t->heap->seen_top[c];
}

static void class_seen_used(hak_tls_t *t, unsigned c) {
  hak_heap_t *h = t->heap;
  h->last_use[c] = h->tick;
  lru_touch(h, c);
  tcache_seen(t, c);
}

/* Lower a class's cap, sending the oldest blocks beyond it back to their pages. */
static void class_shrink(hak_tls_t *t, unsigned c, uint32_t cap) {
  uint32_t old = bin_cap(t, c), count = bin_count(t, c);
  if (cap >= old) return;
  if (count > cap) {
    unsigned k = count - cap;
    void **s = bin_slots(t, c);
    heap_return_blocks(t->heap, s, k);
    memmove(s, s + k, (size_t)cap * sizeof(void *));
    bin_set_count(t, c, cap);
  }
  t->heap->cap_bytes -= (size_t)(old - cap) * hak_class_size[c];
  bin_set_cap(t, c, cap);
  t->heap->heat[c] = 0;
}

/* The same for a class found idle, which also gives back its pending
 * list (heap.h): pending blocks keep their page alive, and an idle class
 * has no use for them. */
static void class_shrink_idle(hak_tls_t *t, unsigned c, uint32_t cap) {
  if (pend_of(t, c)->head) heap_return_pending(t->heap, pend_of(t, c));
  class_shrink(t, c, cap);
}

/* Make `need` bytes of room in the budget by shrinking classes idle for
 * HAK_STEAL_AGE events, least recently used first. */
static void make_room(hak_tls_t *t, unsigned except, size_t need) {
  hak_heap_t *h = t->heap;
  size_t budget = __atomic_load_n(&hak_config.tcache_budget, __ATOMIC_RELAXED);
  for (int rounds = 0; rounds < 16 && h->cap_bytes + need > budget; rounds++) {
    unsigned victim = HAK_NCLASSES;
    uint32_t oldest = h->tick - HAK_STEAL_AGE;
    if (h->tick < HAK_STEAL_AGE) return;
    for (unsigned c = h->lru_first, next; c < HAK_NCLASSES && h->last_use[c] <= oldest; c = next) {
      next = h->lru_next[c];
      if (c == except || bin_cap(t, c) == 0) continue;
      if (class_untouched(t, c)) {
        victim = c;
        break;
      }
      /* In use since last seen: seen now, as if at a cold event (it goes
       * to the end of the list, and is looked at again only once of age). */
      class_seen_used(t, c);
    }
    if (victim == HAK_NCLASSES) return;
    class_shrink_idle(t, victim, bin_cap(t, victim) / 2);
  }
}

/* Raise the class's cap to `want` (above it, at most the class maximum), or
 * as far toward it as the budget allows once idle classes gave room. */
static void class_raise(hak_tls_t *t, unsigned c, uint32_t want) {
  hak_heap_t *h = t->heap;
  uint32_t cap = bin_cap(t, c);
  size_t size = hak_class_size[c], budget = __atomic_load_n(&hak_config.tcache_budget, __ATOMIC_RELAXED);
  if (h->cap_bytes + (want - cap) * size > budget) {
    make_room(t, c, (want - cap) * size);
    size_t room = budget > h->cap_bytes ? budget - h->cap_bytes : 0;
    if (room < (want - cap) * size) want = cap + (uint32_t)(room / size);
    if (want <= cap) return;
  }
  slots_widen(t, c, want);
  h->cap_bytes += (want - cap) * size;
  bin_set_cap(t, c, want);
  h->heat[c] = 0;
  HAK_STAT_MAX(hak_cap_max[c], want);
}

/* Double the class's cap, to at most `limit` and the class maximum. */
static void class_grow(hak_tls_t *t, unsigned c, uint32_t limit) {
  uint32_t max = __atomic_load_n(&hak_config.tcache_cap[c], __ATOMIC_RELAXED), cap = bin_cap(t, c);
  if (max > limit) max = limit;
  if (cap >= max) return;
  uint32_t want = cap ? 2 * cap : 1;
  class_raise(t, c, want > max ? max : want);
}

/* Every HAK_LEARN_PERIOD cold events, learner or not: classes untouched for
 * two periods halve (the trim); with the learner, hot classes also double. */
static void learner_step(hak_tls_t *t, bool learn) {
  hak_heap_t *h = t->heap;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    unsigned events = (unsigned)h->refills[c] + h->flushes[c];
    unsigned collects = __atomic_load_n(&h->collects[c], __ATOMIC_RELAXED); /* a collector's (heap.c) */
    if (events + collects == 0 && class_untouched(t, c)) {
      if (h->idle_steps[c] < 255) h->idle_steps[c]++;
      uint32_t cap = bin_cap(t, c), start = hak_config.tcache_start[c];
      if (h->idle_steps[c] >= 2 && cap > start) class_shrink_idle(t, c, cap / 2 > start ? cap / 2 : start);
    } else {
      h->idle_steps[c] = 0;
      /* Not a draining class (thread.c, "Drain"): its next flush would take
       * it back to its drain cap, and until then it held up to twice that of
       * others' blocks (test_tcache_learn's consumer: 84 KB against its
       * bound of 80, depending on where the learner's period fell). */
      if (learn && events >= HAK_LEARN_HOT && h->drain[c] != 2) class_grow(t, c, UINT32_MAX);
    }
    h->refills[c] = h->flushes[c] = 0;
    __atomic_store_n(&h->collects[c], 0, __ATOMIC_RELAXED);
    tcache_seen(t, c);
  }
  tcache_publish(t);
}

/* "Free runs" (above): the thread has flushed HAK_FREE_RUN times without a
 * refill of any class. Its classes of blocks of a page or more give their
 * cached blocks back and cache none until its next refill, so a thread
 * preempted after its last frees does not keep them from the others. */
HAK_INLINE bool free_run_class(unsigned c) { return hak_class_size[c] >= HAK_FREE_RUN_SIZE; }

static void free_run_trim(hak_tls_t *t) {
  for (unsigned c = 0; c < HAK_NCLASSES; c++)
    if (free_run_class(c) && bin_cap(t, c)) class_shrink(t, c, 0);
}

void tcache_cold_event(hak_tls_t *t, unsigned c, bool refill) {
  hak_heap_t *h = t->heap;
  bool first = h->last_use[c] == 0; /* the class's first cold event in this thread */
  h->tick++;
  h->last_use[c] = h->tick;
  lru_touch(h, c);
  if (refill) { if (h->refills[c] < UINT16_MAX) h->refills[c]++; }
  else if (h->flushes[c] < UINT16_MAX) h->flushes[c]++;
  /* hak_option_set may have lowered the class maximum or the budget. */
  uint32_t max = __atomic_load_n(&hak_config.tcache_cap[c], __ATOMIC_RELAXED);
  if (HAK_UNLIKELY(first) && refill && h->room[c] > heap_area(h, c)->cap) /* "Inherited caps" */
    class_raise(t, c, h->room[c] < max ? h->room[c] : max);
  if (heap_area(h, c)->cap > max) class_shrink(t, c, max);
  if (HAK_UNLIKELY(h->cap_bytes > __atomic_load_n(&hak_config.tcache_budget, __ATOMIC_RELAXED))) class_shrink(t, c, heap_area(h, c)->cap / 2);
  if (refill) {
    h->free_run = 0;
  } else if (h->free_run < HAK_FREE_RUN) {
    if (++h->free_run == HAK_FREE_RUN) free_run_trim(t);
  }
  if ((h->free_run < HAK_FREE_RUN || !free_run_class(c)) && ++h->heat[c] >= HAK_GROW_EVENTS) class_grow(t, c, UINT32_MAX);
  if (h->tick >= h->next_step) {
    h->next_step = h->tick + HAK_LEARN_PERIOD;
    learner_step(t, __atomic_load_n(&hak_config.tcache_learn, __ATOMIC_RELAXED));
  }
}

/* A flush of a class the thread only frees others' blocks of (thread.c,
 * "Drain"): its cap heads for HAK_DRAIN_BYTES' worth of blocks, whatever it
 * had grown to while the thread still allocated the class. */
void tcache_drain_event(hak_tls_t *t, unsigned c) {
  hak_heap_t *h = t->heap;
  h->tick++;
  h->last_use[c] = h->tick;
  lru_touch(h, c);
  if (h->flushes[c] < UINT16_MAX) h->flushes[c]++;
  uint32_t cap = bin_cap(t, c), want = HAK_DRAIN_BYTES / hak_class_size[c], max = __atomic_load_n(&hak_config.tcache_cap[c], __ATOMIC_RELAXED);
  if (want > max) want = max;
  if (cap > want) {
    class_shrink(t, c, want);
  } else if (cap < want && ++h->heat[c] >= HAK_GROW_EVENTS) {
    class_grow(t, c, want); /* not past want: its slot area would keep the excess */
  }
}

/* The caps for the text report's cap_last column (stats.c). A store only
 * where the value differs: hak_cap_last is 6 process-wide lines, and storing
 * all 96 entries at every learner step and thread exit took those lines from
 * every other thread doing the same (bench_thread_churn: ~11 line writes per
 * 1000 operations, uprobe counts: commit 711d715), while the caps of threads
 * re-created for the same work mostly repeat. A read of a line it does not
 * write leaves the line shared. */
void tcache_publish(hak_tls_t *t) {
  (void)t;
#if HAK_STATS
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    uint32_t cap = bin_cap(t, c);
    if (atomic_load_explicit(&hak_cap_last[c], memory_order_relaxed) != cap)
      atomic_store_explicit(&hak_cap_last[c], cap, memory_order_relaxed);
  }
#endif
}

size_t heap_thread_cached_bytes(void) {
  hak_tls_t *t = &hak_tls;
  size_t n = 0;
  if (t->state != HAK_THREAD_LIVE) return 0;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) n += (size_t)bin_count(t, c) * hak_class_size[c];
  return n;
}
