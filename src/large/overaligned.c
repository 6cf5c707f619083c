/* overaligned.c — which blocks aligned to 2 MiB or more are live, by address.
 *
 * Such a block (large.c's overaligned_alloc) is a mapping of its own whose
 * record (overaligned_t: its mapping, usable size) sits just before the
 * block, in the mapping's first OS page. The slice map cannot mark it: free()'s
 * fast path would read a segment header at the block's 2 MiB boundary,
 * which is the block itself. So free() asks this table for every pointer no
 * registry places (front/malloc.c: the foreign-pointer path), as do realloc,
 * malloc_usable_size and hak_owns (front/api.c) and valgrind.c.
 *
 * The table: a power-of-two array of buckets, each the head of a chain of
 * records, indexed by a multiplicative hash of p >> 21 (the blocks are 2 MiB
 * aligned, so no two share a key). A pointer that is not 2 MiB aligned is
 * none of ours without a look (every foreign block glibc hands out), so
 * the table costs a foreign free nothing. The array grows fourfold when the
 * records outnumber twice its buckets: chains stay short (O(1) expected per
 * lookup), and the moves cost O(1) amortised per insert.
 *
 * Locks: 64 stripe locks (spin-then-yield, os/lock.h, not process-wide in
 * the report's sense: each guards its own buckets). Bucket b belongs to
 * stripe b % 64 at every table size (the array has at least 64 buckets and
 * both take the hash's low bits), so a lookup takes its stripe first and
 * then reads the array's address and size, which only change with all 64
 * stripes held (grow, taking them in order). An insert, take or lookup
 * holds one stripe; the record it reads is live while it holds the stripe:
 * a record leaves the table under its stripe before large.c unmaps it. No
 * system call under a stripe: grow maps the new array before it locks and
 * unmaps the old one after it unlocked (no thread can hold the old address
 * then: it is read only under a stripe, and all were held when it changed).
 * The first array is static (.bss), never unmapped.
 *
 * Fork: the prepare handler takes the 64 stripes in order (after a grow in
 * progress, which holds them all, is through), so the child's table is
 * whole; the parent releases them and the child resets them. A grow whose
 * thread forked away between its map and its locks leaves the child an
 * unused mapping, nothing else. Thread exit: nothing (nothing per thread).
 * A thread preempted holding a stripe makes the others of that stripe wait,
 * as any lock; none holds two stripes but a grow or a fork, in order.
 *
 * Bad input is unchanged: a pointer not in the table falls through to the
 * foreign path (front/malloc.c), and a freed block's record is out of the
 * table before its mapping goes, so a second free of it finds nothing and
 * goes on to unmapped_recently (reported) as it did with the list. */
#include "large/overaligned.h"
#include "large/large.h"
#include "os/lock.h"
#include "os/os.h"

#define STRIPES 64u
#define FIRST_BUCKETS 256u
#define GROW_LOAD 2u   /* records per bucket before the array grows */
#define GROW_FACTOR 4u

static struct {
  hak_lock_t lock;
} __attribute__((aligned(64))) stripes[STRIPES];

static overaligned_t *first_table[FIRST_BUCKETS];
/* Read and written under a stripe; replaced with all stripes held. */
static overaligned_t **table = first_table;
static size_t buckets = FIRST_BUCKETS;
/* Records in the table (atomic: stripes change it concurrently). */
static _Atomic(size_t) records;
#if HAK_STATS
_Atomic(uint64_t) overaligned_steps;
#endif

_Static_assert(FIRST_BUCKETS % STRIPES == 0, "a bucket's stripe is the same at every size");

HAK_INLINE size_t hash_of(const void *p) {
  uint64_t k = (uint64_t)((uintptr_t)p >> HAK_SEG_SHIFT);
  return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 32);
}
HAK_INLINE hak_lock_t *stripe_of(size_t h) { return &stripes[h & (STRIPES - 1)].lock; }
HAK_INLINE const void *block_of(const overaligned_t *o) { return o + 1; }

/* The link that holds p's record, or the chain's terminating NULL link.
 * Under p's stripe. */
static overaligned_t **find(size_t h, const void *p) {
  overaligned_t **pp = &table[h & (buckets - 1)];
  uint64_t steps = 0;
  while (*pp && block_of(*pp) != p) {
    pp = &(*pp)->next;
    steps++;
  }
#if HAK_STATS
  atomic_fetch_add_explicit(&overaligned_steps, steps + (*pp != NULL), memory_order_relaxed);
#else
  (void)steps;
#endif
  return pp;
}

static void lock_all(void) {
  for (unsigned i = 0; i < STRIPES; i++) hak_lock_local(&stripes[i].lock);
}
static void unlock_all(void) {
  for (unsigned i = STRIPES; i-- > 0;) hak_unlock(&stripes[i].lock);
}

/* The array grows to `want` buckets (a power of two), unless another grow
 * got there first; a failed map leaves it as it was (longer chains). */
static void grow(size_t want) {
  size_t bytes = want * sizeof(overaligned_t *);
  overaligned_t **t = os_map(bytes), **old = NULL;
  if (!t) return;
  size_t old_n = 0;
  lock_all();
  if (buckets < want) {
    for (size_t i = 0; i < buckets; i++)
      for (overaligned_t *o = table[i], *next; o; o = next) {
        next = o->next;
        overaligned_t **head = &t[hash_of(block_of(o)) & (want - 1)];
        o->next = *head;
        *head = o;
      }
    old = table;
    old_n = buckets;
    table = t;
    buckets = want;
    t = NULL;
  }
  unlock_all();
  if (t) os_unmap(t, bytes);
  if (old && old != first_table) os_unmap(old, old_n * sizeof(overaligned_t *));
}

void overaligned_insert(overaligned_t *o) {
  size_t h = hash_of(block_of(o));
  hak_lock_t *l = stripe_of(h);
  hak_lock_local(l);
  overaligned_t **head = &table[h & (buckets - 1)];
  o->next = *head;
  *head = o;
  size_t n = buckets;
  hak_unlock(l);
  size_t live = atomic_fetch_add_explicit(&records, 1, memory_order_relaxed) + 1;
  if (live > (size_t)GROW_LOAD * n && n <= (SIZE_MAX / sizeof(overaligned_t *)) / GROW_FACTOR) grow(n * GROW_FACTOR);
}

overaligned_t *overaligned_take(const void *p) {
  if (((uintptr_t)p & (HAK_SEG_SIZE - 1)) || !atomic_load_explicit(&records, memory_order_relaxed)) return NULL;
  size_t h = hash_of(p);
  hak_lock_t *l = stripe_of(h);
  hak_lock_local(l);
  overaligned_t **pp = find(h, p), *hit = *pp;
  if (hit) *pp = hit->next;
  hak_unlock(l);
  if (hit) atomic_fetch_sub_explicit(&records, 1, memory_order_relaxed);
  return hit;
}

bool overaligned_owns(const void *p, size_t *usable) {
  if (((uintptr_t)p & (HAK_SEG_SIZE - 1)) || !atomic_load_explicit(&records, memory_order_relaxed)) return false;
  size_t h = hash_of(p);
  hak_lock_t *l = stripe_of(h);
  hak_lock_local(l);
  overaligned_t *hit = *find(h, p);
  if (hit && usable) *usable = hit->usable;
  hak_unlock(l);
  return hit != NULL;
}

void overaligned_atfork_prepare(void) {
  for (unsigned i = 0; i < STRIPES; i++) hak_lock_fork(&stripes[i].lock);
}
void overaligned_atfork_parent(void) {
  for (unsigned i = STRIPES; i-- > 0;) hak_unlock_fork(&stripes[i].lock);
}
void overaligned_atfork_child(void) {
  for (unsigned i = 0; i < STRIPES; i++) hak_lock_reset(&stripes[i].lock);
}
