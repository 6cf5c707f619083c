/* pool.h — the heap pool (heap/pool.c): thread heaps handed out at thread
 * start and taken back at thread exit, without a lock. */
#ifndef HAK_POOL_H
#define HAK_POOL_H

#include "hak_internal.h"

void pool_init(void) HAK_HIDDEN;
/* A heap for the thread with kernel id tid, recycled or newly mapped (NULL
 * when the OS refuses memory): the parked heap `hint` if it is near the top
 * of the free stack (a heap or NULL: the owner of the thread's first freed
 * block). Also reaps dying heaps and takes back one of a thread that
 * vanished without its exit. */
hak_heap_t *pool_take(int tid, hak_heap_t *hint) HAK_HIDDEN;
/* After heap_destroy(h) returned `destroyed`: h back to the pool, or, with
 * signals still on their way to it, among the dying until they arrive. */
void pool_retire(hak_heap_t *h, bool destroyed) HAK_HIDDEN;
/* Whether h is a thread heap on the free stack (parked: heap_park), or
 * popped from it by a thread that has not yet set it live; read under
 * h->lock, which that thread takes before it touches h's pages. */
bool pool_parked(hak_heap_t *h) HAK_HIDDEN;
/* fork child: rebuild the pool; `mine` is the surviving thread's heap. */
void pool_atfork_child(hak_heap_t *mine) HAK_HIDDEN;

/* The all-heaps list (heap/thread.c): push-only. */
void heap_all_push(hak_heap_t *h) HAK_HIDDEN;

#endif
