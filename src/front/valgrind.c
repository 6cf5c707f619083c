/* valgrind.c — the memcheck client requests behind front/valgrind.h, compiled
 * only in the HAKMEM_VALGRIND build. */
#include "front/valgrind.h"

#if HAK_VALGRIND
#include "front/front.h"
#include "guard/guard.h"
#include "large/large.h"
#include "hakmem.h"

#include <string.h>

static size_t vg_usable_size(const void *p) {
  size_t u = 0;
#if HAK_SECURE
  /* usable_ours is the size asked for: the block's whole size, so that the
   * canary and the slack after it are NOACCESS too */
  if (registry_has(p)) {
    unsigned cls = segment_of(p)->slice_cls[slice_index(p)];
    return cls != HAK_CLASS_NONE ? hak_class_size[cls] : large_usable(p);
  }
#else
  if (registry_has(p)) return usable_ours(p);
#endif
  if (overaligned_owns(p, &u)) return u;
  return 0;
}

static bool vg_ours(const void *p) { return p && (registry_has(p) || overaligned_owns(p, NULL)); }

void *vg_allocated(void *p, size_t n, bool zeroed) {
  if (!p) return p;
  HAK_VG_ENTER();
  size_t u = vg_usable_size(p);
  HAK_VG_LEAVE();
  VALGRIND_MALLOCLIKE_BLOCK(p, n, 0, zeroed);
  if (u > n) VALGRIND_MAKE_MEM_NOACCESS((char *)p + n, u - n);
  return p;
}

void vg_freeing(void *p) {
  HAK_VG_ENTER();
  bool ours = vg_ours(p);
  HAK_VG_LEAVE();
  if (ours) VALGRIND_FREELIKE_BLOCK(p, 0);
}

void vg_usable(void *p, size_t u) {
  if (!p || !u) return;
  /* The slack past the bytes asked for becomes usable: undefined, and the
   * bytes the program has written keep their state. */
  HAK_VG_ENTER();
  uintptr_t bad = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(p, u);
  HAK_VG_LEAVE();
  if (bad) VALGRIND_MAKE_MEM_UNDEFINED((void *)bad, (uintptr_t)p + u - bad);
}

/* Always a new block: memcheck's record of the old one ends with a
 * FREELIKE, and the new one starts at its exact size. */
void *vg_realloc(void *p, size_t n) {
  if (!p) return hak_malloc(n);
  HAK_VG_ENTER();
  bool ours = vg_ours(p);
  HAK_VG_LEAVE();
  if (!ours) return foreign_realloc(p, n);
  if (n == 0) {
    hak_free(p);
    return NULL;
  }
  void *q = hak_malloc(n);
  if (!q) return NULL;
  /* Copy what the program may use of the old block (up to its first
   * NOACCESS byte): memcheck carries the bytes' definedness over. */
  HAK_VG_ENTER();
  size_t old = vg_usable_size(p);
  uintptr_t bad = VALGRIND_CHECK_MEM_IS_ADDRESSABLE(p, old);
  if (bad) old = (size_t)(bad - (uintptr_t)p);
  memcpy(q, p, old < n ? old : n);
  HAK_VG_LEAVE();
  hak_free(p);
  return q;
}
#endif
