/* unmapped.c — a small ring of the last ranges HAKMEM unmapped.
 *
 * Lock-free: a writer claims a slot with a fetch-add and stores base then
 * end; a reader may see a slot half-written or overwritten, which only makes
 * it miss (the pointer then goes to glibc as before) or consult mincore
 * needlessly. The ring is a hint; the decision is mincore's: a pointer is
 * reported only if the page it points into is not mapped at all, where
 * glibc's free could do nothing but crash. Memory mapped there again since
 * (by glibc or anyone) is forwarded as usual. Consulted only for pointers
 * that are not HAKMEM's: the foreign-free path. Fork copies the ring with
 * the address space, which is what the child needs. */
#include "guard/unmapped.h"
#include "os/os.h"

#include <errno.h>
#include <sys/mman.h>

#define UNMAPPED_SLOTS 64

static struct {
  _Atomic(uintptr_t) base, end;
} ring[UNMAPPED_SLOTS];
static _Atomic(unsigned) ring_next;

void unmapped_note(const void *base, size_t size) {
  unsigned i = atomic_fetch_add_explicit(&ring_next, 1, memory_order_relaxed) % UNMAPPED_SLOTS;
  atomic_store_explicit(&ring[i].end, 0, memory_order_relaxed);
  atomic_store_explicit(&ring[i].base, (uintptr_t)base, memory_order_relaxed);
  atomic_store_explicit(&ring[i].end, (uintptr_t)base + size, memory_order_release);
}

bool unmapped_recently(const void *p) {
  uintptr_t a = (uintptr_t)p;
  bool hit = false;
  for (unsigned i = 0; i < UNMAPPED_SLOTS && !hit; i++) {
    uintptr_t e = atomic_load_explicit(&ring[i].end, memory_order_acquire);
    uintptr_t b = atomic_load_explicit(&ring[i].base, memory_order_relaxed);
    hit = a >= b && a < e;
  }
  if (!hit) return false;
  unsigned char vec;
  int saved = errno;
  size_t ps = os_page_size();
  bool gone = mincore((void *)(a & ~(uintptr_t)(ps - 1)), 1, &vec) != 0 && errno == ENOMEM;
  errno = saved;
  return gone;
}
