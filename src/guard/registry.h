/* registry.h — which parts of the address space are HAKMEM's.
 *
 * Two structures answer it. The registry proper: one bit per 2 MiB chunk over
 * a 48-bit address space (16 MiB of .bss, touched only where HAKMEM has
 * memory), set when a segment or huge block starting there is mapped; it is
 * the ground truth the slow paths consult, and never reads memory HAKMEM does
 * not own.
 *
 * The slice map serves free()'s fast path: one byte per 64 KiB slice of the
 * address space (4 GiB reserved with MAP_NORESERVE at start-up, resident only
 * where HAKMEM has memory), holding the size class of the slice's page plus
 * one, HAK_CLASS_NONE + 1 for large blocks, 0 elsewhere. It indexes the TLS
 * bins directly. Until start-up (or if the reservation is refused) the index
 * mask is 0, every lookup reads a static zero byte, and all frees go the slow
 * way. */
#ifndef HAK_REGISTRY_H
#define HAK_REGISTRY_H

#include "hak_internal.h"

#define HAK_VA_BITS 48
#define HAK_REG_WORDS ((size_t)1 << (HAK_VA_BITS - HAK_SEG_SHIFT - 6))

extern _Atomic(uint64_t) hak_registry[HAK_REG_WORDS] HAK_HIDDEN;

HAK_INLINE bool registry_has(const void *p) {
  uintptr_t c = (uintptr_t)p >> HAK_SEG_SHIFT;
  uint64_t w = atomic_load_explicit(&hak_registry[(c >> 6) & (HAK_REG_WORDS - 1)], memory_order_relaxed);
  return (w >> (c & 63)) & 1;
}

void registry_add(const void *chunk) HAK_HIDDEN;
void registry_remove(const void *chunk) HAK_HIDDEN;

#define HAK_SLICE_MAP_BITS (HAK_VA_BITS - HAK_SLICE_SHIFT)

extern uint8_t *hak_slice_map HAK_HIDDEN;
extern uintptr_t hak_slice_mask HAK_HIDDEN;

/* The mask must be read before the map pointer: start-up publishes the
 * pointer first, and a reader pairing the new mask with the old one-byte
 * placeholder would read out of bounds. x86 never reorders two loads, so
 * there only the compiler is held back (no instruction); weakly ordered CPUs
 * get an acquire load. */
HAK_INLINE unsigned slice_map_value(const void *p) {
#if defined(__x86_64__) || defined(__i386__)
  uintptr_t idx = ((uintptr_t)p >> HAK_SLICE_SHIFT) & hak_slice_mask;
  __atomic_signal_fence(__ATOMIC_ACQUIRE);
#else
  uintptr_t idx = ((uintptr_t)p >> HAK_SLICE_SHIFT) & __atomic_load_n(&hak_slice_mask, __ATOMIC_ACQUIRE);
#endif
  return hak_slice_map[idx];
}

/* Reserve the map (start-up, once). */
void slice_map_init(void) HAK_HIDDEN;
/* Record value v (class + 1, HAK_CLASS_NONE + 1, or 0) for n slices from p. */
void slice_map_set(const void *p, size_t n, unsigned v) HAK_HIDDEN;

#endif
