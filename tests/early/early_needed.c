/* libearly_needed.so: linked into test_early (DT_NEEDED), so its constructor
 * runs before the program's own constructors - and, under LD_PRELOAD, maybe
 * before HAKMEM's.  It allocates there; main checks and frees the blocks. */
#include <stdlib.h>
#include <string.h>

static char *g_block;
static char *g_strdup;
static void *g_big;

__attribute__((constructor)) static void early_needed_ctor(void)
{
    void *tmp = malloc(10);
    free(tmp);
    g_block = malloc(1000);
    if (g_block)
        memset(g_block, 0x4e, 1000);
    g_strdup = strdup("allocated in the constructor of a DT_NEEDED library");
    g_big = calloc(1, 3 << 20);
}

char *early_needed_block(void) { return g_block; }
char *early_needed_string(void) { return g_strdup; }
void *early_needed_big(void) { return g_big; }
