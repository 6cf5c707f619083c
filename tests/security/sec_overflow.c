/* sec_overflow - writes past the end (overflow) or before the start
 * (underflow) of a block, by 1 and by 32 bytes, by a plain store and by
 * memcpy, on a small block (40 bytes) and a large one (200000 bytes); then
 * the block is freed and the size class used again, so that a check on free
 * or on a later malloc can fire. See sec_harness.h for the verdicts. */
#include "sec_harness.h"

static const char junk[64] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde";

static void smash(size_t n, long off, size_t len, int by_memcpy)
{
    char *p = malloc(ht_hide(n));
    memset(p, 0, n);
    char *at = ht_hide_ptr(p + off);
    if (by_memcpy) memcpy(at, junk, ht_hide(len));
    else for (size_t i = 0; i < len; i++) ((volatile char *)at)[i] = junk[i];
    free(ht_hide_ptr(p));
    sec_churn(n);
}

#define SMALL 40
#define LARGE 200000
static void of1s(void) { smash(SMALL, SMALL, 1, 0); }
static void of1sm(void) { smash(SMALL, SMALL, 1, 1); }
static void of32s(void) { smash(SMALL, SMALL, 32, 0); }
static void of32sm(void) { smash(SMALL, SMALL, 32, 1); }
static void of1l(void) { smash(LARGE, LARGE, 1, 0); }
static void of1lm(void) { smash(LARGE, LARGE, 1, 1); }
static void of32l(void) { smash(LARGE, LARGE, 32, 0); }
static void of32lm(void) { smash(LARGE, LARGE, 32, 1); }
static void uf1s(void) { smash(SMALL, -1, 1, 0); }
static void uf1sm(void) { smash(SMALL, -1, 1, 1); }
static void uf32s(void) { smash(SMALL, -32, 32, 0); }
static void uf32sm(void) { smash(SMALL, -32, 32, 1); }
static void uf1l(void) { smash(LARGE, -1, 1, 0); }
static void uf1lm(void) { smash(LARGE, -1, 1, 1); }
static void uf32l(void) { smash(LARGE, -32, 32, 0); }
static void uf32lm(void) { smash(LARGE, -32, 32, 1); }

static const sec_case_t cases[] = {
    {"overflow-1-small", of1s},    {"overflow-1-small-memcpy", of1sm},
    {"overflow-32-small", of32s},  {"overflow-32-small-memcpy", of32sm},
    {"overflow-1-large", of1l},    {"overflow-1-large-memcpy", of1lm},
    {"overflow-32-large", of32l},  {"overflow-32-large-memcpy", of32lm},
    {"underflow-1-small", uf1s},   {"underflow-1-small-memcpy", uf1sm},
    {"underflow-32-small", uf32s}, {"underflow-32-small-memcpy", uf32sm},
    {"underflow-1-large", uf1l},   {"underflow-1-large-memcpy", uf1lm},
    {"underflow-32-large", uf32l}, {"underflow-32-large-memcpy", uf32lm},
};

SEC_MAIN(cases)
