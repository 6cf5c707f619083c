/* registry.c — the chunk bitmap behind registry_has(). */
#include "guard/registry.h"

_Atomic(uint64_t) hak_registry[HAK_REG_WORDS];

void registry_add(const void *chunk) {
  uintptr_t c = (uintptr_t)chunk >> HAK_SEG_SHIFT;
  atomic_fetch_or_explicit(&hak_registry[(c >> 6) & (HAK_REG_WORDS - 1)], 1ull << (c & 63), memory_order_release);
}

void registry_remove(const void *chunk) {
  uintptr_t c = (uintptr_t)chunk >> HAK_SEG_SHIFT;
  atomic_fetch_and_explicit(&hak_registry[(c >> 6) & (HAK_REG_WORDS - 1)], ~(1ull << (c & 63)), memory_order_release);
}
