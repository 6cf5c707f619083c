/* zero.h — calloc's zeroing of a small block it has just taken from a class.
 *
 * Why not memset(p, 0, n) below 129 bytes: the call goes through the PLT, and
 * glibc's memset for sizes under one vector (64 bytes in its AVX-512 variant,
 * the one this EPYC gets) writes with masked stores, slow on AMD: callocs of
 * 16-48 bytes freed at once cost 1.5x what 64-byte ones did. Here the block
 * gets eight (up to 128 bytes) or four (up to 64) 16-byte stores at offsets
 * min(16k, last), last the offset of the request's last 16-byte word: the same
 * stores for every size of the tier, no branch on the size inside it; stores
 * past that word land on it again. Offsets are rounded to 16 bytes: in the
 * fast and standard builds every class size is a multiple of 16 and blocks
 * start 16-aligned, so the block holds the request rounded up to 16 (HAK_TAIL
 * is 0, no word after the request). The secure build keeps the repeat right
 * after the request (heap/canary.h): it zeroes exactly n bytes with memset.
 * One tier of eight stores for every size to 128 was 0.66x the CPU time on
 * callocs of random sizes 8-128 (memset's size branches mispredict) but
 * 1.12-1.17x on callocs of constant 64 or 128 bytes: eight stores where
 * memset makes one or two; two tiers keep the constant sizes (the common
 * case: a call site callocs one structure) at least as fast as memset.
 * Figures: the commit that added this file. */
#ifndef HAK_FRONT_ZERO_H
#define HAK_FRONT_ZERO_H

#include "hak_internal.h"
#include "heap/canary.h"

#include <string.h>

/* Requests up to this size take the 16-byte stores. */
#define HAK_ZERO_INLINE_MAX ((size_t)128)

#if !HAK_SECURE
/* p: a block of a class, n <= max bytes asked for (0 included: the block
 * still has 16); max 64 or 128, a constant. */
HAK_INLINE void zero_block_upto(void *p, size_t n, size_t max) {
  size_t last = (n - 1) & ~(size_t)15 & -(size_t)(n != 0); /* n == 0: 0 */
  char *b = (char *)p;
#pragma GCC unroll 8
  for (size_t k = 0; k < max; k += 16)
    memset(b + (k < last ? k : last), 0, 16); /* one 16-byte store */
}
#endif

/* Zeroes the n bytes calloc asked of the class block p. */
HAK_INLINE void zero_class_block(void *p, size_t n) {
#if !HAK_SECURE
  if (HAK_LIKELY(n <= 64)) {
    zero_block_upto(p, n, 64);
    return;
  }
  if (HAK_LIKELY(n <= HAK_ZERO_INLINE_MAX)) {
    zero_block_upto(p, n, HAK_ZERO_INLINE_MAX);
    return;
  }
#endif
  memset(p, 0, n);
}

#endif
