/* test_purge_busy - the purge deadline's look on refills and flushes
 * (policy/purger.c, purge_tick_slow_busy): a busy thread skips it for the
 * next few of them, and still sees a passed deadline within PURGE_SKIP + 1
 * of them; the other slow paths look every time.
 *
 * Linked with libhakmem.a, to call the ticks and read the deadline word.
 *  1. Busy: refill ticks back to back (within one coarse clock tick) with a
 *     deadline a second away: the thread's skip count is set, and most
 *     ticks then read no clock.
 *  2. The deadline passes while the thread is set to skip: the first flush
 *     tick does not claim it (it skips), and one of the next PURGE_SKIP + 1
 *     (8) does.
 *  3. A large-block tick (purge_tick) with the skip count set claims a passed
 *     deadline at once.
 * Run with HAKMEM_BACKGROUND_PURGE=0 (no thread claims it meanwhile).
 */
#include "hak_test.h"
#include "heap/heap.h"
#include "policy/purger.h"

#define BOUND 8 /* PURGE_SKIP + 1 */

static uint32_t deadline(void) { return atomic_load(&hak_purge_deadline); }

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Arm a deadline `ms` from now (coarse clock) and return it. */
static uint32_t arm_in(uint32_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint32_t now = (uint32_t)((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
    atomic_store(&hak_purge_deadline, 0);
    purge_arm((now + ms) | 1);
    return deadline();
}

/* Busy ticks until the thread is set to skip (two looks in one coarse tick). */
static void make_busy(hak_heap_t *h)
{
    for (int i = 0; i < 100000 && h->purge_skip == 0; i++) purge_tick_refill();
    CHECK(h->purge_skip > 0, "back-to-back refill ticks never set the skip count");
}

int main(void)
{
    hak_test_name = "test_purge_busy";
    free(malloc(64)); /* the thread's heap, and the purger no longer wanted */
    CHECK(hak_tls.state == HAK_THREAD_LIVE, "no heap");
    hak_heap_t *h = hak_tls.heap;
    purge_tick(); /* the first look after start-up, which may start the purger */

    /* 1 */
    uint32_t d = arm_in(1000);
    make_busy(h);
    CHECK(deadline() == d, "a deadline a second away was claimed");

    /* 2 */
    d = arm_in(20);
    make_busy(h);
    sleep_ms(60);
    CHECK(deadline() == d, "the deadline was claimed while the thread slept");
    unsigned skip = h->purge_skip;
    purge_tick_flush();
    CHECK(deadline() == d, "the first flush tick after a busy stretch looked (skip count %u)", skip);
    int seen = 0;
    for (int i = 2; i <= BOUND && !seen; i++) {
        purge_tick_flush();
        if (deadline() != d) seen = i;
    }
    CHECK(seen, "a passed deadline not seen within %d flush ticks", BOUND);

    /* 3 */
    d = arm_in(20);
    make_busy(h);
    sleep_ms(60);
    purge_tick();
    CHECK(deadline() != d, "a large-block tick skipped a passed deadline");

    printf("test_purge_busy: OK: busy refill/flush ticks skip the clock (count %u), a passed deadline seen at the "
           "%d. flush tick, at once on other slow paths\n", skip, seen);
    return 0;
}
