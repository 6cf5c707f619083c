/* libatfork_needed.so: linked into test_atfork (DT_NEEDED), so its
 * constructor runs before HAKMEM's start-up registers HAKMEM's own fork
 * handlers. It registers fork handlers there, first thing; prepare handlers
 * run in reverse order of registration, so its prepare handler runs after
 * HAKMEM's, and allocates (small, mid, large and huge blocks) and frees.
 *
 * Its own state is guarded by its own mutex, taken in prepare and released
 * in parent/child, as any library's fork handlers must: glibc runs each
 * prepare handler with its atfork lock dropped, so two threads forking at
 * once run them concurrently unless something else orders them. HAKMEM's
 * prepare orders them when it runs first (the second forker waits there),
 * but where HAKMEM started before this constructor (a sanitizer runtime's
 * early malloc: the UBSan build), this handler runs first, and unguarded
 * the two forks' prepare and parent handlers shared g_blocks: one freed the
 * other's blocks while it still wrote them (double frees that HAKMEM
 * reported, and use after free). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static void *g_blocks[5];
static int g_prepared, g_parents, g_children;

static void prepare(void)
{
    pthread_mutex_lock(&g_mu);
    static const size_t sizes[5] = { 100, 20000, 200000, 5 << 20, 40 };
    for (int i = 0; i < 5; i++) {
        g_blocks[i] = malloc(sizes[i]);
        if (g_blocks[i])
            memset(g_blocks[i], 0x5a, sizes[i] < 4096 ? sizes[i] : 4096);
    }
    void *tmp = malloc(3 << 20); /* and a free while every lock is held */
    free(tmp);
    g_prepared++;
}

static void release(void)
{
    for (int i = 0; i < 5; i++) {
        free(g_blocks[i]);
        g_blocks[i] = NULL;
    }
}

/* The child's only thread is the one that forked, which holds g_mu there. */
static void parent(void) { release(); g_parents++; pthread_mutex_unlock(&g_mu); }
static void child(void) { release(); g_children++; pthread_mutex_unlock(&g_mu); }

__attribute__((constructor)) static void atfork_needed_ctor(void)
{
    pthread_atfork(prepare, parent, child);
}

/* how often each handler ran, and whether the blocks of the last prepare
 * were all served */
void atfork_needed_counts(int *prepared, int *parents, int *children)
{
    pthread_mutex_lock(&g_mu);
    *prepared = g_prepared;
    *parents = g_parents;
    *children = g_children;
    pthread_mutex_unlock(&g_mu);
}
