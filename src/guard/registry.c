/* registry.c — the slice map behind registry_has() and free()'s fast path:
 * two levels and the window (protocol in registry.h). */
#include "guard/registry.h"
#include "guard/block_check.h"
#include "os/os.h"

#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

#define LEAF_ENTRIES ((size_t)1 << HAK_LEAF_BITS)
#define LEAF_BYTES   (LEAF_ENTRIES * sizeof(hak_slice_entry_t))

/* All zeros, so .bss: no relocation, no file bytes, and only the pages a
 * process writes (the top entries of the leaves it maps) become its own;
 * the zero leaf is read at most, the kernel's shared zero page. */
hak_slice_map_t hak_slice_map;
_Static_assert(sizeof(hak_slice_map.zero) == LEAF_BYTES, "the zero leaf is a whole leaf");

/* A top entry: leaf's address relative to the zero leaf. Never 0 (leaf is
 * not the zero leaf). */
HAK_INLINE uintptr_t top_entry(const void *leaf) { return (uintptr_t)leaf - (uintptr_t)hak_slice_map.zero; }
HAK_INLINE hak_slice_entry_t *top_leaf(uintptr_t rel) { return (hak_slice_entry_t *)((uintptr_t)hak_slice_map.zero + rel); }

/* hak_slice_window before the window is decided (no_window) and when it
 * could not be mapped (no_room): headers only, whose `first` no slice
 * number (below 2^32) reaches, so their entries are never read; the
 * standard build's free() reads their check copy for blocks outside the
 * window (registry.h). */
typedef struct {
  uintptr_t first, pad;
#if HAK_WORD_CHECKS
  hak_fast_check_t check[HAK_NCLASSES + 2];
#endif
} window_header_t;
#if HAK_WORD_CHECKS
_Static_assert(offsetof(window_header_t, check) == offsetof(hak_slice_window_t, check), "a header is a window's head");
#endif
static window_header_t no_window = {.first = (uintptr_t)1 << 63}, no_room = {.first = (uintptr_t)1 << 63};
hak_slice_window_ref_t hak_slice_window = {(const hak_slice_window_t *)&no_window};

#if HAK_WORD_CHECKS
/* floor(2^64 / size) + 1, or 2^64 / size for a power of two: the factor of
 * the exact divisibility tests (block_carved_start, block_slice_ok_map). */
static uint64_t check_mul64(uint32_t size) { return UINT64_MAX / size + 1; }
/* hak_block_check is a constant table, so a window can copy it whenever it
 * is mapped, before or after start-up. */
static void checks_copy(hak_fast_check_t *check) {
  for (unsigned v = 0; v < HAK_NCLASSES + 2; v++) {
    check[v].mul = hak_block_check[v].mul;
    check[v].bound = hak_block_check[v].fast_bound;
    uint32_t size = hak_block_check[v].size;
    check[v].mul64 = size ? check_mul64(size) : 0;
  }
}
/* The slice's term (registry.h, slice_term) for a bound: free() passes p
 * at offset o of the slice when Y = (o + phase) * mul64 mod 2^64 (formed
 * as o * mul64 + phase * mul64) is below the bound, Y - bound then wrapping
 * into the top HAK_SLICE_SPAN values; no other Y gets there. With
 * x = o + phase = k * size + r (x < 2^20, below): r = 0 gives Y = k * e < 2^20
 * (e = mul64 * size mod 2^64 < size), so Y - bound is in [0, 2^20) for
 * the blocks past the bound; r >= 1 gives mul64 <= Y <
 * 2^64 - mul64 + e + 2^20 (block_carved_start's arithmetic: no wrap), so
 * Y - bound is in (0, 2^64 - mul64 + 2^21), below 2^64 - HAK_SLICE_SPAN
 * (mul64 >= 2^46: size <= 256 KiB). And every bound (< 2^20) is at most
 * HAK_SLICE_SPAN, so all the blocks below it pass. Bound 0: term 0 (the
 * same as phase * mul64 for the test: nothing passes, whatever the
 * class). test_block_check tries every offset. */
static uint64_t slice_term(uint64_t phase, uint64_t mul64, uint64_t bound) {
  return bound ? phase * mul64 - bound : 0;
}

/* For slice j of the page (offset off = j * 2^16 in it): the phase is off
 * mod size, k0 = floor(off / size) is the last block of the page starting
 * at or before the slice's start, and p at offset o of the slice is a
 * block start exactly when x = o + phase is a multiple of the size, block
 * k0 + x / size; so x * mul64 (the check copy's; block_slice_ok_map) is
 * (x / size) * e for those, e = mul64 * size mod 2^64, and at least mul64
 * for the others (block_carved_start's arithmetic).
 * The bound (carved - k0) * e admits exactly the blocks carved. A power of
 * two (e = 0, its blocks fill its pages: per to a slice, or one block
 * start every size / 2^16 slices above 64 KiB) has no bound but 1, all the
 * slice's multiples: only once the slice's last block is carved (block k0
 * when per is 0: the slice's start is block k0's, or it holds none). Every
 * class: x = o + phase < 2^16 + 2^18 < 2^20, block_carved_start's bound.
 * One store per slice: the term carries phase and bound together (a page's
 * phases do not change while it lives; slice_map_set made the term 0
 * before the page's entries were set). */
void slice_map_mid_carved(const void *start, unsigned n, uint32_t size, size_t carved_bytes) {
  if (n < 2 || ((uintptr_t)start & (HAK_SLICE_SIZE - 1))) return;
  hak_slice_window_t *w = (hak_slice_window_t *)__atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
  uint64_t mul64 = check_mul64(size), e = mul64 * size;
  uint32_t carved = (uint32_t)(carved_bytes / size), per = (uint32_t)(HAK_SLICE_SIZE / size);
  uintptr_t slice = (uintptr_t)start >> HAK_SLICE_SHIFT;
  for (unsigned j = 0; j < n; j++, slice++) {
    uintptr_t i = slice - w->first;
    if (i >= HAK_WIN_ENTRIES) continue; /* the headers, or outside the window: free_checked */
    uint32_t off = j << HAK_SLICE_SHIFT, k0 = off / size;
    uint64_t bound = e ? (carved > k0 ? (carved - k0) * e : 0) : k0 + (per ? per : 1) <= carved;
    __atomic_store_n(&w->slice_term[i], slice_term(off % size, mul64, bound), __ATOMIC_RELAXED);
  }
}

/* The term of a slice of a one-slice class (bin index v): phase 0 and the
 * bound of its blocks, fast_lim times e (1 for a power of two: e = 0, and
 * its blocks fill the slice). 0 for anything else (pages of several slices,
 * sentinels). The same test as block_fast_ok's 32-bit one, in free()'s
 * 64-bit form. */
static uint64_t one_slice_term(unsigned v) {
  if (v == 0 || v > HAK_NCLASSES || hak_block_check[v].fast_lim == 0) return 0;
  uint32_t size = hak_block_check[v].size;
  uint64_t mul64 = check_mul64(size), e = mul64 * size;
  return slice_term(0, mul64, e ? hak_block_check[v].fast_lim * e : 1);
}

void slice_map_checks_init(void) {
  checks_copy(no_window.check);
  checks_copy(no_room.check);
}
#endif

/* The window's place: HEADROOM slices above the first segment, the rest
 * below it, where later segments go (os.c maps each right below the
 * previous one). */
#define HEADROOM ((uintptr_t)1 << 13) /* 512 MiB */

/* Decide the window once, before the first entry is written: every
 * slice_map_set follows a slice_map_reserve of its memory, so every writer
 * sees the decision and writes the window's entries as well as the leaves'. */
static void window_ensure(const void *p) {
  const hak_slice_window_t *w = __atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
  if (w != (const hak_slice_window_t *)&no_window) return;
  size_t bytes = (sizeof(hak_slice_window_t) + os_page_size() - 1) & ~(os_page_size() - 1);
  int saved = errno;
  void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  const hak_slice_window_t *want = (const hak_slice_window_t *)&no_room;
  if (m != MAP_FAILED) {
    os_name(m, bytes, "hakmem-slicemap");
    uintptr_t s = ((uintptr_t)p >> HAK_SLICE_SHIFT) + HEADROOM;
    ((hak_slice_window_t *)m)->first = s > HAK_WIN_ENTRIES ? s - HAK_WIN_ENTRIES : 0;
#if HAK_WORD_CHECKS
    checks_copy(((hak_slice_window_t *)m)->check);
#endif
    want = (const hak_slice_window_t *)m;
  }
  if (!__atomic_compare_exchange_n(&hak_slice_window.w, &w, want, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE) &&
      m != MAP_FAILED) {
    munmap(m, bytes); /* another thread decided first */
    errno = saved;
  }
}

static bool leaf_ensure(size_t top) {
  uintptr_t expect = 0;
  if (__atomic_load_n(&hak_slice_map.top[top], __ATOMIC_ACQUIRE) != 0) return true;
  int saved = errno;
  void *m = mmap(NULL, LEAF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  if (m == MAP_FAILED) return false;
  os_name(m, LEAF_BYTES, "hakmem-slicemap");
  uintptr_t rel = top_entry(m);
  if (!__atomic_compare_exchange_n(&hak_slice_map.top[top], &expect, rel, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
    munmap(m, LEAF_BYTES); /* another thread mapped it first */
    errno = saved;
  }
  return true;
}

bool slice_map_reserve(const void *p, size_t size) {
  window_ensure(p);
  uint32_t first = (uint32_t)((uintptr_t)p >> HAK_SLICE_SHIFT);
  uint32_t last = (uint32_t)(((uintptr_t)p + (size ? size - 1 : 0)) >> HAK_SLICE_SHIFT);
  for (size_t t = first >> HAK_LEAF_BITS; t <= (last >> HAK_LEAF_BITS); t++)
    if (!leaf_ensure(t)) return false;
  return true;
}

void slice_map_set(const void *p, size_t n, unsigned v) {
  hak_slice_entry_t e = (hak_slice_entry_t)(v * HAK_SLICE_MAP_SCALE);
  uint32_t slice = (uint32_t)((uintptr_t)p >> HAK_SLICE_SHIFT);
  hak_slice_window_t *w = (hak_slice_window_t *)__atomic_load_n(&hak_slice_window.w, __ATOMIC_ACQUIRE);
#if HAK_WORD_CHECKS
  uint64_t term = one_slice_term(v);
#endif
  for (size_t i = 0; i < n; i++, slice++) {
    if (slice - w->first < HAK_WIN_ENTRIES) { /* never for the headers */
#if HAK_WORD_CHECKS
      /* The slice's page, if any, is new or gone: nothing carved. The
       * term is 0 while the entry changes (block_slice_ok_map), then a
       * one-slice class's, whose blocks the test admits all. */
      __atomic_store_n(&w->slice_term[slice - w->first], 0, __ATOMIC_RELAXED);
#endif
      __atomic_store_n(&w->e[slice - w->first], e, __ATOMIC_RELAXED);
#if HAK_WORD_CHECKS
      if (term) __atomic_store_n(&w->slice_term[slice - w->first], term, __ATOMIC_RELEASE);
#endif
    }
    uintptr_t rel = __atomic_load_n(&hak_slice_map.top[slice >> HAK_LEAF_BITS], __ATOMIC_ACQUIRE);
    if (rel == 0) continue; /* no leaf: nothing of ours here (v must be 0) */
    __atomic_store_n(&top_leaf(rel)[slice & (LEAF_ENTRIES - 1)], e, __ATOMIC_RELAXED);
  }
}
