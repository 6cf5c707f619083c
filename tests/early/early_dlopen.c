/* libearly_dlopen.so: loaded by test_early with dlopen.  Its constructor
 * allocates blocks that the main program frees; its destructor (at dlclose)
 * frees one of its own and allocates again. */
#include <stdlib.h>
#include <string.h>

static char *g_given;
static char *g_kept;
static int *g_flag; /* set by the program: where the destructor reports */

__attribute__((constructor)) static void early_dlopen_ctor(void)
{
    g_given = malloc(5000);
    if (g_given)
        memset(g_given, 0x6d, 5000);
    g_kept = malloc(300);
    if (g_kept)
        memset(g_kept, 0x6b, 300);
}

__attribute__((destructor)) static void early_dlopen_dtor(void)
{
    int ok = g_kept != NULL;
    for (int i = 0; ok && i < 300; i++)
        ok = g_kept[i] == 0x6b;
    free(g_kept);
    void *p = malloc(123);
    free(p);
    if (g_flag)
        *g_flag = ok ? 1 : -1;
}

char *early_dlopen_block(void) { return g_given; }
void early_dlopen_report_to(int *flag) { g_flag = flag; }
