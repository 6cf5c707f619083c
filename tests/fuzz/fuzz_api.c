/* fuzz_api - libFuzzer target: the input is a program of hak_ API calls,
 * run by two threads, checked against a model.
 *
 * HAKMEM is linked prefix-only (libhakmem.a with hak_ names only), so the
 * fuzzer and AddressSanitizer keep their own malloc and see every access
 * HAKMEM makes to its own memory. Each input is decoded into operations on 32
 * slots (a slot holds a block, its size, alignment, and the seed of the
 * pattern written into it):
 *   malloc, calloc (zeroed), realloc (prefix kept), aligned_alloc and
 *   posix_memalign (alignment 8 B..64 KiB; invalid ones -> EINVAL), free,
 *   usable size (>= size, stable, whole of it writable), impossible sizes
 *   (NULL + ENOMEM), and the same through a second thread: it allocates into
 *   or frees a slot on request (remote frees both ways), and exits at the end
 *   of the input with its blocks still held (its pages are abandoned and
 *   adopted later).
 * Every block's contents are checked before it is freed or resized, and every
 * result's alignment and usable size when it is made. A failed check aborts,
 * which libFuzzer reports as a crash with the input that caused it.
 *
 * Build: CMake -DHAKMEM_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt);
 * `make fuzz` runs it (FUZZ_TIME seconds, default 60). */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hakmem.h"

#define NSLOT 32

typedef struct {
    unsigned char *p;
    size_t size;
    size_t align;
    uint8_t seed;
} slot_t;

static slot_t g_slot[NSLOT];

static void fail(const char *what, const slot_t *s)
{
    fprintf(stderr, "fuzz_api: %s (block %p, size %zu, align %zu)\n", what, s ? (void *)s->p : NULL,
            s ? s->size : 0, s ? s->align : 0);
    abort();
}

static uint8_t pat(uint8_t seed, size_t i) { return (uint8_t)(seed + i * 31 + (i >> 8)); }

/* Large blocks carry the pattern every 4093 bytes and in their last byte
 * only: writing (and, under ASan, checking) megabytes byte by byte on every
 * operation would leave little time for fuzzing. */
static size_t stride(size_t size) { return size > 65536 ? 4093 : 1; }

static void fill(slot_t *s, size_t from, size_t to)
{
    size_t step = stride(s->size);
    for (size_t i = from; i < to; i += step) s->p[i] = pat(s->seed, i);
    if (to > from) s->p[to - 1] = pat(s->seed, to - 1);
}

static void check(const slot_t *s)
{
    if (!s->p) return;
    size_t step = stride(s->size);
    for (size_t i = 0; i < s->size; i += step)
        if (s->p[i] != pat(s->seed, i)) fail("contents changed", s);
    if (s->size && s->p[s->size - 1] != pat(s->seed, s->size - 1)) fail("last byte changed", s);
}

static void made(slot_t *s, void *p, size_t size, size_t align, uint8_t seed)
{
    s->p = p;
    s->size = size;
    s->align = align;
    s->seed = seed;
    if (!p) fail("allocation failed", s);
    if ((uintptr_t)p % (align < 16 ? 16 : align)) fail("misaligned", s);
    size_t u = hak_usable_size(p);
    if (u < size) fail("usable size below the size asked for", s);
    if (!hak_owns(p)) fail("hak_owns says no", s);
    /* the whole usable size is the program's */
    memset(s->p + size, 0xA5, u - size);
    fill(s, 0, size);
}

static void release(slot_t *s)
{
    check(s);
    hak_free(s->p);
    s->p = NULL;
    s->size = 0;
}

/* ---- the second thread: allocates or frees one slot per request -------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int op;                /* 0 idle, 1 free slot, 2 alloc into slot, 3 exit */
    unsigned idx;
    size_t size;
    uint8_t seed;
    int running;
    pthread_t tid;
} peer_t;

static peer_t g_peer = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0};

/* Each hand-off costs two context switches: at most this many per input
 * (later requests are skipped), so long inputs still run quickly. */
#define PEER_OPS_MAX 24
static unsigned g_peer_ops;

static void *peer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&g_peer.mu);
    for (;;) {
        while (g_peer.op == 0) pthread_cond_wait(&g_peer.cv, &g_peer.mu);
        int op = g_peer.op;
        if (op == 3) break;
        slot_t *s = &g_slot[g_peer.idx];
        if (op == 1) release(s);
        else made(s, hak_malloc(g_peer.size), g_peer.size, 16, g_peer.seed);
        g_peer.op = 0;
        pthread_cond_broadcast(&g_peer.cv);
    }
    g_peer.op = 0;
    pthread_cond_broadcast(&g_peer.cv);
    pthread_mutex_unlock(&g_peer.mu);
    return NULL;
}

/* Run one request on the peer and wait for it: deterministic. */
static void peer_do(int op, unsigned idx, size_t size, uint8_t seed)
{
    if (op != 3 && g_peer_ops++ >= PEER_OPS_MAX) { /* skipped: the slot stays as it is */
        if (op == 2) made(&g_slot[idx], hak_malloc(size), size, 16, seed);
        return;
    }
    if (!g_peer.running) {
        if (op == 3) return;
        if (pthread_create(&g_peer.tid, NULL, peer_main, NULL) != 0) fail("pthread_create", NULL);
        g_peer.running = 1;
    }
    pthread_mutex_lock(&g_peer.mu);
    g_peer.op = op;
    g_peer.idx = idx;
    g_peer.size = size;
    g_peer.seed = seed;
    pthread_cond_broadcast(&g_peer.cv);
    while (g_peer.op != 0) pthread_cond_wait(&g_peer.cv, &g_peer.mu);
    pthread_mutex_unlock(&g_peer.mu);
    if (op == 3) {
        pthread_join(g_peer.tid, NULL);
        g_peer.running = 0;
    }
}

/* ---- decoding ----------------------------------------------------------- */

typedef struct {
    const uint8_t *d;
    size_t n, i;
} input_t;

static uint8_t next8(input_t *in) { return in->i < in->n ? in->d[in->i++] : 0; }
static uint16_t next16(input_t *in) { return (uint16_t)(next8(in) | next8(in) << 8); }

/* Sizes: mostly small, some up to the largest class, a few large and huge. */
static size_t next_size(input_t *in)
{
    uint8_t k = next8(in);
    switch (k >> 5) {
    case 0: case 1: case 2: return k & 31;                      /* 0..31 */
    case 3: case 4: return next16(in) % 1025;                   /* ..1 KiB */
    case 5: return next16(in) % 32769;                          /* ..32 KiB */
    case 6: return 32768 + (size_t)next16(in) * 8;              /* ..544 KiB */
    default: return ((size_t)1 << 20) + (size_t)next16(in) * 16; /* huge: 1..2 MiB */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input_t in = {data, size, 0};
    g_peer_ops = 0;
    while (in.i < in.n) {
        uint8_t op = next8(&in);
        unsigned idx = next8(&in) % NSLOT;
        slot_t *s = &g_slot[idx];
        uint8_t seed = (uint8_t)(op ^ idx ^ in.i);
        switch (op % 12) {
        case 0: case 1: { /* malloc */
            size_t n = next_size(&in);
            if (s->p) release(s);
            made(s, hak_malloc(n), n, 16, seed);
            break;
        }
        case 2: { /* calloc, checked zero */
            size_t c = next8(&in) % 17, n = next_size(&in) / (c ? c : 1);
            if (s->p) release(s);
            unsigned char *p = hak_calloc(c, n);
            if (!p) fail("calloc failed", s);
            for (size_t i = 0; i < c * n; i++)
                if (p[i]) { s->p = p; s->size = c * n; fail("calloc block not zeroed", s); }
            made(s, p, c * n, 16, seed);
            break;
        }
        case 3: { /* realloc: the common prefix survives */
            size_t n = next_size(&in);
            check(s);
            size_t keep = !s->p ? 0 : s->size < n ? s->size : n;
            unsigned char *q = hak_realloc(s->p, n);
            slot_t old = *s;
            if (!q) {
                if (n == 0 && s->p) { s->p = NULL; s->size = 0; break; } /* realloc(p, 0) frees */
                if (n == 0) break;
                fail("realloc failed", s);
            }
            for (size_t i = 0; i < keep; i += stride(old.size))
                if (q[i] != pat(old.seed, i)) { s->p = q; fail("realloc lost contents", s); }
            if (keep == old.size && keep && q[keep - 1] != pat(old.seed, keep - 1)) {
                s->p = q;
                fail("realloc lost the last byte", s);
            }
            made(s, q, n, 16, seed);
            break;
        }
        case 4: { /* aligned_alloc / posix_memalign */
            size_t a = (size_t)8 << (next8(&in) % 14), n = next_size(&in);
            if (s->p) release(s);
            if (op & 16) {
                void *p = NULL;
                if (hak_posix_memalign(&p, a, n) != 0) fail("posix_memalign failed", s);
                made(s, p, n, a, seed);
            } else {
                made(s, hak_aligned_alloc(a, n), n, a, seed);
            }
            break;
        }
        case 5: case 6: /* free */
            if (s->p) release(s);
            else hak_free(NULL);
            break;
        case 7: { /* usable size: stable, and its slack writable */
            if (!s->p) break;
            size_t u = hak_usable_size(s->p);
            if (u < s->size || u != hak_usable_size(s->p)) fail("usable size", s);
            memset(s->p + s->size, 0x5A, u - s->size);
            check(s);
            break;
        }
        case 8: /* the peer frees it (remote free) */
            if (s->p) peer_do(1, idx, 0, 0);
            break;
        case 9: { /* the peer allocates it (main frees it later, maybe after the peer exits) */
            size_t n = next_size(&in);
            if (s->p) release(s);
            peer_do(2, idx, n, seed);
            break;
        }
        case 10: /* the peer exits with its blocks still out */
            peer_do(3, 0, 0, 0);
            break;
        default: { /* impossible requests: NULL and ENOMEM / EINVAL, nothing else changes */
            void *p = NULL;
            errno = 0;
            if (hak_malloc((size_t)-1 - next8(&in)) || errno != ENOMEM) fail("huge malloc did not fail", NULL);
            errno = 0;
            if (hak_calloc((size_t)1 << 33, (size_t)1 << 33) || errno != ENOMEM) fail("calloc overflow", NULL);
            if (hak_posix_memalign(&p, 24, 10) != EINVAL || p) fail("posix_memalign(24) not EINVAL", NULL);
            break;
        }
        }
    }
    peer_do(3, 0, 0, 0);
    for (unsigned i = 0; i < NSLOT; i++)
        if (g_slot[i].p) release(&g_slot[i]);
    return 0;
}
