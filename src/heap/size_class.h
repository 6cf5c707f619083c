/* size_class.h — request size to size class, by table up to 1 KiB and by one
 * bit scan above. Classes: 16-byte steps to 128 B, then eight per doubling, so
 * above 128 B no class wastes more than 12.5% of the request; below that the
 * 16-byte alignment floor bounds the waste at 15 bytes. */
#ifndef HAK_SIZE_CLASS_H
#define HAK_SIZE_CLASS_H

#include "hak_internal.h"

/* A class's bin offset is where its cache sits in the thread's bins, in
 * bytes: (class + 1) * 16 (bins[0] is the "not ours" sentinel). The slice
 * map holds the same offsets, and the small-size table holds them instead
 * of class numbers, so malloc's fast path goes from size to cache with one
 * load and no arithmetic. */
#define HAK_BIN_BYTES 16u
HAK_INLINE unsigned bin_off_of_class(unsigned cls) { return (cls + 1) * HAK_BIN_BYTES; }
HAK_INLINE unsigned class_of_bin_off(unsigned off) { return off / HAK_BIN_BYTES - 1; }

extern const uint16_t hak_small_bin_tab[HAK_SMALL_TAB_MAX / 16 + 1] HAK_HIDDEN;
extern const uint32_t hak_class_size[HAK_NCLASSES + 1] HAK_HIDDEN;

/* Valid for 1024 < n <= HAK_MID_MAX. */
HAK_INLINE unsigned size_class_mid(size_t n) {
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
  return (b - 7u) * 8u + (unsigned)((n - 1) >> (b - 3u));
}

/* Valid for n <= HAK_MID_MAX (n == 0 maps to the smallest class). */
HAK_INLINE unsigned size_class_of(size_t n) {
  if (HAK_LIKELY(n <= HAK_SMALL_TAB_MAX)) return class_of_bin_off(hak_small_bin_tab[(n + 15) >> 4]);
  return size_class_mid(n);
}

/* Slices a page of this class spans: one for blocks up to 8 KiB, eight
 * blocks' worth up to 32 KiB so the tail waste stays small, four up to 64
 * KiB and two above (the tail past the last block is never touched, so it
 * costs address space, not memory; a 256 KiB class's page is 8 slices).
 * Two above 64 KiB: a page is its owner thread's, so each thread that uses
 * a class holds a page of it, and a page passed from thread to thread
 * (emptied and cut again with its block boundaries, or adopted) ends up
 * resident as far as the most blocks any of them took from it; with four
 * blocks of 64-256 KiB a page, a program whose threads take one or two each
 * (bench_stress 32 10 8: 448 blocks of 128 KiB and 77 of 256 KiB in 256
 * threads) made most of those pages resident whole. Two a page: stress
 * 0.88-0.93x the minor faults, 0.92-0.94x the peak RSS, 0.98-1.00x the CPU
 * time, its own clock unchanged (fast and standard builds, two CPUs and
 * one, 61 alternating pairs each); sizemix, large_mt unchanged. Two a page
 * from 32 KiB (one above 64 KiB) cost bench_prodcons 2 150000 16 64K,
 * whose producers take thousands of blocks of 32-64 KiB, 59% of its
 * throughput (page cuts and retirements). Classes above 32 KiB exist so
 * that blocks of one size land on the same pages again: as large pages of
 * their own, blocks of 32-64 KiB touched new memory nearly every time
 * (python3 scripts/bench.py --ab
 * --workloads sizemix,prodcons_mid --runs 16, A classes to 32 KiB, B to
 * 256 KiB, fast build: sizemix minor faults 0.80x, peak RSS 93.6 -> 70.0 MB,
 * CPU time 0.92x; prodcons_mid +48.7% (p=0.0008), RSS 133.8 -> 78.7 MB). */
HAK_INLINE unsigned class_slices(unsigned cls) {
  size_t b = hak_class_size[cls];
  if (b <= 8192) return 1;
  size_t n = b <= 32768 ? 8 : b <= 65536 ? 4 : 2;
  return (unsigned)((n * b + HAK_SLICE_SIZE - 1) >> HAK_SLICE_SHIFT);
}

#endif
