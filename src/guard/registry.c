/* registry.c — the chunk bitmap behind registry_has(), and the slice map. */
#include "guard/registry.h"
#include "os/lock.h"

#include <string.h>
#include <sys/mman.h>

_Atomic(uint64_t) hak_registry[HAK_REG_WORDS];

static uint8_t slice_map_off[1];
uint8_t *hak_slice_map = slice_map_off;
uintptr_t hak_slice_mask;

void slice_map_init(void) {
  static _Atomic(int) state; /* 0 untried, 1 in progress, 2 done (or refused) */
  int expect = 0;
  if (atomic_load_explicit(&state, memory_order_acquire) == 2) return;
  if (!atomic_compare_exchange_strong(&state, &expect, 1)) {
    /* Bounded: after a short wait go on without the map (correct, the slow
     * path consults the registry), e.g. in a child forked while another
     * thread was in here, where the map will never come. */
    for (unsigned i = 0; i < 64 + 256 && atomic_load_explicit(&state, memory_order_acquire) != 2; i++) {
      if (i < 64) cpu_relax();
      else sched_yield();
    }
    return;
  }
  size_t len = (size_t)1 << HAK_SLICE_MAP_BITS;
  void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m != MAP_FAILED) { /* if refused: stay on the slow path, correct, just slower */
    __atomic_store_n(&hak_slice_map, (uint8_t *)m, __ATOMIC_RELAXED);
    __atomic_store_n(&hak_slice_mask, len - 1, __ATOMIC_RELEASE);
  }
  atomic_store_explicit(&state, 2, memory_order_release);
}

void slice_map_set(const void *p, size_t n, unsigned v) {
  if (!hak_slice_mask) return;
  memset(hak_slice_map + (((uintptr_t)p >> HAK_SLICE_SHIFT) & hak_slice_mask), (int)v, n);
}

void registry_add(const void *chunk) {
  uintptr_t c = (uintptr_t)chunk >> HAK_SEG_SHIFT;
  atomic_fetch_or_explicit(&hak_registry[(c >> 6) & (HAK_REG_WORDS - 1)], 1ull << (c & 63), memory_order_release);
}

void registry_remove(const void *chunk) {
  uintptr_t c = (uintptr_t)chunk >> HAK_SEG_SHIFT;
  atomic_fetch_and_explicit(&hak_registry[(c >> 6) & (HAK_REG_WORDS - 1)], ~(1ull << (c & 63)), memory_order_release);
}
