/* block_check.c — the block-start tests of block_check.h. The table is data
 * computed once from hak_class_size (size_class.c): for each class,
 * size = 2^shift * o, inv = o^-1 mod 2^64 (Python: pow(o, -1, 2**64)), and
 * fast_lim = 65536 / size for sizes up to 8 KiB (one-slice pages), else 0,
 * the size itself, and for the fast test mul = 2^32 / size + 1 (integer
 * division) and fast_bound = fast_lim * (mul * size - 2^32) (Python:
 * m = 2**32 // size + 1; b = lim * (m * size - 2**32)); test_block_check
 * checks every entry against hak_class_size and the test against the
 * division for every offset of a slice.
 * (guard sits below heap, but reads the TLS heap pointer to know whose page
 * it looks at.) */
#include "guard/block_check.h"
#include "guard/registry.h"
#include "heap/heap.h"

const hak_block_check_t hak_block_check[HAK_NCLASSES + 2] = {
  {0, 0, 0, 0, 0, 0}, /* v = 0: not a small block (cache capacity 0, never checked) */
  {0x0000000000000001ull, 4096, 4, 16, 0x10000001u, 65536}, /* class 0: 16 B */
  {0x0000000000000001ull, 2048, 5, 32, 0x08000001u, 65536}, /* class 1: 32 B */
  {0xaaaaaaaaaaaaaaabull, 1365, 4, 48, 0x05555556u, 43680}, /* class 2: 48 B */
  {0x0000000000000001ull, 1024, 6, 64, 0x04000001u, 65536}, /* class 3: 64 B */
  {0xcccccccccccccccdull, 819, 4, 80, 0x03333334u, 52416}, /* class 4: 80 B */
  {0xaaaaaaaaaaaaaaabull, 682, 5, 96, 0x02aaaaabu, 21824}, /* class 5: 96 B */
  {0x6db6db6db6db6db7ull, 585, 4, 112, 0x02492493u, 46800}, /* class 6: 112 B */
  {0x0000000000000001ull, 512, 7, 128, 0x02000001u, 65536}, /* class 7: 128 B */
  {0x8e38e38e38e38e39ull, 455, 4, 144, 0x01c71c72u, 14560}, /* class 8: 144 B */
  {0xcccccccccccccccdull, 409, 5, 160, 0x0199999au, 26176}, /* class 9: 160 B */
  {0x2e8ba2e8ba2e8ba3ull, 372, 4, 176, 0x01745d18u, 47616}, /* class 10: 176 B */
  {0xaaaaaaaaaaaaaaabull, 341, 6, 192, 0x01555556u, 43648}, /* class 11: 192 B */
  {0x4ec4ec4ec4ec4ec5ull, 315, 4, 208, 0x013b13b2u, 50400}, /* class 12: 208 B */
  {0x6db6db6db6db6db7ull, 292, 5, 224, 0x0124924au, 56064}, /* class 13: 224 B */
  {0xeeeeeeeeeeeeeeefull, 273, 4, 240, 0x01111112u, 61152}, /* class 14: 240 B */
  {0x0000000000000001ull, 256, 8, 256, 0x01000001u, 65536}, /* class 15: 256 B */
  {0x8e38e38e38e38e39ull, 227, 5, 288, 0x00e38e39u, 7264}, /* class 16: 288 B */
  {0xcccccccccccccccdull, 204, 6, 320, 0x00cccccdu, 13056}, /* class 17: 320 B */
  {0x2e8ba2e8ba2e8ba3ull, 186, 5, 352, 0x00ba2e8cu, 23808}, /* class 18: 352 B */
  {0xaaaaaaaaaaaaaaabull, 170, 7, 384, 0x00aaaaabu, 21760}, /* class 19: 384 B */
  {0x4ec4ec4ec4ec4ec5ull, 157, 5, 416, 0x009d89d9u, 25120}, /* class 20: 416 B */
  {0x6db6db6db6db6db7ull, 146, 6, 448, 0x00924925u, 28032}, /* class 21: 448 B */
  {0xeeeeeeeeeeeeeeefull, 136, 5, 480, 0x00888889u, 30464}, /* class 22: 480 B */
  {0x0000000000000001ull, 128, 9, 512, 0x00800001u, 65536}, /* class 23: 512 B */
  {0x8e38e38e38e38e39ull, 113, 6, 576, 0x0071c71du, 36160}, /* class 24: 576 B */
  {0xcccccccccccccccdull, 102, 7, 640, 0x00666667u, 39168}, /* class 25: 640 B */
  {0x2e8ba2e8ba2e8ba3ull, 93, 6, 704, 0x005d1746u, 11904}, /* class 26: 704 B */
  {0xaaaaaaaaaaaaaaabull, 85, 8, 768, 0x00555556u, 43520}, /* class 27: 768 B */
  {0x4ec4ec4ec4ec4ec5ull, 78, 6, 832, 0x004ec4edu, 44928}, /* class 28: 832 B */
  {0x6db6db6db6db6db7ull, 73, 7, 896, 0x00492493u, 46720}, /* class 29: 896 B */
  {0xeeeeeeeeeeeeeeefull, 68, 6, 960, 0x00444445u, 47872}, /* class 30: 960 B */
  {0x0000000000000001ull, 64, 10, 1024, 0x00400001u, 65536}, /* class 31: 1024 B */
  {0x8e38e38e38e38e39ull, 56, 7, 1152, 0x0038e38fu, 50176}, /* class 32: 1152 B */
  {0xcccccccccccccccdull, 51, 8, 1280, 0x00333334u, 52224}, /* class 33: 1280 B */
  {0x2e8ba2e8ba2e8ba3ull, 46, 7, 1408, 0x002e8ba3u, 5888}, /* class 34: 1408 B */
  {0xaaaaaaaaaaaaaaabull, 42, 9, 1536, 0x002aaaabu, 21504}, /* class 35: 1536 B */
  {0x4ec4ec4ec4ec4ec5ull, 39, 7, 1664, 0x00276277u, 54912}, /* class 36: 1664 B */
  {0x6db6db6db6db6db7ull, 36, 8, 1792, 0x0024924au, 55296}, /* class 37: 1792 B */
  {0xeeeeeeeeeeeeeeefull, 34, 7, 1920, 0x00222223u, 56576}, /* class 38: 1920 B */
  {0x0000000000000001ull, 32, 11, 2048, 0x00200001u, 65536}, /* class 39: 2048 B */
  {0x8e38e38e38e38e39ull, 28, 8, 2304, 0x001c71c8u, 57344}, /* class 40: 2304 B */
  {0xcccccccccccccccdull, 25, 9, 2560, 0x0019999au, 25600}, /* class 41: 2560 B */
  {0x2e8ba2e8ba2e8ba3ull, 23, 8, 2816, 0x001745d2u, 35328}, /* class 42: 2816 B */
  {0xaaaaaaaaaaaaaaabull, 21, 10, 3072, 0x00155556u, 43008}, /* class 43: 3072 B */
  {0x4ec4ec4ec4ec4ec5ull, 19, 8, 3328, 0x0013b13cu, 58368}, /* class 44: 3328 B */
  {0x6db6db6db6db6db7ull, 18, 9, 3584, 0x00124925u, 27648}, /* class 45: 3584 B */
  {0xeeeeeeeeeeeeeeefull, 17, 8, 3840, 0x00111112u, 60928}, /* class 46: 3840 B */
  {0x0000000000000001ull, 16, 12, 4096, 0x00100001u, 65536}, /* class 47: 4096 B */
  {0x8e38e38e38e38e39ull, 14, 9, 4608, 0x000e38e4u, 28672}, /* class 48: 4608 B */
  {0xcccccccccccccccdull, 12, 10, 5120, 0x000ccccdu, 12288}, /* class 49: 5120 B */
  {0x2e8ba2e8ba2e8ba3ull, 11, 9, 5632, 0x000ba2e9u, 16896}, /* class 50: 5632 B */
  {0xaaaaaaaaaaaaaaabull, 10, 11, 6144, 0x000aaaabu, 20480}, /* class 51: 6144 B */
  {0x4ec4ec4ec4ec4ec5ull, 9, 9, 6656, 0x0009d89eu, 27648}, /* class 52: 6656 B */
  {0x6db6db6db6db6db7ull, 9, 10, 7168, 0x00092493u, 46080}, /* class 53: 7168 B */
  {0xeeeeeeeeeeeeeeefull, 8, 9, 7680, 0x00088889u, 28672}, /* class 54: 7680 B */
  {0x0000000000000001ull, 8, 13, 8192, 0x00080001u, 65536}, /* class 55: 8192 B */
  {0x8e38e38e38e38e39ull, 0, 10, 9216, 0x00071c72u, 0}, /* class 56: 9216 B */
  {0xcccccccccccccccdull, 0, 11, 10240, 0x00066667u, 0}, /* class 57: 10240 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 10, 11264, 0x0005d175u, 0}, /* class 58: 11264 B */
  {0xaaaaaaaaaaaaaaabull, 0, 12, 12288, 0x00055556u, 0}, /* class 59: 12288 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 10, 13312, 0x0004ec4fu, 0}, /* class 60: 13312 B */
  {0x6db6db6db6db6db7ull, 0, 11, 14336, 0x0004924au, 0}, /* class 61: 14336 B */
  {0xeeeeeeeeeeeeeeefull, 0, 10, 15360, 0x00044445u, 0}, /* class 62: 15360 B */
  {0x0000000000000001ull, 0, 14, 16384, 0x00040001u, 0}, /* class 63: 16384 B */
  {0x8e38e38e38e38e39ull, 0, 11, 18432, 0x00038e39u, 0}, /* class 64: 18432 B */
  {0xcccccccccccccccdull, 0, 12, 20480, 0x00033334u, 0}, /* class 65: 20480 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 11, 22528, 0x0002e8bbu, 0}, /* class 66: 22528 B */
  {0xaaaaaaaaaaaaaaabull, 0, 13, 24576, 0x0002aaabu, 0}, /* class 67: 24576 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 11, 26624, 0x00027628u, 0}, /* class 68: 26624 B */
  {0x6db6db6db6db6db7ull, 0, 12, 28672, 0x00024925u, 0}, /* class 69: 28672 B */
  {0xeeeeeeeeeeeeeeefull, 0, 11, 30720, 0x00022223u, 0}, /* class 70: 30720 B */
  {0x0000000000000001ull, 0, 15, 32768, 0x00020001u, 0}, /* class 71: 32768 B */
  {0x8e38e38e38e38e39ull, 0, 12, 36864, 0x0001c71du, 0}, /* class 72: 36864 B */
  {0xcccccccccccccccdull, 0, 13, 40960, 0x0001999au, 0}, /* class 73: 40960 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 12, 45056, 0x0001745eu, 0}, /* class 74: 45056 B */
  {0xaaaaaaaaaaaaaaabull, 0, 14, 49152, 0x00015556u, 0}, /* class 75: 49152 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 12, 53248, 0x00013b14u, 0}, /* class 76: 53248 B */
  {0x6db6db6db6db6db7ull, 0, 13, 57344, 0x00012493u, 0}, /* class 77: 57344 B */
  {0xeeeeeeeeeeeeeeefull, 0, 12, 61440, 0x00011112u, 0}, /* class 78: 61440 B */
  {0x0000000000000001ull, 0, 16, 65536, 0x00010001u, 0}, /* class 79: 65536 B */
  {0x8e38e38e38e38e39ull, 0, 13, 73728, 0x0000e38fu, 0}, /* class 80: 73728 B */
  {0xcccccccccccccccdull, 0, 14, 81920, 0x0000cccdu, 0}, /* class 81: 81920 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 13, 90112, 0x0000ba2fu, 0}, /* class 82: 90112 B */
  {0xaaaaaaaaaaaaaaabull, 0, 15, 98304, 0x0000aaabu, 0}, /* class 83: 98304 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 13, 106496, 0x00009d8au, 0}, /* class 84: 106496 B */
  {0x6db6db6db6db6db7ull, 0, 14, 114688, 0x0000924au, 0}, /* class 85: 114688 B */
  {0xeeeeeeeeeeeeeeefull, 0, 13, 122880, 0x00008889u, 0}, /* class 86: 122880 B */
  {0x0000000000000001ull, 0, 17, 131072, 0x00008001u, 0}, /* class 87: 131072 B */
  {0x8e38e38e38e38e39ull, 0, 14, 147456, 0x000071c8u, 0}, /* class 88: 147456 B */
  {0xcccccccccccccccdull, 0, 15, 163840, 0x00006667u, 0}, /* class 89: 163840 B */
  {0x2e8ba2e8ba2e8ba3ull, 0, 14, 180224, 0x00005d18u, 0}, /* class 90: 180224 B */
  {0xaaaaaaaaaaaaaaabull, 0, 16, 196608, 0x00005556u, 0}, /* class 91: 196608 B */
  {0x4ec4ec4ec4ec4ec5ull, 0, 14, 212992, 0x00004ec5u, 0}, /* class 92: 212992 B */
  {0x6db6db6db6db6db7ull, 0, 15, 229376, 0x00004925u, 0}, /* class 93: 229376 B */
  {0xeeeeeeeeeeeeeeefull, 0, 14, 245760, 0x00004445u, 0}, /* class 94: 245760 B */
  {0x0000000000000001ull, 0, 18, 262144, 0x00004001u, 0}, /* class 95: 262144 B */
  {0, 0, 0, 0, 0, 0}, /* v = HAK_CLASS_NONE + 1: large blocks (capacity 0) */
};

bool block_is_live_start(const void *p) {
  if (!registry_has(p)) return false;
  hak_segment_t *s = segment_of(p);
  if (s->magic != HAK_SEG_MAGIC || s->kind != HAK_SEG_SMALL) return false;
  unsigned cls;
  return block_live_page(p, hak_tls.heap, &cls) != NULL;
}

