/* test_canary_bytes - the secure build's keyed word before each block and
 * its repeat after the request (src/heap/canary.h), by themselves: for 32
 * keys, every small class up to 1 KiB and every request size it serves, a
 * block sealed for n bytes
 *   - reads back intact, with n as its request;
 *   - has the byte right after the request (an off-by-one overflow) and the
 *     byte right before the block (an off-by-one underflow) in 0x80..0xbf,
 *     whether handed out or free: a NUL, an ASCII character or 0xff written
 *     there always changes them;
 *   - is no longer intact after any value outside that range is written at
 *     n or right before the block (one inside it may go unseen, with a
 *     keyed chance), nor once marked free.
 * Before the bytes were kept in that range, a keyed byte let one write in 256
 * through (test_security_secure failed about 1 run in 70). */
#define HAK_SECURE 1
#include "hak_test.h"
#include "heap/canary.h"

uint64_t hak_canary_key;

static int in_range(unsigned char c) { return c >= 0x80 && c <= 0xbf; }

/* Every byte value outside 0x80..0xbf written at *at makes b not intact. */
static void check_byte(unsigned char *b, size_t bsize, unsigned char *at, int k, size_t n, const char *where)
{
    unsigned char keep = *at;
    for (unsigned v = 0; v < 256; v++) {
        if (in_range((unsigned char)v)) continue;
        *at = (unsigned char)v;
        CHECK(!canary_intact(b, bsize), "key %d, %zu bytes of %zu: 0x%02x written %s not seen", k, n, bsize, v, where);
    }
    *at = keep;
}

int main(void)
{
    static _Alignas(64) unsigned char buf[4096];
    uint64_t x = 0x9e3779b97f4a7c15ull, checked = 0;
    for (int k = 0; k < 32; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        hak_canary_key = x;
        for (size_t bsize = 16; bsize <= 1024; bsize += 16) {
            unsigned char *b = buf + 1024 + 16 * (size_t)(k % 8); /* addresses vary with the key too */
            canary_mark_free(b, bsize);
            CHECK(in_range(b[-1]), "key %d, block of %zu free: byte before it 0x%02x", k, bsize, b[-1]);
            CHECK(canary_code(b) == 0, "free block of %zu reads as in use", bsize);
            CHECK(!canary_intact(b, bsize), "free block of %zu reads as intact", bsize);
            for (size_t n = 0; n + HAK_TAIL <= bsize; n++) {
                memset(b - 8, 0x11, bsize + 8); /* the program's bytes, not an earlier seal's */
                canary_seal(b, bsize, n);
                CHECK(canary_intact(b, bsize), "key %d, %zu bytes of %zu: not intact when sealed", k, n, bsize);
                CHECK(canary_request(b, bsize) == n, "key %d: request %zu read back as %zu", k, n,
                      canary_request(b, bsize));
                CHECK(in_range(b[n]), "key %d, %zu bytes of %zu: byte after the request 0x%02x", k, n, bsize, b[n]);
                CHECK(in_range(b[-1]), "key %d, %zu bytes of %zu: byte before the block 0x%02x", k, n, bsize, b[-1]);
                check_byte(b, bsize, b + n, k, n, "after it");
                check_byte(b, bsize, b - 1, k, n, "before it");
                CHECK(canary_intact(b, bsize), "key %d, %zu bytes of %zu: not intact once restored", k, n, bsize);
                checked++;
            }
        }
    }
    printf("test_canary_bytes: OK (%llu sealed blocks, each byte value outside 0x80..0xbf written after and before each)\n",
           (unsigned long long)checked);
    return 0;
}
