/* sec_double_free - the same block freed twice, in the ways programs do it:
 * small, medium (a mid size class) and large blocks; long after the first
 * free; interleaved with another free (a, b, a); the second free in another
 * thread; and after the block was handed out again and freed by its new
 * owner (a stale pointer). See sec_harness.h for the verdicts. */
#include "sec_harness.h"

#include <pthread.h>

static void twice(size_t n)
{
    char *p = malloc(ht_hide(n));
    p[0] = 1;
    free(p);
    free(ht_hide_ptr(p));
    sec_churn(n);
}

static void df_small(void) { twice(32); }
static void df_medium(void) { twice(6000); }
static void df_large(void) { twice(300000); }
static void df_huge(void) { twice(8u << 20); }

/* the block has long left the thread's cache when it is freed again */
static void df_delayed(void)
{
    enum { N = 2000 };
    static void *v[N];
    char *p = malloc(ht_hide(48));
    for (int i = 0; i < N; i++) v[i] = malloc(ht_hide(48));
    free(p);
    for (int i = 0; i < N; i++) free(v[i]);
    sec_churn(48);
    sec_churn(96);
    free(ht_hide_ptr(p));
    sec_churn(48);
}

static void df_interleaved(void)
{
    void *a = malloc(ht_hide(64)), *b = malloc(ht_hide(64));
    free(a);
    free(b);
    free(ht_hide_ptr(a));
    sec_churn(64);
}

static void *free_it(void *p)
{
    free(p);
    return NULL;
}

static void df_cross_thread(void)
{
    void *p = malloc(ht_hide(80));
    pthread_t t;
    if (pthread_create(&t, NULL, free_it, p) != 0) _exit(2);
    pthread_join(t, NULL);
    free(ht_hide_ptr(p));
    sec_churn(80);
}

/* p is freed, handed out again as q, freed by q's owner, then freed through p */
static void df_after_reuse(void)
{
    void *p = malloc(ht_hide(40));
    free(p);
    void *q = malloc(ht_hide(40));
    free(q);
    free(ht_hide_ptr(p));
    sec_churn(40);
}

static const sec_case_t cases[] = {
    {"double-free-small", df_small},
    {"double-free-medium", df_medium},
    {"double-free-large", df_large},
    {"double-free-huge", df_huge},
    {"double-free-delayed", df_delayed},
    {"double-free-interleaved", df_interleaved},
    {"double-free-cross-thread", df_cross_thread},
    {"double-free-after-reuse", df_after_reuse},
};

SEC_MAIN(cases)
