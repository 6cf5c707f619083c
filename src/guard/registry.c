/* registry.c — the two-level slice map behind registry_has() and free()'s
 * fast path (protocol in registry.h). */
#include "guard/registry.h"
#include "os/os.h"

#include <errno.h>
#include <sys/mman.h>

#define LEAF_ENTRIES ((size_t)1 << HAK_LEAF_BITS)
#define LEAF_BYTES   (LEAF_ENTRIES * sizeof(hak_slice_entry_t))

/* What every top entry points at until its leaf exists: reads as "not ours".
 * .bss: address space only, never written, so never resident beyond the
 * shared zero page. */
static hak_slice_entry_t zero_leaf[LEAF_ENTRIES];

#define BIAS(i) ((uintptr_t)((size_t)(i) << HAK_LEAF_BITS) * sizeof(hak_slice_entry_t))
#define ZERO(i) ((uintptr_t)zero_leaf - BIAS(i))
#define ZERO4(i) ZERO(i), ZERO((i) + 1), ZERO((i) + 2), ZERO((i) + 3)
#define ZERO16(i) ZERO4(i), ZERO4((i) + 4), ZERO4((i) + 8), ZERO4((i) + 12)
#define ZERO64(i) ZERO16(i), ZERO16((i) + 16), ZERO16((i) + 32), ZERO16((i) + 48)
#define ZERO256(i) ZERO64(i), ZERO64((i) + 64), ZERO64((i) + 128), ZERO64((i) + 192)
#define ZERO1024(i) ZERO256(i), ZERO256((i) + 256), ZERO256((i) + 512), ZERO256((i) + 768)

_Static_assert(HAK_TOP_ENTRIES == 4096, "the initialiser below spells out 4096 entries");
uintptr_t hak_slice_top[HAK_TOP_ENTRIES] = {ZERO1024(0), ZERO1024(1024), ZERO1024(2048), ZERO1024(3072)};

static bool leaf_ensure(size_t top) {
  uintptr_t expect = ZERO(top);
  if (__atomic_load_n(&hak_slice_top[top], __ATOMIC_ACQUIRE) != expect) return true;
  int saved = errno;
  void *m = mmap(NULL, LEAF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  errno = saved;
  if (m == MAP_FAILED) return false;
  os_name(m, LEAF_BYTES, "hakmem-slicemap");
  uintptr_t biased = (uintptr_t)m - BIAS(top);
  if (!__atomic_compare_exchange_n(&hak_slice_top[top], &expect, biased, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE)) {
    munmap(m, LEAF_BYTES); /* another thread mapped it first */
    errno = saved;
  }
  return true;
}

bool slice_map_reserve(const void *p, size_t size) {
  uint32_t first = (uint32_t)((uintptr_t)p >> HAK_SLICE_SHIFT);
  uint32_t last = (uint32_t)(((uintptr_t)p + (size ? size - 1 : 0)) >> HAK_SLICE_SHIFT);
  for (size_t t = first >> HAK_LEAF_BITS; t <= (last >> HAK_LEAF_BITS); t++)
    if (!leaf_ensure(t)) return false;
  return true;
}

void slice_map_set(const void *p, size_t n, unsigned v) {
  hak_slice_entry_t e = (hak_slice_entry_t)(v * HAK_SLICE_MAP_SCALE);
  uint32_t slice = (uint32_t)((uintptr_t)p >> HAK_SLICE_SHIFT);
  for (size_t i = 0; i < n; i++, slice++) {
    uintptr_t leaf = __atomic_load_n(&hak_slice_top[slice >> HAK_LEAF_BITS], __ATOMIC_ACQUIRE);
    if (leaf == ZERO(slice >> HAK_LEAF_BITS)) continue; /* no leaf: nothing of ours here (v must be 0) */
    __atomic_store_n((hak_slice_entry_t *)(leaf + (uintptr_t)slice * sizeof(hak_slice_entry_t)), e, __ATOMIC_RELAXED);
  }
}
