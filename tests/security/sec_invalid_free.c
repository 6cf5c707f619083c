/* sec_invalid_free - free() of pointers the allocator never handed out: a
 * stack array, alloca memory, the inside of a block, a misaligned pointer, a
 * page far from any heap, and the allocator's own metadata (HAKMEM: the
 * segment header before a block's page; glibc: a chunk header). See
 * sec_harness.h for the verdicts. */
#include "sec_harness.h"

#include <alloca.h>
#include <sys/mman.h>

static void if_stack(void)
{
    char buf[256];
    memset(buf, 0, sizeof buf);
    free(ht_hide_ptr(buf + 64));
    sec_churn(32);
}

static void if_alloca(void)
{
    char *p = alloca(ht_hide(200));
    memset(p, 0, 200);
    free(ht_hide_ptr(p));
    sec_churn(32);
}

static void if_interior(void)
{
    char *p = malloc(ht_hide(256));
    memset(p, 0, 256);
    free(ht_hide_ptr(p + 64));
    sec_churn(256);
}

static void if_unaligned(void)
{
    char *p = malloc(ht_hide(256));
    memset(p, 0, 256);
    free(ht_hide_ptr(p + 1));
    sec_churn(256);
}

/* a readable page (zeroed), nowhere near a heap */
static void if_far(void)
{
    char *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) _exit(2);
    free(ht_hide_ptr(m + 4096));
    sec_churn(32);
}

static void if_metadata(void)
{
    char *p = malloc(ht_hide(64));
    char *meta;
    if (sec_on_hakmem()) /* the segment header: page records */
        meta = (char *)(((uintptr_t)p & ~(uintptr_t)((2u << 20) - 1)) + 1024);
    else /* the chunk header (size field) */
        meta = p - 16;
    free(ht_hide_ptr(meta));
    sec_churn(64);
}

static const sec_case_t cases[] = {
    {"invalid-free-stack", if_stack},
    {"invalid-free-alloca", if_alloca},
    {"invalid-free-interior", if_interior},
    {"invalid-free-unaligned", if_unaligned},
    {"invalid-free-far", if_far},
    {"invalid-free-metadata", if_metadata},
};

SEC_MAIN(cases)
