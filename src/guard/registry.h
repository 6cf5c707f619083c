/* registry.h — which parts of the address space are HAKMEM's: the slice map.
 *
 * One 16-bit entry per 64 KiB slice of the 48-bit address space says what
 * the slice holds: the byte offset in the thread's bins of the bin for the
 * class of its page ((class + 1) * 16), the large sentinel's offset for
 * large, huge and free slices of ours, and 0 for memory that is not ours.
 * free()'s fast path indexes the TLS bins with it directly; the slow paths
 * ask registry_has() (entry non-zero), the ground truth for "is this ours",
 * which never reads memory HAKMEM does not own.
 *
 * Two levels, so the address space it costs is in proportion to what
 * HAKMEM uses: a top table of 2^16 entries, one per 4 GiB (bits 32-47 of
 * the address), and leaves of 2^16 entries (bits 16-31: 128 KiB of
 * MAP_NORESERVE address space each, resident only where touched), mapped
 * when a segment or huge mapping in their range is first mapped, and never
 * unmapped. The top table and a static leaf of zeros are one .bss object,
 * hak_slice_map, and a top entry holds its leaf's address relative to the
 * zero leaf, so 0 (the value the loader gives it) is the zero leaf: lookups
 * are safe before start-up and for any pointer, and read 0. No entry needs
 * a relocation, so a process touches only the pages of the top table that
 * it uses (one, typically) instead of dirtying the whole table at load
 * time; a lookup pays one lea for it (adding the zero leaf's address).
 * The 16-bit split makes both
 * indices one instruction each from the slice number (movzwl, shrl).
 *
 * The window: free() reads the entry through two dependent loads there,
 * and the second one waits for the first. So the entries of 2^16 slices
 * (4 GiB of address space, from 512 MiB above the first segment HAKMEM
 * maps down to 3.5 GiB below it, where later segments go) are also kept in
 * one array of 128 KiB, MAP_NORESERVE, mapped with that first segment and
 * never unmapped, with the slice number of its first entry in front of it:
 * for p inside, the lookup is one subtraction, one compare and one load
 * whose address depends on p (the window's address and start are read
 * from memory that does not change). Outside, and when the window could
 * not be mapped, the two-level lookup (the cold branch). No reservation
 * of address space beyond the leaves and the window (VmSize, RLIMIT_AS:
 * tests/test_addrspace.c). The slow paths read the two levels
 * (slice_map_entry), the ground truth; the window is a copy.
 *
 * Concurrency: a leaf is published with one CAS on its top entry (a loser
 * unmaps its own leaf); readers depend on the pointer they loaded (address
 * dependency, as every CPU HAKMEM targets honours), and a fresh leaf reads
 * zero. The window likewise: hak_slice_window points to a static header
 * that no slice is inside until the first slice_map_reserve decides it,
 * with one CAS, to the window (its start written before) or, if the
 * mapping failed, to another such header; a loser unmaps its own. The
 * decision precedes the first slice_map_set (each follows a reserve of its
 * memory, and a writer of a slice happens after its earlier writers), so
 * every write of an entry inside the window goes to both copies, the
 * window's first; a reader of either sees the old entry or the new one.
 * Nothing is held across calls, so neither fork, a thread's exit nor a
 * preempted thread leaves anything half done: at worst one leaf or window
 * mapping is lost (unused address space; a child forked while another
 * thread decided the window decides it again at its own first reserve,
 * before which it has no entries). Entries of a slice are written only by
 * the thread that owns the slice's segment state (under its shard lock,
 * or by the huge block's allocator/freer, or by a first-class heap under its
 * lock) and are single aligned 16-bit atomic stores, read with relaxed
 * atomic loads (the same one instruction as a plain load): an entry may
 * change while other threads free blocks of its page (hak_heap_delete gives
 * a heap's pages their class's entry back, heap/user_heap.c), and a reader
 * then sees the old entry or the new one, both of which route the block
 * right. Bits above 47 of a pointer are ignored, as they always were. */
#ifndef HAK_REGISTRY_H
#define HAK_REGISTRY_H

#include "hak_internal.h"

#define HAK_VA_BITS        48
#define HAK_SLICE_NUM_BITS (HAK_VA_BITS - HAK_SLICE_SHIFT)   /* 32: a slice number fits uint32_t */
#define HAK_LEAF_BITS      16                                 /* 2^16 slices = 4 GiB per leaf */
#define HAK_TOP_ENTRIES    ((size_t)1 << (HAK_SLICE_NUM_BITS - HAK_LEAF_BITS))
/* Entries are bin offsets: bin index * sizeof(hak_bin_t) (checked in front.h). */
#define HAK_SLICE_MAP_SCALE 16u

typedef uint16_t hak_slice_entry_t;

#if HAK_WORD_CHECKS
/* The standard build's fast block-start test (guard/block_check.h,
 * block_fast_ok) for one bin offset: hak_block_check's mul and fast_bound,
 * copied into the window's header (below), indexed by the bin offset
 * itself (16-byte entries: scale 1), so that free() addresses them from the
 * register that holds the window's address after its lookup instead of
 * forming the table's address (one lea per free). mul64: the page-relative
 * test of free_checked (guard/block_check.h, block_carved_start),
 * floor(2^64 / size) + 1 (0 for the sentinels: the test fails). */
typedef struct hak_fast_check {
  uint32_t mul, bound;
  uint64_t mul64;
} hak_fast_check_t;
_Static_assert(sizeof(hak_fast_check_t) == HAK_SLICE_MAP_SCALE, "indexed by the bin offset itself");
/* free()'s window test passes in the top HAK_SLICE_SPAN values of 2^64
 * (hak_slice_window_t.slice_term): more than any bound (< 2^20), and far
 * less than any mul64 (>= 2^46), so the blocks it admits and the offsets
 * it refuses land on the two sides (registry.c); 2^31, so that x86_64
 * compares with a sign-extended 32-bit immediate. */
#define HAK_SLICE_SPAN ((uint64_t)1 << 31)
#endif

typedef struct hak_slice_map {
  /* Per leaf, its address minus the zero leaf's (0: no leaf yet, so the
   * zero leaf). Integers: never dereferenced without adding `zero`. */
  uintptr_t top[HAK_TOP_ENTRIES];
  hak_slice_entry_t zero[(size_t)1 << HAK_LEAF_BITS]; /* never written: "not ours" */
} hak_slice_map_t;
extern hak_slice_map_t hak_slice_map HAK_HIDDEN;

/* The window: a one-level copy of the map for 2^16 slices (4 GiB) around
 * the first segment, so that free() reads p's entry with one load. */
#define HAK_WIN_ENTRIES ((uintptr_t)1 << 16)
typedef struct hak_slice_window {
  uintptr_t first; /* slice number of e[0] */
  uintptr_t pad;
#if HAK_WORD_CHECKS
  /* The fast block-start test's fields, in the window and in both static
   * headers (registry.c): the window's copied before it is published, the
   * headers' at start-up (slice_map_checks_init). free() reads them on
   * every call, before it looks at the bin: until then they are zero, the
   * test fails and free_checked takes the full test (front/malloc.c). */
  hak_fast_check_t check[HAK_NCLASSES + 2];
#endif
  hak_slice_entry_t e[HAK_WIN_ENTRIES];
#if HAK_WORD_CHECKS
  /* The standard build's block-start test in free() (guard/block_check.h,
   * block_slice_ok_map), one word per slice of the window: with x = p's
   * offset in its slice and mul64 the check copy's for the slice map
   * entry's class, p is a block start of the slice's page that the test
   * admits exactly when x * mul64 + slice_term >= 2^64 - HAK_SLICE_SPAN
   * (mod 2^64), slice_term = phase * mul64 - bound: phase the slice's
   * offset in its page mod the size, bound the blocks admitted times
   * e = mul64 * size mod 2^64 (1 for a power of two, registry.c). A slice
   * of a one-slice class: phase 0, the bound of all the slice's blocks
   * (block_fast_ok's test), set with the entry by slice_map_set. A slice
   * of a page of several slices: the bound of the page's carved blocks
   * that start in or after the slice, set by every carve of the page
   * (slice_map_mid_carved). Every other slice (large and free slices,
   * pages not carved yet, memory not ours): 0, which no offset passes for
   * any class (and a sentinel's mul64 is 0). One word, so one line and
   * one page per free, and one store per change: a reader sees the old
   * term or the new one, never half of each (it was two arrays, slice_add
   * and slice_bound, 512 KiB apart, written in order). One test for both
   * kinds of slices: a free() that took one branch for the slice test and
   * another for a page of several slices mispredicted it wherever the two
   * kinds of blocks mix (bench_random_mixed N 20000 1 16 32K: 1.20x the
   * fast build's CPU time with a test for each, 1.06x with this one).
   * Written by the slice's owner: 0 while an entry changes
   * (slice_map_set), so whenever a slice changes hands or class. */
  uint64_t slice_term[HAK_WIN_ENTRIES];
#endif
} hak_slice_window_t;
/* The window, or (until it is mapped, and if it cannot be) a header whose
 * `first` no slice number reaches, with the check copy but no entries. */
typedef struct {
  const hak_slice_window_t *w;
} __attribute__((aligned(64))) hak_slice_window_ref_t; /* a line of its own: free() reads it each time */
extern hak_slice_window_ref_t hak_slice_window HAK_HIDDEN;

/* The bin offset of p's slice from the two-level map (0: not ours): two
 * loads, the second dependent on the first. The ground truth. */
HAK_INLINE unsigned slice_map_entry(const void *p) {
  uintptr_t slice, top = (uintptr_t)p >> HAK_SLICE_SHIFT;
#if defined(__x86_64__)
  /* slice = top's low 16 bits, top = its bits 16-31 (bits above 47 of p
   * are dropped): one instruction each. */
  __asm__("movzwl %w1, %k0\n\tshrl %2, %k1" : "=&r"(slice), "+r"(top) : "i"(HAK_LEAF_BITS));
#else
  slice = (uint16_t)top;
  top = (uint32_t)top >> HAK_LEAF_BITS;
#endif
  /* The empty asms hide values from GCC, which otherwise spends one to two
   * more instructions on the constant offset of `zero` (checked with
   * objdump): this way the lookup is mov (map,top,8); lea zero(rel,map);
   * movzwl (leaf,slice,2), one lea more than an absolute pointer costs. */
  const hak_slice_map_t *m = &hak_slice_map;
  __asm__("" : "+r"(m));
  uintptr_t leaf = (uintptr_t)m->zero + __atomic_load_n(&m->top[top], __ATOMIC_RELAXED);
  __asm__("" : "+r"(leaf));
  return __atomic_load_n((const hak_slice_entry_t *)leaf + slice, __ATOMIC_RELAXED);
}

/* The bin offset of p's slice (0: not ours), free()'s lookup: from the
 * window when p is in it (one load dependent on p: the window's address and
 * first slice do not depend on p), else from the two-level map. The same
 * value as slice_map_entry(p). Bits above 47 of p put it outside the
 * window. *wp: the window or header read (its check copy: the standard
 * build's free()); *ip: p's slice's index in it (HAK_WIN_ENTRIES or more
 * when p is outside it, always for the headers). */
HAK_INLINE uintptr_t slice_map_lookup(const void *p, const hak_slice_window_t **wp, uintptr_t *ip) {
  /* Acquire (a plain load on x86_64): `first` and the check copy are then
   * plain fields, written before the window was published, read from
   * memory. */
  const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
  *wp = w;
  uintptr_t i = ((uintptr_t)p >> HAK_SLICE_SHIFT) - w->first;
  *ip = i; /* p's index in the window: HAK_WIN_ENTRIES or more outside it */
  if (HAK_LIKELY(i < HAK_WIN_ENTRIES)) {
#if defined(__x86_64__)
    /* GCC adds the entries' offset to i before it scales it (one add
     * more) and zero-extends the entry again where the branches join: one
     * movzwl does both. Atomic as a 16-bit aligned load is. */
    uintptr_t v;
    __asm__("movzwl %c2(%1,%3,2), %k0" : "=r"(v) : "r"(w), "i"(offsetof(hak_slice_window_t, e)), "r"(i),
            "m"(*(const hak_slice_entry_t(*)[HAK_WIN_ENTRIES])w->e));
    if (v > UINT16_MAX) __builtin_unreachable(); /* for GCC: no zero-extension of it as unsigned */
    return v;
#else
    return __atomic_load_n(&w->e[i], __ATOMIC_RELAXED);
#endif
  }
  /* p again, hidden, so that GCC does not keep p >> 16 for this branch. */
  __asm__("" : "+r"(p));
  return slice_map_entry(p);
}

#if HAK_WORD_CHECKS
/* The standard build's free mark (HAK_FREE_MARK, hak_internal.h): the
 * window's address, which free() has in a register after its lookup. The
 * window is decided once, before the first slice map entry is written
 * (registry.c, window_ensure), so before any small block exists, and never
 * changes after: every mark a block can carry is this value. A mapping of
 * HAKMEM's own, no program holds it as data (as it did not hold the random
 * key before; a block whose word matches by chance costs only the
 * double-free search, front/malloc.c). */
HAK_INLINE uintptr_t hak_word_mark(void) { return (uintptr_t)__atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE); }
#endif

/* Is p in memory HAKMEM mapped (a segment, or the first 2 MiB of a huge
 * mapping)? */
HAK_INLINE bool registry_has(const void *p) { return slice_map_entry(p) != 0; }

/* Make sure the leaves covering [p, p + size) exist; false if the OS refused
 * one (nothing else changed). Call after mapping, before slice_map_set. */
bool slice_map_reserve(const void *p, size_t size) HAK_HIDDEN;
/* Record bin index v (class + 1, HAK_CLASS_NONE + 1, or 0 when the memory
 * stops being ours) for n slices from p. The leaves must exist. */
void slice_map_set(const void *p, size_t n, unsigned v) HAK_HIDDEN;
#if HAK_WORD_CHECKS
/* Fill the static headers' check copy (start-up, hak_init, before any
 * thread's bins have room); a mapped window fills its own. */
void slice_map_checks_init(void) HAK_HIDDEN;
/* A carve of the page of n slices whose blocks of size bytes start at
 * start (its first slice's start) took it to carved_bytes past start: its
 * slices' slice_term, where they are in the window. */
void slice_map_mid_carved(const void *start, unsigned n, uint32_t size, size_t carved_bytes) HAK_HIDDEN;
#endif

#endif
