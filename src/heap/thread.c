/* thread.c — a thread's heap over its life: created on the thread's first
 * allocation, its caches refilled and flushed, torn down at thread exit. Also
 * the shared heap, which serves allocations no thread heap can (during
 * start-up recursion, and from TLS destructors that run after ours). */
#include "heap/heap.h"
#include "heap/size_class.h"
#include "front/init.h"
#include "remote/remote.h"
#include "os/lock.h"
#include "os/os.h"
#include "os/vg_quiet.h"
#include "policy/config.h"
#include "stats/stats.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread hak_tls_t hak_tls;

/* Under pool_lock: heaps in use (live), dying heaps still awaiting remote
 * signals (dying, see heap_destroy), and heaps ready for reuse (pool). */
static hak_lock_t pool_lock = HAK_LOCK_NAMED("heap_pool");
static hak_heap_t *pool_free;
static hak_heap_t *live_heaps;
static hak_heap_t *dying_heaps;
static hak_heap_t *live_cursor; /* next live heap to check for a vanished thread */

static hak_lock_t shared_lock = HAK_LOCK_NAMED("shared_heap");
static hak_heap_t shared_heap;

static pthread_key_t exit_key;

/* Every heap ever mapped, for process-wide collection: pushed once when
 * mapped, never removed (heaps are recycled, never unmapped). */
static _Atomic(hak_heap_t *) all_heaps = &shared_heap;

hak_heap_t *heap_all_first(void) { return atomic_load_explicit(&all_heaps, memory_order_acquire); }
hak_heap_t *heap_shared(void) { return &shared_heap; }

static size_t heap_bytes(void) {
  size_t slots = 0;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) slots += hak_config.tcache_slots[c];
  return align_up(sizeof(hak_heap_t) + slots * sizeof(void *), os_page_size());
}

static void live_add(hak_heap_t *h) {
  h->live_prev = NULL;
  h->live_next = live_heaps;
  if (live_heaps) live_heaps->live_prev = h;
  live_heaps = h;
}

static void live_remove(hak_heap_t *h) {
  if (live_cursor == h) live_cursor = h->live_next;
  if (h->live_prev) h->live_prev->live_next = h->live_next; else live_heaps = h->live_next;
  if (h->live_next) h->live_next->live_prev = h->live_prev;
  h->live_next = h->live_prev = NULL;
}

static void pool_put(hak_heap_t *h) {
  h->pool_next = pool_free;
  pool_free = h;
}

/* Dying heaps whose awaited signals have all arrived go to the pool. Under
 * pool_lock, so one thread at a time, and never across a fork. */
static void reap_dying(bool lost) {
  hak_heap_t **pp = &dying_heaps;
  while (*pp) {
    hak_heap_t *h = *pp;
    if (heap_reap(h, lost)) {
      *pp = h->pool_next;
      pool_put(h);
    } else {
      pp = &h->pool_next;
    }
  }
}

/* A heap created in the last round of key destructors (a destructor of
 * another key allocating first there) never gets its own destructor run:
 * glibc runs no further round. Each thread start looks at up to two live
 * heaps, round robin, and takes back one whose thread no longer exists
 * (tgkill says ESRCH: it ran no more code, so the heap is not half-changed;
 * a tid reused since only delays this). Torn down like at thread exit; the
 * blocks that thread still had cached are lost.
 * The candidates are picked under pool_lock, asked about outside it (two
 * system calls per thread start, which other threads starting or exiting
 * used to wait behind), and claimed under it again only if still live with
 * the same tid: a heap whose thread exited normally has left the live list
 * by then, and a recycled one has another tid. */
#define VANISHED_LOOKS 2
typedef struct { hak_heap_t *h; int tid; } heap_look_t;

static unsigned vanished_candidates(int self, heap_look_t *out) {
  unsigned n = 0;
  for (int i = 0; i < VANISHED_LOOKS; i++) {
    hak_heap_t *h = live_cursor ? live_cursor : live_heaps;
    if (!h) break;
    live_cursor = h->live_next;
    if (h->tid == self || atomic_load_explicit(&h->busy, memory_order_acquire)) continue;
    if (n && out[0].h == h) break;
    out[n++] = (heap_look_t){h, h->tid};
  }
  return n;
}

static bool heap_is_live(hak_heap_t *h) { return h->live_prev != NULL || live_heaps == h; }

static int process_id;

static hak_heap_t *vanished_heap(const heap_look_t *look, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    int saved = errno;
    bool gone = syscall(SYS_tgkill, process_id, look[i].tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    if (!gone) continue;
    hak_heap_t *h = look[i].h;
    hak_lock(&pool_lock);
    bool claim = heap_is_live(h) && h->tid == look[i].tid && !atomic_load_explicit(&h->busy, memory_order_acquire);
    if (claim) live_remove(h);
    hak_unlock(&pool_lock);
    if (claim) return h;
  }
  return NULL;
}

static void heap_retire(hak_heap_t *h, bool destroyed);

static hak_heap_t *heap_new(int tid) {
  heap_look_t look[VANISHED_LOOKS];
  unsigned looks = 0;
  hak_lock(&pool_lock);
  if (dying_heaps) reap_dying(false);
  if (live_heaps && live_heaps->live_next) looks = vanished_candidates(tid, look);
  hak_heap_t *h = pool_free;
  if (h) {
    pool_free = h->pool_next;
    h->pool_next = NULL;
    h->tid = tid;
    live_add(h);
  }
  hak_unlock(&pool_lock);
  hak_heap_t *gone = looks ? vanished_heap(look, looks) : NULL;
  if (gone) {
    /* torn down like at thread exit (heap_retire takes it off the live list) */
    hak_lock(&pool_lock);
    live_add(gone);
    hak_unlock(&pool_lock);
    heap_retire(gone, heap_destroy(gone));
    HAK_STAT_INC(HAK_EV_THREAD_EXIT);
  }
  if (h) return h;
  h = os_map(heap_bytes());
  if (!h) return NULL;
  h->slot_store = (void **)(h + 1);
  hak_heap_t *head = atomic_load_explicit(&all_heaps, memory_order_relaxed);
  do {
    h->all_next = head;
  } while (!atomic_compare_exchange_weak_explicit(&all_heaps, &head, h, memory_order_release, memory_order_relaxed));
  hak_lock(&pool_lock);
  h->tid = tid;
  live_add(h);
  hak_unlock(&pool_lock);
  return h;
}

/* After heap_destroy: to the pool, or, if signals are still on their way
 * to it, to the dying list until they have arrived. */
static void heap_retire(hak_heap_t *h, bool destroyed) {
  hak_lock(&pool_lock);
  live_remove(h);
  if (destroyed) {
    pool_put(h);
  } else {
    h->pool_next = dying_heaps;
    dying_heaps = h;
  }
  if (dying_heaps) reap_dying(false);
  hak_unlock(&pool_lock);
}

static void thread_exit(void *arg) {
  (void)arg;
  hak_tls_t *t = &hak_tls;
  if (t->state != HAK_THREAD_LIVE) return;
  hak_heap_t *h = t->heap;
  tcache_publish(t);
  HAK_VG_ENTER(); /* the flush writes free blocks */
  heap_flush_all(t);
  /* From here on this thread allocates from the shared heap and frees
   * remotely: other TLS destructors may still run after this one. */
  for (unsigned v = 0; v < HAK_NCLASSES + 2; v++) t->bins[v] = (hak_bin_t){0};
  t->state = HAK_THREAD_DEAD;
  t->heap = NULL;
  heap_retire(h, heap_destroy(h));
  HAK_VG_LEAVE();
  HAK_STAT_INC(HAK_EV_THREAD_EXIT);
}

/* Without its exit key a heap would never be torn down, and exit_key (0)
 * would name another library's key: threads then use the shared heap. */
static bool exit_key_ok;

void thread_key_init(void) {
  process_id = (int)getpid();
  exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

bool thread_heap_init(hak_tls_t *t) {
  if (t->state != HAK_THREAD_NEW) return t->state == HAK_THREAD_LIVE;
  if (!hak_init_done() && !hak_init()) return false;
  if (HAK_UNLIKELY(!exit_key_ok)) return false;
  hak_heap_t *h = heap_new((int)syscall(SYS_gettid));
  if (!h) return false;
  void **slot = h->slot_store;
  heap_lock(h); /* a collector may look at a recycled heap */
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    hak_bin_t *b = bin_of(t, c);
    b->slots = slot;
    b->count = 0;
    slot += hak_config.tcache_slots[c];
    h->batch[c] = 4;
    h->allocates[c] = 0; /* a recycled heap starts afresh */
  }
  /* Caps start small; heap/tcache.c grows them as classes are used. */
  tcache_init(t, h);
  heap_unlock(h);
  t->heap = h;
  t->state = HAK_THREAD_LIVE;
  /* May allocate (for high key numbers); the heap is live, so that works. */
  pthread_setspecific(exit_key, h);
  HAK_STAT_INC(HAK_EV_THREAD_INIT);
  return true;
}

void *shared_alloc(unsigned cls) {
  void *p = NULL;
  hak_lock(&shared_lock);
  unsigned n = heap_take(&shared_heap, cls, &p, 1);
  hak_unlock(&shared_lock);
  HAK_STAT_INC(HAK_EV_SHARED_ALLOC);
  return n ? p : NULL;
}

void *heap_refill_alloc(hak_tls_t *t, unsigned cls) {
  if (HAK_UNLIKELY(t->state != HAK_THREAD_LIVE) && !thread_heap_init(t)) return shared_alloc(cls);
  hak_bin_t *b = bin_of(t, cls);
  if (b->count) return b->slots[--b->count];
  void *p;
  tcache_cold_event(t, cls, true);
  if (HAK_UNLIKELY(b->cap == 0)) return heap_take(t->heap, cls, &p, 1) ? p : NULL;
  /* Slow start: a thread that needs few blocks of a class carves (and at
   * exit writes to) few; one that keeps refilling gets half a cache each time. */
  hak_heap_t *h = t->heap;
  unsigned half = b->cap / 2 ? b->cap / 2 : 1;
  unsigned want = h->batch[cls] < half ? h->batch[cls] : half;
  if (h->batch[cls] < half) h->batch[cls] = (uint16_t)(2 * h->batch[cls] < half ? 2 * h->batch[cls] : half);
  unsigned n = heap_take(h, cls, b->slots, want);
  if (!n) return NULL;
  b->count = n - 1;
  tcache_seen(t, cls);
  return b->slots[n - 1];
}

void heap_flush_free(hak_tls_t *t, unsigned cls, void *p) {
  if (HAK_UNLIKELY(t->state != HAK_THREAD_LIVE) && !thread_heap_init(t)) {
    /* No heap of our own (exited, or start-up): hand the block to its page's owner. */
    remote_push(page_of(p), p, p, 1);
    HAK_CSTAT_ADD(cls, HAK_CS_RETURNED, 1);
    return;
  }
  hak_bin_t *b = bin_of(t, cls);
  if (b->count >= b->cap) tcache_cold_event(t, cls, false);
  if (b->count < b->cap) { /* the heap was just created, or the cap grew */
    b->slots[b->count++] = p;
    tcache_seen(t, cls);
    return;
  }
  if (HAK_UNLIKELY(b->cap == 0)) {
    heap_return_blocks(t->heap, &p, 1);
    return;
  }
  /* Flush the older half: the newer blocks are the ones still warm in cache. */
  unsigned k = b->count - b->cap / 2;
  heap_return_blocks(t->heap, b->slots, k);
  memmove(b->slots, b->slots + k, (size_t)(b->count - k) * sizeof(void *));
  b->count -= k;
  b->slots[b->count++] = p;
  tcache_seen(t, cls);
  HAK_CSTAT_INC(cls, HAK_CS_FLUSH);
}

void heap_flush_all(hak_tls_t *t) {
  if (t->state != HAK_THREAD_LIVE) return;
  for (unsigned c = 0; c < HAK_NCLASSES; c++) {
    hak_bin_t *b = bin_of(t, c);
    if (!b->count) continue;
    heap_return_blocks(t->heap, b->slots, b->count);
    b->count = 0;
  }
  heap_collect_remote(t->heap);
}

/* fork: the locks are taken in the order the code nests them (shared heap,
 * then heap pool) and the child resets them. The child then repairs what the
 * threads that do not exist in it left behind (remote.c, "Fork"): heaps of
 * those threads give their pages up (abandoned, for the child's threads to
 * adopt; only the blocks in their caches are lost), unless they were caught
 * half-changed (busy: then they are left alone, pages and all); dying heaps
 * stop waiting for signals that can no longer come; and the surviving
 * thread's heap and the shared heap collect the pages whose signal was lost. */
void heap_atfork_prepare(void) {
  hak_lock_fork(&shared_lock);
  hak_lock_fork(&pool_lock);
}
void heap_atfork_parent(void) {
  hak_unlock_fork(&pool_lock);
  hak_unlock_fork(&shared_lock);
}
void heap_atfork_child(void) {
  hak_lock_reset(&pool_lock);
  hak_lock_reset(&shared_lock);
  process_id = (int)getpid();
  hak_heap_t *mine = hak_tls.state == HAK_THREAD_LIVE ? hak_tls.heap : NULL;
  if (mine) mine->tid = (int)syscall(SYS_gettid); /* the survivor has a new kernel id */
  live_cursor = NULL;
  hak_heap_t *h = live_heaps;
  while (h) {
    hak_heap_t *next = h->live_next;
    if (h != mine) {
      live_remove(h);
      if (!atomic_load_explicit(&h->busy, memory_order_acquire)) {
        heap_reap(h, true);
        pool_put(h);
      }
    }
    h = next;
  }
  reap_dying(true);
  if (mine) heap_repair_after_fork(mine);
  heap_repair_after_fork(&shared_heap);
}
