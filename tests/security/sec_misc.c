/* sec_misc - write after free, read of a zero-size block, an impossibly
 * large malloc, and an overflowing calloc. For the last two the defined
 * answer (NULL with errno ENOMEM) counts as detected. See sec_harness.h. */
#include "sec_harness.h"

#include <stdint.h>

/* 16 bytes written into a freed block (where free lists keep their links),
 * then the class is used again */
static void write_after_free(void)
{
    char *p = malloc(ht_hide(40));
    memset(p, 0, 40);
    free(p);
    memset(ht_hide_ptr(p), 'A', 16);
    sec_churn(40);
}

static void zero_size_read(void)
{
    volatile char *p = malloc(ht_hide(0));
    if (!p) _exit(2);
    char sum = 0;
    for (int i = 0; i < 16; i++) sum += p[i];
    (void)sum;
    free((void *)p);
    sec_churn(16);
}

static void huge_malloc(void)
{
    errno = 0;
    void *p = malloc(ht_hide(SIZE_MAX - 4096));
    if (!p && errno == ENOMEM) sec_handled("malloc(SIZE_MAX - 4096) = NULL, ENOMEM");
    free(p);
}

static void calloc_overflow(void)
{
    errno = 0;
    void *p = calloc(ht_hide(SIZE_MAX / 8 + 2), ht_hide(16));
    if (!p && errno == ENOMEM) sec_handled("calloc(SIZE_MAX/8+2, 16) = NULL, ENOMEM");
    free(p);
}

static const sec_case_t cases[] = {
    {"write-after-free", write_after_free},
    {"zero-size-read", zero_size_read},
    {"impossible-malloc", huge_malloc},
    {"calloc-overflow", calloc_overflow},
};

SEC_MAIN(cases)
