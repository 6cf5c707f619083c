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
 * Concurrency: a leaf is published with one CAS on its top entry (a loser
 * unmaps its own leaf); readers depend on the pointer they loaded (address
 * dependency, as every CPU HAKMEM targets honours), and a fresh leaf reads
 * zero. Nothing is held across calls, so neither fork, a thread's exit nor
 * a preempted thread leaves anything half done: at worst one leaf mapping
 * is lost (unused address space). Entries of a slice are written only by
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
 * copied here so that free() addresses them from the register that already
 * holds the slice map's address, with the bin offset as the index (16-byte
 * entries: scale 1), instead of forming the table's address (one lea per
 * free). Zero (the test fails: the full test decides) until hak_init
 * fills them (block_check_fill), before any thread's bins have room: free()
 * reads an entry only for a bin with room (front.h, free_block). */
typedef struct hak_fast_check {
  uint32_t mul, bound;
  uint64_t unused;
} hak_fast_check_t;
_Static_assert(sizeof(hak_fast_check_t) == HAK_SLICE_MAP_SCALE, "indexed by the bin offset itself");
#endif

typedef struct hak_slice_map {
  /* Per leaf, its address minus the zero leaf's (0: no leaf yet, so the
   * zero leaf). Integers: never dereferenced without adding `zero`. */
  uintptr_t top[HAK_TOP_ENTRIES];
  hak_slice_entry_t zero[(size_t)1 << HAK_LEAF_BITS]; /* never written: "not ours" */
#if HAK_WORD_CHECKS
  hak_fast_check_t check[HAK_NCLASSES + 2]; /* indexed by bin offset */
#endif
} hak_slice_map_t;
extern hak_slice_map_t hak_slice_map HAK_HIDDEN;

/* The bin offset of p's slice (0: not ours), and in *mp the slice map's
 * address as the lookup held it in a register. A straight line: two loads. */
HAK_INLINE unsigned slice_map_lookup(const void *p, const hak_slice_map_t **mp) {
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
  *mp = m;
  return __atomic_load_n((const hak_slice_entry_t *)leaf + slice, __ATOMIC_RELAXED);
}

/* The bin offset of p's slice (0: not ours). */
HAK_INLINE unsigned slice_map_bin_offset(const void *p) {
  const hak_slice_map_t *m;
  return slice_map_lookup(p, &m);
}

/* Is p in memory HAKMEM mapped (a segment, or the first 2 MiB of a huge
 * mapping)? */
HAK_INLINE bool registry_has(const void *p) { return slice_map_bin_offset(p) != 0; }

/* Make sure the leaves covering [p, p + size) exist; false if the OS refused
 * one (nothing else changed). Call after mapping, before slice_map_set. */
bool slice_map_reserve(const void *p, size_t size) HAK_HIDDEN;
/* Record bin index v (class + 1, HAK_CLASS_NONE + 1, or 0 when the memory
 * stops being ours) for n slices from p. The leaves must exist. */
void slice_map_set(const void *p, size_t n, unsigned v) HAK_HIDDEN;

#endif
