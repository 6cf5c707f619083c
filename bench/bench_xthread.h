/* bench_xthread.h — a lock-free mailbox through which benchmark threads hand
 * blocks to another thread to free (bench_sizemix, bench_oversub).
 *
 * Senders push with a CAS onto a singly linked list threaded through the
 * blocks' first word; the owner takes the whole list with one exchange and
 * frees it.  No ABA: only the owner removes, and it removes everything.  A
 * block's first 8 bytes are overwritten by the link, so a sender reads what it
 * checks before pushing.
 */
#ifndef HAKMEM_BENCH_XTHREAD_H
#define HAKMEM_BENCH_XTHREAD_H

#include "bench_common.h"
#include <stdatomic.h>

struct bench_mailbox {
    _Alignas(64) _Atomic(void *) head;
    char pad[64 - sizeof(void *)];
};

static inline void bench_mailbox_push(struct bench_mailbox *m, void *block)
{
    void *head = atomic_load_explicit(&m->head, memory_order_relaxed);
    do {
        *(void **)block = head;
    } while (!atomic_compare_exchange_weak_explicit(&m->head, &head, block,
                                                    memory_order_release,
                                                    memory_order_relaxed));
}

/* Frees every block in the mailbox; returns how many. */
static inline uint64_t bench_mailbox_drain(struct bench_mailbox *m)
{
    uint64_t n = 0;
    void *b = atomic_exchange_explicit(&m->head, NULL, memory_order_acquire);
    while (b) {
        void *next = *(void **)b;
        free(b);
        b = next;
        n++;
    }
    return n;
}

#endif /* HAKMEM_BENCH_XTHREAD_H */
