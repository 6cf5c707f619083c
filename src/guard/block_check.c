/* block_check.c — the block-start tests of block_check.h. The table is data
 * computed once from hak_class_size (size_class.c): for each class,
 * size = 2^shift * o, inv = o^-1 mod 2^64 (Python: pow(o, -1, 2**64)), and
 * fast_lim = 65536 / size for sizes up to 8 KiB (one-slice pages), else 0,
 * and the size itself.
 * (guard sits below heap, but reads the TLS heap pointer to know whose page
 * it looks at.) */
#include "guard/block_check.h"
#include "guard/registry.h"
#include "heap/heap.h"

const hak_block_check_t hak_block_check[HAK_NCLASSES + 2] = {
  {0, 0, 0, 0}, /* v = 0: not a small block (cache capacity 0, never checked) */
  {0x0000000000000001ull, 4096, 4, 16}, /* class 0: 16 B */
  {0x0000000000000001ull, 2048, 5, 32}, /* class 1: 32 B */
  {0xaaaaaaaaaaaaaaabull, 1365, 4, 48}, /* class 2: 48 B */
  {0x0000000000000001ull, 1024, 6, 64}, /* class 3: 64 B */
  {0xcccccccccccccccdull, 819, 4, 80}, /* class 4: 80 B */
  {0xaaaaaaaaaaaaaaabull, 682, 5, 96}, /* class 5: 96 B */
  {0x6db6db6db6db6db7ull, 585, 4, 112}, /* class 6: 112 B */
  {0x0000000000000001ull, 512, 7, 128}, /* class 7: 128 B */
  {0x8e38e38e38e38e39ull, 455, 4, 144}, /* class 8: 144 B */
  {0xcccccccccccccccdull, 409, 5, 160}, /* class 9: 160 B */
  {0x2e8ba2e8ba2e8ba3ull, 372, 4, 176}, /* class 10: 176 B */
  {0xaaaaaaaaaaaaaaabull, 341, 6, 192}, /* class 11: 192 B */
  {0x4ec4ec4ec4ec4ec5ull, 315, 4, 208}, /* class 12: 208 B */
  {0x6db6db6db6db6db7ull, 292, 5, 224}, /* class 13: 224 B */
  {0xeeeeeeeeeeeeeeefull, 273, 4, 240}, /* class 14: 240 B */
  {0x0000000000000001ull, 256, 8, 256}, /* class 15: 256 B */
  {0x8e38e38e38e38e39ull, 227, 5, 288}, /* class 16: 288 B */
  {0xcccccccccccccccdull, 204, 6, 320}, /* class 17: 320 B */
  {0x2e8ba2e8ba2e8ba3ull, 186, 5, 352}, /* class 18: 352 B */
  {0xaaaaaaaaaaaaaaabull, 170, 7, 384}, /* class 19: 384 B */
  {0x4ec4ec4ec4ec4ec5ull, 157, 5, 416}, /* class 20: 416 B */
  {0x6db6db6db6db6db7ull, 146, 6, 448}, /* class 21: 448 B */
  {0xeeeeeeeeeeeeeeefull, 136, 5, 480}, /* class 22: 480 B */
  {0x0000000000000001ull, 128, 9, 512}, /* class 23: 512 B */
  {0x8e38e38e38e38e39ull, 113, 6, 576}, /* class 24: 576 B */
  {0xcccccccccccccccdull, 102, 7, 640}, /* class 25: 640 B */
  {0x2e8ba2e8ba2e8ba3ull, 93, 6, 704}, /* class 26: 704 B */
  {0xaaaaaaaaaaaaaaabull, 85, 8, 768}, /* class 27: 768 B */
  {0x4ec4ec4ec4ec4ec5ull, 78, 6, 832}, /* class 28: 832 B */
  {0x6db6db6db6db6db7ull, 73, 7, 896}, /* class 29: 896 B */
  {0xeeeeeeeeeeeeeeefull, 68, 6, 960}, /* class 30: 960 B */
  {0x0000000000000001ull, 64, 10, 1024}, /* class 31: 1024 B */
  {0x8e38e38e38e38e39ull, 56, 7, 1152}, /* class 32: 1152 B */
  {0xcccccccccccccccdull, 51, 8, 1280}, /* class 33: 1280 B */
  {0x2e8ba2e8ba2e8ba3ull, 46, 7, 1408}, /* class 34: 1408 B */
  {0xaaaaaaaaaaaaaaabull, 42, 9, 1536}, /* class 35: 1536 B */
  {0x4ec4ec4ec4ec4ec5ull, 39, 7, 1664}, /* class 36: 1664 B */
  {0x6db6db6db6db6db7ull, 36, 8, 1792}, /* class 37: 1792 B */
  {0xeeeeeeeeeeeeeeefull, 34, 7, 1920}, /* class 38: 1920 B */
  {0x0000000000000001ull, 32, 11, 2048}, /* class 39: 2048 B */
  {0x8e38e38e38e38e39ull, 28, 8, 2304}, /* class 40: 2304 B */
  {0xcccccccccccccccdull, 25, 9, 2560}, /* class 41: 2560 B */
  {0x2e8ba2e8ba2e8ba3ull, 23, 8, 2816}, /* class 42: 2816 B */
  {0xaaaaaaaaaaaaaaabull, 21, 10, 3072}, /* class 43: 3072 B */
  {0x4ec4ec4ec4ec4ec5ull, 19, 8, 3328}, /* class 44: 3328 B */
  {0x6db6db6db6db6db7ull, 18, 9, 3584}, /* class 45: 3584 B */
  {0xeeeeeeeeeeeeeeefull, 17, 8, 3840}, /* class 46: 3840 B */
  {0x0000000000000001ull, 16, 12, 4096}, /* class 47: 4096 B */
  {0x8e38e38e38e38e39ull, 14, 9, 4608}, /* class 48: 4608 B */
  {0xcccccccccccccccdull, 12, 10, 5120}, /* class 49: 5120 B */
  {0x2e8ba2e8ba2e8ba3ull, 11, 9, 5632}, /* class 50: 5632 B */
  {0xaaaaaaaaaaaaaaabull, 10, 11, 6144}, /* class 51: 6144 B */
  {0x4ec4ec4ec4ec4ec5ull, 9, 9, 6656}, /* class 52: 6656 B */
  {0x6db6db6db6db6db7ull, 9, 10, 7168}, /* class 53: 7168 B */
  {0xeeeeeeeeeeeeeeefull, 8, 9, 7680}, /* class 54: 7680 B */
  {0x0000000000000001ull, 8, 13, 8192}, /* class 55: 8192 B */
  {0x8e38e38e38e38e39ull, 0, 10, 9216}, /* class 56: 9216 B */
  {0xcccccccccccccccdull, 0, 11, 10240}, /* class 57: 10240 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 10, 11264}, /* class 58: 11264 B */
  {0xaaaaaaaaaaaaaaabull, 0, 12, 12288}, /* class 59: 12288 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 10, 13312}, /* class 60: 13312 B */
  {0x6db6db6db6db6db7ull, 0, 11, 14336}, /* class 61: 14336 B */
  {0xeeeeeeeeeeeeeeefull, 0, 10, 15360}, /* class 62: 15360 B */
  {0x0000000000000001ull, 0, 14, 16384}, /* class 63: 16384 B */
  {0x8e38e38e38e38e39ull, 0, 11, 18432}, /* class 64: 18432 B */
  {0xcccccccccccccccdull, 0, 12, 20480}, /* class 65: 20480 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 11, 22528}, /* class 66: 22528 B */
  {0xaaaaaaaaaaaaaaabull, 0, 13, 24576}, /* class 67: 24576 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 11, 26624}, /* class 68: 26624 B */
  {0x6db6db6db6db6db7ull, 0, 12, 28672}, /* class 69: 28672 B */
  {0xeeeeeeeeeeeeeeefull, 0, 11, 30720}, /* class 70: 30720 B */
  {0x0000000000000001ull, 0, 15, 32768}, /* class 71: 32768 B */
  {0x8e38e38e38e38e39ull, 0, 12, 36864}, /* class 72: 36864 B */
  {0xcccccccccccccccdull, 0, 13, 40960}, /* class 73: 40960 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 12, 45056}, /* class 74: 45056 B */
  {0xaaaaaaaaaaaaaaabull, 0, 14, 49152}, /* class 75: 49152 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 12, 53248}, /* class 76: 53248 B */
  {0x6db6db6db6db6db7ull, 0, 13, 57344}, /* class 77: 57344 B */
  {0xeeeeeeeeeeeeeeefull, 0, 12, 61440}, /* class 78: 61440 B */
  {0x0000000000000001ull, 0, 16, 65536}, /* class 79: 65536 B */
  {0x8e38e38e38e38e39ull, 0, 13, 73728}, /* class 80: 73728 B */
  {0xcccccccccccccccdull, 0, 14, 81920}, /* class 81: 81920 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 13, 90112}, /* class 82: 90112 B */
  {0xaaaaaaaaaaaaaaabull, 0, 15, 98304}, /* class 83: 98304 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 13, 106496}, /* class 84: 106496 B */
  {0x6db6db6db6db6db7ull, 0, 14, 114688}, /* class 85: 114688 B */
  {0xeeeeeeeeeeeeeeefull, 0, 13, 122880}, /* class 86: 122880 B */
  {0x0000000000000001ull, 0, 17, 131072}, /* class 87: 131072 B */
  {0x8e38e38e38e38e39ull, 0, 14, 147456}, /* class 88: 147456 B */
  {0xcccccccccccccccdull, 0, 15, 163840}, /* class 89: 163840 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 14, 180224}, /* class 90: 180224 B */
  {0xaaaaaaaaaaaaaaabull, 0, 16, 196608}, /* class 91: 196608 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 14, 212992}, /* class 92: 212992 B */
  {0x6db6db6db6db6db7ull, 0, 15, 229376}, /* class 93: 229376 B */
  {0xeeeeeeeeeeeeeeefull, 0, 14, 245760}, /* class 94: 245760 B */
  {0x0000000000000001ull, 0, 18, 262144}, /* class 95: 262144 B */
  {0, 0, 0, 0}, /* v = HAK_CLASS_NONE + 1: large blocks (capacity 0) */
};

bool block_is_live_start(const void *p) {
  if (!registry_has(p)) return false;
  hak_segment_t *s = segment_of(p);
  if (s->magic != HAK_SEG_MAGIC || s->kind != HAK_SEG_SMALL) return false;
  hak_page_t *pg = __atomic_load_n(&s->slice_page[slice_index(p)], __ATOMIC_ACQUIRE);
  if (!pg || pg->cls >= HAK_NCLASSES) return false;
  const uint8_t *b = (const uint8_t *)p;
  /* Only the owner reads bump (the owner writes it); others bound by the
   * page's end, fixed for the page's life. */
  hak_heap_t *owner = atomic_load_explicit(&pg->owner, memory_order_relaxed);
  bool own = owner != NULL && owner == hak_tls.heap;
  if (b < pg->start || b >= (own ? pg->bump : pg->end)) return false;
  return block_index((uint64_t)(b - pg->start), &hak_block_check[pg->cls + 1]) < pg->capacity;
}
