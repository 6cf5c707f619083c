/* canary.h — the word the secure build (libhakmem-secure.so) keeps right
 * before every block, and its repeat right after the request.
 *
 * Secure build: a request for n bytes gets a block of the class for n + 16.
 * The 8 bytes right before block b (the end of the slot before it, or of
 * the page's lead) are b's state word, keyed per block:
 * canary_of(b) ^ (m << 8), m = n + 16 (at most the block size), or
 * canary_of(b) itself (m 0) while the block is free (freed, carved and not
 * yet handed out). The 8 bytes right after the request repeat the word.
 *   - free and realloc check the word (m in 16..bsize: a double free finds
 *     m 0, in any thread, cached or on its page; an underflow changes the
 *     word's top byte, the byte right before the block) and its repeat
 *     (overflow: a write of even one byte past n changes it), then mark the
 *     word free. All of it is on two lines: b's own (or the one before it)
 *     and the one holding the end of the request; the block's last bytes
 *     are not read.
 *   - malloc_usable_size is n, read back from the word: all of it may be
 *     written, and the block's last 8 bytes (the next block's word) never
 *     are;
 *   - every block has room for its word before it: a page of a class up to
 *     HAK_GUARD_BLOCK_MAX (one slice) gives its first block as a guard,
 *     never handed out, whose last 8 bytes are the next block's word;
 *     pages of bigger classes (several slices) start HAK_PAGE_LEAD bytes
 *     into their first slice (segment.c, page_init), and large and huge
 *     blocks HAK_HEAD bytes (or their alignment) into their run or mapping.
 * The word is read by other threads freeing the block: it is stored whole
 * (one aligned 8-byte store) and only ever holds a valid value, m 0 or the
 * m of the block's current request.
 *
 * The key is per process (from the kernel's AT_RANDOM bytes), so the value
 * a given block's word must hold cannot be written by a constant. */
#ifndef HAK_CANARY_H
#define HAK_CANARY_H

#include "hak_internal.h"

#include <string.h>

#ifndef HAK_SECURE
#define HAK_SECURE 0
#endif

#if HAK_SECURE
#define HAK_TAIL 16u /* bytes of every block after the largest request it serves */
/* Classes up to this size (one-slice pages) give their page's first block
 * as a guard; bigger ones start their pages HAK_PAGE_LEAD bytes in. */
#define HAK_GUARD_BLOCK_MAX 8192u

extern uint64_t hak_canary_key HAK_HIDDEN;

/* The bytes an off-by-one write hits are kept in 0x80..0xbf, so a NUL, an
 * ASCII character or 0xff written there always changes them (a keyed byte
 * would match 1 write in 256): the word's top byte (the byte right before
 * the block: an underflow) and low byte (the repeat's first byte, right
 * after the request: an overflow). m << 8 leaves both as they are (m < 2^48). */
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
HAK_INLINE uint64_t *word_of(const void *b) { return (uint64_t *)((uintptr_t)b - 8); }
HAK_INLINE uint64_t word_load(const void *b) { return __atomic_load_n(word_of(b), __ATOMIC_RELAXED); }
/* The m a word w of block b stands for, rotated so that a word whose low
 * byte differs (x's low byte lands in the top bits) is out of every range:
 * 0 free, 16..bsize handed out for m - 16 bytes (the repeat at b + m - 16:
 * malloc needs n only, not the block size). */
HAK_INLINE uint64_t word_code(uint64_t w, uint64_t k) { uint64_t x = w ^ k; return (x >> 8) | (x << 56); }
HAK_INLINE uint64_t canary_code(const void *b) { return word_code(word_load(b), canary_of(b)); }
HAK_INLINE uint64_t canary_code_of(size_t n) { return (uint64_t)(n + 16) << 8; }

HAK_INLINE void canary_mark_free(void *b, size_t bsize) {
  (void)bsize;
  __atomic_store_n(word_of(b), canary_of(b), __ATOMIC_RELAXED);
}

/* b (bsize bytes) handed out for n bytes, n + 16 <= bsize. */
HAK_INLINE void canary_seal(void *b, size_t bsize, size_t n) {
  (void)bsize;
  uint64_t w = canary_of(b) ^ canary_code_of(n);
  __atomic_store_n(word_of(b), w, __ATOMIC_RELAXED);
  memcpy((char *)b + n, &w, 8);
}

/* The same for a block known to be free (popped from a thread cache: every
 * block enters one marked free): the free mark is the block's canary, read
 * instead of computed again (the line is written next anyway). A free mark
 * overwritten while the block was cached is carried into the seal, so the
 * block's next free reports it, where a recomputed canary would have hidden
 * it. */
HAK_INLINE void canary_seal_free(void *b, size_t bsize, size_t n) {
  (void)bsize;
  uint64_t w = word_load(b) ^ canary_code_of(n);
  __atomic_store_n(word_of(b), w, __ATOMIC_RELAXED);
  memcpy((char *)b + n, &w, 8);
}

/* b is handed out and its word and the repeat after the request are
 * intact; *k gets b's canary and *m its m (n + 16, valid only when true).
 * The one copy of the word check: free's paths, realloc and the checks of
 * heap/canary.c all come here. */
HAK_INLINE bool canary_word_ok(const void *b, size_t bsize, uint64_t *k, uint64_t *m) {
  uint64_t w = word_load(b), f;
  *k = canary_of(b);
  *m = word_code(w, *k);
  if (HAK_UNLIKELY(*m - 16 > bsize - 16)) return false; /* free (0), or overwritten */
  memcpy(&f, (const char *)b + *m - 16, 8);
  return f == w;
}
HAK_INLINE bool canary_intact(const void *b, size_t bsize) {
  uint64_t k, m;
  return canary_word_ok(b, bsize, &k, &m);
}

/* Bytes the caller of a block handed out for n may use. */
HAK_INLINE size_t canary_request(const void *b, size_t bsize) { (void)bsize; return (size_t)canary_code(b) - 16; }

/* Blocks carved from a page (heap.c, user_heap.c): their words say free. */
void canary_carved(uint8_t *first, unsigned k, size_t bsize) HAK_HIDDEN;
/* A page about to carve its first block: a class up to
 * HAK_GUARD_BLOCK_MAX gives that block as its guard (not written: its last
 * 8 bytes are the next block's word). */
HAK_INLINE void canary_guard_page(hak_page_t *p) {
  if (p->bump == p->start && p->bsize <= HAK_GUARD_BLOCK_MAX && p->bump < p->end) p->bump += p->bsize;
}
/* Sets the key once (before the first word is written). */
void canary_key_ensure(void) HAK_HIDDEN;

/* Large and huge blocks start HAK_HEAD bytes (or their alignment, if more)
 * into their run or mapping: the word before the block is theirs, and the
 * repeat goes after the request the same way (usable: the bytes from the
 * block to the end of its usable area). */
#define HAK_HEAD 16u
HAK_INLINE void canary_seal_large(void *b, size_t usable, size_t n) { canary_seal(b, usable, n); }
HAK_INLINE bool canary_intact_large(const void *b, size_t usable) { return canary_intact(b, usable); }
#else
#define HAK_TAIL 0u
#define HAK_HEAD 0u
#endif

#endif
