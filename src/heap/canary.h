/* canary.h — what the secure build (libhakmem-secure.so) keeps at the end of
 * every block.
 *
 * Secure build: a request for n bytes gets a block of the class for n + 8,
 * so that every block ends in a tail word of its own (mimalloc's MI_PADDING
 * is the model). The tail is keyed per block: tail = canary_of(block) ^ gap,
 * gap = block size - n (at least 8), or gap 0 while the block is free
 * (freed, carved and not yet handed out, or a page's guard block). The 8
 * bytes right after the request repeat the tail, rotated so that where
 * the two overlap (gap < 16) they agree, and are checked with it.
 *   - free and realloc check the block's own tail and those 8 bytes
 *     (overflow: a write of even one byte past n changes one of them) and
 *     the tail of the block before it (underflow: the bytes before a block
 *     are its neighbour's tail), then mark the tail free (a second free
 *     finds gap 0: double free, in any thread, cached or on its page);
 *   - malloc_usable_size is n, read back from the tail: all of it may be
 *     written without touching the canary;
 *   - the first block of a page of a class up to 1 KiB is a guard, never
 *     handed out, so every block handed out has a neighbour before it
 *     (bigger classes: the first block's underflow is not seen);
 *   - large and huge blocks keep the tail at the end of their usable area
 *     and the 8 bytes after n the same way; they have no neighbour, so a
 *     keyed head word right before the block stands for its tail (below).
 * The tail word is read by other threads freeing the next block: it is
 * stored whole (one aligned 8-byte store) and only ever holds a valid
 * value, gap 0 or the gap of the block's current request.
 *
 * The key is per process (from the kernel's AT_RANDOM bytes), so the value
 * a given block's tail must hold cannot be written by a constant. */
#ifndef HAK_CANARY_H
#define HAK_CANARY_H

#include "hak_internal.h"

#include <string.h>

#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif

#if HAK_SECURE
#define HAK_TAIL 8u /* bytes of every block after the largest request it serves */
/* Classes up to this size give their page's first block as a guard. */
#define HAK_GUARD_BLOCK_MAX 1024u

extern uint64_t hak_canary_key HAK_HIDDEN;

/* The bytes an off-by-one write hits are kept in 0x80..0xbf, so a NUL, an
 * ASCII character or 0xff written there always changes them (a keyed byte
 * would match 1 write in 256): the canary's top byte (the byte right before
 * the next block: an underflow of that block; no gap reaches it) and low
 * byte (the tail's first byte, right after a request that leaves a gap of
 * 8), and the first byte of the repeat after the request (canary_repeat). */
#define CANARY_SET_BITS 0x8000000000000080ull
#define CANARY_FREE_BITS 0x4000000000000040ull
/* An odd multiplier that fits an instruction's 32-bit immediate: a
 * bijection all the same (the secret is the key), with no register to
 * hold a 64-bit constant on the fast paths. */
HAK_INLINE uint64_t canary_mix(const void *b, uint64_t key) {
  return ((((uint64_t)(uintptr_t)b ^ key) * 0x7feb352dull) & ~CANARY_FREE_BITS) | CANARY_SET_BITS;
}
HAK_INLINE uint64_t canary_of(const void *b) { return canary_mix(b, hak_canary_key); }
HAK_INLINE uint64_t rotl64(uint64_t x, unsigned r) { return (x << r) | (x >> ((64 - r) & 63)); }
/* The 8 bytes right after a request that leaves a gap of g: the tail
 * rotated so that where they overlap (g < 16) they agree with it, and the
 * first byte in 0x80..0xbf (above; outside the overlap unless g == 8,
 * where it is the tail's low byte, in that range already). */
HAK_INLINE uint64_t canary_repeat(uint64_t t, uint64_t g) {
  return (rotl64(t, (unsigned)(g * 8) & 63) & ~0x40ull) | 0x80ull;
}
HAK_INLINE uint64_t *tail_of(const void *b, size_t bsize) { return (uint64_t *)((uintptr_t)b + bsize - 8); }
HAK_INLINE uint64_t tail_load(const void *b, size_t bsize) {
  return __atomic_load_n(tail_of(b, bsize), __ATOMIC_RELAXED);
}
/* The tail's gap: 0 free, 8..bsize handed out for bsize - gap bytes. */
HAK_INLINE uint64_t tail_gap(const void *b, size_t bsize) { return tail_load(b, bsize) ^ canary_of(b); }

HAK_INLINE void canary_mark_free(void *b, size_t bsize) {
  __atomic_store_n(tail_of(b, bsize), canary_of(b), __ATOMIC_RELAXED);
}

/* b (bsize bytes) handed out for n bytes, n + 8 <= bsize. The tail first:
 * the repeat may overlap it, with the same bytes. */
HAK_INLINE void canary_seal(void *b, size_t bsize, size_t n) {
  uint64_t g = bsize - n, t = canary_of(b) ^ g;
  __atomic_store_n(tail_of(b, bsize), t, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t f = canary_repeat(t, g);
  memcpy((char *)b + n, &f, 8);
}

/* The same for a block known to be free (popped from a thread cache: every
 * block enters one marked free, its tail canary_of(b)): the tail's free mark
 * is the block's canary, read instead of computed again (the line is written
 * next anyway). A free mark overwritten while the block was cached (a write
 * after free) is carried into the seal, so the block's next free reports it,
 * where a recomputed canary would have hidden it. */
HAK_INLINE void canary_seal_free(void *b, size_t bsize, size_t n) {
  uint64_t g = bsize - n, t = tail_load(b, bsize) ^ g;
  __atomic_store_n(tail_of(b, bsize), t, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  uint64_t f = canary_repeat(t, g);
  memcpy((char *)b + n, &f, 8);
}

/* b is handed out and its tail and the 8 bytes after the request are intact. */
HAK_INLINE bool canary_intact(const void *b, size_t bsize) {
  uint64_t t = tail_load(b, bsize), g = t ^ canary_of(b), f;
  if (HAK_UNLIKELY(g - 8 > bsize - 8)) return false; /* free (0), or overwritten */
  memcpy(&f, (const char *)b + bsize - g, 8);
  return f == canary_repeat(t, g);
}

/* The tail of the block before b (same page) holds a valid value. */
HAK_INLINE bool canary_prev_ok(const void *b, size_t bsize) {
  return tail_gap((const char *)b - bsize, bsize) <= bsize;
}

/* Bytes the caller of a block handed out for n may use. */
HAK_INLINE size_t canary_request(const void *b, size_t bsize) { return bsize - (size_t)tail_gap(b, bsize); }

/* Blocks carved from a page (heap.c, user_heap.c): their tails say free. */
/* A page about to carve its first block: a class up to
 * HAK_GUARD_BLOCK_MAX gives that block as its guard. */
void canary_carved(uint8_t *first, unsigned k, size_t bsize) HAK_HIDDEN;
HAK_INLINE void canary_guard_page(hak_page_t *p) {
  if (p->bump == p->start && p->bsize <= HAK_GUARD_BLOCK_MAX && p->bump < p->end) {
    canary_carved(p->bump, 1, p->bsize);
    p->bump += p->bsize;
  }
}
/* Sets the key once (before the first tail is written). */
void canary_key_ensure(void) HAK_HIDDEN;

/* Large and huge blocks have no neighbour whose tail an underflow would
 * hit: they start HAK_HEAD bytes (or their alignment, if more) into their
 * run or mapping, and the word right before the block holds a head keyed
 * like the tail (a different mix of the block's address), checked with it. */
#define HAK_HEAD 16u
/* The byte right before the block (the word's top byte) is always in
 * 0x80..0xbf: an off-by-one write of a NUL, an ASCII character or 0xff
 * below the block always changes it (a keyed byte would miss 1 in 256). */
HAK_INLINE uint64_t head_of(const void *b) {
  uint64_t h = rotl64(canary_of(b), 29) ^ 0x5bd1e9955bd1e995ull;
  return (h & ~(1ull << 62)) | (1ull << 63);
}
HAK_INLINE void canary_head_seal(void *b) {
  uint64_t h = head_of(b);
  memcpy((char *)b - 8, &h, 8);
}
HAK_INLINE bool canary_head_intact(const void *b) {
  uint64_t h;
  memcpy(&h, (const char *)b - 8, 8);
  return h == head_of(b);
}
/* A large or huge block of `usable` bytes handed out for n bytes. */
HAK_INLINE void canary_seal_large(void *b, size_t usable, size_t n) {
  canary_head_seal(b);
  canary_seal(b, usable, n);
}
HAK_INLINE bool canary_intact_large(const void *b, size_t usable) {
  return canary_head_intact(b) && canary_intact(b, usable);
}
#else
#define HAK_TAIL 0u
#define HAK_HEAD 0u
#endif

#endif
