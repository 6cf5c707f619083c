/* registry.h — which 2 MiB chunks of the address space are HAKMEM's.
 *
 * One bit per chunk over a 48-bit address space (16 MiB of .bss, touched only
 * where HAKMEM has memory). A chunk is marked when a segment or huge block
 * starting there is mapped, so free() tells our pointers from foreign ones with
 * a single load and never reads memory it does not own. */
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

#endif
